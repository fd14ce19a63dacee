"""Per-agent privacy of the decentralized algorithms: sound bounds and the paper's.

Each agent has its own ledger (its batch sizes differ from the others'); a
run's epsilon is the largest over agents. Two accounts are kept side by side:

* **Sound** (every headline): the Renyi DP of what each round actually
  releases, from its replace-one sensitivity, composed by dp_accounting.
  Q-DPSGD-1 and SDM release (post-processings of) the noisy mean gradient
  g + N(0, (sigma K)^2 I): sensitivity 2K/|S| (one of |S| clipped gradients
  replaced), the Gaussian mechanism with noise multiplier sigma |S| / 2. A
  round without examples releases nothing about the data. By default
  (``amplified=False``) that is the whole account: it holds for any batch
  the caller forms. With ``amplified=True`` (opt-in, for batches drawn by
  ``dpjax.sampling.DeadlineSampler`` from a key kept secret) each such round
  is also accounted as sampled without replacement: given its size |S|
  (drawn from the agent's speed,
  independent of the data, so it may be conditioned on), the batch is the
  first |S| entries of a uniform permutation of the agent's m examples
  drawn from the agent's private key and never revealed, i.e. a uniform
  size-|S| subset; the round is then exactly the subsampled mechanism of
  Wang, Balle and Kasiviswanathan (AISTATS 2019, Thm. 9; replace-one
  neighbours), which dp_accounting's ``SampledWithoutReplacementDpEvent``
  computes, and RDP composes over rounds whatever their sizes. This is the
  same event ``dpjax.sampling.FixedSizeSampler`` uses. Q-DPSGD-2 releases
  Q(x_i) + discrete Gaussian with x_i never noised: its sensitivity
  Delta_t = d_t + eta sqrt(p) grows with the drift d_t of
  ``qdpsgd2_sensitivities`` (rho_t = Delta_t^2 / (2 (sigma K)^2) zCDP); the
  drift carries every past batch, so no subsampling argument applies.
  The sigma of a run is read from its rounds' ``RoundMetrics`` (what ran,
  sweep overrides included): ``qdpsgd_step_event`` and the functions that
  take the metrics in place of batch sizes refuse a setting whose
  ``noise_multiplier`` differs from it.
* **Paper** (reported, never a headline): Theorems 1 and 5 of Ding et al.
  as stated, with their RDP-to-DP conversion eps = eps(rho) + log(1/delta) /
  (rho - 1) minimized over the order (``paper_epsilon``). Thm. 1 charges
  8 rho / (m^2 sigma^2) per round, below the unsampled round's 2 rho /
  (sigma^2 |S|^2) whenever |S| < m / 2 (every setting the paper runs), and
  below the sampled round's RDP at large orders; ``paper_is_upper_bound``
  checks a round at every order.
"""

import functools
import math
from typing import NamedTuple

import dp_accounting
import numpy as np

from dpjax import _solve
from dpjax import _validate
from dpjax import accounting
from dpjax._composition import repeated
from dpjax.distributed.decentralized import _rounds

PRIVATE = ('qdpsgd1', 'qdpsgd2', 'sdm')


class DecentralizedPrivacy(NamedTuple):
  """What the privacy of a run depends on besides its batch sizes.

  Attributes:
    algorithm: one of ``ALGORITHMS``.
    noise_multiplier: sigma (noise stddev sigma K).
    l2_norm_clip: K.
    num_examples: m, examples per agent (the paper's theorems use it).
    learning_rate: alpha (Q-DPSGD-2 and Thm. 5).
    mixing_rate: the averaging step eps (Q-DPSGD-2 and Thm. 5).
    eta: the quantizer's resolution (Q-DPSGD-2 and Thm. 5).
    dimension: p, the number of model coordinates.
    self_weights: the diagonal of W, one per agent (Q-DPSGD-2).
    amplified: Q-DPSGD-1 and SDM: True accounts each round as sampled
      without replacement, valid only when every batch is a uniform subset
      of its size drawn from secret randomness (``DeadlineSampler``; see
      the module); False (default): the unsampled Gaussian, valid for any
      batch.
  """
  algorithm: str
  noise_multiplier: float
  l2_norm_clip: float
  num_examples: int
  learning_rate: float = 0.0
  mixing_rate: float = 0.0
  eta: float = 0.0
  dimension: int = 0
  self_weights: tuple[float, ...] = ()
  amplified: bool = False


def _check(setting: DecentralizedPrivacy) -> None:
  if setting.algorithm not in _rounds.ALGORITHMS:
    raise ValueError(f'Expected algorithm={setting.algorithm!r} in '
                     f'{_rounds.ALGORITHMS}.')
  _validate.positive(l2_norm_clip=setting.l2_norm_clip)
  _validate.non_negative(noise_multiplier=setting.noise_multiplier)
  _validate.positive_int(num_examples=setting.num_examples)
  if setting.algorithm == 'qdpsgd2':
    _validate.positive(learning_rate=setting.learning_rate,
                       mixing_rate=setting.mixing_rate, eta=setting.eta)
    _validate.positive_int(dimension=setting.dimension)


def _check_ran(setting: DecentralizedPrivacy, ran, rtol: float = 1e-6,
               sigma: float | None = None) -> None:
  """Refuses a setting whose sigma is not the one every round ran."""
  claimed = setting.noise_multiplier if sigma is None else sigma
  ran = np.asarray(ran, np.float64)
  if not np.all(np.isclose(ran, claimed, rtol=rtol, atol=0)):
    values = np.unique(ran)
    raise ValueError(
        f'Claimed noise_multiplier={claimed}, but the rounds ran '
        f'noise_multiplier={values.tolist() if values.size < 4 else values}:'
        ' account what ran (one setting per sigma).')


def _sizes(batch_sizes, setting: DecentralizedPrivacy,
           sigma: float | None = None) -> np.ndarray:
  """[rounds, agents] sizes, from an array or the rounds' stacked metrics."""
  if isinstance(batch_sizes, _rounds.RoundMetrics):
    _check_ran(setting, batch_sizes.noise_multiplier, sigma=sigma)
    batch_sizes = batch_sizes.batch_size
  sizes = np.asarray(batch_sizes)
  if sizes.ndim == 1:
    sizes = sizes[:, None]
  if sizes.ndim != 2 or (sizes < 0).any():
    raise ValueError(f'Expected batch sizes >= 0 of shape [rounds, agents], '
                     f'got shape {np.shape(batch_sizes)}.')
  if (sizes > setting.num_examples).any():
    raise ValueError(f'Expected batch_sizes <= num_examples='
                     f'{setting.num_examples} (an agent\'s examples), got '
                     f'{int(sizes.max())}.')
  return sizes.astype(np.int64)


def qdpsgd2_sensitivities(setting: DecentralizedPrivacy,
                          batch_sizes) -> np.ndarray:
  """Delta_{t,i}: L2 sensitivity of agent i's broadcast in round t.

  Between runs on neighbouring datasets, given the same broadcasts received,
  agent i's models differ by d_t with d_0 = 0 and d_{t+1} <= |1 - eps + eps
  w_ii| d_t + 2 alpha eps K when round t used examples (a mean of clipped
  gradients moves by at most 2K once the models differ), else |...| d_t.
  Randomized rounding with a shared uniform moves each coordinate by at
  most |x_j - x'_j| + eta, and not at all while d_t = 0: Delta_t = d_t +
  eta sqrt(p) if d_t > 0, else 0. Clamping is 1-Lipschitz.

  Args:
    setting: the run's ``DecentralizedPrivacy`` (algorithm 'qdpsgd2').
    batch_sizes: [rounds, agents] |S_{t,i}|.

  Returns:
    float64 [rounds, agents].

  Example:
    >>> s = DecentralizedPrivacy('qdpsgd2', 1.0, 0.5, 100, 0.1, 0.5, 0.01,
    ...                          100, (0.5,))
    >>> qdpsgd2_sensitivities(s, [[3], [3]]).round(4).tolist()
    [[0.0], [0.15]]
  """
  _check(setting)
  sizes = _sizes(batch_sizes, setting)
  rounds, agents = sizes.shape
  weights = np.asarray(setting.self_weights, np.float64)
  if weights.shape != (agents,):
    raise ValueError(f'Expected {agents} self weights, got {weights.shape}.')
  contraction = np.abs(1 - setting.mixing_rate + setting.mixing_rate * weights)
  step = 2 * setting.learning_rate * setting.mixing_rate * setting.l2_norm_clip
  rounding = setting.eta * math.sqrt(setting.dimension)
  drift = np.zeros(agents)
  out = np.zeros((rounds, agents))
  for t in range(rounds):
    out[t] = np.where(drift > 0, drift + rounding, 0.0)
    drift = contraction * drift + step * (sizes[t] > 0)
  return out


# RDP orders of the fast path: dp_accounting's sampled-without-replacement
# curve costs O(order) per order, and epsilon >= 0.5 at delta >= 1e-8 is
# attained below order 64.
ORDERS = (1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0,
          20.0, 24.0, 32.0, 48.0, 64.0)


def _round_event(setting: DecentralizedPrivacy, size: int,
                 sensitivity: float, sigma: float) -> dp_accounting.DpEvent:
  """One agent's round; ``sensitivity`` is Q-DPSGD-2's Delta_t."""
  if setting.algorithm == 'dsgd':
    return dp_accounting.NonPrivateDpEvent()
  if setting.algorithm == 'qdpsgd2':
    if sensitivity == 0:
      return dp_accounting.NoOpDpEvent()
    if sigma == 0:
      return dp_accounting.NonPrivateDpEvent()
    return dp_accounting.ZCDpEvent(
        (sensitivity / setting.l2_norm_clip)**2 / (2 * sigma**2))
  if size == 0:
    return dp_accounting.NoOpDpEvent()
  if sigma == 0:
    return dp_accounting.NonPrivateDpEvent()
  gaussian = dp_accounting.GaussianDpEvent(sigma * size / 2)
  if setting.amplified and size < setting.num_examples:
    return dp_accounting.SampledWithoutReplacementDpEvent(
        setting.num_examples, size, gaussian)
  return gaussian


def qdpsgd_event(setting: DecentralizedPrivacy, batch_size: int,
                 l2_sensitivity: float | None = None, *, steps: int = 1
                 ) -> dp_accounting.DpEvent:
  """The sound event of one agent's round (see the module), ``steps`` times.

  Args:
    setting: the run's ``DecentralizedPrivacy``.
    batch_size: |S| of the round.
    l2_sensitivity: Q-DPSGD-2 only: Delta_t from ``qdpsgd2_sensitivities``.
    steps: rounds of this size (default 1).

  Returns:
    Q-DPSGD-1 and SDM: ``GaussianDpEvent(sigma |S| / 2)``, inside
    ``SampledWithoutReplacementDpEvent(m, |S|, .)`` when ``amplified``;
    Q-DPSGD-2: ``ZCDpEvent(Delta^2 / (2 (sigma K)^2))``; ``NoOpDpEvent`` for
    a round that used nothing; ``NonPrivateDpEvent`` for DSGD or sigma = 0;
    self-composed ``steps`` times when steps > 1.

  Example:
    >>> s = DecentralizedPrivacy('qdpsgd1', 2.0, 0.5, 1000, amplified=False)
    >>> qdpsgd_event(s, 20)
    GaussianDpEvent(noise_multiplier=20.0)
  """
  _check(setting)
  _validate.non_negative_int(batch_size=batch_size)
  if batch_size > setting.num_examples:
    raise ValueError(f'Expected batch_size={batch_size} <= num_examples='
                     f'{setting.num_examples}: a round cannot use more '
                     'examples than the agent holds.')
  if setting.algorithm == 'qdpsgd2' and l2_sensitivity is None:
    raise ValueError('Expected the round sensitivity for Q-DPSGD-2 '
                     '(qdpsgd2_sensitivities).')
  return repeated(_round_event(setting, batch_size,
                               float(l2_sensitivity or 0.0),
                               float(setting.noise_multiplier)), steps)


def qdpsgd_step_event(metrics: _rounds.RoundMetrics,
                      setting: DecentralizedPrivacy, agent: int,
                      l2_sensitivity: float | None = None, *,
                      rtol: float = 1e-6) -> dp_accounting.DpEvent:
  """Agent ``agent``'s sound event of the round that returned ``metrics``.

  Reads |S| and sigma from the round's ``RoundMetrics`` (what ran, a sweep
  override of sigma included) and refuses a setting that claims another
  sigma; then as ``qdpsgd_event``.

  Args:
    metrics: one round's metrics (``batch_size`` [n], scalar sigma).
    setting: the run's ``DecentralizedPrivacy`` (its sigma is the claim).
    agent: the agent's index i.
    l2_sensitivity: Q-DPSGD-2 only: Delta_t from ``qdpsgd2_sensitivities``.
    rtol: relative tolerance of the sigma check (the metrics hold float32).

  Example:
    >>> m = dpjax.distributed.RoundMetrics(np.array([20, 0]), np.zeros(2),
    ...                                    0.0, np.float32(2.0))
    >>> s = DecentralizedPrivacy('qdpsgd1', 2.0, 0.5, 1000)
    >>> qdpsgd_step_event(m, s, 0)
    GaussianDpEvent(noise_multiplier=20.0)
  """
  if not isinstance(setting, DecentralizedPrivacy) or agent is None:
    raise ValueError('Expected qdpsgd_step_event(metrics, setting, agent): '
                     'setting a DecentralizedPrivacy, agent an index.')
  ran = np.asarray(metrics.noise_multiplier)
  sizes = np.asarray(metrics.batch_size)
  if ran.shape or sizes.ndim != 1:
    raise ValueError(f'Expected one round\'s metrics, got batch_size of shape '
                     f'{sizes.shape}: index the round first.')
  _check_ran(setting, ran, rtol)
  _validate.non_negative_int(agent=agent)
  if agent >= sizes.shape[0]:
    raise ValueError(f'Expected agent={agent} < {sizes.shape[0]} agents.')
  return qdpsgd_event(setting, int(sizes[agent]), l2_sensitivity)


def _events_of(setting, sizes):
  """Per round and agent: (size, Delta_t) pairs that define the events."""
  if setting.algorithm == 'qdpsgd2':
    return np.zeros_like(sizes), qdpsgd2_sensitivities(setting, sizes)
  return sizes, np.zeros(sizes.shape)


def agent_ledgers(setting: DecentralizedPrivacy, batch_sizes,
                  bits=None) -> list[accounting.PrivacyLedger]:
  """One ledger per agent: each round's sound event and bits, in order.

  Args:
    setting: the run's ``DecentralizedPrivacy``.
    batch_sizes: [rounds, agents] from the rounds' metrics, or the rounds'
      ``RoundMetrics`` stacked over rounds (then the setting's sigma is
      checked against the one that ran, and bits default to theirs).
    bits: [rounds, agents] bits sent (default 0).

  Returns:
    ``PrivacyLedger`` per agent, under replace-one neighbours; the run's
    epsilon is the largest (see ``agent_epsilons`` for the same numbers
    computed faster). The records are ``planned``: an accounting of the
    batch sizes, each batch assumed a fresh uniform subset (as the deadline
    sampler draws it from a fresh key per round).
  """
  _check(setting)
  sizes = _sizes(batch_sizes, setting)
  if bits is None and isinstance(batch_sizes, _rounds.RoundMetrics):
    bits = batch_sizes.bits
  bits = np.zeros(sizes.shape) if bits is None else np.asarray(bits, float)
  if bits.shape != sizes.shape:
    raise ValueError(f'Expected bits of shape {sizes.shape}, got {bits.shape}.')
  sizes_, sens = _events_of(setting, sizes)
  sigma = float(setting.noise_multiplier)
  ledgers = []
  replace_one = dp_accounting.NeighboringRelation.REPLACE_ONE
  for i in range(sizes.shape[1]):
    ledger = accounting.PrivacyLedger(neighboring_relation=replace_one)
    for t in range(sizes.shape[0]):
      ledger.record(_round_event(setting, int(sizes_[t, i]),
                                 float(sens[t, i]), sigma),
                    bits=float(bits[t, i]), neighboring_relation=replace_one,
                    planned=True)
    ledgers.append(ledger)
  return ledgers


def _rdp_totals(setting, sizes, sigma) -> np.ndarray:
  """Per agent, the RDP curve over ``ORDERS`` of all its rounds [agents, K]."""
  orders = np.asarray(ORDERS)
  if setting.algorithm == 'dsgd' or sigma == 0:
    used = _events_of(setting, sizes)
    private = (used[1] > 0) if setting.algorithm == 'qdpsgd2' else used[0] > 0
    total = np.zeros((sizes.shape[1], len(ORDERS)))
    total[private.any(axis=0) | (setting.algorithm == 'dsgd')] = np.inf
    return total
  if setting.algorithm == 'qdpsgd2':
    rho = ((qdpsgd2_sensitivities(setting, sizes) / setting.l2_norm_clip)**2
           / (2 * sigma**2)).sum(axis=0)
    return rho[:, None] * orders[None]
  distinct = np.unique(sizes[sizes > 0])
  curves = {int(b): _gaussian_round_curve(
      setting.num_examples, int(b), sigma, setting.amplified)
            for b in distinct}
  total = np.zeros((sizes.shape[1], len(ORDERS)))
  for b, curve in curves.items():
    total += (sizes == b).sum(axis=0)[:, None] * curve[None]
  return total


@functools.lru_cache(maxsize=4096)
def _gaussian_round_curve(num_examples: int, size: int, sigma: float,
                          amplified: bool) -> np.ndarray:
  """RDP curve of a Q-DPSGD-1 / SDM round (cached: curves are reused)."""
  setting = DecentralizedPrivacy('qdpsgd1', sigma, 1.0, num_examples,
                                 amplified=amplified)
  return accounting.rdp_curve(_round_event(setting, size, 0.0, sigma), ORDERS)


def agent_epsilons(setting: DecentralizedPrivacy, batch_sizes, delta: float,
                   noise_multiplier: float | None = None) -> np.ndarray:
  """Sound epsilon of every agent after the given rounds.

  Each distinct round event's RDP curve (over ``ORDERS``) is computed once
  and summed with its count: the same composition as the agent's ledger,
  converted at the orders ``ORDERS`` instead of dp_accounting's defaults
  (both are valid bounds; they agree within a few percent).
  ``batch_sizes`` may be the rounds' stacked ``RoundMetrics``: then sigma
  must be the one that ran (``agent_ledgers``). ``noise_multiplier``
  overrides the setting's.
  """
  _check(setting)
  _validate.open_unit(delta=delta)
  sizes = _sizes(batch_sizes, setting, noise_multiplier)
  sigma = float(setting.noise_multiplier if noise_multiplier is None
                else noise_multiplier)
  totals = _rdp_totals(setting, sizes, sigma)
  return np.array([
      np.inf if np.isinf(t).any() else (
          0.0 if not t.any() else accounting.epsilon_from_rdp(ORDERS, t, delta))
      for t in totals])


def run_epsilon(setting: DecentralizedPrivacy, batch_sizes,
                delta: float) -> float:
  """The run's sound epsilon: the largest over agents (sizes or metrics)."""
  return float(np.max(agent_epsilons(setting, batch_sizes, delta)))


def calibrate_decentralized(setting: DecentralizedPrivacy, batch_sizes,
                            target_epsilon: float, delta: float,
                            rtol: float = 1e-2) -> float:
  """Smallest sigma (within ``rtol``) whose run epsilon meets the target.

  Batch sizes are public randomness (speeds are independent of the data),
  so drawing them first and calibrating to them leaks nothing. Pass the
  sizes of several runs stacked along the agent axis to get one sigma that
  meets the target in each.
  """
  _check(setting)
  _validate.positive(target_epsilon=target_epsilon, rtol=rtol)
  if setting.algorithm == 'dsgd':
    raise ValueError('DSGD adds no noise: nothing to calibrate.')
  sizes = _sizes(batch_sizes, setting)

  def eps(sigma):
    return float(np.max(agent_epsilons(setting, sizes, delta, sigma)))

  hi = 1.0
  if setting.amplified and setting.algorithm != 'qdpsgd2':
    # Amplified epsilon <= unsampled epsilon: the unsampled sigma is above.
    hi = calibrate_decentralized(setting._replace(amplified=False), sizes,
                                 target_epsilon, delta, rtol)

  def unreachable(_):
    raise ValueError(f'target_epsilon={target_epsilon} is unreachable.')

  return _solve.smallest_float(
      lambda sigma: eps(sigma) <= target_epsilon, start=hi, rtol=rtol,
      ceiling=1e8, floor=1e-8, unreachable=unreachable)


def paper_rdp_coefficients(setting: DecentralizedPrivacy,
                           batch_sizes) -> np.ndarray:
  """Per round and agent, the paper's eps'(rho) / rho (Thm. 1 or Thm. 5).

  Thm. 1 (Q-DPSGD-1): 8 / (m^2 sigma^2) if |S| > 0 else 0. Thm. 5
  (Q-DPSGD-2): 8 / (sigma^2 m^2) (alpha eps + eta sqrt(p) |S| / K)^2 in
  every round, as stated.
  """
  _check(setting)
  sizes = _sizes(batch_sizes, setting).astype(np.float64)
  s, m = setting.noise_multiplier, setting.num_examples
  if setting.algorithm == 'qdpsgd1':
    return np.where(sizes > 0, 8 / (m**2 * s**2), 0.0)
  if setting.algorithm == 'qdpsgd2':
    inner = (setting.learning_rate * setting.mixing_rate + setting.eta
             * math.sqrt(setting.dimension) * sizes / setting.l2_norm_clip)
    return 8 / (s**2 * m**2) * inner**2
  raise ValueError(f'The paper states no theorem for {setting.algorithm!r}.')


def paper_epsilon(setting: DecentralizedPrivacy, batch_sizes,
                  delta: float) -> float:
  """Thm. 1 / Thm. 5 epsilon, max over agents, with the paper's conversion.

  With eps(rho) = rho r (r the summed coefficients), eps(rho) + log(1/delta)
  / (rho - 1) is smallest at rho = 1 + sqrt(log(1/delta) / r), giving r + 2
  sqrt(r log(1/delta)).
  """
  _validate.open_unit(delta=delta)
  r = float(paper_rdp_coefficients(setting, batch_sizes).sum(axis=0).max())
  return r + 2 * math.sqrt(r * math.log(1 / delta))


def paper_is_upper_bound(setting: DecentralizedPrivacy, batch_size: int,
                         l2_sensitivity: float | None = None) -> bool:
  """Whether the paper's RDP of one round bounds the sound one at every order.

  Compares eps'(rho) of Thm. 1 / Thm. 5 with the round's sound RDP curve
  (``qdpsgd_event``, amplified or not as ``setting`` says; Q-DPSGD-2 at
  ``l2_sensitivity``) at every order in ``ORDERS``.
  """
  size = 0 if setting.algorithm == 'qdpsgd2' else batch_size
  paper = float(paper_rdp_coefficients(setting, [[batch_size]])[0, 0])
  event = qdpsgd_event(setting, size, l2_sensitivity)
  sound = accounting.rdp_curve(event, ORDERS)
  return bool(np.all(paper * np.asarray(ORDERS) >= sound * (1 - 1e-12)))
