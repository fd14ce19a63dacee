"""audit's run: every case (and its broken twin) on every seed."""

import math
import time
from typing import Any

import jax
import numpy as np

from dpjax import accounting
from dpjax import audit
from experiments.audit._config import Config
from experiments.audit._results import Audit
from experiments.audit._results import Case
from experiments.audit._results import OneRun
from experiments.audit._results import OneRunAudit
from experiments.audit._results import Results
from experiments.common import row_cache
from experiments.common import runner


def point_estimate(fp: int, fn: int, trials: int, delta: float) -> float:
  """The epsilon the held-out error rates show without a confidence margin
  (inf when a rate is 0 on the side that bounds it); the lower bound is the
  same formula on the rates' Clopper-Pearson upper bounds."""
  a, b = fp / trials, fn / trials
  best = 0.0
  for x, y in ((a, b), (b, a)):
    if 1 - delta - x > y:
      best = max(best, math.inf if y == 0 else math.log((1 - delta - x) / y))
  return best


def _audit(key, case, cfg: Config) -> dict[str, Any]:
  start = time.time()
  r = audit.distinguishing_audit(key, case.mechanism, case.d, case.d_prime,
                                 trials=cfg.trials, delta=case.delta,
                                 score=case.score, confidence=cfg.confidence,
                                 chunk=cfg.chunk)
  return dict(lower_bound=r.epsilon_lower_bound,
              estimate=point_estimate(r.false_positives, r.false_negatives,
                                      r.trials, r.delta),
              false_positives=r.false_positives,
              false_negatives=r.false_negatives, held_out=r.trials,
              seconds=time.time() - start)


def input_canary_data(n=512, m=256, d=32, classes=4, seed=0):
  """Generated data: 4 Gaussian clusters in 32 dimensions; the canaries are
  far-out inputs (5x the spread) with random labels."""
  rng = np.random.default_rng(seed)
  centers = rng.normal(size=(classes, d)) * 2
  y = rng.integers(0, classes, n)
  x = centers[y] + rng.normal(size=(n, d))
  return x, y, rng.normal(size=(m, d)) * 5, rng.integers(0, classes, m)


def _one_run_audits(cfg: Config, scores, m: int, r: int, delta: float,
                    seeds) -> list[OneRunAudit]:
  """The one-run audit of ``scores`` (m canaries, r guesses) per seed."""
  out = []
  for seed in seeds:
    start = time.time()
    res = audit.one_run_audit(jax.random.key(seed), scores, num_canaries=m,
                              num_guesses=r, delta=delta,
                              confidence=cfg.confidence)
    out.append(OneRunAudit(lower_bound=res.epsilon_lower_bound,
                           correct=res.num_correct,
                           seconds=time.time() - start))
  return out


def one_run(cfg: Config, seeds) -> list[OneRun]:
  """One-run audits of full-batch DP-SGD training, honest and with clipping
  skipped, per stated epsilon and seed: white-box gradient canaries and
  black-box input-space canaries."""
  steps, delta, rows = cfg.one_run_steps, cfg.one_run_delta, []
  x, y, cx, cy = input_canary_data()
  for eps in cfg.one_run_epsilons:
    sigma = accounting.calibrate(accounting.gaussian_event, eps, delta,
                                 steps=steps)
    stated = float(accounting.epsilon(accounting.gaussian_event(
        sigma, steps=steps), delta))
    for kind in ('gradient', 'input'):
      if kind == 'gradient':
        m, r = cfg.one_run_num_canaries, cfg.one_run_num_guesses
        make = lambda clip, m=m: audit.dpsgd_gradient_canaries(  # noqa: E731
            m, steps=steps, noise_multiplier=sigma, clip=clip)
      else:
        m, r = len(cx), min(50, len(cx))
        make = lambda clip: audit.dpsgd_input_canaries(  # noqa: E731
            x, y, cx, cy, num_classes=4, steps=steps, noise_multiplier=sigma,
            learning_rate=2.0, clip=clip)
      honest, broken = (_one_run_audits(cfg, make(clip), m, r, delta, seeds)
                        for clip in (True, False))
      rows.append(OneRun(kind=kind, target=eps, epsilon=stated, delta=delta,
                         noise_multiplier=sigma, canaries=m, guesses=r,
                         steps=steps, honest=honest, broken=broken))
  return rows


def select(names):
  """The registered cases called ``names`` (None: all), building only
  those (building every case compiles a few hundred programs)."""
  if names is None:
    return audit.audit_cases()
  known = audit.audit_case_names()
  unknown = [n for n in names if n not in known]
  if unknown:
    raise ValueError(f'unknown audit cases {unknown}; known: '
                     f"{', '.join(known)}")
  return tuple(audit.audit_case(n) for n in names)


# Each case's per-seed numbers, kept as arrays (``row_cache``).
_FIELDS = ('lower_bound', 'estimate', 'false_positives', 'false_negatives',
           'held_out', 'seconds')
_COUNTS = ('false_positives', 'false_negatives', 'held_out')


def _audit_case(i: int, case, cfg: Config) -> dict[str, np.ndarray]:
  """The case (and its broken twin) on every seed, as arrays per field."""
  out = {}
  for side, mechanism in (('honest', case), ('broken', case.broken)):
    if mechanism is None:
      continue
    runs = []
    for seed in cfg.seeds:
      key = jax.random.fold_in(jax.random.key(seed), i)
      if side == 'broken':
        key = jax.random.fold_in(key, 1)
      runs.append(_audit(key, mechanism, cfg))
    for field in _FIELDS:
      out[f'{side}.{field}'] = np.asarray([r[field] for r in runs])
  return out


def _runs(arrays: dict[str, np.ndarray], side: str) -> list[Audit]:
  if f'{side}.lower_bound' not in arrays:
    return []
  cast = {f: int if f in _COUNTS else float for f in _FIELDS}
  columns = {f: arrays[f'{side}.{f}'] for f in _FIELDS}
  return [Audit(**{f: cast[f](columns[f][j]) for f in _FIELDS})
          for j in range(len(columns['lower_bound']))]


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Every selected case and its broken twin on every seed; one-run audits.
  Each finished case is kept, so that the full audit can run in parts."""
  seeds = cfg.seeds
  rows = []
  done = row_cache.RowCache(ctx.checkpoint_dir('cases'), cfg.to_dict())
  for i, case in enumerate(select(cfg.cases)):
    arrays = done.get(dict(case=case.name, index=i),
                      lambda: _audit_case(i, case, cfg))
    row = Case(name=case.name, epsilon=float(case.epsilon),
               delta=float(case.delta), relation=case.relation,
               attack=case.attack, honest=_runs(arrays, 'honest'),
               broken=_runs(arrays, 'broken'),
               broken_epsilon=(None if case.broken is None
                               else float(case.broken.epsilon)))
    rows.append(row)
    lbs = [a.lower_bound for a in row.honest]
    ctx.say(f'{case.name}: stated eps {case.epsilon:.3g}, lower bound median '
            f'{np.median(lbs):.3g}')
  return Results(dataset=dict(name='none: canaries built per mechanism'),
                 cases=rows, registered=list(audit.audit_case_names()),
                 one_run=one_run(cfg, seeds), devices=str(jax.devices()))
