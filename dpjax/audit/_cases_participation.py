"""Audit cases of BandMF's participation pattern, which two loops broke.

Correlated noise (``add_dpsgd_noise(sigma, key=..., strategy=C)`` on a
``ClippedSum``) releases y = G + C^{-1} Z, so C y = C G + Z: the run is one
Gaussian mechanism whose sensitivity is ||C Delta|| for the canary's
participation pattern Delta (clip 1, one entry per step). Its accounting
assumes the pattern of a ``CyclicPoissonSampler``: example i in partition
i mod b, step t on partition t mod b, so two participations are at least b
steps apart (Choquette-Choo et al. 2023, "(Amplified) banded matrix
factorization", Alg. 2; amplified at rate q < 1 when bands <= b, Thm 4).
At rate 1 (every step takes its whole partition) ``step_event`` reads the T
steps as the Gaussian of sensitivity sqrt(cyclic_squared_sensitivities(C,
b)[T]), which ``PrivacyLedger.record_step`` composes; the honest cases state
that epsilon. Both twins put one example in consecutive steps while the
claim assumes b-separated ones; the exact epsilon is the Gaussian
mechanism's at the true ||C Delta|| (both are Gaussian, computed with
dp_accounting's PLD at delta 1e-5).

* ``reshuffled_epochs_bandmf``: 3 steps, b = 2 (epochs of 2 steps over 8
  examples). Twin: epochs reshuffled (a fresh ``ShuffleSampler``
  permutation per epoch), claimed as the old code did with the declared
  separation "steps per epoch" (``sensitivity(C, min_separation=2)``,
  what ``bandmf_event(sigma, C, steps=3, min_separation=2)`` gave): the
  canary sits in the last batch of epoch 0 and the first of epoch 1 (steps
  1 and 2, the worst order a shuffle draws, fixed by the order key; the
  claim, unamplified, must hold for every order). For a Toeplitz strategy
  the shift is at most sqrt(1 + cos(C e_t, C e_t+1)) < sqrt 2 (1.15 for
  ``optimize_banded_toeplitz(3, 2)``), which 1e5 trials cannot resolve (a
  Gaussian claim is refuted there only once the shift nears 1.7); the case
  takes a 2-band strategy near that claim's worst case (a shift of 2 x),
  C = [[1/8, 0, 0], [0, 1/8, 0], [0, 1, 1]] (the last row adds the last two
  steps): a claimed shift sqrt(1 + 1/64) = 1.008, a true one sqrt(4 +
  1/64) = 2.004 (1.988 x). At sigma 2: stated 1.99 (the ledger's), exact
  4.35. No strategy does better than 2 x: a once-per-epoch pattern splits
  into its even and its odd epochs, each separated by the steps per epoch,
  so ||C Delta|| is at most twice the claimed sensitivity. A 2 x shift
  needs about 10^6 trials to refute reliably (the full preset's; the slow
  test runs this twin at 10^6).
* ``restarted_cyclic_step``: a ``CyclicPoissonSampler`` over b = 3
  partitions at rate 1, 3 steps of ``optimize_banded_toeplitz(3, 3)``.
  Twin: the loop restarts the step count every epoch (epoch length 1, the
  shortest; any length that is not a multiple of b breaks the cycle, less
  so), drawing ``sampler.sample(fold_in(key, epoch), t mod epoch_len)``:
  every step takes partition 0, so the canary takes part in all 3 steps
  while the accounting (noise step t, partition t mod 3) has it once. A
  ledger that only checks (key, step) replays accepted it (each batch key
  is new); ``record_step`` now refuses a batch step other than the run's.
  Shift 2.13 x the claimed column norm; at sigma 2: stated 1.99, exact
  4.71.

Scores are the Gaussian log-likelihood ratio <C Delta, C y> (tight).

Example:
  >>> restarted_cyclic_step_case().broken.name
  'restarted_cyclic_step_restarted_count'
"""

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import accounting
from dpjax import correlated_noise
from dpjax import sampling
from dpjax import transforms
from dpjax.audit._cases import _epsilon
from dpjax.audit._cases import _twin
from dpjax.audit._cases import ADD_REMOVE
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import DELTA

_CLIP, _SIGMA, _DIM, _STEPS = 1.0, 2.0, 5, 3
_BATCH_SEED = 1  # the data order; noise keys are the trials'


def _grads(n: int, canary: int) -> jax.Array:
  grads = 0.3 * jax.random.normal(jax.random.key(0), (n, _DIM), jnp.float32)
  return grads.at[canary].set(jnp.zeros(_DIM).at[0].set(100.0))


def _run(strategy, grads, batches, key, present):
  """The releases' e_0 parts over the steps (one batch each) and the chain's
  state after each step."""
  tx = optax.chain(transforms.clip_per_example(_CLIP),
                   transforms.add_dpsgd_noise(_SIGMA, key=key,
                                              strategy=strategy))
  params = jnp.zeros(_DIM)
  state, outs, states = tx.init(params), [], []
  for indices, mask in batches:
    out, state = tx.update(grads[indices], state, params,
                           mask=mask & present[indices])
    outs.append(out[0])
    states.append(state)
  return jnp.stack(outs), states


def _pattern(batches, canary: int) -> np.ndarray:
  """Delta: 1 at the steps whose batch holds the canary."""
  return np.array([float(np.any((np.asarray(i) == canary) & np.asarray(m)))
                   for i, m in batches])


def _llr(strategy, pattern):
  c = np.asarray(strategy.matrix(), np.float32)[:_STEPS, :_STEPS]
  direction = jnp.asarray(c.T @ (c @ pattern.astype(np.float32)))
  return lambda y: jnp.dot(direction, y).astype(jnp.float32)


def _gaussian_epsilon(strategy, pattern) -> float:
  """The exact epsilon: the Gaussian at the true sensitivity ||C Delta||."""
  c = strategy.matrix()[:_STEPS, :_STEPS]
  column_norm = float(np.max(strategy.column_norms()))
  return _epsilon(dp_accounting.GaussianDpEvent(
      _SIGMA * column_norm / float(np.linalg.norm(c @ pattern))), DELTA, 'pld')


def _ledger_epsilon(strategy, grads, sampler, batches, present) -> float:
  """What ``PrivacyLedger.record_step`` states for the honest run."""
  pairs = [(b.indices, b.mask) for b in batches]
  _, states = jax.jit(lambda key, data: _run(strategy, grads, pairs, key,
                                             data))(jax.random.key(0), present)
  ledger = accounting.PrivacyLedger()
  for state, batch in zip(states, batches):
    ledger.record_step(state, sampler, batch)
  return float(ledger.epsilon(DELTA, 'pld'))


# --- reshuffled_epochs_bandmf -------------------------------------------------

_N, _PER_EPOCH = 8, 2


def _reshuffle_strategy():
  return correlated_noise.lower_triangular(
      np.array([[0.125, 0, 0], [0, 0.125, 0], [0, 1.0, 1.0]]))


def _reshuffled_batches():
  """Steps 0-2: epoch 0's two batches and epoch 1's first, each epoch a
  fresh permutation (``ShuffleSampler``)."""
  shuffle = sampling.ShuffleSampler(_N, _N // _PER_EPOCH)
  epoch = jax.jit(shuffle.epoch)
  key = jax.random.key(_BATCH_SEED)
  epochs = [epoch(jax.random.fold_in(key, e)) for e in (0, 1)]
  return [(e.indices[s], e.mask[s]) for e in epochs for s in range(_PER_EPOCH)
          ][:_STEPS]


def reshuffled_epochs_bandmf_case() -> AuditCase:
  """BandMF under its cyclic schedule; twin: epochs reshuffled, claimed
  with the separation "steps per epoch" (module doc)."""
  strategy = _reshuffle_strategy()
  shuffled = _reshuffled_batches()
  # The worst order: an example last in epoch 0 and first in epoch 1.
  both = np.intersect1d(np.asarray(shuffled[1][0]), np.asarray(shuffled[2][0]))
  canary = int(both[0])
  grads = _grads(_N, canary)
  sampler = sampling.CyclicPoissonSampler(_N, 1.0, _PER_EPOCH)
  sample = jax.jit(sampler.sample)
  key = jax.random.key(_BATCH_SEED)
  cyclic = [sample(key, jnp.int32(t)) for t in range(_STEPS)]
  present = jnp.ones(_N, bool)
  absent = present.at[canary].set(False)

  def mechanism(batches):
    return lambda key, data: _run(strategy, grads, batches, key, data)[0]

  honest_batches = [(b.indices, b.mask) for b in cyclic]
  honest_pattern = _pattern(honest_batches, canary)
  eps = _ledger_epsilon(strategy, grads, sampler, cyclic, present)
  case = AuditCase(
      'reshuffled_epochs_bandmf', mechanism(honest_batches), absent, present,
      _llr(strategy, honest_pattern), eps, DELTA, ADD_REMOVE,
      f'clip_per_example + add_dpsgd_noise(strategy=2-band C), 3 steps of a '
      f'CyclicPoissonSampler (b = {_PER_EPOCH}, q = 1, {_N} examples); a '
      'canary gradient of norm 100 C along e_0, absent from D; the claim '
      'PrivacyLedger.record_step; score = <C Delta, C y> (the Gaussian '
      'LLR): tight')
  # The old claim: the declared separation, steps per epoch.
  old = correlated_noise.sensitivity(strategy, min_separation=_PER_EPOCH)
  twin_eps = _epsilon(dp_accounting.GaussianDpEvent(
      _SIGMA * float(np.max(strategy.column_norms())) / old), DELTA, 'pld')
  twin_pattern = _pattern(shuffled, canary)
  assert twin_pattern.tolist() == [0.0, 1.0, 1.0], twin_pattern
  broken = _twin(
      case, 'reshuffled_epochs_bandmf_shuffled', mechanism(shuffled),
      'epochs reshuffled (ShuffleSampler, a permutation per epoch): the '
      'canary last in epoch 0 and first in epoch 1 (steps 1 and 2), claimed '
      f'with min_separation={_PER_EPOCH} (steps per epoch); exact epsilon '
      f'{_gaussian_epsilon(strategy, twin_pattern):.2f}; score = that '
      'pattern\'s LLR', epsilon=twin_eps)
  return case._replace(broken=broken._replace(
      score=_llr(strategy, twin_pattern)))


# --- restarted_cyclic_step ----------------------------------------------------

_PARTITIONS, _EPOCH_LEN = 3, 1
_N_CYCLIC = 9


def _restarted_batches(sampler):
  """The loop that restarts its count each epoch: step t draws
  ``sample(fold_in(key, epoch), t mod epoch_len)``."""
  key, sample, out = jax.random.key(_BATCH_SEED), jax.jit(sampler.sample), []
  for t in range(_STEPS):
    epoch, step = divmod(t, _EPOCH_LEN)
    out.append(sample(jax.random.fold_in(key, epoch), jnp.int32(step)))
  return out


def restarted_cyclic_step_case() -> AuditCase:
  """A CyclicPoissonSampler at the run's global step; twin: the step count
  restarted each epoch (module doc)."""
  strategy = correlated_noise.banded_toeplitz(
      correlated_noise.optimize_banded_toeplitz(_STEPS, _PARTITIONS), _STEPS)
  canary = 0  # partition 0
  grads = _grads(_N_CYCLIC, canary)
  sampler = sampling.CyclicPoissonSampler(_N_CYCLIC, 1.0, _PARTITIONS)
  sample = jax.jit(sampler.sample)
  key = jax.random.key(_BATCH_SEED)
  honest = [sample(key, jnp.int32(t)) for t in range(_STEPS)]
  restarted = _restarted_batches(sampler)
  present = jnp.ones(_N_CYCLIC, bool)
  absent = present.at[canary].set(False)

  def mechanism(batches):
    pairs = [(b.indices, b.mask) for b in batches]
    return lambda key, data: _run(strategy, grads, pairs, key, data)[0]

  eps = _ledger_epsilon(strategy, grads, sampler, honest, present)
  case = AuditCase(
      'restarted_cyclic_step', mechanism(honest), absent, present,
      _llr(strategy, _pattern([(b.indices, b.mask) for b in honest], canary)),
      eps, DELTA, ADD_REMOVE,
      f'clip_per_example + add_dpsgd_noise(strategy=optimized '
      f'{_PARTITIONS}-band Toeplitz), 3 steps of a CyclicPoissonSampler (b '
      f'= {_PARTITIONS}, q = 1) sampled at the run\'s step; a canary '
      'gradient of norm 100 C along e_0 (partition 0), absent from D; the '
      'claim PrivacyLedger.record_step; score = <C Delta, C y>: tight')
  # The old ledger checked (key, step) replays only: each epoch's batch key
  # is new, so it recorded the step events the noise states give.
  pairs = [(b.indices, b.mask) for b in restarted]
  _, states = jax.jit(lambda key, data: _run(strategy, grads, pairs, key,
                                             data))(jax.random.key(0), present)
  ledger = accounting.PrivacyLedger()
  for state, batch in zip(states, restarted):
    ledger.record(accounting.step_event(state, sampler),
                  noise=state[1].noise_handle(), batch=batch)
  twin_eps = float(ledger.epsilon(DELTA, 'pld'))
  twin_pattern = _pattern([(b.indices, b.mask) for b in restarted], canary)
  assert twin_pattern.tolist() == [1.0, 1.0, 1.0], twin_pattern
  broken = _twin(
      case, 'restarted_cyclic_step_restarted_count', mechanism(restarted),
      f'the step count restarted every {_EPOCH_LEN} step(s) (sample(fold_in('
      'key, epoch), t mod epoch_len)): partition 0 every step, the canary in '
      'all 3, recorded as the noise steps\' events; exact epsilon '
      f'{_gaussian_epsilon(strategy, twin_pattern):.2f}; score = that '
      'pattern\'s LLR', epsilon=twin_eps)
  return case._replace(broken=broken._replace(
      score=_llr(strategy, twin_pattern)))
