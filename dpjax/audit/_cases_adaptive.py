"""Audit cases for adaptive clipping and user-level DP-SGD.

``adaptive_dpsgd``: one step of ``dpjax.adaptive_dpsgd`` releases the noisy
clipped sum and, through the next bound, the noisy centred count (Andrew et
al. 2021). A canary example of norm 100 C_0 along e_0 moves the sum by C_0
e_0 and the centred count by -1/2; the score is the joint Gaussian LLR of
both, so the audit can approach the stated (combined) epsilon. The broken
twin states the same epsilon but releases the count without noise.

``user_dpsgd``: user-level clipping (``clipped_user_grad_sum``) with a
canary user of three examples, each of gradient norm 100 C along e_0. The
broken twin clips each example instead of the user (the canary user then
moves the sum by 3 C) but states the same user-level epsilon.

Example:
  >>> adaptive_dpsgd_case().relation
  'add/remove'
"""

import jax
import jax.numpy as jnp

from dpjax import clipping
from dpjax import sampling
from dpjax import transforms
from dpjax.audit._cases import _dpsgd_epsilon
from dpjax.audit._cases import _poisson_full
from dpjax.audit._cases import _twin
from dpjax.audit._cases import ADD_REMOVE
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import DELTA

_CLIP, _SIGMA, _N, _DIM = 1.0, 2.0, 8, 5
_GAMMA, _ETA = 0.5, 0.2
_COUNT_STDDEV = 2.0


def _canary_grads():
  grads = 0.3 * jax.random.normal(jax.random.key(0), (_N, _DIM), jnp.float32)
  return grads.at[0].set(jnp.zeros(_DIM).at[0].set(100.0))


def _adaptive_tx(key, count_stddev):
  return transforms.adaptive_dpsgd(
      1.0, _CLIP, _SIGMA, _poisson_full(_N), target_quantile=_GAMMA,
      clip_learning_rate=_ETA, count_stddev=count_stddev, key=key)


def _adaptive_mech(count_noise: bool):
  sigma_grad = transforms.adaptive_clip_noise_multiplier(_SIGMA, _COUNT_STDDEV)

  def mechanism(key, data):
    g, mask = data
    params = jnp.zeros(_DIM)
    if count_noise:
      tx = _adaptive_tx(key, _COUNT_STDDEV)
      updates, state = tx.update(g, tx.init(params), params, mask=mask)
      bound = state[0].l2_norm_clip
    else:  # broken: the same gradient noise, the count released exactly
      clip = transforms.adaptive_clip_per_example(
          _CLIP, target_quantile=_GAMMA, learning_rate=_ETA, count_stddev=0.0,
          expected_batch_size=float(_N), key=key)
      noise = transforms.add_dpsgd_noise(sigma_grad, key=key)
      total, state = clip.update(g, clip.init(params), params, mask=mask)
      updates, _ = noise.update(total, noise.init(params))
      updates, bound = -updates / _N, state.l2_norm_clip
    # Invert C_1 = C_0 exp(-eta (b~ - gamma)) for the centred noisy count.
    fraction = _GAMMA - jnp.log(bound / _CLIP) / _ETA
    count = (fraction - 0.5) * _N
    return jnp.stack([-updates[0] * _N, count])
  return mechanism


def _adaptive_score(out):
  """The joint LLR towards D' (canary in): sum shift +C_0 on e_0 (noise
  sigma_grad C_0), centred-count shift -1/2 (noise count_stddev)."""
  sigma_grad = transforms.adaptive_clip_noise_multiplier(_SIGMA, _COUNT_STDDEV)
  grad_term = out[0] / (sigma_grad**2 * _CLIP)
  count_term = -0.5 * out[1] / _COUNT_STDDEV**2
  return (grad_term + count_term).astype(jnp.float32)


def adaptive_dpsgd_case() -> AuditCase:
  grads = _canary_grads()
  tx = _adaptive_tx(jax.random.key(0), _COUNT_STDDEV)
  eps = _dpsgd_epsilon(tx, grads, jnp.ones(_N, bool), _N)
  case = AuditCase(
      'adaptive_dpsgd', _adaptive_mech(True), (grads, jnp.arange(_N) > 0),
      (grads, jnp.ones(_N, bool)), _adaptive_score, eps, DELTA, ADD_REMOVE,
      'a canary gradient of norm 100 C_0 along e_0, masked out in D; the '
      'release is the noisy sum and the next bound (the noisy count); '
      'score = the joint Gaussian LLR of both: tight')
  broken = _twin(
      case, 'adaptive_dpsgd_exact_count', _adaptive_mech(False),
      'the unclipped fraction released without noise (the same stated '
      'epsilon): the next bound tells whether the canary was clipped; '
      'score = minus the centred count')
  return case._replace(broken=broken._replace(
      score=lambda out: (-out[1]).astype(jnp.float32)))


def _user_loss(params, example):
  return jnp.dot(params, example)


def _user_mech(per_user: bool):
  grad_sum = clipping.clipped_user_grad_sum(_user_loss, _CLIP)
  example_sum = clipping.clipped_grad_sum(_user_loss, _CLIP)

  def mechanism(key, data):
    x, mask = data
    params = jnp.zeros(_DIM)
    if per_user:
      users, per_user_cap = mask.shape
      indices = jnp.arange(users * per_user_cap).reshape(mask.shape)
      user_batch = sampling.UserBatch(
          jnp.where(mask, indices, 0), mask, jnp.sum(jnp.any(mask, axis=1)))
      total = grad_sum(params, x, user_batch).grad_sum
    else:  # broken: each example clipped, the user unbounded
      flat = x.reshape((-1, _DIM))
      total = example_sum(params, flat, mask.reshape(-1)).grad_sum
    tx = transforms.dpsgd(1.0, None, _SIGMA, _poisson_full(_N), key=key,
                          per_example=False)
    updates, _ = tx.update(total, tx.init(params), params)
    return -updates[0] * _N
  return mechanism


def user_dpsgd_case() -> AuditCase:
  users, per_user = _N, 3
  x = 0.3 * jax.random.normal(jax.random.key(1), (users, per_user, _DIM))
  x = x.at[0].set(jnp.zeros((per_user, _DIM)).at[:, 0].set(100.0))
  mask = jnp.ones((users, per_user), bool)
  tx = transforms.dpsgd(1.0, _CLIP, _SIGMA, _poisson_full(_N),
                        key=jax.random.key(0))
  eps = _dpsgd_epsilon(tx, x[:, 0], jnp.ones(users, bool), users)
  case = AuditCase(
      'user_dpsgd', _user_mech(True), (x, mask.at[0].set(False)), (x, mask),
      lambda u: u.astype(jnp.float32), eps, DELTA, ADD_REMOVE,
      'a canary USER of three examples, each of gradient norm 100 C along '
      'e_0, masked out in D; score = the update\'s e_0 part: tight')
  return case._replace(broken=_twin(
      case, 'user_dpsgd_example_clipping', _user_mech(False),
      'examples clipped one by one (the canary user moves the sum by 3 C) '
      'under the same user-level epsilon'))

