"""Audit cases of four leaks that the one privacy path closes.

Each honest case runs today's path (a ``ClippedSum`` that carries its bound
and unit, one Gaussian privatizer, ``dpjax.accounting.step_event``) and
states the epsilon that reader gives; each broken twin builds what the old
code built (through ``dpjax._clipped_sum.make`` where the old sum claimed a
bound it did not have) and states the claim the old code recorded.

* ``user_level_unit``: user-level clipping (``clipped_user_grad_sum``, one
  bound C per user) under a ``UserPoissonSampler``. Twin: the same users'
  examples clipped one by one (a user with k examples moves the sum by k C)
  claimed as the user-level event at the same sigma, as the reader did
  before the sum carried its unit (today ``step_event`` refuses it).
* ``scaled_clipped_sum``: ``optax.scale(100.)`` between the clipping and the
  noise; the bound follows (100 C) and so does the noise. Twin: the scaled
  sum noised at sigma C, as when the bound was an argument of the noise.
* ``shared_noise_key``: one ``dpsgd`` step and one ``adaptive_dpsgd`` step
  built from ONE key, both releases observed, claimed as the composition of
  the two steps: the privatizer folds its sigma (and the sum's bound) into
  its stream, so the two draws are independent. Twin: the draws coincide,
  as when every Gaussian privatizer drew from one ``'dpsgd_noise'`` stream
  whatever its sigma: r_2 = S + (sigma_2 / sigma_1)(r_1 - S), so
  sigma_2 r_1 - sigma_1 r_2 is the clipped sum's own coordinate scaled,
  without noise.
* ``adaptive_bandmf_count``: ``adaptive_clip_per_example`` chained with
  ``add_dpsgd_noise(sigma, strategy=BandMF)`` under a
  ``CyclicPoissonSampler``: ``step_event`` combines the count noise with
  the gradient noise (Andrew et al. 2021, Thm 1). Twin: the same run claimed
  at the gradient sigma alone, as the old BandMF reader did (it ignored the
  count release); the count noise here dominates, so the count alone
  refutes that claim.

The score of every honest case is the Gaussian log-likelihood ratio of what
the canary moves (tight up to the audit's sample size).

Example:
  >>> scaled_clipped_sum_case().broken.name
  'scaled_clipped_sum_unscaled_noise'
"""

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _clipped_sum
from dpjax import accounting
from dpjax import clipping
from dpjax import correlated_noise
from dpjax import sampling
from dpjax import transforms
from dpjax.audit._cases import _canary_grads
from dpjax.audit._cases import _epsilon
from dpjax.audit._cases import _poisson_full
from dpjax.audit._cases import _twin
from dpjax.audit._cases import ADD_REMOVE
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import DELTA

_CLIP, _SIGMA, _N, _DIM = 1.0, 2.0, 8, 5
_SCALE = 100.0
_GAMMA, _ETA = 0.5, 0.2


def _claim(state, sampler) -> float:
  return _epsilon(accounting.step_event(state, sampler), DELTA, 'pld')


# --- user_level_unit ----------------------------------------------------------

_USERS, _PER_USER = 8, 3


def _linear_loss(params, example):
  return jnp.dot(params, example)


def _user_sampler():
  return sampling.UserPoissonSampler(
      np.repeat(np.arange(_USERS), _PER_USER), 1.0,
      max_examples_per_user=_PER_USER)


def _user_mech(per_user: bool, users: sampling.UserBatch):
  user_sum = clipping.clipped_user_grad_sum(_linear_loss, _CLIP)
  example_sum = clipping.clipped_grad_sum(_linear_loss, _CLIP)

  def mechanism(key, data):
    x, present = data  # the dataset; which of its examples are in it
    params = jnp.zeros(_DIM)
    mask = users.mask & present[users.indices]
    batch = x[users.indices]
    if per_user:
      total = user_sum(params, batch, users._replace(mask=mask)).grad_sum
    else:  # broken: each example clipped, the user unbounded
      total = example_sum(params, batch.reshape((-1, _DIM)),
                          mask.reshape(-1)).grad_sum
    tx = transforms.dpsgd(1.0, None, _SIGMA, _user_sampler(), key=key,
                          per_example=False)
    updates, state = tx.update(total, tx.init(params), params)
    return -updates[0] * _USERS, state
  return mechanism


def user_level_unit_case() -> AuditCase:
  """User-level clipping under a user sampler; twin: clipped per example,
  claimed per user (module doc)."""
  sampler = _user_sampler()
  users = jax.jit(sampler.sample)(jax.random.key(0), 0)  # q = 1: all
  x = 0.3 * jax.random.normal(jax.random.key(1), (_USERS * _PER_USER, _DIM))
  x = x.at[:_PER_USER].set(jnp.zeros(_DIM).at[0].set(100.0))  # user 0
  present = jnp.ones(_USERS * _PER_USER, bool)
  honest, broken = _user_mech(True, users), _user_mech(False, users)
  eps = _claim(jax.jit(honest)(jax.random.key(0), (x, present))[1], sampler)
  first = lambda mech: lambda key, data: mech(key, data)[0]
  case = AuditCase(
      'user_level_unit', first(honest), (x, present.at[:_PER_USER].set(False)),
      (x, present), lambda u: u.astype(jnp.float32), eps, DELTA, ADD_REMOVE,
      f'a canary USER of {_PER_USER} examples, each of gradient norm 100 C '
      'along e_0, absent from D; the UserBatch of a UserPoissonSampler '
      '(q = 1), the claim step_event under it; score = the update\'s e_0 '
      'part: tight')
  # The claim the reader gave before the sum carried its unit: the user-
  # level event at sigma (step_event now refuses an example-level sum).
  twin_eps = _epsilon(sampler.dp_event(_SIGMA), DELTA, 'pld')
  return case._replace(broken=_twin(
      case, 'user_level_unit_example_clipping', first(broken),
      f'the users\' examples clipped one by one (the canary user moves the '
      f'sum by {_PER_USER} C), claimed as the user-level event at sigma',
      epsilon=twin_eps))


# --- scaled_clipped_sum -------------------------------------------------------


def _scaled_mech(bound_follows: bool):
  def mechanism(key, data):
    g, mask = data
    params = jnp.zeros(_DIM)
    noise = transforms.add_dpsgd_noise(_SIGMA, key=key)
    if bound_follows:
      tx = optax.chain(transforms.clip_per_example(_CLIP),
                       optax.scale(_SCALE), noise)
      out, state = tx.update(g, tx.init(params), params, mask=mask)
    else:  # broken: the scaled value noised for the bound C
      total = clipping.clip_and_sum(g, _CLIP, mask).grad_sum
      total = _clipped_sum.make(_SCALE * total.value, _CLIP)
      out, state = noise.update(total, noise.init(params))
    return out[0] / _SCALE, state
  return mechanism


def scaled_clipped_sum_case() -> AuditCase:
  """A clipped sum scaled by 100 before the noise; twin: the noise stays at
  sigma C (module doc)."""
  grads = _canary_grads(_N, _DIM)
  honest = _scaled_mech(True)
  state = jax.jit(honest)(jax.random.key(0), (grads, jnp.ones(_N, bool)))[1]
  eps = _claim(state, _poisson_full(_N))
  first = lambda mech: lambda key, data: mech(key, data)[0]
  case = AuditCase(
      'scaled_clipped_sum', first(honest), (grads, jnp.arange(_N) > 0),
      (grads, jnp.ones(_N, bool)), lambda u: u, eps, DELTA, ADD_REMOVE,
      f'chain(clip_per_example(C), optax.scale({_SCALE:g}), add_dpsgd_noise)'
      '; a canary gradient of norm 100 C along e_0, masked out in D; score '
      '= the release\'s e_0 part over the scale: tight')
  return case._replace(broken=_twin(
      case, 'scaled_clipped_sum_unscaled_noise', first(_scaled_mech(False)),
      f'the sum scaled by {_SCALE:g} (it moves by {_SCALE:g} C) noised at '
      'sigma C, as when the noise took the bound as an argument'))


# --- shared_noise_key ---------------------------------------------------------

_COUNT_STDDEV = 2.0
_SIGMA_GRAD = transforms.adaptive_clip_noise_multiplier(_SIGMA, _COUNT_STDDEV)


def _two_chains(key_dpsgd, key_adaptive, g, mask):
  params = jnp.zeros(_DIM)
  plain = transforms.dpsgd(1.0, _CLIP, _SIGMA, _poisson_full(_N),
                          key=key_dpsgd)
  adaptive = transforms.adaptive_dpsgd(
      1.0, _CLIP, _SIGMA, _poisson_full(_N), target_quantile=_GAMMA,
      clip_learning_rate=_ETA, count_stddev=_COUNT_STDDEV, key=key_adaptive)
  u1, s1 = plain.update(g, plain.init(params), params, mask=mask)
  u2, s2 = adaptive.update(g, adaptive.init(params), params, mask=mask)
  # Invert C_1 = C_0 exp(-eta (b~ - gamma)) for the centred noisy count.
  fraction = _GAMMA - jnp.log(s2[0].l2_norm_clip / _CLIP) / _ETA
  out = jnp.stack([-u1[0] * _N, -u2[0] * _N, (fraction - 0.5) * _N])
  return out, (s1, s2)


def _shared_mech(one_draw: bool):
  def mechanism(key, data):
    out = _two_chains(key, key, *data)[0]
    if not one_draw:
      return out
    # Broken: the adaptive release reuses the dpsgd release's draw z (both
    # chains clip to C_0 at step 0, so both sums are S).
    g, mask = data
    s0 = clipping.clip_and_sum(g, _CLIP, mask).grad_sum.value[0]
    return out.at[1].set(s0 + _SIGMA_GRAD / _SIGMA * (out[0] - s0))
  return mechanism


def _shared_score(out):
  """The joint LLR towards D': +C on e_0 in both releases (noise sigma C and
  sigma_grad C), centred count -1/2 (noise count_stddev)."""
  return (out[0] / (_SIGMA**2 * _CLIP) + out[1] / (_SIGMA_GRAD**2 * _CLIP)
          - 0.5 * out[2] / _COUNT_STDDEV**2).astype(jnp.float32)


def _shared_twin_score(out):
  """sigma_grad r_1 - sigma_1 r_2: one draw z cancels, leaving
  (sigma_grad - sigma_1) x the sum's e_0 coordinate."""
  return (_SIGMA_GRAD * out[0] - _SIGMA * out[1]).astype(jnp.float32)


def shared_noise_key_case() -> AuditCase:
  """One dpsgd and one adaptive_dpsgd step on one batch; twin: both built
  from one key (module doc)."""
  grads = _canary_grads(_N, _DIM)
  key = jax.random.key(0)
  _, (s1, s2) = jax.jit(_two_chains)(key, key, grads, jnp.ones(_N, bool))
  sampler = _poisson_full(_N)
  eps = float(accounting.epsilon(dp_accounting.ComposedDpEvent(
      [accounting.step_event(s, sampler) for s in (s1, s2)]), DELTA, 'pld'))
  case = AuditCase(
      'shared_noise_key', _shared_mech(False), (grads, jnp.arange(_N) > 0),
      (grads, jnp.ones(_N, bool)), _shared_score, eps, DELTA, ADD_REMOVE,
      'a dpsgd and an adaptive_dpsgd step built from one key, both '
      'released (and the next bound); a canary gradient of norm 100 C along '
      'e_0, masked out in D; the claim composes the two step events; score '
      '= the joint Gaussian LLR: tight')
  broken = _twin(
      case, 'shared_noise_key_one_key', _shared_mech(True),
      'the two Gaussian draws coincide (one stream for every sigma), so '
      'sigma_grad r_1 - sigma r_2 is the sum without noise; score = that '
      'difference')
  return case._replace(broken=broken._replace(score=_shared_twin_score))


# --- adaptive_bandmf_count ----------------------------------------------------

# The count noise dominates (sigma_grad ~ 5 z): the count alone refutes a
# claim at sigma_grad.
_BANDMF_Z, _BANDMF_COUNT_STDDEV, _PARTITIONS = _SIGMA, 1.02, 2
_BANDMF_SIGMA_GRAD = transforms.adaptive_clip_noise_multiplier(
    _BANDMF_Z, _BANDMF_COUNT_STDDEV)
_BANDMF_COEFS = (1.0, 0.5)


def _bandmf_strategy():
  return correlated_noise.banded_toeplitz(list(_BANDMF_COEFS), 8)


def _adaptive_bandmf(key, g, mask):
  """Step 0 (partition 0 of the cycle): the release's e_0 part and the
  centred noisy count, and the chain's state."""
  m = float(_N)  # the sampler's expected batch size q (2 N) / b
  tx = optax.chain(
      transforms.adaptive_clip_per_example(
          _CLIP, target_quantile=_GAMMA, learning_rate=_ETA,
          count_stddev=_BANDMF_COUNT_STDDEV, expected_batch_size=m, key=key),
      transforms.add_dpsgd_noise(_BANDMF_SIGMA_GRAD, key=key,
                                 strategy=_bandmf_strategy()))
  params = jnp.zeros(_DIM)
  out, state = tx.update(g, tx.init(params), params, mask=mask)
  fraction = _GAMMA - jnp.log(state[0].l2_norm_clip / _CLIP) / _ETA
  return jnp.stack([out[0], (fraction - 0.5) * m]), state


def _bandmf_score(out):
  """The joint LLR towards D': +C on e_0 (noise sigma_grad C times the
  column norm over C[0, 0]), centred count -1/2 (noise count_stddev)."""
  c = np.asarray(_bandmf_strategy().matrix())
  noise = _BANDMF_SIGMA_GRAD * _CLIP * np.linalg.norm(c, axis=0).max() / c[0, 0]
  return (out[0] * _CLIP / noise**2
          - 0.5 * out[1] / _BANDMF_COUNT_STDDEV**2).astype(jnp.float32)


def adaptive_bandmf_count_case() -> AuditCase:
  """Adaptive clipping under a BandMF strategy; twin: the count release left
  out of the claim (module doc)."""
  rows = _N  # partition 0 of 2 N examples: 0, 2, ..., 2 N - 2
  grads = _canary_grads(rows, _DIM)
  sampler = sampling.CyclicPoissonSampler(_PARTITIONS * _N, 1.0, _PARTITIONS)
  _, state = jax.jit(_adaptive_bandmf)(jax.random.key(0), grads,
                                       jnp.ones(rows, bool))
  mechanism = lambda key, data: _adaptive_bandmf(key, *data)[0]
  case = AuditCase(
      'adaptive_bandmf_count', mechanism, (grads, jnp.arange(rows) > 0),
      (grads, jnp.ones(rows, bool)), _bandmf_score, _claim(state, sampler),
      DELTA, ADD_REMOVE,
      f'adaptive_clip_per_example + add_dpsgd_noise(strategy=banded '
      f'Toeplitz {list(_BANDMF_COEFS)}), step 0 of a CyclicPoissonSampler '
      f'(b = {_PARTITIONS}, q = 1); a canary gradient of norm 100 C_0 along '
      'e_0, masked out in D; the release and the next bound (the noisy '
      'count); the claim step_event (sigma_grad with the count noise); '
      'score = the joint Gaussian LLR: tight')
  # The old BandMF reader: the strategy's event at the gradient sigma.
  twin_eps = _epsilon(sampler.dp_event(_BANDMF_SIGMA_GRAD), DELTA, 'pld')
  return case._replace(broken=_twin(
      case, 'adaptive_bandmf_count_ignored', mechanism,
      f'the same run claimed at the gradient sigma {_BANDMF_SIGMA_GRAD:.2f} '
      'alone, the count release (stddev '
      f'{_BANDMF_COUNT_STDDEV}) left out of the event', epsilon=twin_eps))
