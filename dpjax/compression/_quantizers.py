"""Unbiased stochastic quantizers onto a uniform grid (integer codes).

Two grids from the papers dpjax reproduces:

* Q-DPSGD's low-precision quantizer (Ding et al., eq. 5): resolution eta,
  ``bits``-bit signed codes {-2^(bits-1), ..., 2^(bits-1) - 1}, values
  eta * code.
* cpSGD's k-level quantizer (Agarwal et al. 2018, Sec. 3): k levels
  B(r) = -X_max + r s, s = 2 X_max / (k - 1), codes {0, ..., k - 1}.

Both round x in [B(r), B(r + 1)] up to B(r + 1) with probability
(x - B(r)) / s and down otherwise, so E[Q(x)] = x and Var[Q(x)] <= s^2 / 4
inside the representable range; values outside it are first clamped to the
nearest end (biased there, by construction). Quantizers are static NamedTuples
(hashable, safe to close over in jitted code) with ``quantize(x, key=...)``
returning int32 codes, ``dequantize(codes)`` and ``bits_per_coordinate``.
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpjax import _validate


def stochastic_round(x: jax.typing.ArrayLike, *, key: jax.Array,
                     spacing: float = 1.0, offset: float = 0.0) -> jax.Array:
  """Unbiased stochastic rounding of x onto offset + spacing * Z (int32 codes).

  With y = (x - offset) / spacing, returns floor(y) + 1 with probability
  y - floor(y) and floor(y) otherwise, so E[offset + spacing * code] = x
  (up to the float rounding of y and the 2^-24 resolution of the uniform).

  Args:
    x: values (floating).
    key: PRNG key (required).
    spacing: grid spacing s > 0.
    offset: grid origin.

  Returns:
    int32 codes of x's shape (unclamped).

  Example:
    >>> c = stochastic_round(jnp.array([0.25, 2.0]), key=jax.random.key(0))
    >>> bool(c[1] == 2) and int(c[0]) in (0, 1)
    True
  """
  _validate.positive(spacing=spacing)
  key = _validate.key(key)
  x = jnp.asarray(x)
  if not jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(jnp.float32)
  return _round(x, key, float(spacing), float(offset), None)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _round(x: jax.Array, key: jax.Array, spacing: float, offset: float,
           clamp: tuple[float, float, int, int] | None) -> jax.Array:
  """Stochastic rounding, optionally clamping x and the codes first."""
  if clamp is not None:
    x = jnp.clip(x, jnp.asarray(clamp[0], x.dtype),
                 jnp.asarray(clamp[1], x.dtype))
  y = (x - jnp.asarray(offset, x.dtype)) / jnp.asarray(spacing, x.dtype)
  low = jnp.floor(y)
  up = jax.random.uniform(key, y.shape, y.dtype) < (y - low)
  codes = low.astype(jnp.int32) + up.astype(jnp.int32)
  if clamp is not None:
    codes = jnp.clip(codes, clamp[2], clamp[3])
  return codes


class GridQuantizer(NamedTuple):
  """Stochastic quantizer onto offset + spacing * {code_min, ..., code_max}.

  Attributes:
    spacing: grid spacing s (> 0).
    offset: value of code 0.
    code_min: smallest code.
    code_max: largest code.
  """
  spacing: float
  offset: float
  code_min: int
  code_max: int

  @property
  def levels(self) -> int:
    """Number of representable values."""
    return self.code_max - self.code_min + 1

  @property
  def bits_per_coordinate(self) -> int:
    """Bits to send one code at fixed width: ceil(log2(levels))."""
    return max(1, math.ceil(math.log2(self.levels)))

  @property
  def low(self) -> float:
    """Smallest representable value."""
    return self.offset + self.spacing * self.code_min

  @property
  def high(self) -> float:
    """Largest representable value."""
    return self.offset + self.spacing * self.code_max

  @property
  def variance_bound(self) -> float:
    """Per-coordinate variance bound s^2 / 4 inside [low, high]."""
    return self.spacing**2 / 4

  def quantize(self, x: jax.typing.ArrayLike, *, key: jax.Array) -> jax.Array:
    """Clamps x to [low, high] and rounds it stochastically: int32 codes.

    Example:
      >>> q = low_precision_quantizer(eta=0.5, bits=4)
      >>> q.quantize(jnp.array([100.0, -100.0]), key=jax.random.key(0))
      Array([ 7, -8], dtype=int32)
    """
    key = _validate.key(key)
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
      x = x.astype(jnp.float32)
    return _round(x, key, float(self.spacing), float(self.offset),
                  (self.low, self.high, self.code_min, self.code_max))

  def dequantize(self, codes: jax.typing.ArrayLike,
                 dtype=jnp.float32) -> jax.Array:
    """offset + spacing * codes, as ``dtype``.

    Example:
      >>> k_level_quantizer(x_max=1.0, levels=3).dequantize(jnp.array([0, 2]))
      Array([-1.,  1.], dtype=float32)
    """
    codes = jnp.asarray(codes)
    return (jnp.asarray(self.offset, dtype)
            + jnp.asarray(self.spacing, dtype) * codes.astype(dtype))


def low_precision_quantizer(eta: float, bits: int) -> GridQuantizer:
  """Q-DPSGD's low-precision quantizer: resolution eta, ``bits``-bit codes.

  x in [k eta, (k + 1) eta] goes to k eta with probability
  1 - (x - k eta) / eta and to (k + 1) eta otherwise, after clamping x to
  [-eta 2^(bits-1), eta (2^(bits-1) - 1)].

  Args:
    eta: resolution (> 0).
    bits: code width s, 1 <= s <= 31 (signed two's-complement range).

  Returns:
    A ``GridQuantizer`` with ``bits_per_coordinate == bits``.

  References:
    Ding et al., Q-DPSGD, eq. (5).

  Example:
    >>> q = low_precision_quantizer(eta=0.1, bits=8)
    >>> q.bits_per_coordinate, q.code_min, q.code_max
    (8, -128, 127)
  """
  _validate.positive(eta=eta)
  _validate.positive_int(bits=bits)
  if bits > 31:
    raise ValueError(f'Expected bits={bits} <= 31.')
  return GridQuantizer(float(eta), 0.0, -2**(bits - 1), 2**(bits - 1) - 1)


def k_level_quantizer(x_max: float, levels: int) -> GridQuantizer:
  """cpSGD's k-level quantizer on [-X_max, X_max] (codes 0..k-1).

  Bins B(r) = -X_max + 2 r X_max / (k - 1); x in [B(r), B(r + 1)] is rounded
  up with probability (x - B(r)) / s, s = 2 X_max / (k - 1). Unbiased for
  |x| <= X_max with variance <= s^2 / 4.

  Args:
    x_max: X_max (> 0).
    levels: k >= 2.

  Returns:
    A ``GridQuantizer`` with ``bits_per_coordinate == ceil(log2(k))``.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 3.

  Example:
    >>> q = k_level_quantizer(x_max=1.0, levels=5)
    >>> q.spacing, q.bits_per_coordinate
    (0.5, 3)
  """
  _validate.positive(x_max=x_max)
  if not isinstance(levels, int) or isinstance(levels, bool) or levels < 2:
    raise ValueError(f'Expected levels={levels} to be an integer >= 2.')
  return GridQuantizer(2 * float(x_max) / (levels - 1), -float(x_max), 0,
                       levels - 1)
