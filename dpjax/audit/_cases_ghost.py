"""Audit case: ghost clipping on an embedding whose lookups cancel.

A loss that indexes a table with plain ``table[ids]`` lowers to a gather that
clamps an out-of-range id in the forward pass while its transposed scatter
drops that id's gradient. The canary record looks up rows (V, V - 1, V - 1)
of a V-row table with output gradients (2u, -u, -u): its gradient is -2u on
row V - 1 (the out-of-range lookup counts nowhere), of norm 200 C. A ghost
norm that clamps the id like the forward sees 2u - u - u = 0 on row V - 1,
clips nothing, and lets the full gradient into the sum; the broken twin
computes its norms that way (the ghost rule before it followed the scatter).

Example:
  >>> case = dpsgd_ghost_gather_case()
  >>> case.relation, case.broken.name
  ('add/remove', 'dpsgd_ghost_gather_clamped_norm')
"""

import jax
import jax.numpy as jnp

from dpjax import _clipped_sum
from dpjax import accounting
from dpjax import clipping
from dpjax import transforms
from dpjax.audit._cases import _epsilon
from dpjax.audit._cases import _poisson_full
from dpjax.audit._cases import _twin
from dpjax.audit._cases import ADD_REMOVE
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import DELTA

ROWS, WIDTH, LOOKUPS = 6, 2, 3


def _embed_loss(params, example):
  return jnp.sum(params['e'][example['ids']] * example['t'])


def _clamped_loss(params, example):
  """The same loss with the ids clamped in the backward pass too."""
  table = params['e']
  return jnp.sum(table.at[example['ids']].get(mode='clip') * example['t'])


def _clamped_norm_sum(params, batch, mask, clip):
  """Today's bug, rebuilt: norms of the clamped gradient, weights applied to
  the real (scattered) gradients."""
  clamped = clipping.per_example_grads(_clamped_loss)(params, batch)['e']
  real = clipping.per_example_grads(_embed_loss)(params, batch)['e']
  norms = jnp.sqrt(jnp.sum(jnp.square(clamped), axis=(1, 2)))
  weights = jnp.where(mask, jnp.minimum(1.0, clip / norms), 0.0)
  # Wrapped as a clipped sum (it claims C), as the broken rule would be.
  return _clipped_sum.make({'e': jnp.tensordot(weights, real, axes=1)}, clip)


def dpsgd_ghost_gather_case() -> AuditCase:
  """DP-SGD with ghost clipping on an embedding; the canary's lookups cancel
  under the forward's clamping (module doc)."""
  clip, sigma, n = 1.0, 2.0, 4
  k_ids, k_t = jax.random.split(jax.random.key(2))
  ids = jax.random.randint(k_ids, (n, LOOKUPS), 0, ROWS - 1)
  ts = 0.3 * jax.random.normal(k_t, (n, LOOKUPS, WIDTH), jnp.float32)
  u = jnp.zeros(WIDTH).at[0].set(100.0 * clip)
  ids = ids.at[0].set(jnp.array([ROWS, ROWS - 1, ROWS - 1]))
  ts = ts.at[0].set(jnp.stack([2 * u, -u, -u]))
  batch = {'ids': ids.astype(jnp.int32), 't': ts}
  params = {'e': jnp.zeros((ROWS, WIDTH), jnp.float32)}

  def mech(clamped_norms):
    ghost = clipping.clipped_grad_sum(_embed_loss, clip, 'ghost')

    def mechanism(key, data):
      b, mask = data
      if clamped_norms:  # deliberately broken: the norm of a clamped id
        total = _clamped_norm_sum(params, b, mask, clip)
      else:
        total = ghost(params, b, mask).grad_sum
      tx = transforms.dpsgd(1.0, None, sigma, _poisson_full(n), key=key,
                            per_example=False)
      updates, _ = tx.update(total, tx.init(params), params)
      return -updates['e'] * n
    return mechanism

  tx = transforms.dpsgd(1.0, None, sigma, _poisson_full(n),
                        key=jax.random.key(0), per_example=False)
  zero_sum = clipping.clip_and_sum(  # the noise takes only a clipped sum
      jax.tree.map(lambda p: p[None], params), clip, jnp.ones(1, bool))
  _, state = tx.update(zero_sum.grad_sum, tx.init(params), params)
  eps = _epsilon(accounting.step_event(state, _poisson_full(n)), DELTA, 'pld')
  case = AuditCase(
      'dpsgd_ghost_gather', mech(False), (batch, jnp.arange(n) > 0),
      (batch, jnp.ones(n, bool)), lambda s: -s[ROWS - 1, 0], eps, DELTA,
      ADD_REMOVE,
      f'ghost clipping on table[ids], {ROWS} rows; canary ids ({ROWS}, '
      f'{ROWS - 1}, {ROWS - 1}) with output gradients (2u, -u, -u), u = 100 '
      f'C e_0: id {ROWS} is out of range (clamped forward, dropped by the '
      f'scatter), so the gradient is -2u on row {ROWS - 1}; masked out in '
      f'D; score = minus the update of e[{ROWS - 1}, 0]: tight')
  return case._replace(broken=_twin(
      case, 'dpsgd_ghost_gather_clamped_norm', mech(True),
      'norms of the clamped ids (2u - u - u = 0: nothing clipped) on the '
      'scattered gradient'))
