"""Validation of static hyperparameters (concrete numbers only).

Only concrete Python/NumPy numbers are checked; traced values pass through.
This module imports nothing from dpjax, so every layer may use it.
"""

import numbers
from typing import Any

import jax
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
