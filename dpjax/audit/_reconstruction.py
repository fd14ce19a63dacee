"""Reconstruction attacks on shared gradients (what sparsity and noise hide).

* ``least_squares_reconstruction``: the closed-form attack of Zhu & Blaschko,
  Thm 5.1, on a one-input linear layer whose gradient is g = k x, released as
  m * (k x + N(0, sigma^2 I)) with a random mask m at rate r. The attacker
  knows k and m and returns the least-squares x_hat = <m k, g'> / ||m k||^2;
  E||x - x_hat||^2 = sigma^2 E[1 / ||m k||^2] >= sigma^2 / ((1 - r) ||k||^2)
  (``reconstruction_error_bound``).
* ``invert_gradients``: gradient matching (Geiping et al. 2020, "Inverting
  Gradients"): optimize a dummy input so that its gradient has the highest
  cosine similarity with the observed one, on the coordinates the attacker
  sees (the nonzeros of a sparsified message).

These are measurement tools for experiments; they release nothing.
"""

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from dpjax import _validate


def reconstruction_error_bound(stddev: float, rate: float,
                               k: jax.typing.ArrayLike) -> jax.Array:
  """Zhu & Blaschko Thm 5.1: E||x - x_hat||^2 >= stddev^2 / ((1 - r)||k||^2).

  ``stddev`` is the absolute noise standard deviation.
  """
  _validate.non_negative(stddev=stddev)
  if not 0 <= rate < 1:
    raise ValueError(f'Expected rate={rate} in [0, 1).')
  return stddev**2 / ((1 - rate) * jnp.sum(jnp.square(k)))


def least_squares_reconstruction(released: jax.typing.ArrayLike,
                                 mask: jax.typing.ArrayLike,
                                 k: jax.typing.ArrayLike) -> jax.Array:
  """x_hat = <m k, g'> / ||m k||^2 for a released g' = m (k x + noise).

  Example:
    >>> k = jnp.array([1., 2., 2.])
    >>> float(least_squares_reconstruction(3.0 * k, jnp.ones(3), k))
    3.0
  """
  mk = jnp.asarray(mask) * jnp.asarray(k)
  return jnp.vdot(mk, released) / jnp.vdot(mk, mk)


def _flat(tree: Any) -> jax.Array:
  return jnp.concatenate([jnp.ravel(x) for x in jax.tree.leaves(tree)])


def invert_gradients(loss_fn: Callable[[Any, Any], jax.Array], params: Any,
                     observed: Any, example_like: Any, *, key: jax.Array,
                     steps: int = 500, learning_rate: float = 0.1,
                     visible: Any = None) -> Any:
  """Gradient-matching reconstruction of one example (Geiping et al. 2020).

  Minimizes ``1 - cos(grad loss_fn(params, x), observed)`` over the dummy
  input ``x`` with Adam, starting from N(0, 1); only coordinates where
  ``visible`` is nonzero are compared (default: the nonzeros of
  ``observed``, i.e. what a sparse message reveals).

  Args:
    loss_fn: ``loss_fn(params, x)`` of one example (the label, if any, is
      closed over: label-known threat model).
    params: the model parameters the gradient was taken at.
    observed: the released gradient, shaped like params.
    example_like: an array shaped like the input to reconstruct.
    key: PRNG key of the initial guess.
    steps: Adam steps.
    learning_rate: Adam step size.
    visible: optional 0/1 pytree like params.

  Returns:
    The reconstructed input.
  """
  _validate.positive_int(steps=steps)
  _validate.positive(learning_rate=learning_rate)
  target = _flat(observed)
  seen = (target != 0) if visible is None else (_flat(visible) != 0)
  target = jnp.where(seen, target, 0.0)

  def mismatch(x):
    g = jnp.where(seen, _flat(jax.grad(loss_fn)(params, x)), 0.0)
    return 1.0 - jnp.vdot(g, target) / (
        jnp.linalg.norm(g) * jnp.linalg.norm(target) + 1e-12)

  opt = optax.adam(learning_rate)
  x0 = jax.random.normal(_validate.key(key), jnp.shape(example_like))

  def body(carry, _):
    x, state = carry
    updates, state = opt.update(jax.grad(mismatch)(x), state)
    return (optax.apply_updates(x, updates), state), None

  # optax's Adam raises an int32 step count to a float power, which strict
  # dtype promotion rejects; the promotion here is harmless.
  with jax.numpy_dtype_promotion('standard'):
    (x, _), _ = jax.lax.scan(body, (x0, opt.init(x0)), None, length=steps)
  return x
