"""Checks of experiment configuration values, raising ``ValueError``.

Each check takes keyword arguments, so the error names the value, e.g.
``non_negative_int(seed=-1)`` raises ``ValueError('Expected seed=-1 to be an
integer >= 0.')``. The real-valued checks look at concrete numbers only
(Python or NumPy numbers, 0-d arrays); anything else, such as a traced value,
passes unchecked. The integer checks reject bools and non-integers. These are
the rules ``dpjax`` applies to its own hyperparameters, written here so that
experiments use public code only.

Example:
  >>> positive(learning_rate=0.1); open_unit(delta=1e-5)
  >>> non_negative_int(seed=-1)
  Traceback (most recent call last):
    ...
  ValueError: Expected seed=-1 to be an integer >= 0.
"""

import numbers
from typing import Any

import jax
import numpy as np


def _concrete(value: Any) -> bool:
  if isinstance(value, jax.core.Tracer):
    return False
  return isinstance(value, numbers.Real) or (
      isinstance(value, (np.ndarray, jax.Array)) and np.ndim(value) == 0)


def positive(**kwargs: Any) -> None:
  """Checks value > 0."""
  for name, value in kwargs.items():
    if _concrete(value) and not float(value) > 0:
      raise ValueError(f'Expected {name}={value} > 0.')


def non_negative(**kwargs: Any) -> None:
  """Checks value >= 0."""
  for name, value in kwargs.items():
    if _concrete(value) and not float(value) >= 0:
      raise ValueError(f'Expected {name}={value} >= 0.')


def open_unit(**kwargs: Any) -> None:
  """Checks 0 < value < 1 (e.g. delta)."""
  for name, value in kwargs.items():
    if _concrete(value) and not 0 < float(value) < 1:
      raise ValueError(f'Expected {name}={value} in (0, 1).')


def _integers(kwargs: dict[str, Any], minimum: int, bound: str) -> None:
  for name, value in kwargs.items():
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
        or value < minimum):
      raise ValueError(f'Expected {name}={value} to be an integer {bound}.')


def positive_int(**kwargs: Any) -> None:
  """Checks that each value is an int (not a bool) > 0."""
  _integers(kwargs, 1, '> 0')


def non_negative_int(**kwargs: Any) -> None:
  """Checks that each value is an int (not a bool) >= 0."""
  _integers(kwargs, 0, '>= 0')
