"""Audit cases for float leaks: counts released with float Laplace noise.

A count of 0 plus float32 Laplace noise keeps the fine low-order bits of the
noise, while a count of 1 plus the same noise lands on the 2^-24 grid near 0
(Mironov 2012; ``low_bit_score``). The honest mechanism is the library's
exact integer release (int32 counts plus exact discrete Laplace noise); its
broken twin releases the same counts plus float Laplace noise of the same
scale, whose ideal epsilon is the same but whose low bits give it away.

Example:
  >>> private_histogram_case().relation
  'replace-one'
"""

import jax
import jax.numpy as jnp

from dpjax import noise
from dpjax import nonparametric
from dpjax.audit import _distinguishing
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import REPLACE_ONE

_EPSILON = 1.0
_COUNT_KW = dict(bounds=(0.0, 1.0), num_classes=2, bins=1)
# Each off-grid witness outweighs the whole Laplace LLR term (|LLR| <= 2).
_LOW_BIT_WEIGHT = 4.0


def _exact(key, data):
  x, y = data
  release, _ = nonparametric.dp_histogram(key, x, y, epsilon=_EPSILON,
                                          **_COUNT_KW)
  return release.counts[0].astype(jnp.float32)


def _float_laplace(key, data):
  """Today's leak: exact counts + float32 Laplace(1 / eps)."""
  x, y = data
  k_release, k_noise = jax.random.split(key)
  release, _ = nonparametric.dp_histogram(
      k_release, x, y, epsilon=float('inf'), **_COUNT_KW)
  counts = release.counts[0].astype(jnp.float32)
  return counts + noise.laplace(k_noise, counts.shape, scale=1.0 / _EPSILON)


def _score(c):
  """Towards D' (counts (0, 1)): the Laplace LLR of (1, 0) vs (0, 1), plus
  the off-grid witnesses of a zero count in column 0 (D') minus column 1
  (D)."""
  llr = (jnp.clip(2 * c[1] - 1, -1, 1) + jnp.clip(1 - 2 * c[0], -1, 1))
  low = (_distinguishing.low_bit_score(c[0])
         - _distinguishing.low_bit_score(c[1]))
  return (llr + _LOW_BIT_WEIGHT * low).astype(jnp.float32)


def private_histogram_case() -> AuditCase:
  # One record in the single cell flips its label: counts (1, 0) -> (0, 1).
  x = jnp.full((1, 1), 0.5, jnp.float32)
  # Replace-one moves two counts by 1: twice the add/remove event, the one
  # the release returns.
  _, event = nonparametric.dp_histogram(jax.random.key(0), x, jnp.array([0]),
                                        epsilon=_EPSILON, **_COUNT_KW)
  eps = 2 * event.epsilon
  case = AuditCase(
      'private_histogram', _exact, (x, jnp.array([0])), (x, jnp.array([1])),
      _score, float(eps), 0.0, REPLACE_ONE,
      'one record (the whole dataset) flips its label: both class counts '
      'of its cell move by 1; score = the Laplace LLR over the two counts '
      'plus the low-bit score (|v| < 1 off the 2^-24 grid: a zero count '
      'under float noise); integer releases never trip it: tight on the LLR')
  broken = case._replace(
      name='private_histogram_float_laplace', mechanism=_float_laplace,
      broken=None,
      attack='the same counts plus float32 Laplace(1 / eps) (same ideal '
      'epsilon): the low bits of a small release tell a count of 0 from 1')
  return case._replace(broken=broken)
