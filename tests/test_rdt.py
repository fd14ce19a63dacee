"""Random decision trees (dpjax.nonparametric.random_decision_trees)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import nonparametric as npm

INF = float('inf')


def _data(n=200, d=4, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
  y = (x[:, 0] + x[:, 1] > 0).astype(np.int32)
  return x, y


def _fit(x, y, eps=INF, key=0, **kw):
  kw = dict(dict(num_trees=4, depth=3), **kw)
  return npm.random_decision_trees(jax.random.key(key), x, y, epsilon=eps,
                                   bounds=(-1.0, 1.0), num_classes=2, **kw)


def test_exact_counts_match_a_numpy_traversal_and_structure_is_public():
  x, y = _data()
  rel, event = _fit(x, y)
  assert event.epsilon == INF
  other, _ = _fit(x[:50] * 0.5, 1 - y[:50])
  np.testing.assert_array_equal(rel.attributes, other.attributes)
  np.testing.assert_array_equal(rel.thresholds, other.thresholds)
  u = (np.clip(x, -1, 1) + 1) / 2
  attrs, thrs = np.asarray(rel.attributes), np.asarray(rel.thresholds)
  for t in range(4):
    counts = np.zeros((8, 2))
    for row, label in zip(u, y):
      node = 0
      for _ in range(3):
        node = 2 * node + 1 + int(row[attrs[t, node]] >= thrs[t, node])
      counts[node - 7, label] += 1
    np.testing.assert_array_equal(rel.leaf_counts[t], counts)
  # Thresholds lie inside the node's range: the children split the parent's.
  assert np.all((thrs >= 0) & (thrs <= 1))


@pytest.mark.parametrize('relation', ['add_remove', 'replace'])
def test_leaf_count_sensitivity_under_adversarial_neighbours(relation):
  x, y = _data(n=60)
  trees = 5
  base, _ = _fit(x, y, num_trees=trees)
  worst = 0.0
  corners = np.array([[-1, -1, -1, -1], [1, 1, 1, 1], [1, -1, 1, -1]],
                     np.float32)
  for i in (0, 31):
    for c, label in zip(corners, (0, 1, 1)):
      if relation == 'add_remove':
        xs, ys = np.vstack([x, c]), np.append(y, label)
        rm_x, rm_y = np.delete(x, i, 0), np.delete(y, i)
        for nx, ny in ((xs, ys), (rm_x, rm_y)):
          other, _ = _fit(nx, ny, num_trees=trees)
          worst = max(worst, float(jnp.abs(other.leaf_counts
                                           - base.leaf_counts).sum()))
      else:
        nx, ny = x.copy(), y.copy()
        nx[i], ny[i] = c, 1 - y[i]
        other, _ = _fit(nx, ny, num_trees=trees)
        worst = max(worst, float(jnp.abs(other.leaf_counts
                                         - base.leaf_counts).sum()))
  bound = trees if relation == 'add_remove' else 2 * trees
  assert worst == bound  # attained, never exceeded


def test_pure_jit_invariant_and_accurate():
  x, y = _data(n=200)
  a, _ = _fit(x, y, eps=5.0, key=3)
  b, _ = _fit(x, y, eps=5.0, key=3)
  for la, lb in zip(a, b):
    np.testing.assert_array_equal(la, lb)
  xt, yt = _data(n=300, seed=1)
  xs = xt[:40]
  eager = npm.predict(a, xs)
  with jax.disable_jit():
    unjitted = npm.predict(a, xs)
  np.testing.assert_array_equal(eager, unjitted)
  jitted = jax.jit(lambda r, q: npm.predict(r, q))(a, xs)
  np.testing.assert_array_equal(eager, jitted)
  exact, _ = _fit(x, y)
  assert np.mean(np.asarray(npm.predict(exact, xt)) == yt) > 0.7


@pytest.mark.parametrize('kwargs,match', [
    (dict(epsilon=0.0), 'epsilon=0.0'),
    (dict(epsilon=-1.0), 'epsilon=-1.0'),
    (dict(num_trees=0), 'num_trees=0'),
    (dict(depth=0), 'depth=0'),
    (dict(depth=21), 'depth=21'),
    (dict(y=[0, 2, 1]), 'y to hold integer labels'),
    (dict(y=[0, 1]), r'shape \(2,\)'),
    (dict(x=[[0.0, np.nan], [0.0, 0.0], [1.0, 1.0]]), 'x without NaN'),
    (dict(bounds=(1.0, 0.0)), 'low < high'),
    (dict(bounds=None), 'bounds'),
])
def test_bad_input_names_the_value(kwargs, match):
  args = dict(x=[[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]], y=[0, 1, 1],
              epsilon=1.0, bounds=(0.0, 1.0), num_classes=2)
  args.update(kwargs)
  x, y = args.pop('x'), args.pop('y')
  with pytest.raises(ValueError, match=match):
    npm.random_decision_trees(jax.random.key(0), x, y, **args)
