"""Validation of static hyperparameters (concrete numbers only).

Only concrete Python/NumPy numbers are checked; traced values pass through.
This module imports nothing from dpjax, so every layer may use it.
"""

import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def concrete(value: Any) -> bool:
  """True for a concrete real number (not a tracer)."""
  if isinstance(value, jax.core.Tracer):
    return False
  return isinstance(value, numbers.Real) or (
      isinstance(value, (np.ndarray, jax.Array)) and np.ndim(value) == 0
  )


def non_negative(**kwargs: Any) -> None:
  for name, value in kwargs.items():
    if concrete(value) and not float(value) >= 0:
      raise ValueError(f'Expected {name}={value} >= 0.')


def positive(**kwargs: Any) -> None:
  for name, value in kwargs.items():
    if concrete(value) and not float(value) > 0:
      raise ValueError(f'Expected {name}={value} > 0.')


def open_unit(**kwargs: Any) -> None:
  """Checks 0 < value < 1 (e.g. delta)."""
  for name, value in kwargs.items():
    if concrete(value) and not 0 < float(value) < 1:
      raise ValueError(f'Expected {name}={value} in (0, 1).')


def half_open_unit(**kwargs: Any) -> None:
  """Checks 0 < value <= 1 (e.g. a sampling rate)."""
  for name, value in kwargs.items():
    if concrete(value) and not 0 < float(value) <= 1:
      raise ValueError(f'Expected {name}={value} in (0, 1].')


def _integer_check(kwargs: dict[str, Any], minimum: int, bound: str) -> None:
  for name, value in kwargs.items():
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
        or value < minimum):
      raise ValueError(f'Expected {name}={value} to be an integer {bound}.')


def positive_int(**kwargs: Any) -> None:
  _integer_check(kwargs, 1, '> 0')


def non_negative_int(**kwargs: Any) -> None:
  _integer_check(kwargs, 0, '>= 0')


def integer_at_least(minimum: int, **kwargs: Any) -> None:
  """Checks that each value is an int (not a bool) >= ``minimum``."""
  _integer_check(kwargs, minimum, f'>= {minimum}')


def key(value: Any, name: str = 'key') -> jax.Array:
  """Checks that a PRNG key was given; returns it as a typed key."""
  if value is None:
    raise ValueError(f'Expected {name} to be a jax.random key, got None.')
  if not isinstance(value, jax.Array):
    raise ValueError(
        f'Expected {name} to be a jax.random key, got {type(value).__name__}.'
    )
  if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
    return value
  if value.dtype == np.uint32 and value.shape == (2,):
    return jax.random.wrap_key_data(value)
  raise ValueError(
      f'Expected {name} to be a jax.random key, got an array of dtype '
      f'{value.dtype} and shape {value.shape}.'
  )


def finite(**kwargs: Any) -> None:
  """Checks that each concrete value is finite (not NaN or +-inf)."""
  for name, value in kwargs.items():
    if concrete(value) and not np.isfinite(float(value)):
      raise ValueError(f'Expected {name}={value} to be finite.')


def distinct_keys(**keys: Any) -> None:
  """Checks that concrete PRNG keys given for different streams differ."""
  seen = {}
  for name, value in keys.items():
    with jax.ensure_compile_time_eval():  # concrete keys stay concrete
      data = jax.random.key_data(key(value, name))
    if isinstance(data, jax.core.Tracer):
      continue
    data = np.asarray(data).tobytes()
    if data in seen:
      raise ValueError(f'Expected {seen[data]} and {name} to be different '
                       'keys: one key for two streams correlates them.')
    seen[data] = name


def l2_norm_clip(l2_norm_clip: Any) -> None:
  """Raises ValueError unless every leaf of l2_norm_clip is positive, finite."""
  leaves = jax.tree.leaves(l2_norm_clip)
  if not leaves:
    raise ValueError(f'Expected l2_norm_clip={l2_norm_clip} to be non-empty.')
  for c in leaves:
    positive(l2_norm_clip=c)
    finite(l2_norm_clip=c)


def row_mask(mask: jax.typing.ArrayLike, batch: int) -> jax.Array:
  """The row mask, checked: a boolean array of shape [B] (required)."""
  if mask is None:
    raise ValueError(
        'Expected mask= (bool [B], False on padded rows): an aggregator '
        'cannot tell padding from data without it. Pass batch.mask from the '
        'sampler, or jnp.ones(B, bool) for a batch without padding.')
  mask = jnp.asarray(mask)
  if mask.dtype != jnp.bool_:
    raise ValueError(f'Expected a boolean mask, got dtype {mask.dtype}.')
  if mask.shape != (batch,):
    raise ValueError(f'Expected mask of shape ({batch},) (one flag per row), '
                     f'got {mask.shape}.')
  return mask


def per_example_grads(grads: Any, params: Any = None) -> int:
  """Checks a per-example gradient pytree; returns the batch size B.

  Every leaf must be floating with one leading batch axis B shared by all
  leaves, and (when ``params`` is given) shaped ``(B,) + param.shape``: a
  gradient without its batch axis would be clipped coordinate by coordinate.
  """
  leaves = jax.tree.leaves(grads)
  if not leaves:
    raise ValueError('Expected per-example gradients, got an empty pytree.')
  for path, g in jax.tree_util.tree_leaves_with_path(grads):
    if not jnp.issubdtype(jnp.result_type(g), jnp.floating):
      raise ValueError(f'Expected floating per-example gradients, got '
                       f'{jnp.result_type(g)} at {jax.tree_util.keystr(path)}.')
    if jnp.ndim(g) < 1:
      raise ValueError('Expected a leading batch axis on every gradient leaf, '
                       f'got a scalar at {jax.tree_util.keystr(path)}.')
  batch = jnp.shape(leaves[0])[0]
  if params is not None:
    named, param_def = jax.tree_util.tree_flatten_with_path(params)
    try:
      grad_leaves = param_def.flatten_up_to(grads)
    except (ValueError, TypeError) as e:
      raise ValueError('Expected per-example gradients with the structure of '
                       f'params: {e}') from None
    for (path, p), g in zip(named, grad_leaves):
      want = (batch,) + tuple(jnp.shape(p))
      if tuple(jnp.shape(g)) != want:
        raise ValueError(
            f'Expected the per-example gradient at {jax.tree_util.keystr(path)}'
            f' to have shape {want} (batch axis + parameter shape), got '
            f'{tuple(jnp.shape(g))}. Missing batch axis?')
  for path, g in jax.tree_util.tree_leaves_with_path(grads):
    if jnp.shape(g)[0] != batch:
      raise ValueError(f'Expected batch size {batch} on every leaf, got '
                       f'{jnp.shape(g)[0]} at {jax.tree_util.keystr(path)}.')
  return batch


def sparsity(sparsity: int, dimension: int, name: str = 'sparsity'):
  """Raises ValueError unless ``1 <= sparsity <= dimension`` (an int)."""
  positive_int(**{name: sparsity})
  if sparsity > dimension:
    raise ValueError(
        f'Expected {name}={sparsity} <= the dimension {dimension}.')


def radius(radius: Any) -> None:
  """Raises ValueError unless radius is positive and finite."""
  positive(radius=radius)
  finite(radius=radius)


def sampler(value: Any) -> Any:
  """The expected batch size of a sampler (a chain's divisor), checked.

  A chain divides by the expected batch size of the sampler its batches come
  from, read there (its one place) rather than given again as a number: a
  number, or anything without ``expected_batch_size`` and ``unit``, is
  refused.
  """
  if (isinstance(value, type) or not hasattr(value, 'unit')
      or getattr(value, 'expected_batch_size', None) is None):
    raise ValueError(
        f'Expected sampler= the dpjax.sampling sampler the batches come from '
        f'(e.g. PoissonSampler(n, q)), got {type(value).__name__}: the chain '
        'divides by its expected_batch_size, so pass the sampler, not a '
        'number.')
  size = value.expected_batch_size
  positive(expected_batch_size=size)
  return size
