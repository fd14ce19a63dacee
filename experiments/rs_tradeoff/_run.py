"""rs_tradeoff's run: every curve (sigma, C, ablation) at every rate r*.

The seeds of a setting train as one vmapped program
(``train.run_seeds_and_record``); the bits per step of the sparse messages
(values plus positions once per epoch) are reported against dense DP-SGD.
"""

import itertools
import math
from typing import Any

import jax

import dpjax
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.common import train as train_lib
from experiments.rs_tradeoff._config import Config


def _settings(cfg):
  """(setting, sigma, C, ablation) for every curve."""
  out = [('dpsgd', s, c, None) for s, c in
         itertools.product(cfg.sigmas, cfg.clips)]
  out += [('noisy_sgd', s, max(cfg.clips), 'noisy_sgd')
          for s in cfg.sigmas]
  out += [('clipped_sgd', None, c, 'clipped_sgd') for c in cfg.clips]
  return out


def run(cfg: Config, ctx: runner.Context) -> dict[str, Any]:
  """Trains every (curve, rate, seed); returns the numbers."""
  ds = data_lib.load(cfg.dataset, seed=cfg.seed, fallback=cfg.allow_fallback)
  model_name = models.default_model_name(ds.name)
  model = models.make_model(model_name, ds.num_classes,
                            input_shape=ds.input_shape)
  steps = train_lib.steps_for_epochs(cfg.epochs, cfg.expected_batch_size,
                                     len(ds.x_train))
  runs = []
  for setting, sigma, clip, ablation in _settings(cfg):
    for rate in cfg.rates:
      tc = train_lib.TrainConfig(
          steps=steps, expected_batch_size=cfg.expected_batch_size,
          learning_rate=cfg.learning_rate, momentum=cfg.momentum,
          l2_norm_clip=clip, noise_multiplier=sigma, ablation=ablation,
          sparsify_rate=rate, eval_every=max(1, steps // cfg.evals))
      runs += train_lib.run_seeds_and_record(
          model, ds, tc, cfg.seeds, delta=cfg.delta, out_dir=ctx.out_dir,
          label=f'{setting} sigma={sigma} C={clip} r={rate}',
          progress=ctx.progress, model=model_name, setting=setting,
          sigma=sigma, clip=clip, rate=rate)
  summary = report_lib.summarize_over_seeds(
      runs, ('setting', 'sigma', 'clip', 'rate'),
      ('train_accuracy', 'test_accuracy'))
  params = model.init(jax.random.key(0), ds.x_train[0])
  d = models.num_params(params)
  spe = max(1, round(len(ds.x_train) / cfg.expected_batch_size))
  bits = {r: dpjax.transforms.rs_dpsgd_bits(
      dpjax.transforms.SparsityMaskSchedule.cooling(
          r, math.ceil(steps / spe), spe, params), d)[:steps]
          for r in cfg.rates}
  dense = dpjax.transforms.dpsgd_bits(params)
  for row in summary:  # sparse messages: values + positions once per epoch
    row['bits_per_step'] = float(bits[row['rate']].mean())
    row['bits_vs_dense'] = row['bits_per_step'] / dense
  return dict(dataset=report_lib.dataset_info(ds), model=model_name,
              steps=steps, runs=runs, summary=summary)
