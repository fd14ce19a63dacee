"""Accounting: agreement with dp_accounting, published values, calibration,
pure DP, truncated Poisson, and the ledger."""

import math

import dp_accounting
import numpy as np
import dpjax
from dp_accounting import pld
from dp_accounting import rdp
import pytest
from scipy import stats

from dpjax import accounting

NR = dp_accounting.NeighboringRelation

CONFIGS = [  # (noise_multiplier, sampling_rate, steps, delta)
    (1.1, 256 / 60000, 14062, 1e-5),
    (1.5, 0.04, 2250, 1e-5),
    (0.8, 0.01, 1000, 1e-6),
    (2.0, 0.1, 500, 1e-5),
    (4.0, 1.0, 10, 1e-3),
    (1.0, 0.001, 100000, 1e-7),
]


def _reference(event, delta, name, relation=NR.ADD_OR_REMOVE_ONE):
  acc = (rdp.RdpAccountant(neighboring_relation=relation) if name == 'rdp'
         else pld.PLDAccountant(relation))
  acc.compose(event)
  return acc.get_epsilon(delta)


@pytest.mark.parametrize('sigma,q,steps,delta', CONFIGS)
@pytest.mark.parametrize('name', ['rdp', 'pld'])
def test_epsilon_equals_dp_accounting(sigma, q, steps, delta, name):
  event = accounting.gaussian_event(sigma, sampling_rate=q, steps=steps)
  # The PLD's grid is coarser than dp_accounting's default where that one
  # would be large (small noise): pessimistic still, and close.
  assert accounting.epsilon(event, delta, name) == pytest.approx(
      _reference(event, delta, name), rel=1e-12 if name == 'rdp' else 1e-4)


def test_published_regression_values():
  # dp-accounting 0.6.0 regression values; Opacus reports RDP 7.32911
  # with its own order grid and PRV 6.7774.
  e = accounting.gaussian_event(1.5, sampling_rate=0.04, steps=2250)
  assert accounting.epsilon(e, 1e-5, 'rdp') == pytest.approx(7.3293, abs=1e-4)
  assert accounting.epsilon(e, 1e-5, 'rdp') == pytest.approx(7.3291, abs=2e-3)
  assert accounting.epsilon(e, 1e-5, 'pld') == pytest.approx(6.7688, abs=1e-4)
  assert accounting.epsilon(e, 1e-5, 'pld') == pytest.approx(6.7774, abs=0.02)
  e = accounting.gaussian_event(1.1, sampling_rate=256 / 60000, steps=14062)
  assert accounting.epsilon(e, 1e-5, 'rdp') == pytest.approx(2.5966, abs=1e-4)
  assert accounting.epsilon(e, 1e-5, 'pld') == pytest.approx(2.3817, abs=1e-4)


@pytest.mark.parametrize('name', ['rdp', 'pld'])
def test_delta_and_epsilon_are_inverse(name):
  event = accounting.gaussian_event(1.1, sampling_rate=0.01, steps=2000)
  eps = accounting.epsilon(event, 1e-5, name)
  assert accounting.delta(event, eps, name) == pytest.approx(1e-5, rel=0.05)
  assert accounting.delta(event, eps, name) <= 1e-5 * 1.001


@pytest.mark.parametrize('name', ['rdp', 'pld'])
@pytest.mark.parametrize('target', [1.0, 3.0, 8.0])
def test_calibration_round_trip(name, target):
  q, steps, delta = 0.01, 3000, 1e-5
  sigma = accounting.calibrate(
      lambda s: accounting.gaussian_event(s, sampling_rate=q), target, delta,
      name, steps=steps)
  spent = accounting.epsilon(
      accounting.gaussian_event(sigma, sampling_rate=q, steps=steps), delta,
      name)
  assert spent <= target
  assert spent >= target * 0.995  # and it is not needlessly conservative
  less = accounting.gaussian_event(sigma * 0.99, sampling_rate=q, steps=steps)
  assert accounting.epsilon(less, delta, name) > target


def test_unreachable_target_raises_clearly():
  with pytest.raises(ValueError, match='unreachable'):
    accounting.calibrate(
        lambda s: accounting.gaussian_event(s, sampling_rate=0.5), 0.01, 1e-5,
        steps=10000, ceiling=10.0)


def test_pure_dp_basic_composition_and_accountants():
  event = dp_accounting.ComposedDpEvent([
      dp_accounting.SelfComposedDpEvent(accounting.pure_dp_event(0.1), 30),
      accounting.pure_dp_event(0.5)])
  assert accounting.basic_composition(event) == pytest.approx((3.5, 0.0))
  for name in ('rdp', 'pld'):
    eps = accounting.epsilon(event, 1e-5, name)
    assert 0 < eps <= 3.5
  # Advanced composition must beat basic for many small steps under PLD.
  assert accounting.epsilon(event, 1e-5, 'pld') < 3.0
  assert accounting.delta(event, 3.5) == 0.0


def test_pld_of_pure_event_matches_the_epsilon_for_one_step():
  event = accounting.pure_dp_event(1.0)
  assert accounting.epsilon(event, 1e-9, 'pld') == pytest.approx(1.0, abs=1e-3)
  assert accounting.epsilon(event, 1e-9, 'rdp') == pytest.approx(1.0)


def test_approximate_dp_events_are_refused_by_rdp_but_handled_by_pld():
  event = accounting.EpsilonDeltaDpEvent(1.0, 1e-6)
  # A lone (epsilon, delta) event at a delta >= its own is (epsilon, delta)-DP
  # under any accountant; a composition of them has no RDP curve.
  assert accounting.epsilon(event, 1e-5, 'rdp') == 1.0
  with pytest.raises(dp_accounting.UnsupportedEventError):
    accounting.epsilon(event, 1e-5, 'rdp', steps=2)
  assert accounting.epsilon(event, 1e-5, 'pld') <= 1.0
  with pytest.raises(ValueError, match='basic_composition'):
    accounting.basic_composition(
        accounting.gaussian_event(1.0, sampling_rate=0.1, steps=2))


def test_truncated_poisson_is_the_untruncated_event_plus_tv():
  # A cap that the other examples fill with probability 1.2e-9 a step.
  n, q, cap, sigma, steps, delta = 60000, 256 / 60000, 360, 1.1, 1000, 1e-5
  trunc = dp_accounting.SelfComposedDpEvent(
      dp_accounting.TruncatedSubsampledGaussianDpEvent(n, q, cap, sigma), steps)
  plain = accounting.gaussian_event(sigma, sampling_rate=q, steps=steps)
  tv = -math.expm1(steps * math.log1p(-stats.binom.sf(cap - 1, n, q)))
  assert 1e-7 < tv < delta / 2
  for name in ('rdp', 'pld'):
    eps = accounting.epsilon(trunc, delta, name)
    assert eps.accountant == name and eps.note == ''
    assert accounting.epsilon(plain, delta, name) < eps
    assert eps == pytest.approx(accounting.epsilon(plain, delta - tv, name))
    assert accounting.delta(trunc, eps, name) == pytest.approx(
        accounting.delta(plain, eps, name) + tv)
  # dp_accounting's exact PLD of the truncated event is never above it;
  # giving 12% of delta to tv costs 0.0024 here.
  exact = _reference(trunc, delta, 'pld')
  assert exact <= accounting.epsilon(trunc, delta, 'pld') <= exact + 0.005


def test_truncation_too_likely_for_rdp_falls_back_to_pld_and_says_so():
  trunc = dp_accounting.TruncatedSubsampledGaussianDpEvent(1000, 0.1, 100, 1.0)
  eps = accounting.epsilon(trunc, 1e-5, 'rdp')
  assert eps == pytest.approx(accounting.epsilon(trunc, 1e-5, 'pld'))
  assert eps.accountant == 'pld' and 'PLD' in eps.note


@pytest.mark.parametrize('sigma', [0.0, 0.3, 0.5])
def test_low_noise_poisson_runs_get_an_epsilon_not_an_error(sigma):
  # A 50-step run of PoissonSampler(1437, 64 / 1437): the truncation costs
  # delta only, so RDP answers itself (inf at sigma = 0), above the PLD.
  sampler = dpjax.PoissonSampler(1437, 64 / 1437)
  eps = accounting.epsilon(sampler.dp_event(sigma), 1e-5, steps=50)
  if sigma == 0:
    assert eps == math.inf and 'not private' in eps.note
  else:
    assert math.isfinite(eps) and eps.accountant == 'rdp'
    assert eps > accounting.epsilon(sampler.dp_event(sigma), 1e-5, 'pld',
                                    steps=50)


@pytest.mark.slow
def test_calibration_of_a_small_truncated_poisson_sampler():
  sampler = dpjax.PoissonSampler(1437, 64 / 1437)
  sigma = accounting.calibrate(sampler.dp_event, 3.0, 1e-5, steps=50)
  assert accounting.epsilon(sampler.dp_event(sigma), 1e-5, steps=50) <= 3.0


def test_epsilon_steps_composes_and_rejects_bad_steps():
  step = accounting.gaussian_event(1.0, sampling_rate=0.01)
  assert accounting.epsilon(step, 1e-5, steps=100) == pytest.approx(
      accounting.epsilon(accounting.gaussian_event(1.0, sampling_rate=0.01, steps=100), 1e-5))
  assert accounting.epsilon(step, 1e-5).note == ''
  with pytest.raises(ValueError, match='steps=0'):
    accounting.epsilon(step, 1e-5, steps=0)


def test_without_replacement_uses_replace_one():
  event = dp_accounting.SelfComposedDpEvent(
      dp_accounting.SampledWithoutReplacementDpEvent(
          1000, 10, dp_accounting.GaussianDpEvent(1.0)), 100)
  assert accounting.infer_neighboring_relation(event) == NR.REPLACE_ONE
  assert accounting.epsilon(event, 1e-5) == pytest.approx(
      _reference(event, 1e-5, 'rdp', NR.REPLACE_ONE))


@pytest.mark.parametrize('call,match', [
    (lambda: accounting.epsilon(accounting.gaussian_event(1, sampling_rate=.1, steps=1), 0.0),
     'delta=0.0'),
    (lambda: accounting.epsilon(accounting.gaussian_event(1, sampling_rate=.1, steps=1), 1.5),
     'delta=1.5'),
    (lambda: accounting.epsilon(accounting.gaussian_event(1, sampling_rate=.1, steps=1), 1e-5, 'x'),
     "accountant='x'"),
    (lambda: accounting.gaussian_event(-1.0, sampling_rate=0.1, steps=10), 'noise_multiplier=-1.0'),
    (lambda: accounting.gaussian_event(1.0, sampling_rate=0.0, steps=10), 'sampling_rate=0.0'),
    (lambda: accounting.gaussian_event(1.0, sampling_rate=1.2, steps=10), 'sampling_rate=1.2'),
    (lambda: accounting.gaussian_event(1.0, sampling_rate=0.1, steps=-3), 'steps=-3'),
    (lambda: accounting.calibrate(lambda s: accounting.gaussian_event(s, sampling_rate=0.1), 0.0, 1e-5, steps=10),
     'target_epsilon=0.0'),
    (lambda: accounting.calibrate(lambda s: accounting.gaussian_event(s, sampling_rate=0.1), -1.0, 1e-5, steps=10),
     'target_epsilon=-1.0'),
    (lambda: accounting.calibrate(lambda s: accounting.gaussian_event(s, sampling_rate=0.1), 1.0, 1e-5, steps=0),
     'steps=0'),
    (lambda: accounting.pure_dp_event(-0.1), 'epsilon=-0.1'),
    (lambda: accounting.delta(accounting.gaussian_event(1, sampling_rate=.1, steps=1), -1.0),
     'epsilon=-1.0'),
])
def test_bad_arguments_raise_naming_the_value(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_ledger_reports_the_recorded_events_and_round_trips_json():
  ledger = accounting.PrivacyLedger()
  assert ledger.epsilon(1e-5) == 0.0
  step = accounting.gaussian_event(1.1, sampling_rate=0.01)
  batch_key, noise_key = np.uint32([0, 1]), np.uint32([0, 2])  # raw keys
  for t in range(500):
    ledger.record(step, batch=(batch_key, t), noise=(noise_key, t))
  ledger.record(accounting.pure_dp_event(0.2), count=3, planned=True)
  ledger.record(dp_accounting.TruncatedSubsampledGaussianDpEvent(
      1000, 0.01, 60, 1.1), batch=(batch_key, 500), noise=(noise_key, 500))
  assert ledger.num_events == 504 and len(ledger.runs) == 3
  expected = dp_accounting.ComposedDpEvent([
      dp_accounting.SelfComposedDpEvent(step, 500),
      dp_accounting.SelfComposedDpEvent(accounting.pure_dp_event(0.2), 3),
      dp_accounting.SelfComposedDpEvent(
          dp_accounting.TruncatedSubsampledGaussianDpEvent(1000, 0.01, 60, 1.1),
          1)])
  for name in ('rdp', 'pld'):
    assert ledger.epsilon(1e-5, name) == accounting.epsilon(expected, 1e-5,
                                                            name)
  restored = accounting.PrivacyLedger.from_json(ledger.to_json())
  assert restored == ledger
  assert restored.epsilon(1e-5) == ledger.epsilon(1e-5)
  assert restored.delta(2.0) == ledger.delta(2.0)


def test_every_event_type_round_trips_through_json():
  events = [
      accounting.gaussian_event(1.1, sampling_rate=0.01, steps=7),
      dp_accounting.SampledWithoutReplacementDpEvent(
          100, 5, dp_accounting.LaplaceDpEvent(0.5)),
      dp_accounting.ComposedDpEvent([dp_accounting.ZCDpEvent(0.1),
                                     accounting.EpsilonDeltaDpEvent(1.0, 1e-6)]),
      dp_accounting.dp_event.DiscreteLaplaceDpEvent(0.3, 2),
  ]
  for event in events:
    assert accounting.event_from_dict(accounting.event_to_dict(event)) == event


def test_ledger_rejects_bad_input():
  ledger = accounting.PrivacyLedger()
  with pytest.raises(ValueError, match='DpEvent'):
    ledger.record('not an event')
  with pytest.raises(ValueError, match='count=-1'):
    ledger.record(accounting.pure_dp_event(1.0), count=-1)
  with pytest.raises(ValueError, match='Unknown DpEvent'):
    accounting.PrivacyLedger.from_json(
        '{"runs": [{"event": {"type": "Bogus"}, "count": 1}]}')


# --- discrete Gaussian (zCDP) --------------------------------------------------


@pytest.mark.parametrize('sigma,sens,delta', [(2.0, 1.0, 1e-5), (10.0, 3.0, 1e-6),
                                              (1.0, 1.0, 1e-3)])
def test_discrete_gaussian_event_rdp_epsilon_is_below_the_zcdp_closed_form(
    sigma, sens, delta):
  event = accounting.discrete_gaussian_event(sigma, sens)
  rho = sens**2 / (2 * sigma**2)
  assert event == dp_accounting.ZCDpEvent(rho)
  eps = accounting.epsilon(event, delta, 'rdp')
  closed = rho + 2 * math.sqrt(rho * math.log(1 / delta))
  assert eps <= closed
  assert eps >= 0.7 * closed  # the same order: not a vacuous bound
  # RDP of the discrete Gaussian equals the continuous Gaussian's.
  gauss = accounting.epsilon(dp_accounting.GaussianDpEvent(sigma / sens), delta)
  assert eps == pytest.approx(gauss, rel=1e-9)


def test_discrete_gaussian_composes_linearly_in_rho():
  one = accounting.discrete_gaussian_event(4.0)
  many = dp_accounting.SelfComposedDpEvent(one, 50)
  assert accounting.epsilon(many, 1e-5) == pytest.approx(
      accounting.epsilon(accounting.discrete_gaussian_event(4.0 / math.sqrt(50)),
                         1e-5), rel=1e-9)


def test_pld_rejects_zcdp_events_with_a_clear_error():
  event = dp_accounting.ComposedDpEvent([
      accounting.gaussian_event(1.0, sampling_rate=0.1),
      accounting.discrete_gaussian_event(2.0)])
  with pytest.raises(ValueError, match='pld.*ZCDpEvent.*rdp'):
    accounting.epsilon(event, 1e-5, 'pld')
  with pytest.raises(ValueError, match='ZCDpEvent'):
    accounting.delta(event, 1.0, 'pld')
  assert accounting.epsilon(event, 1e-5, 'rdp') < math.inf


def test_discrete_gaussian_event_validates_and_round_trips_in_the_ledger():
  with pytest.raises(ValueError, match='sigma=0'):
    accounting.discrete_gaussian_event(0, 1.0)
  with pytest.raises(ValueError, match='l2_sensitivity=-1'):
    accounting.discrete_gaussian_event(1.0, -1)
  ledger = accounting.PrivacyLedger()
  ledger.record(accounting.discrete_gaussian_event(3.0, 2.0), 10,
                noise=(np.uint32([0, 7]), 0))
  assert accounting.PrivacyLedger.from_json(ledger.to_json()) == ledger


def test_ledger_counts_bits_beside_the_events():
  ledger = accounting.PrivacyLedger()
  step = accounting.laplace_event(1.0)
  key = np.uint32([0, 7])  # a raw key
  for t in range(3):
    ledger.record(step, bits=100, noise=(key, t))
  ledger.record(step, 2, bits=50, noise=(key, 3))
  assert ledger.bits == 400 and ledger.num_events == 5
  assert len(ledger.runs) == 2  # different bits start a new run
  again = accounting.PrivacyLedger.from_json(ledger.to_json())
  assert again == ledger and again.bits == 400
  assert again != accounting.PrivacyLedger([(step, 5)])
  with pytest.raises(ValueError, match='bits'):
    ledger.record(step, bits=-1, noise=(key, 5))
