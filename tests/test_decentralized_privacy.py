"""Per-agent accounting of the decentralized algorithms: sound vs the paper."""

import math

import dp_accounting
import numpy as np
import pytest

from dpjax import accounting
from dpjax import distributed as dd

Q1 = dd.DecentralizedPrivacy('qdpsgd1', 2.0, 0.5, 1000, amplified=False)


def test_qdpsgd1_round_is_the_gaussian_of_its_replace_one_sensitivity():
  # Mean of |S| gradients clipped to K: replace-one sensitivity 2K/|S|, noise
  # sigma K: noise multiplier sigma |S| / 2.
  assert dd.qdpsgd_event(Q1, 20) == dp_accounting.GaussianDpEvent(20.0)
  assert dd.qdpsgd_event(Q1, 0) == dp_accounting.NoOpDpEvent()
  amp = dd.qdpsgd_event(Q1._replace(amplified=True), 20)
  assert amp == dp_accounting.SampledWithoutReplacementDpEvent(
      1000, 20, dp_accounting.GaussianDpEvent(20.0))
  dsgd = dd.DecentralizedPrivacy('dsgd', 0.0, 1.0, 10)
  assert dd.qdpsgd_event(dsgd, 5) == dp_accounting.NonPrivateDpEvent()


def test_paper_formulas_on_test_vectors():
  sizes = np.array([[20, 0], [0, 0], [35, 10]])  # [rounds, agents]
  # Thm. 1: 8 / (m^2 sigma^2) per round with |S| > 0.
  c1 = dd.paper_rdp_coefficients(Q1, sizes)
  np.testing.assert_allclose(c1, np.where(sizes > 0, 8 / (1e6 * 4), 0))
  # Thm. 5: 8 / (sigma^2 m^2) (alpha eps + eta sqrt(p) |S| / K)^2, every round.
  q2 = dd.DecentralizedPrivacy('qdpsgd2', 2.0, 0.5, 1000, 0.3, 0.5, 0.01,
                               400, (0.5, 0.5))
  c2 = dd.paper_rdp_coefficients(q2, sizes)
  expect = 8 / (4 * 1e6) * (0.15 + 0.01 * 20 * sizes / 0.5)**2
  np.testing.assert_allclose(c2, expect)
  assert c2[1, 0] == pytest.approx(8 / 4e6 * 0.15**2)  # empty round counts
  # The paper's conversion, minimized over rho: r + 2 sqrt(r log(1/delta)),
  # with r the largest per-agent sum.
  r = c1.sum(axis=0).max()
  assert dd.paper_epsilon(Q1, sizes, 1e-5) == pytest.approx(
      r + 2 * math.sqrt(r * math.log(1e5)))
  rho = np.linspace(1.01, 2000, 200000)
  brute = np.min(rho * r + math.log(1e5) / (rho - 1))
  assert dd.paper_epsilon(Q1, sizes, 1e-5) == pytest.approx(brute, rel=1e-4)


def test_paper_theorem_1_is_no_upper_bound_below_half_the_shard():
  """8 rho / (m^2 sigma^2) >= 2 rho / (sigma^2 |S|^2) iff |S| >= m / 2: the
  paper's Thm. 1 understates the unsampled round whenever |S| < m / 2."""
  for size in (1, 20, 499):
    assert not dd.paper_is_upper_bound(Q1, size)
  for size in (500, 800):
    assert dd.paper_is_upper_bound(Q1, size)
  # Against the sampled-without-replacement bound the paper's constant is
  # still exceeded at the large orders for the paper's setting (m = 1000,
  # B = 20).
  assert not dd.paper_is_upper_bound(Q1._replace(amplified=True), 20)


def test_paper_theorem_5_understates_the_drifting_broadcast():
  q2 = dd.DecentralizedPrivacy('qdpsgd2', 2.0, 0.5, 1000, 0.124, 0.78, 0.1,
                               3760, (0.4,))
  sens = dd.qdpsgd2_sensitivities(q2, [[20]] * 10)[:, 0]
  assert sens[0] == 0 and (np.diff(sens[1:]) > 0).all()
  assert not dd.paper_is_upper_bound(q2, 20, l2_sensitivity=float(sens[5]))


def test_drift_recursion_on_a_test_vector():
  q2 = dd.DecentralizedPrivacy('qdpsgd2', 1.0, 0.5, 10, 0.2, 0.5, 0.01, 100,
                               (0.6,))
  step = 2 * 0.2 * 0.5 * 0.5  # 2 alpha eps K
  c = 1 - 0.5 + 0.5 * 0.6
  sens = dd.qdpsgd2_sensitivities(q2, [[3], [0], [3], [3]])[:, 0]
  d1 = step
  d2 = c * d1  # an empty round adds no drift
  d3 = c * d2 + step
  np.testing.assert_allclose(sens, [0, d1 + 0.1, d2 + 0.1, d3 + 0.1])


def test_ledgers_match_the_fast_epsilons_and_carry_the_bits():
  rng = np.random.default_rng(0)
  sizes = rng.integers(0, 12, (8, 3))
  for setting in (Q1, Q1._replace(amplified=True),
                  dd.DecentralizedPrivacy('qdpsgd2', 40.0, 0.5, 50, 0.2, 0.5,
                                          0.05, 30, (0.5, 0.4, 0.3))):
    setting = setting._replace(num_examples=50)
    bits = np.full(sizes.shape, 96.0)
    ledgers = dd.agent_ledgers(setting, sizes, bits)
    fast = dd.agent_epsilons(setting, sizes, 1e-5)
    slow = np.array([l.epsilon(1e-5) for l in ledgers])
    # The same composition at other RDP orders: both valid bounds, close.
    np.testing.assert_allclose(slow, fast, rtol=0.03)
    assert all(l.bits == 96.0 * 8 for l in ledgers)
    assert dd.run_epsilon(setting, sizes, 1e-5) == pytest.approx(fast.max())


def test_unamplified_gaussian_composition_is_exact():
  sizes = np.array([[4], [9], [0], [30]])
  eps = dd.agent_epsilons(Q1, sizes, 1e-5)[0]
  # Gaussian rounds compose into one Gaussian with the summed 1/z^2.
  z = 1 / math.sqrt(sum(4 / (2.0**2 * s**2) for s in (4, 9, 30)))
  ref = accounting.epsilon(dp_accounting.GaussianDpEvent(z), 1e-5)
  assert eps == pytest.approx(ref, rel=0.02) and eps >= ref * (1 - 1e-9)


def test_calibration_meets_the_target_per_agent():
  rng = np.random.default_rng(1)
  sizes = rng.integers(4, 37, (30, 4))
  for setting in (Q1._replace(num_examples=200, amplified=True),
                  dd.DecentralizedPrivacy('sdm', 1.0, 0.5, 200,
                                          amplified=True),
                  dd.DecentralizedPrivacy('qdpsgd2', 1.0, 0.5, 200, 0.2, 0.5,
                                          0.05, 30, (0.5,) * 4)):
    sigma = dd.calibrate_decentralized(setting, sizes, 1.5, 1e-5)
    spent = dd.run_epsilon(setting._replace(noise_multiplier=sigma), sizes,
                           1e-5)
    assert spent <= 1.5 and spent > 1.5 * 0.95
    lower = dd.run_epsilon(setting._replace(noise_multiplier=sigma * 0.97),
                           sizes, 1e-5)
    assert lower > 1.5  # a little less noise misses the target


def test_bad_privacy_input_names_the_value():
  with pytest.raises(ValueError, match="algorithm='dpsgd'"):
    dd.qdpsgd_event(Q1._replace(algorithm='dpsgd'), 3)
  with pytest.raises(ValueError, match='l2_norm_clip=0'):
    dd.qdpsgd_event(Q1._replace(l2_norm_clip=0), 3)
  with pytest.raises(ValueError, match='round sensitivity'):
    dd.qdpsgd_event(Q1._replace(algorithm='qdpsgd2', learning_rate=0.1,
                                     mixing_rate=0.1, eta=0.1, dimension=3), 3)
  with pytest.raises(ValueError, match='Expected 2 self weights'):
    dd.qdpsgd2_sensitivities(dd.DecentralizedPrivacy(
        'qdpsgd2', 1.0, 0.5, 10, 0.1, 0.1, 0.1, 3, (0.5,)), [[1, 2]])
  with pytest.raises(ValueError, match='nothing to calibrate'):
    dd.calibrate_decentralized(dd.DecentralizedPrivacy('dsgd', 0.0, 1.0, 10),
                               [[1]], 1.0, 1e-5)


def test_the_default_claims_no_amplification():
  """The docs said no amplification was claimed while the default claimed
  it; amplification holds only for batches drawn from secret randomness
  (DeadlineSampler), so it is opt-in."""
  default = dd.DecentralizedPrivacy('qdpsgd1', 2.0, 0.5, 1000)
  assert not default.amplified
  assert dd.qdpsgd_event(default, 20) == dp_accounting.GaussianDpEvent(
      20.0)
  assert dd.run_epsilon(default, [[20]], 1e-5) == dd.run_epsilon(
      Q1, [[20]], 1e-5)


def test_a_batch_above_the_agent_dataset_is_refused():
  with pytest.raises(ValueError, match='batch_size=1001'):
    dd.qdpsgd_event(Q1, 1001)
  with pytest.raises(ValueError, match='batch_sizes <= num_examples=1000'):
    dd.run_epsilon(Q1, [[20, 1001]], 1e-5)
  with pytest.raises(ValueError, match='batch_sizes <= num_examples=1000'):
    dd.agent_ledgers(Q1, [[1001]])


def _metrics(sizes, sigma):
  sizes = np.asarray(sizes)
  return dd.RoundMetrics(sizes, np.full(sizes.shape, 8.0),
                         np.zeros(sizes.shape[:-1]),
                         np.full(sizes.shape[:-1], sigma, np.float32))


def test_events_are_read_from_the_sigma_that_ran():
  """A sweep override of sigma used to be recorded as the setting's sigma."""
  ran = _metrics([[20, 3], [7, 0]], 114.9)
  with pytest.raises(ValueError, match='Claimed noise_multiplier=2.0'):
    dd.qdpsgd_step_event(_round_of(ran, 0), Q1, 0)
  with pytest.raises(ValueError, match='Claimed noise_multiplier=2.0'):
    dd.run_epsilon(Q1, ran, 1e-5)
  with pytest.raises(ValueError, match='Claimed noise_multiplier=2.0'):
    dd.agent_ledgers(Q1, ran)
  setting = Q1._replace(noise_multiplier=114.9)
  assert dd.qdpsgd_step_event(_round_of(ran, 0), setting, 1) == (
      dd.qdpsgd_event(setting, 3))
  assert dd.run_epsilon(setting, ran, 1e-5) == dd.run_epsilon(
      setting, ran.batch_size, 1e-5)
  ledgers = dd.agent_ledgers(setting, ran)
  assert [l.bits for l in ledgers] == [16.0, 16.0]
  with pytest.raises(ValueError, match='index the round'):
    dd.qdpsgd_step_event(ran, setting, 0)
  with pytest.raises(ValueError, match='agent=2'):
    dd.qdpsgd_step_event(_round_of(ran, 0), setting, 2)


def _round_of(metrics, t):
  """Round t of metrics stacked over rounds."""
  return dd.RoundMetrics(*(np.asarray(x)[t] for x in metrics))
