"""What every protocol checks and prepares of its inputs.

Its configs' integer and positive finite arguments (``check_int``,
``check_positive_finite``), the client vectors (``as_float_vector``) and
their L2 clip (``clip``), shared by cpSGD, the distributed discrete Gaussian
and Skellam protocols and the Gaussian baseline.

Example:
  >>> check_int('levels', 16, 2), check_positive_finite('l2_norm_clip', 2)
  (16, 2.0)
  >>> clip(as_float_vector([3, 4], 'x', 1), 1.0)
  Array([0.6, 0.8], dtype=float32)
"""

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _numerics
from dpjax import _validate


def check_int(name: str, value, minimum: int) -> int:
  _validate.integer_at_least(minimum, **{name: value})
  return int(value)


def check_positive_finite(name: str, value) -> float:
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    if not (isinstance(value, (np.ndarray, jax.Array))
            and not isinstance(value, jax.core.Tracer)
            and np.ndim(value) == 0):
      raise ValueError(f'Expected {name}={value!r} to be a concrete number.')
  value = float(value)
  if not (value > 0 and math.isfinite(value)):
    raise ValueError(f'Expected {name}={value} > 0 and finite.')
  return value


def as_float_vector(x: jax.typing.ArrayLike, name: str,
                    ndim: int) -> jax.Array:
  """A client vector [d] (ndim=1) or client vectors [n, d] (ndim=2), float."""
  x = jnp.asarray(x)
  if x.ndim != ndim or x.shape[-1] < 1 or (ndim == 2 and x.shape[0] < 1):
    want = '[d]' if ndim == 1 else '[n, d]'
    raise ValueError(f'Expected {name} of shape {want} with n, d >= 1, got '
                     f'shape {x.shape}.')
  if not jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(jnp.float32)
  return x


def clip(x: jax.Array, l2_norm_clip: jax.typing.ArrayLike) -> jax.Array:
  """x * min(1, D / ||x||); a non-finite vector becomes zero."""
  norm = _numerics.l2_norm(x).astype(x.dtype)  # overflow-safe
  scale = jnp.minimum(jnp.asarray(1, x.dtype),
                      jnp.asarray(l2_norm_clip, x.dtype) / norm)
  return jnp.where(jnp.isfinite(norm), x * scale, jnp.zeros_like(x))
