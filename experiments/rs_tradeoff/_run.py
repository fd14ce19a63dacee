"""rs_tradeoff's run: every DP-SGD panel (sigma, C) and ablation at every r*.

The seeds of a setting train as one vmapped program
(``train.run_seeds_and_record``); each run is scored on the train split
(Fig. 2's metric), the validation split (to choose r* per seed) and the test
split (where a chosen r* is judged). The bits per step of the sparse
messages (values plus positions once per epoch) are reported against dense
DP-SGD. A non-private row (same batches and steps) is the sanity ceiling.
"""

import math
from typing import Any

import jax

import dpjax
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.common import train as train_lib
from experiments.rs_tradeoff._config import Config
from experiments.rs_tradeoff._results import Results

METRICS = ('train_accuracy', 'val_accuracy', 'test_accuracy')


def settings(cfg: Config) -> list[tuple[str, Any, float, Any, tuple]]:
  """(setting, sigma, C, ablation, rates) for every curve.

  The ablations (Fig. 3) run at r* = 0 and the largest rate only, which is
  what their claims compare: noisy SGD at each sigma of the panels (noise
  sigma * max C, no clipping), clipped SGD at each C of the panels.
  """
  pairs = cfg.pairs()
  ends = (0.0, max(cfg.final_rates))
  out = [('dpsgd', s, c, None, cfg.final_rates) for s, c in pairs]
  out += [('noisy_sgd', s, max(cfg.l2_norm_clips), 'noisy_sgd', ends)
          for s in sorted({s for s, _ in pairs})]
  out += [('clipped_sgd', None, c, 'clipped_sgd', ends)
          for c in sorted({c for _, c in pairs})]
  return out


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Trains every (curve, rate, seed); returns the numbers."""
  ds = train_lib.sweep_data(cfg)
  model_name, model = models.for_dataset(ds, cfg.model)
  base = train_lib.sweep_base(cfg, len(ds.x_train))
  steps = base['steps']
  runs = train_lib.run_seeds_and_record(
      model, ds, train_lib.TrainConfig(**base), cfg.seeds, delta=cfg.delta,
      out_dir=ctx.out_dir, label='non-private', progress=ctx.progress,
      model=model_name, setting='non_private', sigma=None, clip=None,
      rate=0.0)
  for setting, sigma, clip, ablation, rates in settings(cfg):
    for rate in rates:
      tc = train_lib.TrainConfig(
          **dict(base, l2_norm_clip=clip), noise_multiplier=sigma,
          ablation=ablation, sparsify_rate=rate)
      runs += train_lib.run_seeds_and_record(
          model, ds, tc, cfg.seeds, delta=cfg.delta, out_dir=ctx.out_dir,
          label=f'{setting} sigma={sigma} C={clip} r={rate}',
          progress=ctx.progress, model=model_name, setting=setting,
          sigma=sigma, clip=clip, rate=rate)
  for r in runs:  # the curves' histories are not reported; keep files small
    r.pop('history', None)
  summary = report_lib.summarize_over_seeds(
      runs, ('setting', 'sigma', 'clip', 'rate'), METRICS)
  params = model.init(jax.random.key(0), ds.x_train[0])
  d = models.num_params(params)
  spe = max(1, round(len(ds.x_train) / cfg.expected_batch_size))
  bits = {r: dpjax.transforms.rs_dpsgd_bits(
      dpjax.transforms.SparsityMaskSchedule.cooling(
          r, math.ceil(steps / spe), spe, params), d)[:steps]
          for r in set(cfg.final_rates)}
  dense = dpjax.transforms.dpsgd_bits(d)
  for row in summary:  # sparse messages: values + positions once per epoch
    if row['setting'] != 'non_private':
      row['bits_vs_dense'] = float(bits[row['rate']].mean()) / dense
  return Results(dataset=report_lib.dataset_info(ds), model=model_name,
                 num_params=d, steps=steps, runs=runs, summary=summary)
