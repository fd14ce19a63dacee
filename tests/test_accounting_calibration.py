"""Calibration helpers of dpjax.accounting: the Gaussian mechanism (classical,
exact, by accountant), Binomial trials (Theorem 1 and exact), integer search.

Each is checked against an independent computation: the analytic Gaussian
privacy profile written out with scipy, dp_accounting's PLD accountant, a
brute-force hockey-stick sum over the whole Binomial support, or the defining
inequality at the answer and one below it."""

import math

import dp_accounting
import numpy as np
import pytest
from scipy import stats

from dpjax import accounting


def _gaussian_delta(stddev, sensitivity, eps):
  """Balle & Wang (2018) Thm. 8: delta(eps) of the Gaussian mechanism."""
  a, b = sensitivity / (2 * stddev), eps * stddev / sensitivity
  return stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)


# ------------------------------------------------------------- Gaussian


def test_classical_gaussian_stddev_is_the_textbook_bound():
  sigma = accounting.classical_gaussian_stddev(0.5, 1e-5, 2.0)
  assert sigma == pytest.approx(2.0 * math.sqrt(2 * math.log(1.25e5)) / 0.5,
                                rel=1e-15)
  # the inverse of the library's classical epsilon
  assert accounting.gaussian_protocol_epsilon(sigma, 2.0, 1e-5) == (
      pytest.approx(0.5, rel=1e-12))
  assert accounting.classical_gaussian_stddev(1.0, 1e-5, 0.0) == 0.0


@pytest.mark.parametrize('kwargs, match', [
    (dict(epsilon=1.5, delta=1e-5, l2_sensitivity=1.0), 'epsilon=1.5 <= 1'),
    (dict(epsilon=0.0, delta=1e-5, l2_sensitivity=1.0), 'epsilon=0.0'),
    (dict(epsilon=0.5, delta=1.0, l2_sensitivity=1.0), 'delta=1.0'),
    (dict(epsilon=0.5, delta=1e-5, l2_sensitivity=-1.0), 'l2_sensitivity'),
])
def test_classical_gaussian_stddev_rejects(kwargs, match):
  with pytest.raises(ValueError, match=match):
    accounting.classical_gaussian_stddev(**kwargs)


@pytest.mark.parametrize('eps, delta, sens', [
    (1.0, 1e-5, 1.0), (0.3, 1e-6, 2.0), (4.0, 1e-5, 0.5)])
def test_gaussian_stddev_is_the_analytic_gaussian_mechanism(eps, delta, sens):
  sigma = accounting.gaussian_stddev(eps, delta, sens)
  assert _gaussian_delta(sigma, sens, eps) <= delta * (1 + 1e-6)
  assert _gaussian_delta(sigma * (1 - 1e-4), sens, eps) > delta
  assert sigma < sens * math.sqrt(2 * math.log(1.25 / delta)) / eps
  # dp_accounting's PLD accountant on the event agrees
  got = accounting.epsilon(accounting.gaussian_event(sigma / sens),
                           delta, 'pld')
  assert got == pytest.approx(eps, rel=2e-3)


def test_gaussian_stddev_of_rounds_is_sqrt_rounds_sensitivity():
  many = accounting.gaussian_stddev(2.0, 1e-5, 0.5, rounds=16)
  assert many == pytest.approx(accounting.gaussian_stddev(2.0, 1e-5, 2.0),
                               rel=1e-12)


def test_gaussian_epsilon_inverts_gaussian_stddev_and_composes():
  sigma = accounting.gaussian_stddev(2.0, 1e-6, 0.5)
  assert accounting.gaussian_epsilon(sigma, 0.5, 1e-6) == pytest.approx(
      2.0, rel=1e-6)
  # exact T-fold composition agrees with the PLD accountant on a ledger
  total = accounting.gaussian_epsilon(sigma, 0.5, 1e-5, rounds=10)
  ledger = accounting.PrivacyLedger()
  ledger.record(accounting.gaussian_event(sigma / 0.5), 10,
                planned=True)  # an accounting of 10 rounds
  assert total == pytest.approx(ledger.epsilon(1e-5, 'pld'), rel=5e-3)
  assert _gaussian_delta(sigma, 0.5 * math.sqrt(10), total) <= 1e-5 * (
      1 + 1e-9)
  assert accounting.gaussian_epsilon(1e9, 1.0, 1e-5) == 0.0


def test_gaussian_helpers_reject_bad_input():
  with pytest.raises(ValueError, match='rounds=0'):
    accounting.gaussian_stddev(1.0, 1e-5, 1.0, rounds=0)
  with pytest.raises(ValueError, match='stddev=0.0'):
    accounting.gaussian_epsilon(0.0, 1.0, 1e-5)
  with pytest.raises(ValueError, match='delta=0.0'):
    accounting.gaussian_epsilon(1.0, 1.0, 0.0)


@pytest.mark.parametrize('accountant', ['pld', 'rdp'])
def test_calibrate_of_a_stddev_meets_the_target_tightly(accountant):
  sens, delta = 2.0, 1e-5
  sigma = sens * accounting.calibrate(accounting.gaussian_event, 1.0, delta,
                                      accountant)
  eps = lambda s: accounting.epsilon(
      accounting.gaussian_event(s / sens), delta, accountant)
  assert eps(sigma) <= 1.0 < eps(sigma * (1 - 2e-4))
  if accountant == 'pld':  # the accountant's value is close to the exact one
    assert sigma == pytest.approx(accounting.gaussian_stddev(1.0, delta, sens),
                                  rel=2e-3)


def test_calibrate_composes_steps():
  one = accounting.calibrate(accounting.gaussian_event, 1.0, 1e-5, 'pld')
  ten = accounting.calibrate(accounting.gaussian_event, 1.0, 1e-5, 'pld',
                             steps=10)
  assert ten > 2 * one
  assert accounting.epsilon(dp_accounting.SelfComposedDpEvent(
      accounting.gaussian_event(ten / 1.0), 10), 1e-5, 'pld') <= 1.0


# -------------------------------------------------------- integer search


D = 1e-5


def _trials_event(m):
  """A mechanism known by its (epsilon, delta): no guarantee below m = 7."""
  if m < 7:
    return dp_accounting.NonPrivateDpEvent()
  return accounting.EpsilonDeltaDpEvent(100.0 / m, D)


def test_an_integer_start_searches_the_smallest_integer():
  eps = lambda m: math.inf if m < 7 else 100.0 / m
  for target in (0.3, 5.0, 14.28, 50.0):
    m = accounting.calibrate(_trials_event, target, D, start=1)
    assert type(m) is int  # pylint: disable=unidiomatic-typecheck
    assert eps(m) <= target and (m == 1 or eps(m - 1) > target)
  assert accounting.calibrate(_trials_event, 50.0, D, start=1) == 7
  assert accounting.calibrate(_trials_event, 0.3, D, start=300) == 334
  assert accounting.calibrate(_trials_event, 0.3, D, start=1,
                              ceiling=334) == 334
  with pytest.raises(ValueError, match='unreachable'):
    accounting.calibrate(_trials_event, 0.3, D, start=1, ceiling=333)
  with pytest.raises(ValueError, match='target_epsilon=0.0'):
    accounting.calibrate(_trials_event, 0.0, D, start=1)
  with pytest.raises(ValueError, match='ceiling=3'):
    accounting.calibrate(_trials_event, 1.0, D, start=5, ceiling=3)


@pytest.mark.parametrize('accountant', ['rdp', 'pld'])
def test_a_lone_epsilon_delta_event_has_its_own_epsilon(accountant):
  # Before: RDP refused any delta > 0 and PLD's discretization answered
  # 0.6376 for 0.637513, so a calibration on the event moved.
  event = accounting.EpsilonDeltaDpEvent(0.637513, 1e-6)
  assert accounting.epsilon(event, 1e-6, accountant) == 0.637513
  assert accounting.epsilon(event, 1e-5, accountant) <= 0.637513
  # Below the event's delta nothing is known.
  assert accounting.epsilon(event, 1e-7, accountant) == float('inf')


# ------------------------------------------------------------- Binomial


def test_binomial_min_trials_is_theorem_1s_boundary():
  n = accounting.binomial_min_trials(0.5, 1.0, 1e-6, 1, 1.0)
  assert n == math.ceil(4 * 23 * math.log(10 / 1e-6)) == 1483
  args = (0.5, 1.0, 1e-6, 1, 1.0, 1.0, 1.0)
  assert math.isfinite(accounting.binomial_epsilon(n, *args))
  with pytest.raises(ValueError, match='Theorem 1 needs'):
    accounting.binomial_epsilon(n - 1, *args)
  # 2 Delta_inf / s dominates: N p (1-p) >= 2 * 100 / 0.01
  assert accounting.binomial_min_trials(0.5, 0.01, 1e-6, 1, 100.0) == 80000
  with pytest.raises(ValueError, match='p=1.0'):
    accounting.binomial_min_trials(1.0, 1.0, 1e-6, 1, 1.0)


def _binomial_trials(target, p, s, delta, d, **kwargs):
  """The Binomial's trials: calibrate from Theorem 1's least N."""
  event = lambda n: accounting.EpsilonDeltaDpEvent(
      accounting.binomial_epsilon(n, p, s, delta, d, 1.0, 1.0, 1.0), delta)
  return accounting.calibrate(
      event, target, delta,
      start=accounting.binomial_min_trials(p, s, delta, d, 1.0), **kwargs)


def test_calibrate_of_binomial_trials_is_the_smallest_valid_n():
  p, s, delta, d = 0.5, 0.25, 1e-5, 1
  eps = lambda n: accounting.binomial_epsilon(n, p, s, delta, d, 1.0, 1.0,
                                              1.0)
  n = _binomial_trials(1.0, p, s, delta, d)
  assert n > accounting.binomial_min_trials(p, s, delta, d, 1.0)
  assert eps(n) <= 1.0 < eps(n - 1)
  # A large target is limited by Theorem 1's condition instead.
  n = _binomial_trials(50.0, p, 1.0, delta, d)
  assert n == accounting.binomial_min_trials(p, 1.0, delta, d, 1.0)
  assert n * p * (1 - p) >= 23 * math.log(10 / delta)
  assert n - 1 < 23 * math.log(10 / delta) / (p * (1 - p))
  with pytest.raises(ValueError, match='unreachable'):
    _binomial_trials(0.01, p, s, delta, d, ceiling=10**6)


def test_binomial_exact_epsilon_is_the_hockey_stick_root():
  n, p, shift, delta = 4000, 0.5, 4, 1e-5
  eps, largest_worst = accounting.binomial_exact_epsilon(n, p, shift, delta)
  assert largest_worst
  # Brute force: the divergence on the whole support, every shift, both ways.
  pmf = stats.binom.pmf(np.arange(n + 1), n, p)

  def div(e):
    out = 0.0
    for j in range(1, shift + 1):
      right = np.concatenate([np.zeros(j), pmf[:-j]])
      left = np.concatenate([pmf[j:], np.zeros(j)])
      for q in (right, left):
        out = max(out, np.sum(np.maximum(pmf - np.exp(e) * q, 0)))
    return out

  assert div(eps) <= delta * (1 + 1e-6) and div(eps - 1e-3) > delta
  assert eps < accounting.binomial_epsilon(n, p, 1 / shift, delta, 1, 1.0,
                                           1.0, 1.0)


def test_calibrate_of_the_exact_binomial_inverts_the_exact_epsilon():
  n, p, shift, delta = 4000, 0.5, 4, 1e-5
  eps, _ = accounting.binomial_exact_epsilon(n, p, shift, delta)
  n_exact = accounting.calibrate(
      lambda m: accounting.EpsilonDeltaDpEvent(
          eps, accounting.binomial_exact_delta(m, p, shift, eps)),
      eps, delta, start=16)
  assert abs(n_exact - n) <= 0.01 * n
  assert accounting.binomial_exact_epsilon(n_exact, p, shift, delta)[0] <= (
      eps + 1e-6)


@pytest.mark.parametrize('kwargs, match', [
    (dict(trials=0, p=0.5, shift=1, delta=1e-5), 'trials=0'),
    (dict(trials=100, p=0.0, shift=1, delta=1e-5), 'p=0.0'),
    (dict(trials=100, p=0.5, shift=0, delta=1e-5), 'shift=0'),
    (dict(trials=100, p=0.5, shift=1, delta=2.0), 'delta=2.0'),
])
def test_binomial_exact_epsilon_rejects(kwargs, match):
  with pytest.raises(ValueError, match=match):
    accounting.binomial_exact_epsilon(**kwargs)
