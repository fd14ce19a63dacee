"""The constrained step of compressed gradient descent (Huang thesis, Alg. 5-9).

Line "theta_t = Pi_{Phi C}(y); pick w_{t+1} in C with Phi w_{t+1} = theta_t"
is one problem: w_{t+1} = argmin_{w in C} ||Phi w - y||^2 / 2, and then
theta_t = Phi w_{t+1} is the Euclidean projection of y onto Phi C (a linear
image of a convex set is convex, and every point of it is Phi w for some w in
C). We solve it with FISTA (accelerated projected gradient), a fixed number
of iterations so that it jits, warm-started at w_t, and report the
projected-gradient residual ||w - Pi_C(w - grad / lipschitz)|| * lipschitz,
which is 0 exactly at a minimizer.
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from dpjax import _validate

Matvec = Callable[[jax.Array], jax.Array]


class ConstrainedSolve(NamedTuple):
  """Result of ``constrained_lift``.

  Attributes:
    w: the lifted point, in C.
    theta: Phi w, the projection of y onto Phi C (up to the residual).
    residual: the projected-gradient residual at w (0 at a minimizer).
  """
  w: jax.Array
  theta: jax.Array
  residual: jax.Array


def operator_norm_squared(matvec: Matvec, rmatvec: Matvec, dimension: int,
                          key: jax.Array, num_iterations: int = 20
                          ) -> jax.Array:
  """An estimate of ||Phi||_op^2 by power iteration on Phi^T Phi.

  Power iteration approaches the top eigenvalue from below; callers that need
  an upper bound (a FISTA step size) multiply by a margin.
  """
  v = jax.random.normal(_validate.key(key), (dimension,))
  v = v / jnp.linalg.norm(v)

  def body(_, v):
    u = rmatvec(matvec(v))
    return u / jnp.maximum(jnp.linalg.norm(u), 1e-30)

  v = jax.lax.fori_loop(0, num_iterations, body, v)
  return jnp.sum(jnp.square(matvec(v)))


def constrained_lift(matvec: Matvec, rmatvec: Matvec, y: jax.Array,
                     w0: jax.Array, project: Callable[[jax.Array], jax.Array],
                     lipschitz: jax.typing.ArrayLike, *,
                     num_iterations: int = 50) -> ConstrainedSolve:
  """w in C minimizing ||Phi w - y||^2 / 2 by FISTA from w0; theta = Phi w.

  Args:
    matvec: v -> Phi v.
    rmatvec: u -> Phi^T u.
    y: the target in R^m (Phi w_t - eta_t * the projected gradient).
    w0: the warm start (w_t, in C).
    project: the Euclidean projection onto C, e.g.
      ``lambda w: project_l1_ball(w, r)``.
    lipschitz: an upper bound on ||Phi||_op^2 (the gradient's Lipschitz
      constant); may be traced.
    num_iterations: FISTA iterations (static).

  Returns:
    ``ConstrainedSolve(w, theta, residual)``.

  References:
    Beck & Teboulle, "A fast iterative shrinkage-thresholding algorithm",
    SIAM J. Imaging Sci. 2009 (FISTA); Huang thesis, Alg. 6 lines 6-7.

  Example:
    >>> phi = jnp.eye(3)[:2]
    >>> out = constrained_lift(lambda v: phi @ v, lambda u: phi.T @ u,
    ...                        jnp.array([0.5, 0.0]), jnp.zeros(3),
    ...                        lambda w: w, 1.0)
    >>> out.w.tolist(), float(out.residual) < 1e-6
    ([0.5, 0.0, 0.0], True)
  """
  _validate.positive_int(num_iterations=num_iterations)
  step = 1.0 / jnp.asarray(lipschitz, w0.dtype)
  w0 = project(w0)

  def grad(w):
    return rmatvec(matvec(w) - y)

  def body(_, carry):
    w, z, t = carry
    w_next = project(z - step * grad(z))
    t_next = (1 + jnp.sqrt(1 + 4 * t * t)) / 2
    z_next = w_next + ((t - 1) / t_next) * (w_next - w)
    return w_next, z_next, t_next

  w, _, _ = jax.lax.fori_loop(0, num_iterations, body,
                              (w0, w0, jnp.ones((), w0.dtype)))
  residual = jnp.linalg.norm(w - project(w - step * grad(w))) / step
  return ConstrainedSolve(w, matvec(w), residual)
