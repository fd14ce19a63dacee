"""dpsgd_baseline's run: every (model, target epsilon, seed) trained.

For each target epsilon, sigma is calibrated under RDP for the exact
mechanism the sampler runs (truncated Poisson subsampling,
``PoissonSampler.dp_event``) and the number of steps; the reported epsilons
are read back from each run's ledger under RDP and PLD. The seeds of a
setting train as one vmapped program (``train.run_seeds_and_record``).
"""

from typing import Any

from dpjax import accounting
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.common import train as train_lib
from experiments.dpsgd_baseline._config import Config


def _model_specs(ds: data_lib.Dataset, cfg: Config):
  specs = {'mlp': dict(hidden=list(cfg.mlp_hidden),
                       activation=cfg.activation)}
  cnn = models.default_model_name(ds.name)
  if cnn.endswith('_cnn'):
    specs[cnn] = {}
  return specs


def run(cfg: Config, ctx: runner.Context) -> dict[str, Any]:
  """Trains every (model, setting, seed); returns the numbers."""
  ds = data_lib.load(cfg.dataset, seed=cfg.seed, fallback=cfg.allow_fallback)
  n = len(ds.x_train)
  base = train_lib.sweep_base(cfg.to_dict(), n)
  sampler = train_lib.make_sampler(train_lib.TrainConfig(**base), n)
  sigmas = {eps: accounting.calibrate(sampler.dp_event, eps, cfg.delta,
                                      steps=base['steps'])
            for eps in cfg.epsilons}
  runs = []
  for model_name, model_kwargs in _model_specs(ds, cfg).items():
    model = models.make_model(model_name, ds.num_classes,
                              input_shape=ds.input_shape, **model_kwargs)
    for target in [None] + list(cfg.epsilons):
      tc = train_lib.TrainConfig(**base, noise_multiplier=sigmas.get(target))
      runs += train_lib.run_seeds_and_record(
          model, ds, tc, cfg.seeds, delta=cfg.delta, out_dir=ctx.out_dir,
          label=f'{model_name} eps={target}', progress=ctx.progress,
          model=model_name, target_epsilon=target)
  return dict(dataset=report_lib.dataset_info(ds),
              sampling_rate=sampler.sampling_rate,
              max_batch_size=sampler.max_batch_size, runs=runs,
              summary=report_lib.summarize_over_seeds(
                  runs, ('model', 'target_epsilon'), ('test_accuracy',)))
