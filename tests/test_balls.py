"""l1 / l2 ball projections and the constrained lift of compressed GD."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax import recovery


def _bisection_l1(x: np.ndarray, r: float) -> np.ndarray:
  """Reference: tau by bisection on sum(max(|x| - tau, 0)) = r (float64)."""
  if np.abs(x).sum() <= r:
    return x.copy()
  lo, hi = 0.0, np.abs(x).max()
  for _ in range(200):
    mid = (lo + hi) / 2
    if np.maximum(np.abs(x) - mid, 0).sum() > r:
      lo = mid
    else:
      hi = mid
  return np.sign(x) * np.maximum(np.abs(x) - hi, 0)


def _l1_optimality_gap(x, p, r):
  """max over the ball of <x - p, v - p>: <= 0 iff p is the projection.
  A linear function peaks at a vertex +-r e_j of the l1 ball."""
  g = x - p
  return r * np.abs(g).max() - g @ p


@pytest.mark.parametrize('seed', range(6))
def test_l1_projection_matches_bruteforce_and_is_optimal(seed):
  rng = np.random.default_rng(seed)
  d = int(rng.integers(1, 60))
  x = rng.normal(size=d) * rng.choice([0.1, 1.0, 10.0])
  if seed == 0:
    x[: d // 2] = x[0]  # ties
  r = float(rng.uniform(0.05, 3.0))
  p = np.asarray(jax.jit(recovery.project_l1_ball)(jnp.asarray(x, jnp.float32),
                                                    r), np.float64)
  ref = _bisection_l1(x, r)
  np.testing.assert_allclose(p, ref, atol=1e-4 * max(1, np.abs(x).max()))
  assert np.abs(p).sum() <= r * (1 + 1e-5) + 1e-6
  assert _l1_optimality_gap(x, p, r) <= 1e-3 * max(1, np.abs(x).max())


def test_l1_projection_keeps_points_inside_and_rejects_a_wrong_answer():
  x = jnp.array([0.2, -0.3, 0.1])
  assert np.array_equal(recovery.project_l1_ball(x, 1.0), x)
  # the gap certificate rejects a point in the ball that is not the projection
  xx = np.array([3.0, -1.0, 0.5])
  assert _l1_optimality_gap(xx, np.array([1.0, -1.0, 0.0]), 2.0) > 0.5
  assert _l1_optimality_gap(xx, np.array([2.0, 0.0, 0.0]), 2.0) <= 1e-9


@pytest.mark.parametrize('seed', range(4))
def test_l2_projection_is_optimal(seed):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=20) * 3
  r = float(rng.uniform(0.1, 20.0))
  p = np.asarray(recovery.project_l2_ball(jnp.asarray(x, jnp.float32), r),
                 np.float64)
  assert np.linalg.norm(p) <= r * (1 + 1e-5)
  g = x - p  # sup over the ball of <g, v - p> = r ||g|| - <g, p>
  assert r * np.linalg.norm(g) - g @ p <= 1e-3 * max(1, np.abs(x).max())
  if np.linalg.norm(x) <= r:
    np.testing.assert_allclose(p, x, rtol=1e-6)


def test_traced_radius_vmaps():
  x = jnp.array([3.0, -1.0, 0.5])
  out = jax.vmap(recovery.project_l1_ball, (None, 0))(x, jnp.array([1.0, 2.0]))
  np.testing.assert_allclose(out, [[1.0, 0, 0], [2.0, 0, 0]], atol=1e-6)


@pytest.mark.parametrize('fn', [recovery.project_l1_ball,
                                recovery.project_l2_ball])
@pytest.mark.parametrize('radius', [0.0, -1.0])
def test_bad_radius_names_the_value(fn, radius):
  with pytest.raises(ValueError, match=f'radius={radius}'):
    fn(jnp.ones(3), radius)


def test_constrained_lift_reaches_a_feasible_point_of_the_image():
  key = jax.random.key(0)
  phi = dpjax.transforms.gaussian_projection(key, 10, 40).matrix()
  w_true = jnp.zeros(40).at[3].set(0.7).at[10].set(-0.2)  # in the unit l1 ball
  y = phi @ w_true
  lip = 1.1 * recovery.operator_norm_squared(
      lambda v: phi @ v, lambda u: phi.T @ u, 40, jax.random.key(1))
  out = recovery.constrained_lift(lambda v: phi @ v, lambda u: phi.T @ u, y,
                                  jnp.zeros(40),
                                  lambda w: recovery.project_l1_ball(w, 1.0),
                                  lip, num_iterations=500)
  assert float(jnp.abs(out.w).sum()) <= 1.0 + 1e-5
  assert float(jnp.linalg.norm(out.theta - y)) < 1e-2 * float(
      jnp.linalg.norm(y))
  assert float(out.residual) < 1e-2
  # y outside Phi C: theta is the projection; residual still ~0 at the optimum
  far = recovery.constrained_lift(lambda v: phi @ v, lambda u: phi.T @ u,
                                  10 * y, jnp.zeros(40),
                                  lambda w: recovery.project_l1_ball(w, 1.0),
                                  lip, num_iterations=500)
  assert float(far.residual) < 1e-2
  assert float(jnp.linalg.norm(far.theta - 10 * y)) > 1.0
