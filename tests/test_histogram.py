"""Histogram, NoisyReg and private histogram (dpjax.nonparametric)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import nonparametric as npm
from dpjax.nonparametric import _cells

INF = float('inf')


def test_exact_cells_for_d40_b10_match_numpy():
  rng = np.random.default_rng(0)
  base = rng.integers(0, 10, (20, 40))
  cells = base[rng.integers(0, 20, 300)]  # many repeats, b^d = 1e40 cells
  valid = rng.random(300) < 0.9
  unique, group, num = jax.jit(_cells.group_cells, static_argnums=2)(
      jnp.asarray(cells, jnp.int32), jnp.asarray(valid), 10)
  ref, inverse = np.unique(cells[valid], axis=0, return_inverse=True)
  assert int(num) == len(ref)
  np.testing.assert_array_equal(unique[:len(ref)], ref)
  np.testing.assert_array_equal(np.asarray(group)[valid], inverse.ravel())
  assert np.all(np.asarray(unique[len(ref):]) == 10)  # sentinel rows
  queries = np.vstack([base, rng.integers(0, 10, (30, 40))])
  found = np.asarray(jax.jit(_cells.find_cells)(unique, num,
                                                jnp.asarray(queries)))
  for q, f in zip(queries, found):
    hits = np.flatnonzero(np.all(ref == q, axis=1))
    assert f == (hits[0] if hits.size else -1)
  # The release path: u in [0, 1]^40 binned by 10, stored cells exact.
  x = (cells + 0.5) / 10
  rel = npm.histogram(x, np.zeros(300, int), bounds=(0.0, 1.0),
                      num_classes=2, bins=10)
  np.testing.assert_array_equal(rel.cells[:int(rel.num_cells)],
                                np.unique(cells, axis=0))


def test_neighbour_search_finds_the_nearest_occupied_cell():
  rng = np.random.default_rng(1)
  stored = np.unique(rng.integers(0, 8, (40, 3)), axis=0)
  padded = np.vstack([stored, np.full((5, 3), 8)])
  queries = rng.integers(0, 8, (200, 3))
  got = np.asarray(_cells.nearest_cells(jnp.asarray(padded), len(stored),
                                        jnp.asarray(queries), 3))
  d2 = ((queries[:, None, :] - stored[None]) ** 2).sum(-1)
  ref = np.where(d2.min(1) <= 3, d2.argmin(1), -1)
  np.testing.assert_array_equal(got, ref)
  assert np.any(ref == -1) and np.any(ref >= 0)


def test_empty_cell_takes_neighbour_label_or_default():
  x = np.array([[0.05, 0.05], [0.95, 0.95]])
  rel = npm.histogram(x, np.array([1, 1]), bounds=(0.0, 1.0),
                      num_classes=2, bins=10)
  # (1, 1) neighbours (0, 0) at squared distance 2 <= d; (5, 5) has none.
  pred = npm.predict(rel, np.array([[0.15, 0.15], [0.55, 0.55]]))
  np.testing.assert_array_equal(pred, [1, 0])


def _grid(cells_per_bin, num_bins, labels):
  x = np.repeat((np.arange(num_bins) + 0.5) / num_bins, cells_per_bin)
  return x[:, None], np.resize(np.asarray(labels), x.shape[0])


def test_noisy_reg_is_not_dp_when_features_are_private():
  """Adding a point to every cell halves the noise scale: far outputs have
  probability ratio far above e^eps, so NoisyReg is only label-DP."""
  eps, cells = 1.0, 4000
  x1, y1 = _grid(1, cells, [1])
  x2, y2 = _grid(2, cells, [1])
  key = jax.random.key(7)
  r1, _ = npm.noisy_reg(key, x1, y1, epsilon=eps, bounds=(0.0, 1.0),
                        num_classes=2, bins=cells)
  r2, _ = npm.noisy_reg(key, x2, y2, epsilon=eps, bounds=(0.0, 1.0),
                        num_classes=2, bins=cells)
  far1 = np.mean(np.asarray(r1.scores[:cells, 1]) < 1 - 3 / eps)
  far2 = np.mean(np.asarray(r2.scores[:cells, 1]) < 1 - 3 / eps)
  assert far1 > 5 * np.e ** eps * far2  # ~ e^3 / e^6: ratio ~ 20 > e


def test_label_sensitivity_of_noisy_reg_is_one_over_n_j():
  rng = np.random.default_rng(2)
  x = rng.uniform(0, 1, (150, 2))
  for k in (2, 3):
    y = rng.integers(0, k, 150)
    base = npm.histogram(x, y, bounds=(0.0, 1.0), num_classes=k, bins=4)
    _, counts = np.unique(np.minimum(np.floor(x * 4), 3), axis=0,
                          return_counts=True)
    n_j = np.zeros(256)
    n_j[:len(counts)] = counts
    worst = 0.0
    for i in range(0, 150, 10):
      for new in range(k):
        y2 = y.copy()
        y2[i] = new
        other = npm.histogram(x, y2, bounds=(0.0, 1.0), num_classes=k,
                              bins=4)
        diff = np.abs(np.asarray(other.scores - base.scores))
        released = diff[:, 1] if k == 2 else diff.sum(1)
        worst = max(worst, float((released * n_j).max()))
    assert worst == pytest.approx(1.0 if k == 2 else 2.0)


@pytest.mark.parametrize('relation', ['add_remove', 'replace'])
def test_private_histogram_count_sensitivity(relation):
  rng = np.random.default_rng(3)
  x, y = rng.uniform(-1, 1, (80, 3)), rng.integers(0, 3, 80)
  kw = dict(epsilon=INF, bounds=(-1.0, 1.0), num_classes=3, bins=3,
            projection_dim=2)
  base, _ = npm.dp_histogram(jax.random.key(0), x, y, **kw)
  worst = 0.0
  for i in (0, 41):
    for c in (np.full(3, -1.0), np.full(3, 1.0), np.array([1.0, -1, 0.3])):
      if relation == 'add_remove':
        pairs = [(np.vstack([x, c]), np.append(y, 2)),
                 (np.delete(x, i, 0), np.delete(y, i))]
      else:
        x2, y2 = x.copy(), y.copy()
        x2[i], y2[i] = c, (y[i] + 1) % 3
        pairs = [(x2, y2)]
      for nx, ny in pairs:
        other, _ = npm.dp_histogram(jax.random.key(0), nx, ny, **kw)
        worst = max(worst, float(np.abs(other.counts - base.counts).sum()))
  assert worst == (1.0 if relation == 'add_remove' else 2.0)


def test_private_histogram_refuses_too_many_cells():
  # The noise itself: tests/test_count_noise.py.
  with pytest.raises(ValueError, match=r'10\^40 = 1' + '0' * 40):
    npm.dp_histogram(jax.random.key(1), np.zeros((3, 40)),
                     np.zeros(3, int), epsilon=1.0, bounds=(0.0, 1.0),
                     num_classes=2, bins=10)


def test_projected_bounds_come_from_phi_and_the_box():
  phi = npm.jl_projection(jax.random.key(0), 6, 3)
  corners_low = (np.asarray(phi) < 0).astype(np.float32)
  corners_high = 1.0 - corners_low
  lo = _cells.project_unit(jnp.asarray(corners_low), phi)
  hi = _cells.project_unit(jnp.asarray(corners_high), phi)
  np.testing.assert_allclose(np.diag(np.asarray(lo)), 0.0, atol=1e-6)
  np.testing.assert_allclose(np.diag(np.asarray(hi)), 1.0, atol=1e-6)
  u = jax.random.uniform(jax.random.key(1), (500, 6))
  z = np.asarray(_cells.project_unit(u, phi))
  assert z.min() > 0 and z.max() < 1
  assert np.std(np.asarray(phi)) == pytest.approx(1 / np.sqrt(3), rel=0.5)


def test_releases_are_pure_and_predict_identically_under_jit():
  rng = np.random.default_rng(4)
  x = rng.normal(size=(120, 5))
  y = (x[:, 0] > 0).astype(int)
  xt = rng.normal(size=(30, 5))
  kw = dict(epsilon=2.0, bounds=(-3.0, 3.0), num_classes=2, bins=3,
            projection_dim=3)
  for fn in (npm.noisy_reg, npm.dp_histogram):
    a, _ = fn(jax.random.key(5), x, y, **kw)
    b, _ = fn(jax.random.key(5), x, y, **kw)
    for la, lb in zip(a, b):
      np.testing.assert_array_equal(la, lb)
    eager = npm.predict(a, xt)
    jitted = jax.jit(lambda q, r=a: npm.predict(r, q))(xt)
    np.testing.assert_array_equal(eager, jitted)
    if fn is npm.noisy_reg:
      with jax.disable_jit():
        unjitted = npm.predict(a, xt[:5])
      np.testing.assert_array_equal(eager[:5], unjitted)
  rel = npm.histogram(x, y, bounds=(-3.0, 3.0), num_classes=2, bins=2)
  assert np.mean(np.asarray(npm.predict(rel, x)) == y) > 0.8


@pytest.mark.parametrize('kwargs,match', [
    (dict(epsilon=0.0), 'epsilon=0.0'),
    (dict(bins=0), 'bins=0'),
    (dict(projection_dim=0), 'projection_dim=0'),
    (dict(y=[0, 3, 1]), r'y to hold integer labels in \[0, num_classes=2\)'),
    (dict(y=[0, 1]), r'shape \(2,\)'),
    (dict(x=[[0.0, np.nan], [0.0, 0.0], [1.0, 1.0]]), 'x without NaN'),
    (dict(num_classes=1), 'num_classes=1'),
])
@pytest.mark.parametrize('fn', ['noisy_reg', 'dp_histogram'])
def test_bad_input_names_the_value(fn, kwargs, match):
  args = dict(x=[[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]], y=[0, 1, 1],
              epsilon=1.0, bounds=(0.0, 1.0), num_classes=2, bins=2)
  args.update(kwargs)
  x, y = args.pop('x'), args.pop('y')
  with pytest.raises(ValueError, match=match):
    getattr(npm, fn)(jax.random.key(0), x, y, **args)
  if fn == 'noisy_reg':
    with pytest.raises(ValueError, match='default_class=2'):
      npm.noisy_reg(jax.random.key(0), [[0.0]], [0], epsilon=1.0,
                    bounds=(0.0, 1.0), num_classes=2, bins=2,
                    default_class=2)
