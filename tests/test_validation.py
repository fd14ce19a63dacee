"""experiments.common.validation: the config checks experiments use."""

import doctest

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import _validate
from experiments.common import validation

CHECKS = ('positive', 'non_negative', 'open_unit', 'positive_int',
          'non_negative_int')
VALUES = (-2, -1, 0, 1, 3, True, False, -0.5, 0.0, 1e-5, 0.5, 1.0, 2.5,
          float('nan'), float('inf'), np.float32(0.25), np.int64(-1),
          np.int64(4), np.array(-1.0), jnp.float32(-1.0), '1', None, (1,))


def _error(check, value):
  try:
    check(x=value)
  except ValueError as e:
    return str(e)
  return None


@pytest.mark.parametrize('name', CHECKS)
def test_same_rule_and_message_as_dpjax(name):
  for value in VALUES:
    assert (_error(getattr(validation, name), value)
            == _error(getattr(_validate, name), value)), value


@pytest.mark.parametrize('call, message', [
    (lambda: validation.non_negative_int(seed=-1),
     'Expected seed=-1 to be an integer >= 0.'),
    (lambda: validation.positive_int(steps=True),
     'Expected steps=True to be an integer > 0.'),
    (lambda: validation.positive_int(steps=2.0),
     'Expected steps=2.0 to be an integer > 0.'),
    (lambda: validation.positive(learning_rate=0),
     'Expected learning_rate=0 > 0.'),
    (lambda: validation.non_negative(momentum=-0.5),
     'Expected momentum=-0.5 >= 0.'),
    (lambda: validation.open_unit(delta=1.0), 'Expected delta=1.0 in (0, 1).'),
])
def test_errors_name_the_value(call, message):
  with pytest.raises(ValueError) as e:
    call()
  assert str(e.value) == message


def test_accepts_valid_and_traced_values():
  validation.positive_int(steps=1, batch=np.int32(4))
  validation.non_negative_int(seed=0)
  validation.positive(learning_rate=0.1, clip=np.float32(2.0))
  validation.non_negative(momentum=0.0)
  validation.open_unit(delta=1e-5)
  jax.jit(lambda x: validation.positive(x=x) or x)(-1.0)  # not concrete


def test_docstring_examples():
  result = doctest.testmod(validation)
  assert result.attempted > 0 and result.failed == 0
