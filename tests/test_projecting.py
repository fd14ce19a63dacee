"""Gaussian projections: JL norm preservation, blocks, keys, schedule."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax import transforms as T


def test_blocked_application_matches_the_dense_matrix():
  key = jax.random.key(3)
  v = jax.random.normal(jax.random.key(4), (2, 23))
  u = jax.random.normal(jax.random.key(5), (6,))
  for block in (None, 1, 5, 23, 40):
    phi = T.gaussian_projection(key, 6, 23, block_size=block)
    dense = phi.matrix()
    assert dense.shape == (6, 23)
    np.testing.assert_allclose(phi.matvec(v), v @ dense.T, atol=1e-5)
    np.testing.assert_allclose(phi.rmatvec(u), dense.T @ u, atol=1e-5)


def _norm_ratios(scale_rows: int, m: int = 16, d: int = 64, draws: int = 1500):
  """m ||Phi v||^2 / ||v||^2 over independent keys for a fixed v."""
  v = jax.random.normal(jax.random.key(0), (d,))
  keys = jax.random.split(jax.random.key(1), draws)

  def ratio(k):
    phi = T.gaussian_projection(k, m, d, block_size=24)
    out = phi.matvec(v)
    return m * jnp.sum(out**2) / jnp.sum(v**2)

  r = np.asarray(jax.jit(jax.vmap(ratio))(keys), np.float64)
  return r * m / scale_rows  # scale_rows = m: the right law


def test_norms_follow_the_jl_law_and_a_wrong_scale_is_rejected():
  m = 16
  good = _norm_ratios(m)
  # ||Phi v||^2 / ||v||^2 ~ chi^2_m / m: mean 1, the chi^2_m law for m x ratio
  assert stats.kstest(good, stats.chi2(m).cdf).pvalue > 1e-3
  assert abs(good.mean() / m - 1) < 4 * np.sqrt(2 / m / len(good))
  wrong = _norm_ratios(2 * m)  # as if the entries had variance 1 / (2m)
  assert stats.kstest(wrong, stats.chi2(m).cdf).pvalue < 1e-6


def test_same_key_same_matrix_fresh_per_step_and_jit_invariant():
  tx = T.project_gaussian(4, key=jax.random.key(7))
  g = jnp.arange(10.0)
  s0 = tx.init(jnp.zeros(10))
  a, s1 = tx.update(g, s0)
  b, _ = jax.jit(tx.update)(g, s0)
  c, _ = tx.update(g, s1)
  np.testing.assert_allclose(a, b, rtol=1e-6)
  assert not np.allclose(a, c)
  other = T.project_gaussian(4, key=jax.random.key(8))
  assert not np.allclose(a, other.update(g, other.init(g))[0])


def test_active_rows_and_schedule():
  phi = T.gaussian_projection(jax.random.key(0), 8, 20, active_rows=3)
  dense = np.asarray(phi.matrix())
  assert np.all(dense[3:] == 0) and np.all(dense[:3] != 0)
  full = np.asarray(T.gaussian_projection(jax.random.key(0), 8, 20).matrix())
  np.testing.assert_allclose(dense[:3], full[:3] * np.sqrt(8 / 3), rtol=1e-5)
  sched = T.projection_dim_schedule(T.l1_ball_gaussian_width(100), 100)
  m = [int(sched(jnp.int32(c))) for c in range(4)]
  assert m[0] < m[1] <= m[2] <= m[3] == 100
  tx = T.project_gaussian(8, key=jax.random.key(1),
                          rows_schedule=lambda c: c + 2)
  out, _ = tx.update(jnp.ones(20), tx.init(jnp.zeros(20)))
  assert int(jnp.sum(out != 0)) == 2


@pytest.mark.parametrize('rows, dim, match', [
    (0, 10, 'num_rows=0'), (11, 10, 'num_rows=11'), (-2, 10, 'num_rows=-2')])
def test_bad_rows_name_the_value(rows, dim, match):
  with pytest.raises(ValueError, match=match):
    T.gaussian_projection(jax.random.key(0), rows, dim)
  with pytest.raises(ValueError, match=match):
    T.project_gaussian(rows, key=jax.random.key(0)).init(jnp.zeros(dim))


def test_key_is_required():
  with pytest.raises(ValueError, match='key'):
    T.project_gaussian(2, key=None)
  assert dpjax.transforms.l2_ball_gaussian_width(100, 2.0) == 20.0


def test_the_length_is_named_dimension():
  phi = T.gaussian_projection(jax.random.key(0), 3, 7)
  assert phi.dimension == 7
  assert phi.matrix().shape == (3, phi.dimension)
  with pytest.raises(ValueError, match='dimension=7'):
    T.gaussian_projection(jax.random.key(0), 8, 7)
