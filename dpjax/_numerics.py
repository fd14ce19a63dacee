"""Overflow-safe norms and the finite substitute for non-finite input.

Every mechanism maps a non-finite input to a finite one before it is clipped
or noised, so the output distribution on an input with NaN or inf is the
distribution on some finite input, and its guarantee holds unchanged. This
module imports nothing from dpjax, so every layer may use it.

Example:
  >>> zero_nonfinite(jnp.array([1.0, jnp.nan, -jnp.inf])).tolist()
  [1.0, 0.0, 0.0]
  >>> float(l2_norm(jnp.array([3e30, 4e30], jnp.float32))) / 1e30  # no overflow
  4.999999924121604
"""

import fractions
import numbers
from typing import Any

import jax
import jax.numpy as jnp


def wide(dtype: Any) -> Any:
  """float32 for a float dtype narrower than float32 (bf16, f16), else
  ``dtype``: the precision norms and clipped sums are computed in."""
  dtype = jnp.dtype(dtype)
  if jnp.issubdtype(dtype, jnp.floating) and jnp.finfo(dtype).bits < 32:
    return jnp.dtype(jnp.float32)
  return dtype


def zero_nonfinite(tree: Any) -> Any:
  """Replaces NaN and +-inf entries of every floating leaf by 0."""

  def leaf(x):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
      return x
    return jnp.where(jnp.isfinite(x), x, jnp.zeros_like(x))

  return jax.tree.map(leaf, tree)


def _scaled_norm(x: jax.Array, axis: Any) -> jax.Array:
  biggest = jnp.max(jnp.abs(x), axis=axis, keepdims=True)
  safe = jnp.where((biggest > 0) & jnp.isfinite(biggest), biggest, 1.0)
  sq = jnp.sum(jnp.square(x / safe), axis=axis, keepdims=True)
  norm = jnp.where(jnp.isfinite(biggest), safe * jnp.sqrt(sq), biggest)
  return jnp.squeeze(norm, axis=axis)


def l2_norm(x: jax.typing.ArrayLike, axis: Any = None) -> jax.Array:
  """||x||_2 over ``axis`` (all axes by default) in float32, overflow-safe.

  Where the plain sum of squares is finite the result is exactly
  ``sqrt(sum(x^2))``; where it overflows, x is divided by its largest
  magnitude before squaring (the LAPACK ``nrm2`` idea), so every finite x has
  a finite norm up to float32's largest value. Non-finite entries give a
  non-finite norm.
  """
  x = jnp.asarray(x).astype(jnp.float32)
  if axis is None:
    axis = tuple(range(x.ndim))
  plain = jnp.sum(jnp.square(x), axis=axis)
  return jnp.where(jnp.isfinite(plain), jnp.sqrt(plain),
                   _scaled_norm(x, axis))


def combine_norms(norms: list[jax.Array]) -> jax.Array:
  """sqrt(sum_l n_l^2) of non-negative norms, overflow-safe like ``l2_norm``."""
  if len(norms) == 1:
    return norms[0]
  return l2_norm(jnp.stack(norms), axis=0)


def weighted_row_sum(g: jax.Array, weight: jax.Array, valid: jax.Array):
  """sum_i weight_i g_i over rows with ``valid``; other rows give exactly 0.

  Weighted, summed and returned in float32 for a narrower float ``g`` (bf16,
  f16), at ``precision=HIGHEST`` (no TF32 on GPUs).
  """
  g = jnp.where(valid.reshape((-1,) + (1,) * (g.ndim - 1)), g, 0)
  g = g.astype(wide(g.dtype))
  return jnp.tensordot(weight.astype(g.dtype), g, axes=1,
                       precision=jax.lax.Precision.HIGHEST)


def as_fraction(value, name: str) -> fractions.Fraction:
  """Exact rational value of a concrete Python/NumPy number."""
  if isinstance(value, jax.core.Tracer):
    raise ValueError(
        f'Expected {name} to be a concrete number (exact sampling precomputes '
        f'rational constants on the host), got a traced value.')
  if isinstance(value, fractions.Fraction):
    return value
  try:
    if isinstance(value, numbers.Integral):
      return fractions.Fraction(int(value))
    return fractions.Fraction(float(value))
  except (TypeError, ValueError, OverflowError) as e:
    raise ValueError(f'Expected {name}={value!r} to be a finite number.') from e
