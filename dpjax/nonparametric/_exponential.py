"""The exponential mechanism (McSherry & Talwar 2007), by Gumbel-max."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax import _validate
from dpjax import accounting


def exponential_mechanism(key: jax.Array, utilities: ArrayLike, *,
                          epsilon: ArrayLike, sensitivity: ArrayLike,
                          mask: ArrayLike | None = None) -> jax.Array:
  """Draws index i with probability proportional to exp(eps u_i / (2 Delta)).

  Sampled as argmax(eps u / (2 Delta) + Gumbel noise), which is exact in
  distribution and needs no normalization (no overflow for any utility
  scale). Works under jit and vmap; ``epsilon`` and ``sensitivity`` may be
  traced.

  Args:
    key: a PRNG key.
    utilities: ``[m]`` utilities u_i (last axis is the candidate axis).
    epsilon: the privacy parameter, > 0.
    sensitivity: Delta, the largest change of any u_i between neighbouring
      datasets (replace-one), > 0.
    mask: optional boolean ``[m]``; False candidates are never drawn. The mask
      must not depend on private data. A concrete mask with no True entry is
      refused; under jit, where it cannot be checked, the draw is then -1.

  Returns:
    An int32 index into the last axis of ``utilities`` (-1 only for an
    all-False traced mask).

  Privacy: epsilon-DP when every utility changes by at most ``sensitivity``
  between neighbours; ``exponential_mechanism_event(epsilon)`` is its event.

  References:
    McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007;
    Huang thesis (paper 002), Alg. 11 (private median, Delta = 1/2).

  Example:
    >>> u = jnp.array([0.0, 0.0, 50.0])
    >>> int(exponential_mechanism(jax.random.key(0), u, epsilon=1.0,
    ...                           sensitivity=1.0))
    2
  """
  key = _validate.key(key)
  _validate.positive(epsilon=epsilon, sensitivity=sensitivity)
  u = jnp.asarray(utilities)
  if u.ndim == 0 or u.shape[-1] == 0:
    raise ValueError(f'Expected utilities with at least one candidate on the '
                     f'last axis, got shape {u.shape}.')
  if not jnp.issubdtype(u.dtype, jnp.floating):
    u = u.astype(jnp.float32)
  _check_finite(u)
  if mask is not None:
    mask = jnp.broadcast_to(jnp.asarray(mask, bool), u.shape)
    if not isinstance(mask, jax.core.Tracer) and not np.all(
        np.any(np.asarray(mask), axis=-1)):
      raise ValueError('Expected mask to allow at least one candidate.')
  logits = jnp.asarray(epsilon, u.dtype) * u / (
      2 * jnp.asarray(sensitivity, u.dtype))
  if mask is not None:
    logits = jnp.where(mask, logits, -jnp.inf)
  gumbel = jax.random.gumbel(key, u.shape, u.dtype)
  index = jnp.argmax(logits + gumbel, axis=-1).astype(jnp.int32)
  if mask is None:
    return index
  return jnp.where(jnp.any(mask, axis=-1), index, -1)


def exponential_mechanism_event(epsilon: float):
  """The epsilon-DP event of one ``exponential_mechanism`` draw.

  Example:
    >>> exponential_mechanism_event(0.5)
    EpsilonDeltaDpEvent(epsilon=0.5, delta=0.0)
  """
  _validate.positive(epsilon=epsilon)
  return accounting.pure_dp_event(epsilon)


def _check_finite(u: jax.Array) -> None:
  if isinstance(u, jax.core.Tracer):
    return
  if not np.all(np.isfinite(np.asarray(u))):
    raise ValueError('Expected finite utilities, got non-finite values.')
