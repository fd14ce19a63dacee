"""DP-kNN (dpjax.nonparametric.dp_knn)."""

import jax
import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier

from dpjax import nonparametric as npm

INF = float('inf')


def _data(n, seed, d=3, k=3):
  rng = np.random.default_rng(seed)
  x = rng.uniform(0, 1, (n, d))
  return x, rng.integers(0, k, n)


@pytest.mark.parametrize('k', [1, 5, 12])
def test_noiseless_dp_knn_equals_sklearn(k):
  x, y = _data(300, 0)
  xt, _ = _data(40, 1)
  rel, _ = npm.dp_knn(jax.random.key(0), x, y, xt, epsilon=INF,
                      bounds=(0.0, 1.0), num_classes=3, k=k)
  sk = KNeighborsClassifier(k, algorithm='brute').fit(x, y)
  _, idx = sk.kneighbors(xt)
  np.testing.assert_array_equal(
      rel.counts, np.stack([np.bincount(y[i], minlength=3) for i in idx]))
  if k == 1:
    np.testing.assert_array_equal(npm.predict(rel, xt), sk.predict(xt))


@pytest.mark.parametrize('relation', ['add_remove', 'replace'])
def test_count_sensitivity_is_at_most_2n(relation):
  x, y = _data(60, 4, k=2)
  xt, _ = _data(6, 5, k=2)
  kw = dict(epsilon=INF, bounds=(0.0, 1.0), num_classes=2, k=5)
  base, _ = npm.dp_knn(jax.random.key(0), x, y, xt, **kw)
  worst = 0.0
  for i in (0, 17, 33):
    for c in (xt[0], xt.mean(0), x[i] + 1e-3):
      for label in (0, 1):
        if relation == 'add_remove':
          pairs = [(np.vstack([x, c]), np.append(y, label)),
                   (np.delete(x, i, 0), np.delete(y, i))]
        else:
          x2, y2 = x.copy(), y.copy()
          x2[i], y2[i] = c, label
          pairs = [(x2, y2)]
        for nx, ny in pairs:
          other, _ = npm.dp_knn(jax.random.key(0), nx, ny, xt, **kw)
          worst = max(worst, float(np.abs(other.counts - base.counts).sum()))
  assert 2 <= worst <= 2 * len(xt)


def test_pure_jit_invariant_and_predicts_at_nearest_test_point():
  x, y = _data(200, 6)
  xt, _ = _data(20, 7)
  kw = dict(epsilon=50.0, bounds=(0.0, 1.0), num_classes=3, k=7)
  a, _ = npm.dp_knn(jax.random.key(3), x, y, xt, **kw)
  b, _ = npm.dp_knn(jax.random.key(3), x, y, xt, **kw)
  np.testing.assert_array_equal(a.counts, b.counts)
  eager = npm.predict(a, xt)
  np.testing.assert_array_equal(eager, np.argmax(a.counts, axis=1))
  jitted = jax.jit(lambda r, q: npm.predict(r, q))(a, xt)
  np.testing.assert_array_equal(eager, jitted)
  with jax.disable_jit():
    np.testing.assert_array_equal(eager[:4], npm.predict(a, xt[:4]))
  np.testing.assert_array_equal(npm.predict(a, xt + 1e-6), eager)


@pytest.mark.parametrize('kwargs,match', [
    (dict(epsilon=0.0), 'epsilon=0.0'),
    (dict(k=0), 'k=0'),
    (dict(y=[0, 5, 1]), 'y to hold integer labels'),
    (dict(y=[0, 1]), r'shape \(2,\)'),
    (dict(x=[[0.0, np.nan], [0.0, 0.0], [1.0, 1.0]]), 'x without NaN'),
    (dict(x_test=[[0.0, 0.0, 0.0]]), 'x_test with 2 features'),
    (dict(x_test=[[np.nan, 0.0]]), 'x_test without NaN'),
])
def test_bad_input_names_the_value(kwargs, match):
  args = dict(x=[[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]], y=[0, 1, 1],
              x_test=[[0.2, 0.2]], epsilon=1.0, bounds=(0.0, 1.0),
              num_classes=2)
  args.update(kwargs)
  x, y, xt = args.pop('x'), args.pop('y'), args.pop('x_test')
  with pytest.raises(ValueError, match=match):
    npm.dp_knn(jax.random.key(0), x, y, xt, **args)
