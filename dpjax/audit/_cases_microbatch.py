"""Audit case: DP-SGD on a clipped sum accumulated over micro-batches.

``clipped_grad_sum(..., microbatch_size=2)`` sums 4 micro-batches of 2 rows
under a scan and claims the batch's bound C (the micro-batches partition the
rows), noised once. The canary (a gradient of norm 100 C along e_0, masked
out in D) lies in the first micro-batch. The broken twin is a scan bug that
reads the first micro-batch at every step (a closure over the wrong chunk)
while claiming the same bound: the canary enters the sum 4 times, 4 C.

Example:
  >>> case = dpsgd_microbatch_case()
  >>> case.relation, case.broken.name
  ('add/remove', 'dpsgd_microbatch_first_chunk')
"""

import jax
import jax.numpy as jnp

from dpjax import _clipped_sum
from dpjax import accounting
from dpjax import clipping
from dpjax import transforms
from dpjax.audit._cases import _canary_grads
from dpjax.audit._cases import _epsilon
from dpjax.audit._cases import _poisson_full
from dpjax.audit._cases import _twin
from dpjax.audit._cases import ADD_REMOVE
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import DELTA

MICROBATCH = 2


def _linear_loss(w, x):
  return jnp.sum(w * x)  # its gradient is the row itself


def _first_chunk_sum(params, rows, mask, clip):
  """The bug, rebuilt: every scan step sums the first micro-batch."""
  chunk_sum = clipping.clipped_grad_sum(_linear_loss, clip)
  first = (rows[:MICROBATCH], mask[:MICROBATCH])

  def body(total, _):
    return total + chunk_sum(params, *first).grad_sum.value, None

  total, _ = jax.lax.scan(body, jnp.zeros_like(params), None,
                          length=rows.shape[0] // MICROBATCH)
  # Wrapped as a clipped sum (it claims C), as the broken scan would be.
  return _clipped_sum.make(total, clip)


def dpsgd_microbatch_case() -> AuditCase:
  """DP-SGD on a clipped sum of 4 micro-batches (module doc)."""
  clip, sigma, n = 1.0, 2.0, 8
  grads = _canary_grads(n)
  params = jnp.zeros(grads.shape[1])
  summed = clipping.clipped_grad_sum(_linear_loss, clip,
                                     microbatch_size=MICROBATCH)

  def mech(first_chunk_only):
    def mechanism(key, data):
      rows, mask = data
      if first_chunk_only:  # deliberately broken: the first chunk 4 times
        total = _first_chunk_sum(params, rows, mask, clip)
      else:
        total = summed(params, rows, mask).grad_sum
      tx = transforms.dpsgd(1.0, None, sigma, _poisson_full(n), key=key,
                            per_example=False)
      updates, _ = tx.update(total, tx.init(params), params)
      return -updates * n
    return mechanism

  tx = transforms.dpsgd(1.0, None, sigma, _poisson_full(n),
                        key=jax.random.key(0), per_example=False)
  zero_sum = clipping.clip_and_sum(  # the noise takes only a clipped sum
      params[None], clip, jnp.ones(1, bool))
  _, state = tx.update(zero_sum.grad_sum, tx.init(params), params)
  eps = _epsilon(accounting.step_event(state, _poisson_full(n)), DELTA, 'pld')
  case = AuditCase(
      'dpsgd_microbatch', mech(False), (grads, jnp.arange(n) > 0),
      (grads, jnp.ones(n, bool)), lambda u: u[0], eps, DELTA, ADD_REMOVE,
      f'{n} rows summed in micro-batches of {MICROBATCH}; a canary gradient '
      'of norm 100 C along e_0 in the first, masked out in D; score = the '
      'update\'s e_0 part (Gaussian LLR): tight')
  return case._replace(broken=_twin(
      case, 'dpsgd_microbatch_first_chunk', mech(True),
      'a scan that sums the first micro-batch at every step (the canary 4 '
      'times) and claims C'))
