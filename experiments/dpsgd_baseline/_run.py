"""dpsgd_baseline's run: every (model, target epsilon, C, seed) trained.

For each target epsilon, sigma is calibrated under RDP for the exact
mechanism the sampler runs (truncated Poisson subsampling,
``PoissonSampler.dp_event``) and the number of steps; the reported epsilons
are read back from each run's ledger under RDP and PLD. Each seed picks its
clip norm C on the validation split (``verdict.select_per_seed``), and the
test accuracy at that C is the seed's result (``selected`` rows); the choice
never sees the test split. The seeds of a setting train as one vmapped
program (``train.run_seeds_and_record``). Tuning C is not accounted, as in
the papers.
"""

from typing import Any

from dpjax import accounting
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.common import train as train_lib
from experiments.common import verdict
from experiments.dpsgd_baseline._config import Config
from experiments.dpsgd_baseline._results import Results


def _model_specs(ds: data_lib.Dataset, cfg: Config):
  """{model name: (its keyword arguments, its clipping method)}."""
  specs = {'mlp': (dict(hidden=list(cfg.mlp_hidden),
                        activation=cfg.activation), cfg.clip_method)}
  cnn = models.default_model_name(ds.name)
  if cfg.cnn and cnn.endswith('_cnn'):
    specs[cnn] = ({}, cfg.cnn_clip_method)
  return specs


def select_clip(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Per (model, target epsilon) and seed, the run whose C has the best
  validation accuracy (ties: the first C), marked ``selected``."""
  return verdict.select_per_seed(runs, ('model', 'target_epsilon'), ('clip',))


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Trains every (model, setting, C, seed); returns the numbers."""
  ds = train_lib.sweep_data(cfg)
  n = len(ds.x_train)
  base = train_lib.sweep_base(cfg, n)
  sampler = train_lib.make_sampler(train_lib.TrainConfig(**base), n)
  sigmas = {eps: accounting.calibrate(sampler.dp_event, eps, cfg.delta,
                                      steps=base['steps'])
            for eps in cfg.epsilons}
  runs = []
  for model_name, (model_kwargs, clipping) in _model_specs(ds, cfg).items():
    _, model = models.for_dataset(ds, model_name, **model_kwargs)
    for target in [None] + list(cfg.epsilons):
      # Non-private training does not clip: one run, C recorded as None.
      for clip in cfg.l2_norm_clips if target is not None else (None,):
        tc = train_lib.TrainConfig(
            **dict(base, l2_norm_clip=clip or 1.0, clipping=clipping),
            noise_multiplier=sigmas.get(target))
        rows = train_lib.run_seeds_and_record(
            model, ds, tc, cfg.seeds, delta=cfg.delta, out_dir=ctx.out_dir,
            label=f'{model_name} eps={target} C={clip}',
            progress=ctx.progress, model=model_name, target_epsilon=target,
            clip=clip)
        for r in rows:  # the per-evaluation histories are not reported
          r.pop('history', None)
        runs += rows
  selected = select_clip(runs)
  return Results(dataset=report_lib.dataset_info(ds),
                 sampling_rate=sampler.sampling_rate,
                 max_batch_size=sampler.max_batch_size, runs=runs,
                 selected=selected,
                 summary=report_lib.summarize_over_seeds(
                     runs, ('model', 'target_epsilon', 'clip'),
                     ('val_accuracy', 'test_accuracy')),
                 selected_summary=report_lib.summarize_over_seeds(
                     selected, ('model', 'target_epsilon'),
                     ('test_accuracy',)))
