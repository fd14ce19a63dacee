"""Seeds in one program benchmark (not a test): vmap vs lax.map vs a loop.

Trains S seeds of the same DP-SGD setting (digits, sigma 4, expected batch 64)
with ``experiments.common.train.train_seeds`` three ways, interleaved in
two passes (``timing.time_medians``) so machine load hits them alike: one program ``jax.vmap``-ed over the seeds,
one program that loops over them with ``jax.lax.map``, and S separate
single-seed runs (the baseline). Times exclude compilation (a warmup round
compiles every variant). Prints each median with the range of the pass
medians and its ratio to the baseline.

Run: ``python -m experiments bench seeds [--model cnn|mlp] [--seeds 3]
[--steps 150] [--repeats 3]``.
"""

import argparse

from experiments.common import data as data_lib
from experiments.common import models
from experiments.bench import timing
from experiments.common import train

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--model mlp --seeds 2 --steps 10 --repeats 1'


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                   allow_abbrev=False)
  parser.add_argument('--model', choices=('cnn', 'mlp'), default='cnn')
  parser.add_argument('--seeds', type=int, default=3)
  parser.add_argument('--steps', type=int, default=150)
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args(argv)
  ds = data_lib.load('digits', seed=0)
  kwargs = dict(hidden=[64], activation='tanh') if args.model == 'mlp' else {}
  name = 'mlp' if args.model == 'mlp' else models.default_model_name(ds.name)
  model = models.make_model(name, ds.num_classes, input_shape=ds.input_shape,
                            **kwargs)
  cfg = train.TrainConfig(steps=args.steps, expected_batch_size=64,
                          learning_rate=0.05, noise_multiplier=4.0,
                          eval_every=args.steps)
  seeds = tuple(range(args.seeds))
  variants = {
      'vmap': lambda: train.train_seeds(model, ds, cfg, seeds,
                                        progress=False, seeds_as='vmap'),
      'lax.map': lambda: train.train_seeds(model, ds, cfg, seeds,
                                           progress=False, seeds_as='map'),
      'separate runs': lambda: [train.train_seeds(
          model, ds, cfg, (s,), progress=False) for s in seeds],
  }
  stats = timing.time_medians(variants, args.repeats, scale=1.0,
                              rewarm=False)
  base = stats['separate runs']['median']
  print(f'{args.model}, {args.seeds} seeds x {args.steps} steps, compilation '
        f'excluded; {timing.legend()}, {args.repeats} calls per pass:')
  for k, stat in stats.items():
    print(f"  {k:14s} {timing.cell(stat)} s   x{stat['median'] / base:.2f} "
          'vs separate runs')


if __name__ == '__main__':
  main()
