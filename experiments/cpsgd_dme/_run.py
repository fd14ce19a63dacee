"""cpsgd_dme's run: client vectors, measured and expected MSE, verdicts."""

import math
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import dpjax
from dpjax import accounting
from dpjax import distributed
from experiments.cpsgd_dme._config import CONDITION_FAILS
from experiments.cpsgd_dme._config import NAME
from experiments.cpsgd_dme._privacy import make_protocol
from experiments.cpsgd_dme._privacy import round_epsilon
from experiments.cpsgd_dme._privacy import trials_for_epsilon


def make_inputs(cfg: dict[str, Any]) -> dict[str, np.ndarray]:
  """Client vectors [n, d] on the sphere of radius D (float32), seeded."""
  n, d, radius = cfg['num_clients'], cfg['dimension'], cfg['clip_norm']
  rng = np.random.default_rng(cfg['seed'])
  out = {}
  spread = rng.normal(size=(n, d))
  out['spread'] = radius * spread / np.linalg.norm(spread, axis=1,
                                                   keepdims=True)
  spiky = np.zeros((n, d))
  for i in range(n):
    idx = rng.choice(d, size=cfg['spikes'], replace=False)
    spiky[i, idx] = rng.choice([-1.0, 1.0], size=cfg['spikes'])
  out['spiky'] = radius * spiky / math.sqrt(cfg['spikes'])
  return {k: out[k].astype(np.float32) for k in cfg['inputs']}


def _clipped_mean(xs: np.ndarray, clip_norm: float) -> np.ndarray:
  x = xs.astype(np.float64)
  norms = np.linalg.norm(x, axis=1, keepdims=True)
  return (x * np.minimum(1.0, clip_norm / np.maximum(norms, 1e-300))).mean(0)


def _keys(cfg, point_index, input_index):
  """Round keys of one point and input: independent across points."""
  base = jax.random.fold_in(jax.random.fold_in(
      jax.random.key(cfg['seed']), point_index), input_index)
  return [jax.random.fold_in(base, r) for r in range(cfg['reps'])]


def _clamping(protocol, xs: np.ndarray, rotation_key) -> tuple[float, float]:
  """(fraction of quantizer inputs outside [-X_max, X_max], ||bias||^2).

  The quantizer's inputs are the clipped (padded, rotated) vectors; the bias
  of the estimate is the mean clamping error, mapped back by R^-1 and
  cropped to d when rotating.
  """
  n, d = xs.shape
  norms = np.linalg.norm(xs.astype(np.float64), axis=1, keepdims=True)
  x = xs * np.minimum(1.0, protocol.l2_norm_clip / np.maximum(norms, 1e-300))
  if protocol.rotate:
    dp = protocol.message_length(d)
    x = np.pad(x, ((0, 0), (0, dp - d)))
    x = np.asarray(dpjax.transforms.randomized_hadamard(
        jnp.asarray(x, jnp.float32), key=rotation_key), np.float64)
  clamped = np.clip(x, -protocol.linf_clip, protocol.linf_clip)
  bias = clamped.mean(0) - x.mean(0)
  if protocol.rotate:
    bias = np.asarray(dpjax.transforms.inverse_randomized_hadamard(
        jnp.asarray(bias, jnp.float32), key=rotation_key), np.float64)[:d]
  return float(np.mean(clamped != x)), float(np.sum(bias**2))


def _point(cfg, index, protocol, inputs, means) -> list[dict[str, Any]]:
  """Measured and expected MSE of one protocol on every input."""
  n, d = cfg['num_clients'], cfg['dimension']
  out = []
  for i, (name, xs) in enumerate(inputs.items()):
    xs_j = jnp.asarray(xs)
    errs, expected, seconds, clamps = [], [], [], []
    for r, key in enumerate(_keys(cfg, index, i)):
      start = time.time()
      est = np.asarray(distributed.distributed_mean(protocol, key, xs_j),
                       np.float64)
      if r > 0:  # the first call compiles
        seconds.append(time.time() - start)
      errs.append(float(np.sum((est - means[name]) ** 2)))
      if protocol.rotate:  # depends on the round's rotation key
        rkey = distributed.shared_key(key)
        expected.append(distributed.cpsgd_expected_mse(protocol, xs_j,
                                                       rotation_key=rkey))
        clamps.append(_clamping(protocol, xs, rkey))
      elif r == 0:
        expected.append(distributed.cpsgd_expected_mse(protocol, xs_j))
        clamps.append(_clamping(protocol, xs, None))
    errs = np.asarray(errs)
    mse, sem = float(errs.mean()), float(errs.std(ddof=1) / math.sqrt(
        errs.size))
    exp = float(np.mean(expected))
    out.append(dict(input=name, mse=mse, sem=sem, expected=exp,
                    clamped_fraction=float(np.mean([c[0] for c in clamps])),
                    bias_sq=float(np.mean([c[1] for c in clamps])),
                    z=(mse - exp) / sem if sem > 0 else 0.0,
                    seconds_per_round=float(np.mean(seconds)) if seconds
                    else None,
                    bound=distributed.cpsgd_mse_bound(
                        d, n, protocol.levels, protocol.trials,
                        protocol.binomial_p, protocol.linf_clip)))
  return out


def _gaussian_rows(cfg, inputs, means) -> list[dict[str, Any]]:
  n, d = cfg['num_clients'], cfg['dimension']
  rows = []
  l2 = 2 * cfg['clip_norm']  # replace-one sensitivity of the sum
  for j, target in enumerate(cfg['epsilons']):
    tight = accounting.calibrate_gaussian_stddev(target, cfg['delta'], l2,
                                                 cfg['accountant'])
    classical = (accounting.classical_gaussian_stddev(target, cfg['delta'], l2)
                 if target <= 1 else None)  # proved for eps <= 1 only
    eps_check = accounting.epsilon(accounting.gaussian_protocol_event(
        tight, l2), cfg['delta'], cfg['accountant'])
    per_client = tight / math.sqrt(n)
    for i, (name, xs) in enumerate(inputs.items()):
      errs = []
      for key in _keys(cfg, 1_000_000 + j, i):  # apart from cpSGD points
        est = np.asarray(distributed.gaussian_distributed_mean(
            key, jnp.asarray(xs), cfg['clip_norm'], per_client), np.float64)
        errs.append(float(np.sum((est - means[name]) ** 2)))
      errs = np.asarray(errs)
      expected = d * tight**2 / n**2
      sem = float(errs.std(ddof=1) / math.sqrt(errs.size))
      rows.append(dict(
          input=name, target_epsilon=target, epsilon=eps_check,
          client_stddev=per_client, sum_stddev=tight, mse=float(errs.mean()),
          sem=sem, expected=expected, z=(float(errs.mean()) - expected) / sem,
          expected_classical=None if classical is None else
          d * classical**2 / n**2,
          # float32 coordinates: one coordinate costs what a d = 1 client does
          bits_per_coordinate=distributed.gaussian_protocol_bits(1),
          bits_per_client=distributed.gaussian_protocol_bits(d)))
  return rows


def run(cfg: dict[str, Any], out_dir: str, progress: bool = True
        ) -> dict[str, Any]:
  del out_dir
  start = time.time()
  inputs = make_inputs(cfg)
  means = {k: _clipped_mean(v, cfg['clip_norm']) for k, v in inputs.items()}
  n, d = cfg['num_clients'], cfg['dimension']
  rows = []
  for variant in cfg['variants']:
    for levels in cfg['levels']:
      if (variant == 'clamp' and cfg['clamp_levels'] is not None
          and levels not in cfg['clamp_levels']):
        continue
      trials: dict[int, list] = {}
      for target in cfg['epsilons']:
        trials.setdefault(trials_for_epsilon(cfg, variant, levels, target),
                          []).append(target)
      for m in cfg['num_trials']:
        trials.setdefault(m, [])
      for m, targets in sorted(trials.items()):
        protocol = make_protocol(cfg, variant, levels, m)
        eps = round_epsilon(cfg, protocol)
        common = dict(
            variant=variant, levels=levels, num_trials=m,
            target_epsilon=min(targets) if targets else None,
            x_max=protocol.linf_clip, epsilon=eps,
            epsilon_note=CONDITION_FAILS if eps is None else None,
            bits_per_coordinate=distributed.bits_per_coordinate(levels, m),
            bits_fixed=distributed.bits_per_coordinate(levels, m,
                                                       fixed_width=True),
            bits_per_client=distributed.cpsgd_bits(protocol, d),
            bits_per_client_fixed=distributed.cpsgd_bits(
                protocol, d, fixed_width=True))
        index = len(rows) // len(inputs)
        for point in _point(cfg, index, protocol, inputs, means):
          rows.append(dict(common, **point))
        if progress:
          print(f'[{NAME}] {variant} k={levels} m={m} eps={eps} '
                f'({time.time() - start:.0f} s)', file=sys.stderr)
  gaussian = _gaussian_rows(cfg, inputs, means)
  for row in rows:  # compare with the Gaussian at the row's target epsilon
    g = next((g for g in gaussian if g['input'] == row['input']
              and g['target_epsilon'] == row['target_epsilon']), None)
    row['mse_vs_gaussian'] = None if g is None else row['mse'] / g['expected']
  return dict(experiment=NAME, config=cfg, seed=cfg['seed'],
              data=dict(name='generated unit vectors', inputs=list(inputs),
                        num_clients=n, dimension=d, spikes=cfg['spikes'],
                        clip_norm=cfg['clip_norm'],
                        mean_norm_sq={k: float(np.sum(v**2))
                                      for k, v in means.items()}),
              rotated_x_max=distributed.rotated_linf_clip(
                  cfg['clip_norm'], d, n, cfg['delta']),
              rows=rows, gaussian=gaussian, verdicts=verdicts(rows, gaussian),
              wall_seconds=round(time.time() - start, 1))


def verdicts(rows, gaussian) -> dict[str, Any]:
  """Numbers behind the report's yes/no lines."""
  gains = []
  for r in rows:
    if r['variant'] != 'rotate' or r['target_epsilon'] is None:
      continue
    base = next((b for b in rows if b['variant'] == 'none'
                 and b['input'] == r['input'] and b['levels'] == r['levels']
                 and b['target_epsilon'] == r['target_epsilon']), None)
    if base is not None:
      gains.append(dict(input=r['input'], epsilon=r['target_epsilon'],
                        levels=r['levels'], mse_none=base['mse'],
                        mse_rotate=r['mse'], gain=base['mse'] / r['mse'],
                        m_none=base['num_trials'], m_rotate=r['num_trials']))
  unclamped = [r for r in rows if r['variant'] != 'clamp']
  best = []
  for g in gaussian:
    cands = [r for r in rows if r['input'] == g['input']
             and r['target_epsilon'] == g['target_epsilon']]
    for variant in sorted({r['variant'] for r in cands}):
      r = min((c for c in cands if c['variant'] == variant),
              key=lambda c: c['mse'])
      best.append(dict(input=g['input'], epsilon=g['target_epsilon'],
                       variant=variant, levels=r['levels'],
                       num_trials=r['num_trials'],
                       bits=r['bits_per_coordinate'], mse=r['mse'],
                       gaussian=g['expected'], ratio=r['mse'] / g['expected']))
  spiky = [g['gain'] for g in gains if g['input'] == 'spiky']
  spread = [g['gain'] for g in gains if g['input'] == 'spread']
  return dict(
      spread_gain_range=[min(spread), max(spread)] if spread else None,
      rotation_gains=gains,
      rotation_helps_spiky=bool(spiky) and all(x > 1 for x in spiky),
      spiky_gain_range=[min(spiky), max(spiky)] if spiky else None,
      within_3sem=sum(abs(r['z']) <= 3 for r in rows + gaussian),
      points=len(rows) + len(gaussian),
      expected_below_bound=sum(r['expected'] <= r['bound'] * (1 + 1e-9)
                               for r in unclamped),
      measured_below_bound=sum(r['mse'] <= r['bound'] + 3 * r['sem']
                               for r in unclamped),
      bound_points=len(unclamped),
      clamp=[dict(input=r['input'], variant=r['variant'],
                  levels=r['levels'], clamped=r['clamped_fraction'],
                  bias_sq=r['bias_sq'])
             for r in rows if r['variant'] in ('clamp', 'rotate')],
      best_vs_gaussian=best)
