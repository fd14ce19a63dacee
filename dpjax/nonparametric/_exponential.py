"""The exponential mechanism (McSherry & Talwar 2007), by Gumbel-max."""

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax import _keys
from dpjax import _validate

_STREAM = _keys.register('exponential_mechanism', __name__)

# Each candidate's Gumbel noise comes from one uniform 64-bit word; a word in
# one of the grid's two extreme cells (probability 2^-64 each) gives noise
# that is +inf or stops at -log(64 log 2), where the exact Gumbel has tails.
NOISE_TAIL = 2.0 ** -63


def exponential_mechanism(key: jax.Array, utilities: ArrayLike, *,
                          epsilon: ArrayLike, sensitivity: ArrayLike,
                          mask: ArrayLike | None = None) -> jax.Array:
  """Draws index i with probability proportional to exp(eps u_i / (2 Delta)).

  Sampled as argmax(eps (u - max u) / (2 Delta) + Gumbel noise) in float32,
  which needs no normalization (no overflow for any utility scale). The
  noise is ``jax.random.gumbel(mode='highest')``, drawn from 64 random bits
  per candidate. Works under jit and vmap; ``epsilon`` and ``sensitivity``
  may be traced.

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

  Privacy: (epsilon, delta)-DP when every utility changes by at most
  ``sensitivity`` between neighbours, with the delta of
  ``exponential_mechanism_delta(epsilon, m)``: its event is
  ``accounting.EpsilonDeltaDpEvent(epsilon, exponential_mechanism_delta(
  epsilon, m))``. Exact Gumbel-max is
  epsilon-DP; float noise has bounded support, so some candidate that the
  exact mechanism could draw is never drawn on one dataset and is on a
  neighbour, which no pure epsilon allows.

  References:
    McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007;
    Huang thesis (paper 002), Alg. 11 (private median, Delta = 1/2).

  Example:
    >>> u = jnp.array([0.0, 0.0, 50.0])
    >>> int(exponential_mechanism(jax.random.key(0), u, epsilon=1.0,
    ...                           sensitivity=1.0))
    2
  """
  key = _keys.stream(_validate.key(key), _STREAM)
  _validate.positive(epsilon=epsilon, sensitivity=sensitivity)
  u = jnp.asarray(utilities)
  if u.ndim == 0 or u.shape[-1] == 0:
    raise ValueError(f'Expected utilities with at least one candidate on the '
                     f'last axis, got shape {u.shape}.')
  u = u.astype(jnp.float32)
  _check_finite(u)
  if mask is not None:
    mask = jnp.broadcast_to(jnp.asarray(mask, bool), u.shape)
    if not isinstance(mask, jax.core.Tracer) and not np.all(
        np.any(np.asarray(mask), axis=-1)):
      raise ValueError('Expected mask to allow at least one candidate.')
  allowed = jnp.ones(u.shape, bool) if mask is None else mask
  # Shifting by the largest allowed utility leaves the law unchanged and
  # keeps the logits near 0, where float32 does not swallow the noise.
  top = jnp.max(jnp.where(allowed, u, -jnp.inf), axis=-1, keepdims=True)
  logits = jnp.asarray(epsilon, jnp.float32) * (u - top) / (
      2 * jnp.asarray(sensitivity, jnp.float32))
  gumbel = jax.random.gumbel(key, u.shape, jnp.float32, mode='highest')
  score = jnp.where(allowed, logits + gumbel, -jnp.inf)
  index = jnp.argmax(score, axis=-1).astype(jnp.int32)
  return jnp.where(jnp.any(allowed, axis=-1), index, -1)


def exponential_mechanism_delta(epsilon: float, num_candidates: int) -> float:
  """The delta of one float ``exponential_mechanism`` draw over m candidates.

  delta = min(1, (1 + e^eps) m 2^-63). Derivation: couple the draw with
  exact Gumbel-max (epsilon-DP) through the same uniforms. The two differ
  only when some candidate's 64-bit word is in one of the two extreme cells
  (``NOISE_TAIL`` = 2 * 2^-64 per candidate), an event E independent of the
  data with P(E) <= m 2^-63 (float rounding inside the range, as in every
  float mechanism, is taken as exact). So P_f(S|D) <= P(S|D) + P(E) <=
  e^eps P(S|D') + P(E) <= e^eps (P_f(S|D') + P(E)) + P(E). The bound is
  vacuous (1) from eps of about 40 at m = 32.

  Example:
    >>> exponential_mechanism_delta(1.0, 50) < 1e-16
    True
  """
  _validate.positive(epsilon=epsilon)
  _validate.positive_int(num_candidates=num_candidates)
  if float(epsilon) > 700:  # e^eps overflows; delta is 1 long before
    return 1.0
  return min(1.0, (1.0 + math.exp(float(epsilon))) * num_candidates
             * NOISE_TAIL)


def _check_finite(u: jax.Array) -> None:
  if isinstance(u, jax.core.Tracer):
    return
  if not np.all(np.isfinite(np.asarray(u))):
    raise ValueError('Expected finite utilities, got non-finite values.')
