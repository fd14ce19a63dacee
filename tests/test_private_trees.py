"""Private median-split tree ensembles (dpjax.nonparametric spe/sspe/pte)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import datasets as sk_datasets

from dpjax import _keys
from dpjax import nonparametric as npm
from dpjax.nonparametric import _trees

N, D, K = 3, 3, 2  # trees, depth, classes of the shared small problem
BOUNDS = (0.0, 1.0)


def _data(n=60, d=2, seed=1):
  x = jax.random.uniform(jax.random.key(seed), (n, d))
  return x, (x[:, 0] > 0.5).astype(jnp.int32)


def _spe(key, x, y, **kw):
  kw = dict(dict(epsilon=1.0, bounds=BOUNDS, num_classes=K, num_trees=N,
                 depth=D, num_candidates=8), **kw)
  return npm.spe(key, x, y, **kw)


def test_depth_budgets_sum_to_eps_and_grow_by_three_halves():
  for depth in (1, 2, 5, 10):
    b = npm.depth_budgets(2.0, depth)
    assert b.shape == (depth,)
    np.testing.assert_allclose(b.sum(), 2.0, rtol=1e-12)
    np.testing.assert_allclose(b[1:] / b[:-1], 1.5)
    c = 1.0 / (2 * 1.5 ** depth - 2)
    np.testing.assert_allclose(b[0], c * 2.0)


def test_partition_touches_each_record_once_and_is_prefix_stable():
  ids = np.asarray(_trees.partition(jax.random.key(0), 1000, 7))
  assert ids.shape == (1000,) and ids.min() >= 0 and ids.max() < 7
  one_hot = ids[:, None] == np.arange(7)
  assert np.all(one_hot.sum(1) == 1)          # every record in one part
  assert np.all(np.bincount(ids, minlength=7) > 100)
  # Adding a record (at the end) moves no other record.
  more = np.asarray(_trees.partition(jax.random.key(0), 1001, 7))
  np.testing.assert_array_equal(more[:1000], ids)


def test_median_utility_sensitivity_under_adversarial_neighbours():
  rng = np.random.default_rng(0)
  v = jnp.asarray(rng.uniform(size=41), jnp.float32)
  node = jnp.asarray(rng.integers(0, 3, size=41), jnp.int32)
  cand = jnp.asarray(rng.uniform(size=(3, 16)), jnp.float32)
  base = _trees.median_utility(v, node, cand)
  worst_add, worst_rep = 0.0, 0.0
  for val in (-1.0, 0.0, 0.5, 2.0, float(cand[1, 3]), float(v[0])):
    for g in range(3):  # add a point with value val to node g
      u = _trees.median_utility(jnp.append(v, val),
                                jnp.append(node, g).astype(jnp.int32), cand)
      worst_add = max(worst_add, float(jnp.max(jnp.abs(u - base))))
      # replace point 0 by it: a removal plus an addition
      u2 = _trees.median_utility(v.at[0].set(val), node.at[0].set(g), cand)
      worst_rep = max(worst_rep, float(jnp.max(jnp.abs(u2 - base))))
  for i in range(41):  # remove any one point
    keep = np.arange(41) != i
    u = _trees.median_utility(v[keep], node[keep], cand)
    worst_add = max(worst_add, float(jnp.max(jnp.abs(u - base))))
  assert worst_add <= _trees.MEDIAN_SENSITIVITY
  assert worst_add == pytest.approx(0.5)       # attained: tight
  assert worst_rep <= 2 * _trees.MEDIAN_SENSITIVITY


def test_leaf_counts_sensitivity_add_remove_and_replace():
  x, y = _data()
  release, _ = _spe(jax.random.key(0), x, y)
  z = x
  tree_of = _trees.partition(jax.random.key(5), 60, N)
  base = _trees.leaf_counts(release.attributes, release.thresholds, z, y,
                            tree_of, num_classes=K)
  assert float(base.sum()) == 60.0  # every record counted once
  worst_add, worst_rep = 0.0, 0.0
  for point in ([0.0, 0.0], [1.0, 1.0], [0.5, 0.5], [0.49, 0.99]):
    for label in range(K):
      zz = jnp.concatenate([z, jnp.asarray([point], z.dtype)])
      yy = jnp.append(y, label).astype(jnp.int32)
      ids = _trees.partition(jax.random.key(5), 61, N)
      c = _trees.leaf_counts(release.attributes, release.thresholds, zz, yy,
                             ids, num_classes=K)
      worst_add = max(worst_add, float(jnp.abs(c - base).sum()))
      zr = z.at[7].set(jnp.asarray(point, z.dtype))
      c2 = _trees.leaf_counts(release.attributes, release.thresholds, zr,
                              y.at[7].set(label), tree_of, num_classes=K)
      worst_rep = max(worst_rep, float(jnp.abs(c2 - base).sum()))
  assert worst_add == 1.0   # one count, by one (Lap(1/eps_l) suffices)
  assert worst_rep <= 2.0   # replace-one: two counts (2 eps_l)


def test_private_splits_ignore_other_trees_records():
  """Parallel composition: adding a record changes only its own tree."""
  x, y = _data()
  key = jax.random.key(3)
  k_part, _, _ = jax.random.split(_keys.stream(key, 'spe'), 3)
  a, _ = _spe(key, x, y)
  xx = jnp.concatenate([x, jnp.asarray([[0.9, 0.1]], x.dtype)])
  yy = jnp.append(y, 1).astype(jnp.int32)
  b, _ = _spe(key, xx, yy)
  own = int(_trees.partition(k_part, 61, N)[60])
  for t in range(N):
    same = bool(jnp.all(a.thresholds[t] == b.thresholds[t])
                and jnp.all(a.attributes[t] == b.attributes[t]))
    if t != own:
      assert same
      np.testing.assert_allclose(a.counts[t], b.counts[t])


def test_one_tree_alone_equals_it_inside_the_ensemble():
  x, _ = _data()
  keys = jax.random.split(jax.random.key(4), N)
  tree_of = _trees.partition(jax.random.key(9), 60, N)
  budgets = jnp.asarray(npm.depth_budgets(1.0, D), jnp.float32)
  attrs, thrs = _trees.grow(keys, x, tree_of, budgets, depth=D,
                            num_candidates=8)
  for t in range(N):
    mine = np.asarray(tree_of) == t
    a1, t1 = _trees.grow(keys[t:t + 1], x[mine],
                         jnp.zeros(int(mine.sum()), jnp.int32), budgets,
                         depth=D, num_candidates=8)
    np.testing.assert_array_equal(a1[0], attrs[t])
    np.testing.assert_array_equal(t1[0], thrs[t])


def test_jit_and_eager_agree_and_purity():
  x, y = _data()
  key = jax.random.key(0)
  eager, event = _spe(key, x, y)
  jitted = jax.jit(lambda k, xx, yy: _spe(k, xx, yy)[0])(key, x, y)
  for a, b in zip(eager, jitted):
    np.testing.assert_array_equal(a, b)
  again, _ = _spe(key, x, y)
  for a, b in zip(eager, again):
    np.testing.assert_array_equal(a, b)
  other, _ = _spe(jax.random.key(1), x, y)
  assert not np.array_equal(eager.thresholds, other.thresholds)
  # The private medians' float noise: one delta per depth (eps_s = 0.5).
  delta = sum(npm.exponential_mechanism_delta(float(e), 8)
              for e in _trees.depth_budgets(0.5, D))
  assert event.epsilon == 1.0 and event.delta == pytest.approx(delta)
  assert 0 < event.delta < 1e-16
  shapes = [tuple(a.shape) for a in eager]
  assert shapes == [(N, 2 ** D - 1), (N, 2 ** D - 1), (N, 2 ** D, K), (2,),
                    (2,)]


def test_splits_stay_in_the_public_box_and_route_consistently():
  x, y = _data()
  release, _ = _spe(jax.random.key(2), x, y, epsilon=1e4)
  assert np.all((release.thresholds >= 0) & (release.thresholds <= 1))
  # At a huge epsilon the root splits near the median of its attribute.
  tree_of = _trees.partition(jax.random.split(jax.random.key(2), 3)[0], 60, N)
  for t in range(N):
    pts = np.asarray(x)[np.asarray(tree_of) == t, release.attributes[t, 0]]
    left = np.mean(pts <= float(release.thresholds[t, 0]))
    assert 0.2 <= left <= 0.8


@pytest.mark.parametrize('kwargs,match', [
    (dict(epsilon=0.0), 'epsilon=0.0'),
    (dict(epsilon=-1.0), 'epsilon=-1.0'),
    (dict(depth=0), 'depth=0'),
    (dict(num_trees=0), 'num_trees=0'),
    (dict(bounds=(1.0, 1.0)), 'low=1.0 >= high=1.0'),
    (dict(bounds=None), 'public input'),
    (dict(num_classes=1), 'num_classes=1'),
])
def test_bad_input_names_the_value(kwargs, match):
  x, y = _data()
  with pytest.raises(ValueError, match=match):
    _spe(jax.random.key(0), x, y, **kwargs)


def test_bad_input_nan_and_semi_supervised():
  x, y = _data()
  with pytest.raises(ValueError, match='x without NaN'):
    _spe(jax.random.key(0), x.at[3, 1].set(jnp.nan), y)
  kw = dict(epsilon=1.0, bounds=BOUNDS, num_classes=K, num_trees=N, depth=D)
  with pytest.raises(ValueError, match='setting=3'):
    npm.sspe(jax.random.key(0), x[:20], y[:20], x[20:], setting=3, **kw)
  with pytest.raises(ValueError, match='x_unlabelled with 2 features'):
    npm.sspe(jax.random.key(0), x[:20], y[:20], x[20:, :1], setting=1, **kw)
  with pytest.raises(ValueError, match='x_unlabelled without NaN'):
    npm.pte(jax.random.key(0), x[:20], y[:20], x[20:].at[0, 0].set(jnp.nan),
            **kw)
  with pytest.raises(ValueError, match='epsilon=0'):
    npm.pte(jax.random.key(0), x[:20], y[:20], x[20:],
            **dict(kw, epsilon=0))


def test_exact_trees_stop_small_nodes_and_setting_two_ignores_labels():
  x, y = _data()
  r1, e1 = npm.sspe(jax.random.key(0), x[:20], y[:20], x[20:], epsilon=1.0,
                    bounds=BOUNDS, num_classes=K, setting=2, num_trees=N,
                    depth=D)
  r2, _ = npm.sspe(jax.random.key(0), x[:20], 1 - y[:20], x[20:],
                   epsilon=1.0, bounds=BOUNDS, num_classes=K, setting=2,
                   num_trees=N, depth=D)
  np.testing.assert_array_equal(r1.thresholds, r2.thresholds)  # label-free
  assert e1.epsilon == 1.0
  r3, e3 = npm.pte(jax.random.key(0), x[:20], y[:20], x[20:], epsilon=1.0,
                   bounds=BOUNDS, num_classes=K, num_trees=N,
                   num_trees_second=2, depth=D)
  assert r3.counts.shape == (N + 2, 2 ** D, K) and e3.epsilon == 1.0


def test_iris_accuracy_at_large_epsilon():
  x, y = sk_datasets.load_iris(return_X_y=True)
  rng = np.random.default_rng(0)
  perm = rng.permutation(len(x))
  tr, te = perm[:120], perm[120:]
  bounds = (x.min(0), x.max(0))
  release, _ = npm.spe(jax.random.key(0), x[tr].astype(np.float32), y[tr],
                       epsilon=1e3, bounds=bounds, num_classes=3)
  acc = np.mean(np.asarray(npm.predict(release, x[te])) == y[te])
  assert acc > 0.8
  sup, _ = npm.sspe(jax.random.key(0), x[tr[:60]], y[tr[:60]], x[tr[60:]],
                    epsilon=1e3, bounds=bounds, num_classes=3, setting=1,
                    num_trees=3)
  assert np.mean(np.asarray(npm.predict(sup, x[te])) == y[te]) > 0.8
