"""Audit cases of the distributed protocols: one round, few clients.

cpSGD (Binomial), the distributed discrete Gaussian and Skellam secure sums:
the server's view is the decoded sum of one round, the canary client's
vector sits at the clip bound along coordinate 0, and the broken twin is the
canary's own message seen without secure aggregation (its noise share
alone) against the round's claim. Q-DPSGD-1/2: one agent's released
message, with two agents on the swap matrix W = [[0, 1], [1, 0]] and mixing
rate 1, so the neighbour's model after the round IS the message.

Example:
  >>> list(distributed_builders())[:2]
  ['cpsgd_binomial', 'ddg']
"""

import dataclasses
import functools
import math
from typing import Callable

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np

from dpjax import accounting
from dpjax import compression
from dpjax import distributed
from dpjax.audit import _cases
from dpjax.audit._cases import ADD_REMOVE
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import DELTA
from dpjax.audit._cases import REPLACE_ONE

# Clients of the DDG and Skellam rounds. Each adds stddev / sqrt(n) of the
# noise, so the broken twin (one share without secure aggregation) sits
# well above the claim: at 16 its 1e5-trial bound is about 2x the claim;
# at 4 it was within 1e-3 of it and could not be refuted.
CLIENTS = 16


def _clients(canary: float, num_clients: int = CLIENTS) -> jax.Array:
  """Client vectors [num_clients, 1]: client 0 holds canary, others 0."""
  return jnp.zeros((num_clients, 1), jnp.float32).at[0, 0].set(canary)


def cpsgd_case() -> AuditCase:
  # Odd levels put 0 on the grid, so only the canary's quantization matters
  # and it is exact at +-D: the sum moves by k - 1 levels.
  # Thm 1 needs n m p (1 - p) >= 23 ln(10 d / delta): many clients with
  # few trials each, so that one client's own noise is small.
  n = 64
  cfg = distributed.CpsgdConfig(l2_norm_clip=1.0, levels=3, trials=20)
  eps = distributed.cpsgd_event(cfg, 1, n, DELTA).epsilon

  def mechanism(key, xs):
    return distributed.distributed_mean(cfg, key, xs)

  def alone(key, xs):  # the canary's message alone: Bin(m, p) noise
    return distributed.distributed_mean(cfg, key, xs[:1])

  case = AuditCase(
      'cpsgd_binomial', mechanism, _clients(cfg.l2_norm_clip, n),
      _clients(-cfg.l2_norm_clip, n), lambda m: m[0], float(eps), DELTA,
      REPLACE_ONE,
      f'{n} clients, d = 1, k = 3, m = 20: the canary client at +D '
      'vs -D; score = the decoded mean (the Binomial LLR is monotone in '
      'it); Thm 1 is loose, so the bound stays well below the claim')
  return case._replace(broken=case._replace(
      name='cpsgd_one_message', mechanism=alone, broken=None,
      attack='the canary client\'s own message without secure aggregation '
      '(Bin(m, p) noise only) against the round\'s claim'))


def _secure_sum_case(kind: str) -> AuditCase:
  cfg = distributed.DistributedDpConfig(
      mechanism=kind, l2_norm_clip=1.0, bits=16, gamma=0.05, stddev=2.0,
      num_clients=CLIENTS)
  eps = accounting.epsilon(distributed.distributed_dp_event(cfg, 1),
                           DELTA)
  share = dataclasses.replace(cfg, num_clients=1,
                              stddev=cfg.stddev / math.sqrt(CLIENTS))

  def mechanism(key, xs):
    return distributed.secure_sum_round(cfg, key, xs).estimate

  def alone(key, xs):
    return distributed.secure_sum_round(share, key, xs[:1]).estimate

  case = AuditCase(
      kind, mechanism, _clients(0.0), _clients(cfg.l2_norm_clip),
      lambda m: m[0], float(eps), DELTA, ADD_REMOVE,
      f'{CLIENTS} clients, d = 1: the canary client at c e_0 vs 0 (the '
      'papers\' add/remove); score = the decoded mean; near tight (the '
      'claim adds the conditional rounding bound)')
  return case._replace(broken=case._replace(
      name=f'{kind}_one_share', mechanism=alone, broken=None,
      attack='the canary client\'s share alone (noise stddev / sqrt(n)) '
      'without secure aggregation, against the round\'s claim'))


# numpy, not jnp: importing dpjax must not start a JAX backend (a process
# calls jax.distributed.initialize first).
_SWAP = np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)
_ALPHA, _CLIP = 0.5, 1.0


def _loss(params, example):
  return -jnp.dot(params, example)  # gradient: -example


def _agent_batch(canary: float) -> distributed.AgentBatch:
  """Agent 0 holds one example, 100 K along +-e_0; agent 1 none."""
  examples = jnp.zeros((2, 1, 1), jnp.float32).at[0, 0, 0].set(canary)
  return distributed.AgentBatch(examples, jnp.array([[True], [False]]))


def qdpsgd1_case(clip_method: str = 'vmap') -> AuditCase:
  """Q-DPSGD-1's round under ``clip_method``; the ghost case's twin clips
  at 4 K while its claim states K (a clip the norms do not enforce), the
  vmap case's halves the noise."""
  sigma = 4.0  # noise multiplier sigma |S| / 2 = 2 on the mean gradient
  quantizer = compression.low_precision_quantizer(0.125, 8)

  def mech(noise_multiplier, clip=_CLIP):
    alg = distributed.qdpsgd1(
        _loss, _SWAP, l2_norm_clip=clip, noise_multiplier=noise_multiplier,
        learning_rate=_ALPHA, mixing_rate=1.0, quantizer=quantizer,
        clip_method=clip_method)

    def mechanism(key, batch):
      state, _ = alg.round(alg.init(jnp.zeros(1)), key, batch)
      return state.params[0, 0]
    return mechanism

  setting = distributed.DecentralizedPrivacy('qdpsgd1', sigma, _CLIP, 1,
                                             amplified=False)
  eps = _cases._epsilon(distributed.qdpsgd_event(setting, 1), DELTA,
                       'pld')
  name = 'qdpsgd1' if clip_method == 'vmap' else f'qdpsgd1_{clip_method}'
  case = AuditCase(
      name, mech(sigma), _agent_batch(100.0), _agent_batch(-100.0),
      lambda x: x, float(eps), DELTA, REPLACE_ONE,
      f'one round ({clip_method} clipping), agent 0\'s one example at '
      '+-100 K e_0 (clipped to +-K); score = agent 0\'s model after the '
      'round (its noisy gradient step): tight')
  if clip_method == 'vmap':
    return case._replace(broken=case._replace(
        name='qdpsgd1_half_noise', mechanism=mech(sigma / 2), broken=None,
        attack='sigma halved'))
  # The noise scales with the clip, so the twin keeps the noise of K and
  # only lets the gradient through at 4 K.
  return case._replace(broken=case._replace(
      name=f'{name}_clip_4x', mechanism=mech(sigma / 4, 4 * _CLIP),
      broken=None, attack='gradient clipped at 4 K, noise and claim of K'))


def qdpsgd2_case() -> AuditCase:
  sigma, eta = 2.0, 0.125
  quantizer = compression.low_precision_quantizer(eta, 8)

  def mech(noise_multiplier):
    alg = distributed.qdpsgd2(
        _loss, _SWAP, l2_norm_clip=_CLIP, noise_multiplier=noise_multiplier,
        learning_rate=_ALPHA, mixing_rate=1.0, quantizer=quantizer)

    def mechanism(key, batch):
      state = alg.init(jnp.zeros(1))
      for _ in range(2):
        state, _ = alg.round(state, key, batch)
      # With W = swap and rate 1, agent 1 (no data) holds agent 0's
      # round-2 broadcast Q(x_0) + discrete Gaussian.
      return state.params[1, 0]
    return mechanism

  setting = distributed.DecentralizedPrivacy(
      'qdpsgd2', sigma, _CLIP, 1, _ALPHA, 1.0, eta, 1, (0.0, 0.0))
  sizes = [[1, 0], [1, 0]]
  sens = distributed.qdpsgd2_sensitivities(setting, sizes)
  event = dp_accounting.ComposedDpEvent([
      distributed.qdpsgd_event(setting, 1, float(sens[t, 0]))
      for t in range(2)])
  eps = accounting.epsilon(event, DELTA)
  case = AuditCase(
      'qdpsgd2', mech(sigma), _agent_batch(100.0), _agent_batch(-100.0),
      lambda x: x, float(eps), DELTA, REPLACE_ONE,
      'two rounds; agent 0\'s example at +-100 K e_0 moves its model by '
      '+-alpha K; score = its round-2 broadcast (held by agent 1); the '
      'claim adds a rounding step eta sqrt(p) and converts zCDP, so loose')
  return case._replace(broken=case._replace(
      name='qdpsgd2_quarter_noise', mechanism=mech(sigma / 4), broken=None,
      attack='sigma quartered'))


def distributed_builders() -> dict[str, Callable[[], AuditCase]]:
  """The protocol cases of ``audit_cases``, by name, not yet built.

  Example:
    >>> list(distributed_builders())
    ['cpsgd_binomial', 'ddg', 'skellam', 'qdpsgd1', 'qdpsgd1_ghost',
     'qdpsgd2']
  """
  return {'cpsgd_binomial': cpsgd_case,
          'ddg': functools.partial(_secure_sum_case, 'ddg'),
          'skellam': functools.partial(_secure_sum_case, 'skellam'),
          'qdpsgd1': qdpsgd1_case,
          'qdpsgd1_ghost': functools.partial(qdpsgd1_case, 'ghost'),
          'qdpsgd2': qdpsgd2_case}
