"""Exact Euclidean projections onto the l2 and l1 balls.

Both are jittable and accept a traced radius. The l1 projection is the
sort-based O(d log d) algorithm of Duchi et al. (2008, Fig. 1): with u the
absolute values sorted in decreasing order, rho the largest j with u_j -
(sum_{i<=j} u_i - r) / j > 0 and tau = (sum_{i<=rho} u_i - r) / rho, the
projection is sign(x) max(|x| - tau, 0) (x itself when ||x||_1 <= r).
"""

import jax
import jax.numpy as jnp

from dpjax import _validate


_radius = _validate.radius


def project_l2_ball(x: jax.typing.ArrayLike,
                    radius: jax.typing.ArrayLike) -> jax.Array:
  """argmin_{||w||_2 <= radius} ||w - x||_2: x scaled down to the sphere.

  Args:
    x: a vector (any shape; the norm is over all entries).
    radius: r > 0 (may be traced).

  Returns:
    x if ||x||_2 <= r, else r x / ||x||_2.

  Example:
    >>> project_l2_ball(jnp.array([3.0, 4.0]), 1.0).tolist()
    [0.6000000238418579, 0.800000011920929]
  """
  _radius(radius)
  x = jnp.asarray(x)
  norm = jnp.linalg.norm(x)
  scale = jnp.minimum(1.0, jnp.asarray(radius, x.dtype) /
                      jnp.maximum(norm, jnp.finfo(x.dtype).tiny))
  return x * scale


def l1_threshold(x: jax.typing.ArrayLike,
                 radius: jax.typing.ArrayLike) -> jax.Array:
  """tau >= 0 with ||soft_threshold(x, tau)||_1 = radius (0 inside the ball).

  Duchi et al. 2008, Fig. 1 (sort-based, O(d log d)).
  """
  x = jnp.ravel(jnp.asarray(x))
  r = jnp.asarray(radius, x.dtype)
  u = jnp.sort(jnp.abs(x))[::-1]
  cumsum = jnp.cumsum(u)
  j = jnp.arange(1, x.size + 1, dtype=x.dtype)
  active = u - (cumsum - r) / j > 0
  rho = jnp.maximum(jnp.sum(active), 1)  # active is a prefix
  tau = (cumsum[rho - 1] - r) / rho.astype(x.dtype)
  inside = jnp.sum(jnp.abs(x)) <= r
  return jnp.where(inside, jnp.zeros((), x.dtype), jnp.maximum(tau, 0.0))


def project_l1_ball(x: jax.typing.ArrayLike,
                    radius: jax.typing.ArrayLike) -> jax.Array:
  """argmin_{||w||_1 <= radius} ||w - x||_2, exactly (sort-based).

  Args:
    x: a vector (any shape; the l1 norm is over all entries).
    radius: r > 0 (may be traced).

  Returns:
    sign(x) max(|x| - tau, 0) with tau = ``l1_threshold(x, radius)``.

  References:
    Duchi, Shalev-Shwartz, Singer, Chandra, "Efficient projections onto the
    l1-ball for learning in high dimensions", ICML 2008, Fig. 1.

  Example:
    >>> project_l1_ball(jnp.array([3.0, -1.0, 0.5]), 2.0).tolist()
    [2.0, -0.0, 0.0]
  """
  _radius(radius)
  x = jnp.asarray(x)
  tau = l1_threshold(x, radius)
  return jnp.sign(x) * jnp.maximum(jnp.abs(x) - tau, 0.0)


BALLS = {'l1': project_l1_ball, 'l2': project_l2_ball}


def ball_projection(ball: str):
  """The projection onto the named ball: 'l1' or 'l2'.

  Example:
    >>> ball_projection('l2')(jnp.array([3.0, 4.0]), 5.0).tolist()
    [3.0, 4.0]
  """
  if ball not in BALLS:
    raise ValueError(f"Expected ball={ball!r} in {tuple(BALLS)}.")
  return BALLS[ball]
