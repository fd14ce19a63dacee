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
