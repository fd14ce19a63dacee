"""Fit + predict timings: dpjax.nonparametric vs scikit-learn and diffprivlib.

n = 1e5 training points (``--num-examples``), d = 10 (``--dimension``), 1e4
test points (``--num-test``; make_classification), eps = 2 (``--epsilon``).
The cold time is each method's first call (compilation included for dpjax);
the warm time a median over calls interleaved across the methods in two
passes, with the range of the pass medians (``timing.time_medians``). Ratios
are against scikit-learn's brute-force kNN measured in the same run.

Run: ``python -m experiments bench nonparametric [--num-examples 100000]
[--dimension 10] [--num-test 10000] [--epsilon 2.0]``.
"""

import argparse

import jax
import numpy as np
from sklearn import datasets, neighbors

from dpjax import nonparametric as npm
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--num-examples 5000 --num-test 1000'


def main(argv=None):
  p = argparse.ArgumentParser(
      prog='python -m experiments bench nonparametric', allow_abbrev=False)
  p.add_argument('--num-examples', type=int, default=100_000,
                 help='training points')
  p.add_argument('--dimension', type=int, default=10,
                 help='features per point')
  p.add_argument('--num-test', type=int, default=10_000, help='test points')
  p.add_argument('--epsilon', type=float, default=2.0)
  p.add_argument('--repeats', type=int, default=1,
                 help='warm calls per method and pass')
  args = p.parse_args(argv)
  n, d, n_test, eps = (args.num_examples, args.dimension, args.num_test,
                        args.epsilon)
  x, y = datasets.make_classification(n + n_test, d, random_state=0)
  x, xt, y, yt = x[:n], x[n:], y[:n], y[n:]
  bounds = (np.minimum(x.min(0), xt.min(0)), np.maximum(x.max(0), xt.max(0)))
  key = jax.random.key(0)
  acc = lambda p: float(np.mean(np.asarray(p) == yt))
  runs = {
      'dpjax noisy_reg (m=4, b=8)': lambda: npm.predict(npm.noisy_reg(
          key, x, y, epsilon=eps, bounds=bounds, num_classes=2, bins=8,
          projection_dim=4)[0], xt),
      'dpjax dp_knn (k=2N)': lambda: npm.predict(npm.dp_knn(
          key, x, y, xt, epsilon=eps, bounds=bounds, num_classes=2)[0], xt),
      'dpjax rdt (10 trees)': lambda: npm.predict(npm.random_decision_trees(
          key, x, y, epsilon=eps, bounds=bounds, num_classes=2)[0], xt),
      'sklearn kNN brute (k=5)': lambda: neighbors.KNeighborsClassifier(
          5, algorithm='brute').fit(x, y).predict(xt),
  }
  try:
    import diffprivlib.models as dpl  # pylint: disable=g-import-not-at-top
    runs['diffprivlib GaussianNB'] = lambda: dpl.GaussianNB(
        epsilon=eps, bounds=bounds).fit(x, y).predict(xt)
    runs['diffprivlib RandomForest (10)'] = lambda: dpl.RandomForestClassifier(
        n_estimators=10, epsilon=eps, bounds=bounds, classes=[0, 1]).fit(
            x, y).predict(xt)
  except ImportError as e:
    print(f'diffprivlib unavailable: {e!r}')
  cold = {name: timing.timed_call(fn, jax.block_until_ready)
          for name, fn in runs.items()}
  warm = timing.time_medians(runs, args.repeats, block=jax.block_until_ready,
                             scale=1.0, rewarm=False)
  base = warm['sklearn kNN brute (k=5)']['median']
  print(f'n={n} d={d} test={n_test} eps={eps}; {jax.devices()[0].platform}; '
        f'warm s: {timing.legend()}, {args.repeats} calls per pass')
  print('| method | cold s | warm s | x sklearn | acc |')
  print('|---|---|---|---|---|')
  for name, (cold_s, pred) in cold.items():
    print(f"| {name} | {cold_s:.2f} | {timing.cell(warm[name])} | "
          f"{warm[name]['median'] / base:.2f} | {acc(pred):.3f} |")


if __name__ == '__main__':
  main()
