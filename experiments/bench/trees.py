"""Tree-ensemble benchmark (not a test): build + predict vs scikit-learn.

An ensemble of ``--num-trees`` trees of depth ``--depth`` on
``--num-examples`` training points of dimension ``--dimension``
(``make_classification``, 2 classes), then predictions for ``--num-test``
points: ``dpjax.nonparametric.spe`` (private median splits, eps = 2; its
first call, with compilation, reported apart with every method's first call,
whose predictions give the accuracy) against diffprivlib's
``RandomForestClassifier`` (eps = 2, explicit public bounds, ``max_depth`` =
depth) and scikit-learn's ``RandomForestClassifier`` (not private,
``max_depth`` = depth, one core), all measured in the same run: a median
over calls interleaved across the methods in two passes, with the range of
the pass medians (``timing.time_medians``); ratios are against scikit-learn.

Run: ``python -m experiments bench trees [--num-examples 100000]
[--dimension 16] [--num-trees 100] [--depth 10] [--num-test 10000]``.
"""

import argparse
import itertools
import warnings

import jax
import numpy as np
from sklearn import datasets as sk_datasets
from sklearn import ensemble as sk_ensemble

from dpjax import nonparametric as npm
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--num-examples 2000 --num-trees 5 --depth 4 --num-test 500'


def parse_args(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                              allow_abbrev=False)
  p.add_argument('--num-examples', type=int, default=100_000,
                 help='training points')
  p.add_argument('--dimension', type=int, default=16,
                 help='features per point')
  p.add_argument('--num-trees', type=int, default=100,
                 help='trees per ensemble')
  p.add_argument('--depth', type=int, default=10)
  p.add_argument('--num-test', type=int, default=10_000, help='test points')
  p.add_argument('--epsilon', type=float, default=2.0)
  p.add_argument('--repeats', type=int, default=1,
                 help='timed calls per method and pass')
  return p.parse_args(argv)


def main(argv=None) -> None:
  args = parse_args(argv)
  x, y = sk_datasets.make_classification(
      args.num_examples + args.num_test, args.dimension,
      n_informative=args.dimension // 2, random_state=0)
  x = x.astype(np.float32)
  n = args.num_examples
  xtr, ytr, xte, yte = x[:n], y[:n], x[n:], y[n:]
  bounds = (x.min(0).astype(np.float64), x.max(0).astype(np.float64))
  print(f'n={n} d={args.dimension} trees={args.num_trees} '
        f'depth={args.depth} n_test={args.num_test} eps={args.epsilon} '
        f'devices={jax.devices()}')
  rows = {}

  def sk():
    m = sk_ensemble.RandomForestClassifier(
        args.num_trees, max_depth=args.depth, random_state=0, n_jobs=1)
    return m.fit(xtr, ytr).predict(xte)
  rows['scikit-learn RF (not private)'] = sk

  def dp_jax(seed):
    rel, _ = npm.spe(jax.random.key(seed), xtr, ytr, epsilon=args.epsilon,
                     bounds=bounds, num_classes=2, num_trees=args.num_trees,
                     depth=args.depth)
    return np.asarray(npm.predict(rel, xte))
  seeds = itertools.count()
  rows['dpjax spe'] = lambda: dp_jax(next(seeds))

  try:
    from diffprivlib import models  # pylint: disable=g-import-not-at-top
  except Exception as e:  # pylint: disable=broad-except
    print(f'diffprivlib unavailable: {e}')
  else:
    def dpl():
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        m = models.RandomForestClassifier(
            args.num_trees, epsilon=args.epsilon, bounds=bounds,
            classes=[0, 1], max_depth=args.depth, random_state=0)
        return m.fit(xtr, ytr).predict(xte)
    rows['diffprivlib RF'] = dpl
  first = {name: timing.timed_call(fn) for name, fn in rows.items()}
  stats = timing.time_medians(rows, args.repeats, scale=1.0, rewarm=False)
  base = stats['scikit-learn RF (not private)']['median']
  print(f'seconds: {timing.legend()}, {args.repeats} calls per pass, after '
        'a first call (with compilation for dpjax)')
  print('| method | first call s | seconds | x sklearn | accuracy |')
  print('|---|---|---|---|---|')
  for name, (first_s, pred) in first.items():
    acc = float(np.mean(np.asarray(pred) == yte))
    print(f"| {name} | {first_s:.2f} | {timing.cell(stats[name])} | "
          f"{stats[name]['median'] / base:.2f} | {acc:.3f} |")


if __name__ == '__main__':
  main()
