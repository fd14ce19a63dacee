"""rs_privacy's run: both methods over the same clip grid, every seed.

Sigma is calibrated under RDP per target epsilon for the sampler and the
number of steps; the mask is data-independent, so RS spends the same privacy.
Every (C, r*) runs on every seed (one vmapped program each): r* = 0 is
DP-SGD, r* > 0 is DP-SGD + RS. Per seed, DP-SGD picks its C and RS its
(C, r*) on the validation split (``choose``), and each is judged by its test
accuracy at that choice (Zhu & Blaschko Sec. 6.2 tune both over the same C
grid; the choice never sees the test split).
"""

from typing import Any

from dpjax import accounting
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.common import train as train_lib
from experiments.common import verdict
from experiments.rs_privacy._config import Config
from experiments.rs_privacy._results import Results

METHODS = ('DP-SGD', 'DP-SGD + RS')


def choose(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Per (target epsilon, method) and seed, the run with the best
  validation accuracy (ties: the smallest (C, r*)), marked ``selected``."""
  return verdict.select_per_seed(runs, ('target_epsilon', 'method'),
                                 ('clip', 'rate'))


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Trains every (epsilon, C, r*, seed); returns the numbers."""
  ds = train_lib.sweep_data(cfg)
  model_name, model = models.for_dataset(ds, cfg.model)
  n = len(ds.x_train)
  base = train_lib.sweep_base(cfg, n)
  steps = base['steps']
  sampler = train_lib.make_sampler(train_lib.TrainConfig(**base), n)
  runs = []
  for eps in cfg.epsilons:
    sigma = accounting.calibrate(sampler.dp_event, eps, cfg.delta,
                                 steps=steps)
    for clip in cfg.l2_norm_clips:
      for rate in (0.0,) + tuple(cfg.final_rates):
        tc = train_lib.TrainConfig(**dict(base, l2_norm_clip=clip),
                                   noise_multiplier=sigma, sparsify_rate=rate)
        rows = train_lib.run_seeds_and_record(
            model, ds, tc, cfg.seeds, delta=cfg.delta, out_dir=ctx.out_dir,
            label=f'eps={eps} C={clip} r={rate}', progress=ctx.progress,
            model=model_name, target_epsilon=eps, clip=clip, rate=rate,
            method=METHODS[rate > 0])
        for r in rows:  # the per-evaluation histories are not reported
          r.pop('history', None)
        runs += rows
  selected = choose(runs)
  return Results(dataset=report_lib.dataset_info(ds), model=model_name,
                 steps=steps, n_train=n, n_validation=len(ds.x_val),
                 sampling_rate=sampler.sampling_rate, runs=runs,
                 selected=selected,
                 summary=report_lib.summarize_over_seeds(
                     selected, ('target_epsilon', 'method'),
                     ('test_accuracy',)),
                 grid=report_lib.summarize_over_seeds(
                     runs, ('target_epsilon', 'clip', 'rate'),
                     ('val_accuracy', 'test_accuracy')))
