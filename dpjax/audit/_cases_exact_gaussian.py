"""Audit case of the exact Gaussian path (``dpsgd(noise='exact')``).

Honest: DP-SGD's exact path on the canary gradients of ``dpsgd_vmap``, its
stated epsilon from ``dpjax.accounting.step_event`` (full batch). Broken
twin: what a naive grid mechanism does, rounding to the NEAREST grid point
and stating the discrete Gaussian's epsilon for the unrounded sensitivity
(no sqrt(d) inflation). Inputs just below and just above half a grid step
in every one of d coordinates are close in L2, yet nearest rounding moves
every code by one: the codes differ by sqrt(d) grid steps against a claim
of one.

Example:
  >>> exact_gaussian_case().broken.name
  'exact_gaussian_nearest_uninflated'
"""

import math

import jax
import jax.numpy as jnp

from dpjax import accounting
from dpjax import noise
from dpjax import transforms
from dpjax.audit import _cases
from dpjax.audit._cases import ADD_REMOVE
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import DELTA
from dpjax.audit._cases import _poisson_full

_TWIN_DIM = 16  # nearest rounding moves the codes by sqrt(16) = 4 steps


def _nearest_uninflated(sigma_z: float):
  """The broken mechanism on the grid Z: round(x) + N_Z(0, sigma_z^2)."""
  def mechanism(key, x):
    k = jnp.round(x).astype(jnp.int32) + noise.discrete_gaussian(
        key, x.shape, sigma=sigma_z)
    return k.astype(jnp.float32)
  return mechanism


def exact_gaussian_case() -> AuditCase:
  clip, sigma, n = 1.0, 2.0, 8
  grads = _cases._canary_grads(n)  # pylint: disable=protected-access

  def mechanism(key, data):
    g, mask = data
    tx = transforms.dpsgd(1.0, clip, sigma, _poisson_full(n), key=key,
                          noise='exact')
    params = jnp.zeros(g.shape[1])
    updates, _ = tx.update(g, tx.init(params), params, mask=mask)
    return -updates * n

  tx = transforms.dpsgd(1.0, clip, sigma, _poisson_full(n),
                        key=jax.random.key(0), noise='exact')
  # pylint: disable-next=protected-access
  eps = _cases._dpsgd_epsilon(tx, grads, jnp.ones(n, bool), n, 'rdp')
  case = AuditCase(
      'exact_gaussian', mechanism, (grads, jnp.arange(n) > 0),
      (grads, jnp.ones(n, bool)), lambda u: u[0], eps, DELTA, ADD_REMOVE,
      'dpsgd(noise="exact"): a canary gradient of norm 100 C along e_0, '
      'masked out in D; score = the update\'s e_0 part; the claim converts '
      'zCDP, so the bound reaches about half of it')
  # Twin: grid step 1, sensitivity claimed 1 (no inflation), sigma_z 2.
  sigma_z = 2.0
  claim = float(accounting.epsilon(accounting.discrete_gaussian_event(
      sigma_z, 1.0), DELTA))
  below = jnp.full((_TWIN_DIM,), 0.5 - 1e-3, jnp.float32)
  above = jnp.full((_TWIN_DIM,), 0.5 + 1e-3, jnp.float32)
  assert float(jnp.linalg.norm(above - below)) <= 1.0
  twin = AuditCase(
      'exact_gaussian_nearest_uninflated', _nearest_uninflated(sigma_z),
      below, above, lambda k: jnp.sum(k) / math.sqrt(_TWIN_DIM), claim,
      DELTA, ADD_REMOVE,
      f'nearest rounding, claim for sensitivity 1 without the rounding '
      f'inflation; d = {_TWIN_DIM} coordinates at 0.5 -+ 0.001 (L2 distance '
      f'{2e-3 * math.sqrt(_TWIN_DIM):.3g}) round to 0 vs 1; score = the '
      'codes\' sum (the LLR)')
  return case._replace(broken=twin)
