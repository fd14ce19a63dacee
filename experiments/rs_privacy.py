"""DP-SGD vs DP-SGD + random sparsification at fixed epsilon (Table 2 analogue).

At epsilon in {1, 3} (delta = 1e-5) the noise multiplier is calibrated under
RDP for the sampler and number of steps; random sparsification does not change
it (the mask is data-independent, so both methods spend exactly the same
privacy). The final rate r* is tuned over {0.5, 0.7, 0.9} on a validation split
held out of the training data (seed ``seed`` only; tuning itself is not
accounted, as in the paper), then both methods are run on ``num_seeds`` seeds
(one vmapped program per method) and compared on the test set (Zhu &
Blaschko, Table 2). Claim per epsilon: RS minus DP-SGD test accuracy > 0,
paired by seed, Bonferroni over the epsilons. r* is chosen on validation data
before the test runs, so the test gain carries no selection bias.

Quick: 3 seeds. Full: 10 seeds.
"""

import dataclasses
import time
from typing import Any

import numpy as np

from dpjax import accounting
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import train as train_lib
from experiments.common import verdict as verdict_lib

NAME = 'rs_privacy'
DESCRIPTION = 'test accuracy of DP-SGD vs DP-SGD + RS at eps 1/3 (Table 2)'
MODES = {
    'quick': dict(dataset='digits', num_seeds=3, epochs=25),
    'full': dict(dataset='digits', num_seeds=10, epochs=25),
}
DEFAULTS = dict(seed=0, epsilons=[1.0, 3.0], delta=1e-5,
                rates=[0.5, 0.7, 0.9], validation_fraction=0.2,
                learning_rate=0.05, momentum=0.9, l2_norm_clip=1.0,
                expected_batch_size=64, evals=5)


def config(mode: str, **overrides) -> dict[str, Any]:
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  data_lib.require_classification(NAME, cfg['dataset'])
  return cfg


def _split(ds: data_lib.Dataset, fraction: float, seed: int):
  """(train without validation, validation-as-test, train with real test)."""
  perm = np.random.default_rng(seed).permutation(len(ds.x_train))
  n_val = int(round(fraction * len(perm)))
  val, tr = perm[:n_val], perm[n_val:]
  train_only = dataclasses.replace(ds, x_train=ds.x_train[tr],
                                   y_train=ds.y_train[tr])
  tuning = dataclasses.replace(train_only, x_test=ds.x_train[val],
                               y_test=ds.y_train[val])
  return tuning, train_only


def run(cfg: dict[str, Any], out_dir: str, progress: bool = True
        ) -> dict[str, Any]:
  start = time.time()
  ds = data_lib.load(cfg['dataset'], seed=cfg['seed'],
                     fallback=cfg.get('allow_fallback', False))
  tuning, final = _split(ds, cfg['validation_fraction'], cfg['seed'])
  model_name = models.default_model_name(ds.name)
  model = models.make_model(model_name, ds.num_classes,
                            input_shape=ds.input_shape)
  n = len(final.x_train)
  base = train_lib.sweep_base(cfg, n)
  steps = base['steps']
  sampler = train_lib.make_sampler(train_lib.TrainConfig(**base), n)
  runs, tuning_runs = [], []
  for eps in cfg['epsilons']:
    sigma = accounting.calibrate(sampler.dp_event, eps, cfg['delta'],
                                 steps=steps)

    def one(data, rate, seeds, stage):
      tc = train_lib.TrainConfig(**base, noise_multiplier=sigma,
                                 sparsify_rate=rate)
      return train_lib.run_seeds_and_record(
          model, data, tc, seeds, delta=cfg['delta'], out_dir=out_dir,
          label=f'{stage} eps={eps} r={rate}', progress=progress,
          model=model_name, target_epsilon=eps, rate=rate, stage=stage,
          method='DP-SGD' if rate == 0 else 'DP-SGD + RS')

    tuned = [one(tuning, r, (cfg['seed'],), 'tune')[0] for r in cfg['rates']]
    tuning_runs += tuned
    best = max(tuned, key=lambda r: r['test_accuracy'])['rate']
    seeds = range(cfg['seed'], cfg['seed'] + cfg['num_seeds'])
    runs += one(final, 0.0, seeds, 'test') + one(final, best, seeds, 'test')
  summary = report_lib.summarize_over_seeds(
      runs, ('target_epsilon', 'method', 'rate'), ('test_accuracy',))
  return dict(experiment=NAME, config=cfg, dataset=report_lib.dataset_info(ds),
              model=model_name, steps=steps, n_train=n,
              n_validation=len(tuning.x_test),
              sampling_rate=sampler.sampling_rate, runs=runs,
              tuning=tuning_runs, summary=summary, claims=claims(runs),
              wall_seconds=round(time.time() - start, 1))


def claims(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Per epsilon: RS (r* tuned on validation) minus DP-SGD test accuracy,
  paired by seed; Bonferroni over the epsilons."""
  by_eps: dict[float, dict[str, list]] = {}
  for r in sorted(runs, key=lambda r: r['seed']):
    by_eps.setdefault(r['target_epsilon'], {}).setdefault(
        r['method'], []).append(r)
  out = []
  for eps, rows in by_eps.items():
    rs, dp = rows['DP-SGD + RS'], rows['DP-SGD']
    v = verdict_lib.paired_verdict([r['test_accuracy'] for r in rs],
                                   [r['test_accuracy'] for r in dp],
                                   comparisons=len(by_eps))
    out.append(verdict_lib.claim(
        f"eps={eps:g}: RS (r*={rs[0]['rate']:g}, tuned on validation) "
        'beats DP-SGD (test acc)', v, target_epsilon=eps))
  return out


COLUMNS = [('target_epsilon', 'target eps'), ('method', 'method'),
           ('rate', 'r*'), ('noise_multiplier', 'sigma'),
           ('epsilon_rdp', 'eps (RDP)'), ('epsilon_pld', 'eps (PLD)'),
           ('delta', 'delta'), ('test_accuracy_mean', 'test acc'),
           ('test_accuracy_sem', 'SEM'), ('seeds', 'seeds')]
TUNING_COLUMNS = [('target_epsilon', 'target eps'), ('rate', 'r*'),
                  ('test_accuracy', 'validation acc')]


def report(results: dict[str, Any], out_dir: str) -> str:
  del out_dir
  cfg = results['config']
  lines = [
      f'## {NAME} ({cfg["mode"]})', '',
      report_lib.dataset_line(results['dataset']), '',
      f"Model {results['model']}; {results['n_train']} training examples "
      f"({results['n_validation']} more held out for tuning r*), "
      f"{results['steps']} steps ({cfg['epochs']} epochs, q = "
      f"{results['sampling_rate']:.4f}), C = {cfg['l2_norm_clip']}, lr "
      f"{cfg['learning_rate']}, momentum {cfg['momentum']}.", '',
      report_lib.markdown_table(results['summary'], COLUMNS), '',
      'Validation accuracy of the tuning runs (seed '
      f"{cfg['seed']}):", '',
      report_lib.markdown_table(results['tuning'], TUNING_COLUMNS), '']
  lines += ['**Claims** (paired by seed; verdicts per the rule at the top):',
            '', verdict_lib.claims_table(results['claims'])]
  return '\n'.join(lines) + '\n'
