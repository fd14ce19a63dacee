"""``predict(release, x)``: one pure entry point for every released model.

Each release type registers its prediction rule with ``predict.register``;
prediction reads only the release and the query points, so it costs no
privacy (post-processing).
"""

import functools
from typing import Any

import jax
from jax.typing import ArrayLike


@functools.singledispatch
def predict(release: Any, x: ArrayLike) -> jax.Array:
  """Class predictions ``[m]`` (int32) of a released model at ``x`` ``[m, d]``.

  Example:
    >>> predict(object(), jnp.zeros((1, 2)))
    Traceback (most recent call last):
    ...
    ValueError: Expected a dpjax.nonparametric release, got object.
  """
  raise ValueError('Expected a dpjax.nonparametric release, got '
                   f'{type(release).__name__}.')
