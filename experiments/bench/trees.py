"""Tree-ensemble benchmark (not a test): build + predict, one run.

An ensemble of ``--trees`` trees of depth ``--depth`` on ``--n`` training
points in ``--d`` dimensions (``make_classification``, 2 classes), then
predictions for ``--n-test`` points: ``dpjax.nonparametric.spe`` (private
median splits, eps = 2; timed once with compilation and once compiled)
against diffprivlib's ``RandomForestClassifier`` (eps = 2, explicit public
bounds, ``max_depth`` = depth) and scikit-learn's ``RandomForestClassifier``
(not private, ``max_depth`` = depth, one core), all measured in the same run;
ratios are against scikit-learn.

Run: ``python -m experiments bench trees [--n 100000] [--d 16]
[--trees 100] [--depth 10] [--n-test 10000]``.
"""

import argparse
import time
import warnings

import jax
import numpy as np
from sklearn import datasets as sk_datasets
from sklearn import ensemble as sk_ensemble

from dpjax import nonparametric as npm


def _time(fn):
  start = time.perf_counter()
  out = fn()
  return time.perf_counter() - start, out


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--n', type=int, default=100_000)
  p.add_argument('--d', type=int, default=16)
  p.add_argument('--trees', type=int, default=100)
  p.add_argument('--depth', type=int, default=10)
  p.add_argument('--n-test', type=int, default=10_000)
  p.add_argument('--epsilon', type=float, default=2.0)
  args = p.parse_args(argv)
  x, y = sk_datasets.make_classification(
      args.n + args.n_test, args.d, n_informative=args.d // 2,
      random_state=0)
  x = x.astype(np.float32)
  xtr, ytr, xte, yte = x[:args.n], y[:args.n], x[args.n:], y[args.n:]
  bounds = (x.min(0).astype(np.float64), x.max(0).astype(np.float64))
  print(f'n={args.n} d={args.d} trees={args.trees} depth={args.depth} '
        f'n_test={args.n_test} eps={args.epsilon} '
        f'devices={jax.devices()}')
  rows = {}

  def sk():
    m = sk_ensemble.RandomForestClassifier(args.trees, max_depth=args.depth,
                                           random_state=0, n_jobs=1)
    return m.fit(xtr, ytr).predict(xte)
  rows['scikit-learn RF (not private)'] = _time(sk)

  def dp_jax(seed):
    rel, _ = npm.spe(jax.random.key(seed), xtr, ytr, epsilon=args.epsilon,
                     bounds=bounds, num_classes=2, num_trees=args.trees,
                     depth=args.depth)
    return np.asarray(npm.predict(rel, xte))
  rows['dpjax spe (first call, with compile)'] = _time(lambda: dp_jax(0))
  rows['dpjax spe (compiled)'] = _time(lambda: dp_jax(1))

  try:
    from diffprivlib import models  # pylint: disable=g-import-not-at-top
  except Exception as e:  # pylint: disable=broad-except
    print(f'diffprivlib unavailable: {e}')
  else:
    def dpl():
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        m = models.RandomForestClassifier(
            args.trees, epsilon=args.epsilon, bounds=bounds, classes=[0, 1],
            max_depth=args.depth, random_state=0)
        return m.fit(xtr, ytr).predict(xte)
    rows['diffprivlib RF'] = _time(dpl)

  base = rows['scikit-learn RF (not private)'][0]
  print(f'{"method":40s} {"seconds":>9s} {"x sklearn":>10s} {"accuracy":>9s}')
  for name, (sec, pred) in rows.items():
    acc = float(np.mean(np.asarray(pred) == yte))
    print(f'{name:40s} {sec:9.2f} {sec / base:10.2f} {acc:9.3f}')


if __name__ == '__main__':
  main()
