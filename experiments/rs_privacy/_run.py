"""rs_privacy's run: tune r* on a validation split, then test both methods.

Sigma is calibrated under RDP per target epsilon for the sampler and the
number of steps; the mask is data-independent, so RS spends the same privacy.
"""

import dataclasses
from typing import Any

import numpy as np

from dpjax import accounting
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.common import train as train_lib
from experiments.rs_privacy._config import Config


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


def run(cfg: Config, ctx: runner.Context) -> dict[str, Any]:
  """Tunes r* per epsilon on seed ``seed``, then tests both methods."""
  ds = data_lib.load(cfg.dataset, seed=cfg.seed, fallback=cfg.allow_fallback)
  tuning, final = _split(ds, cfg.validation_fraction, cfg.seed)
  model_name = models.default_model_name(ds.name)
  model = models.make_model(model_name, ds.num_classes,
                            input_shape=ds.input_shape)
  n = len(final.x_train)
  base = train_lib.sweep_base(cfg.to_dict(), n)
  steps = base['steps']
  sampler = train_lib.make_sampler(train_lib.TrainConfig(**base), n)
  runs, tuning_runs = [], []
  for eps in cfg.epsilons:
    sigma = accounting.calibrate(sampler.dp_event, eps, cfg.delta,
                                 steps=steps)

    def one(data, rate, seeds, stage):
      tc = train_lib.TrainConfig(**base, noise_multiplier=sigma,
                                 sparsify_rate=rate)
      return train_lib.run_seeds_and_record(
          model, data, tc, seeds, delta=cfg.delta, out_dir=ctx.out_dir,
          label=f'{stage} eps={eps} r={rate}', progress=ctx.progress,
          model=model_name, target_epsilon=eps, rate=rate, stage=stage,
          method='DP-SGD' if rate == 0 else 'DP-SGD + RS')

    tuned = [one(tuning, r, (cfg.seed,), 'tune')[0] for r in cfg.rates]
    tuning_runs += tuned
    best = max(tuned, key=lambda r: r['test_accuracy'])['rate']
    runs += one(final, 0.0, cfg.seeds, 'test') + one(final, best, cfg.seeds,
                                                      'test')
  summary = report_lib.summarize_over_seeds(
      runs, ('target_epsilon', 'method', 'rate'), ('test_accuracy',))
  return dict(dataset=report_lib.dataset_info(ds), model=model_name,
              steps=steps, n_train=n, n_validation=len(tuning.x_test),
              sampling_rate=sampler.sampling_rate, runs=runs,
              tuning=tuning_runs, summary=summary)
