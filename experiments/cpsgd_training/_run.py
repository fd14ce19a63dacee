"""cpsgd_training's run: each protocol on the federated loop."""

import math
import time
from typing import Any

import numpy as np

from dpjax import compression
from dpjax import distributed as dist
from experiments.common import data as data_lib
from experiments.common import federated
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.cpsgd_training import _claims
from experiments.cpsgd_training._config import Config
from experiments.cpsgd_training._config import GAUSSIAN_BITS
from experiments.cpsgd_training._config import NAME
from experiments.cpsgd_training._privacy import configurations
from experiments.cpsgd_training._privacy import round_delta
from experiments.cpsgd_training._privacy import settings
from experiments.cpsgd_training._results import Results


def eval_rounds(cfg: Config) -> list[int]:
  """The rounds of the accuracy curves: ``num_evals`` of them, evenly
  spread."""
  return sorted({min(cfg.rounds, max(1, round(
      (i + 1) * cfg.rounds / cfg.num_evals))) for i in range(cfg.num_evals)})


def _setting_row(cfg: Config, setting, method, pr, name, d, n):
  """What every seed's run of a setting shares: its protocol's privacy and
  bits (``pr``: the privacy row, None for the non-private references)."""
  base = dict(
      setting=setting, method=method,
      levels=pr['levels'] if pr else None,
      trials=pr['trials'] if pr else None,
      rotate=pr['rotate'] if pr else None,
      dataset=name, delta=cfg.delta,
      delta_round=round_delta(cfg) if pr else None,
      rounds=cfg.rounds, clients_per_round=n,
      num_clients=cfg.num_clients, dimension=d)
  if method == 'cpsgd':
    base.update({k: pr[k] for k in (
        'x_max', 'spacing', 'message_length', 'bits_per_coordinate',
        'bits_fixed', 'bits_per_client', 'l2_sensitivity', 'epsilon_round',
        'epsilon_total', 'no_guarantee')})
  else:
    base.update(bits_per_coordinate=GAUSSIAN_BITS, bits_fixed=GAUSSIAN_BITS,
                message_length=d,
                bits_per_client=dist.gaussian_protocol_bits(d))
  if method == 'gaussian' and pr is not None:
    base.update(epsilon_round=pr['gauss_epsilon_round'],
                epsilon_total=pr['gauss_epsilon_total'],
                matched_epsilon_round=pr['epsilon_round'],
                noise_multiplier=pr['gauss_noise_multiplier'],
                client_stddev=pr['gauss_client_stddev'])
  elif method == 'gaussian':
    base.update(client_stddev=0.0)  # not private: no epsilon
  return base


def _seed_rows(cfg: Config, base, curves, n) -> list[dict[str, Any]]:
  """One row per seed: the setting's ``base``, its training, its finals."""
  return [dict(
      base, seed=seed, train_config=dict(
          rounds=cfg.rounds, learning_rate=cfg.learning_rate,
          momentum=cfg.momentum, clip_norm=cfg.l2_norm_clip,
          num_clients=cfg.num_clients, clients_per_round=n,
          model=cfg.model, seed=seed),
      **{m: float(curves[m][j, -1]) for m in (
          'test_accuracy', 'train_accuracy', 'train_loss')},
      clipped_fraction=float(np.mean(curves['clipped_fraction'][j])),
      grad_norm_first=float(curves['grad_norm'][j, 0]),
      grad_norm_last=float(curves['grad_norm'][j, -1]))
          for j, seed in enumerate(cfg.seeds)]


def _curve(setting, curves, rounds) -> dict[str, Any]:
  """The setting's test accuracy after each of ``rounds``, mean of seeds."""
  acc = np.asarray(curves['test_accuracy'])
  return dict(setting=setting, rounds=rounds,
              test_accuracy=[float(acc[:, r - 1].mean()) for r in rounds])


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Every protocol on the federated loop, all seeds at once."""
  ds = data_lib.load(cfg.dataset, seed=cfg.seed, fallback=cfg.allow_fallback)
  if ds.task != 'classification':
    raise ValueError(f'{NAME} needs a classification dataset, got {ds.name}')
  model = models.make_model(cfg.model, ds.num_classes,
                            input_shape=ds.input_shape)
  clients = federated.init_clients(model, ds, cfg.seeds, cfg.num_clients)
  d = clients.dimension
  n = cfg.clients_per_round or cfg.num_clients
  configs = configurations(cfg, d, n)
  privacy = [c.row for c in configs]
  plan = _claims.plan(privacy)  # fixed before any training
  loop = federated.FederatedLoop(
      model, ds, num_clients=cfg.num_clients, clients_per_round=n,
      rounds=cfg.rounds, learning_rate=cfg.learning_rate,
      momentum=cfg.momentum, l2_norm_clip=cfg.l2_norm_clip)
  runs, curves_out = [], []
  for setting, method, pr, protocol in settings(cfg, configs, d, n):
    t0 = time.time()
    curves, ledger = loop.run(clients, protocol)
    if method == 'cpsgd' and ledger is not None:  # the rounds that ran
      pr.update(epsilon_total=float(ledger.epsilon(cfg.delta, 'pld')),
                ledger=ledger.to_json(), bits_per_client_total=ledger.bits)
    base = _setting_row(cfg, setting, method, pr, ds.name, d, n)
    runs += _seed_rows(cfg, base, curves, n)
    curves_out.append(_curve(setting, curves, eval_rounds(cfg)))
    ctx.say(f'{setting}: test acc {curves_out[-1]["test_accuracy"][-1]:.4f} '
            f'({time.time() - t0:.1f} s)')
  summary = summarize(runs)
  return Results(dataset=report_lib.dataset_info(ds),
                 model=cfg.model, dimension=d,
                 padded_dimension=compression.next_power_of_two(d),
                 clients_per_round=n, delta_round=round_delta(cfg),
                 privacy=privacy, runs=runs, summary=summary,
                 curves=curves_out,
                 comparisons=comparisons(summary, cfg.l2_norm_clip),
                 plan=plan, exact_checks=_claims.exact_checks(privacy))


_CONSTANT = ('method', 'levels', 'trials', 'rotate', 'bits_per_coordinate',
             'l2_sensitivity',
             'bits_fixed', 'bits_per_client', 'message_length',
             'epsilon_round', 'epsilon_total', 'matched_epsilon_round',
             'noise_multiplier', 'client_stddev', 'delta_round', 'x_max',
             'no_guarantee')


def summarize(runs):
  rows = report_lib.summarize_over_seeds(
      runs, ('setting',), ('test_accuracy', 'train_accuracy', 'train_loss',
                           'clipped_fraction'))
  first = {}
  for r in runs:
    first.setdefault(r['setting'], r)
  for row in rows:
    row.update({k: first[row['setting']].get(k) for k in _CONSTANT})
  return rows


def comparisons(summary, l2_norm_clip):
  """Per cpSGD configuration, the means beside its Gaussian twin's (the
  descriptive table; the claims are checked per seed in ``_claims``)."""
  by = {r['setting']: r for r in summary}
  clipped = by.get('clipped, no noise')
  pairs = []
  for r in summary:
    if r['method'] != 'cpsgd':
      continue
    g = by.get(f"Gaussian @ {r['setting']}")
    row = dict(setting=r['setting'], levels=r['levels'], trials=r['trials'],
               rotate=r['rotate'], bits=r['bits_per_coordinate'],
               bits_fixed=r['bits_fixed'], epsilon_round=r['epsilon_round'],
               epsilon_total=r['epsilon_total'],
               acc_cpsgd=r['test_accuracy_mean'],
               sem_cpsgd=r['test_accuracy_sem'],
               sensitivity_ratio=(r['l2_sensitivity'] / (2 * l2_norm_clip)
                                  if r.get('l2_sensitivity') else None))
    if g is not None:
      diff = r['test_accuracy_mean'] - g['test_accuracy_mean']
      sem = math.hypot(r['test_accuracy_sem'], g['test_accuracy_sem'])
      row.update(acc_gauss=g['test_accuracy_mean'],
                 sem_gauss=g['test_accuracy_sem'],
                 gauss_epsilon_total=g['epsilon_total'], gap=diff,
                 gap_sem=sem,
                 bit_saving=GAUSSIAN_BITS / r['bits_per_coordinate'],
                 # what the Gaussian noise itself costs at this epsilon
                 gauss_noise_cost=(clipped['test_accuracy_mean']
                                   - g['test_accuracy_mean'])
                 if clipped else None)
    pairs.append(row)
  return pairs
