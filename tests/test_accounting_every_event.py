"""Accounting answers fast at every noise level, fixed-size batches have a
PLD, and trade-off curves: soundness against exact or closed forms."""

import logging
import math
import time

import dp_accounting
from dp_accounting import pld
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax import accounting


def _gaussian_profile(eps, mu):
  """delta(eps) of mu-GDP (Balle & Wang 2018, Thm. 8)."""
  return (stats.norm.cdf(-eps / mu + mu / 2)
          - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2))


def _timed_epsilon(event, accountant, steps):
  start = time.perf_counter()
  eps = accounting.epsilon(event, 1e-5, accountant, steps=steps)
  return eps, time.perf_counter() - start


# Each call returned after more than 60 s (or printed a page of warnings)
# before; 10 s leaves room for a loaded machine.
_SECONDS = 10.0


@pytest.mark.parametrize('accountant', ['rdp', 'pld'])
def test_small_noise_poisson_answers_in_seconds_and_names_its_accountant(
    accountant, caplog):
  sampler = dpjax.sampling.PoissonSampler(256, 1 / 16)
  with caplog.at_level(logging.WARNING):
    for z, steps in [(0.011, 1), (0.3, 1000), (0.011, 100000)]:
      eps, seconds = _timed_epsilon(sampler.dp_event(z), accountant, steps)
      assert seconds < _SECONDS, (z, steps, seconds)
      assert math.isfinite(eps) and eps > 100, (z, steps, eps)
      assert eps.accountant in accounting.ACCOUNTANTS
      if eps.accountant != accountant:
        assert 'answered by the' in eps.note
  assert 'failed to converge' not in caplog.text
  assert 'did not converge' in accounting.epsilon(
      sampler.dp_event(0.3), 1e-5, 'rdp').note


@pytest.mark.parametrize('accountant', ['rdp', 'pld'])
def test_a_noise_multiplier_of_zero_is_infinite_at_once(accountant):
  for sampler in [dpjax.sampling.PoissonSampler(256, 1 / 16),
                  dpjax.sampling.FixedSizeSampler(1000, 10),
                  dpjax.sampling.ShuffleSampler(1000, 10)]:
    eps, seconds = _timed_epsilon(sampler.dp_event(0.0), accountant, 100)
    assert eps == math.inf and 'not private' in eps.note and seconds < 1


@pytest.mark.slow
@pytest.mark.parametrize('accountant', ['rdp', 'pld'])
def test_every_sampler_event_answers_in_seconds_at_every_noise(accountant):
  samplers = [dpjax.sampling.PoissonSampler(256, 1 / 16),
              dpjax.sampling.PoissonSampler(60000, 256 / 60000),
              dpjax.sampling.FixedSizeSampler(60000, 256),
              dpjax.sampling.ShuffleSampler(60000, 256)]
  for sampler in samplers:
    previous = math.inf
    for z in [0.011, 0.05, 0.3, 0.5, 1.1, 10.0, 100.0]:
      eps, seconds = _timed_epsilon(sampler.dp_event(z), accountant, 100000)
      assert seconds < _SECONDS, (sampler, z, seconds)
      assert 0 < eps < previous * (1 + 1e-6), (sampler, z, eps)
      previous = eps


def test_truncated_poisson_bound_is_above_the_exact_pld_and_close():
  # dp_accounting's PLD of the truncated event (exact) against dpjax's
  # untruncated event at delta - tv, on a cap that truncates often enough
  # for tv to matter (2.6e-8 a step).
  n, q, cap, z, steps, delta = 1000, 0.05, 92, 2.0, 10, 1e-5
  event = dp_accounting.TruncatedSubsampledGaussianDpEvent(n, q, cap, z)
  exact = pld.PLDAccountant()
  exact.compose(event, steps)
  tv = float(stats.binom.sf(cap - 1, n, q))
  assert 1e-9 < steps * tv < delta / 2
  eps = accounting.epsilon(event, delta, 'pld', steps=steps)
  assert eps.accountant == 'pld' and eps.note == ''
  assert exact.get_epsilon(delta) <= eps <= exact.get_epsilon(delta) + 0.01
  untruncated = accounting.epsilon(
      accounting.gaussian_event(z, sampling_rate=q), delta, 'rdp',
      steps=steps)
  assert untruncated < accounting.epsilon(event, delta, 'rdp', steps=steps)


@pytest.mark.parametrize('z,n,b,steps', [(1.1, 60000, 256, 1000),
                                         (2.0, 1000, 10, 100),
                                         (4.0, 500, 50, 50)])
def test_fixed_size_batches_have_a_pld_never_above_rdp(z, n, b, steps):
  event = dpjax.sampling.FixedSizeSampler(n, b).dp_event(z)
  eps_pld = accounting.epsilon(event, 1e-5, 'pld', steps=steps)
  eps_rdp = accounting.epsilon(event, 1e-5, 'rdp', steps=steps)
  assert eps_pld.accountant == 'pld' and eps_pld.note == ''
  assert 0 < eps_pld < eps_rdp


@pytest.mark.parametrize('eps', [0.5, 2.0, 5.0])
def test_fixed_size_pld_matches_the_closed_form_profile(eps):
  # One step: gamma delta_G(log(1 + (e^eps - 1) / gamma)) with the
  # Gaussian of the replace-one sensitivity 2C (mu = 2 / z).
  n, b, z = 1000, 50, 4.0
  gamma = b / n
  expected = gamma * _gaussian_profile(
      math.log1p(math.expm1(eps) / gamma), 2 / z)
  got = accounting.delta(dpjax.sampling.FixedSizeSampler(n, b).dp_event(z), eps,
                         'pld')
  assert expected <= got <= expected * 1.001 + 1e-12


def test_a_full_fixed_size_batch_is_the_replace_one_gaussian():
  z, n = 2.0, 100
  got = accounting.epsilon(
      dpjax.sampling.FixedSizeSampler(n, n).dp_event(z), 1e-5, 'pld')
  exact = accounting.gaussian_epsilon(z, 2.0, 1e-5)
  assert exact <= got <= exact + 1e-3


def test_tradeoff_curve_of_gaussians_is_the_gdp_curve():
  alphas = np.linspace(0.0, 1.0, 101)
  event = dp_accounting.ComposedDpEvent([
      accounting.gaussian_event(2.0, steps=3),
      dp_accounting.GaussianDpEvent(1.0)])
  mu = math.sqrt(3 / 4 + 1)
  assert accounting.gdp_mu(event) == pytest.approx(mu, rel=1e-12)
  np.testing.assert_allclose(
      accounting.tradeoff_curve(event, alphas),
      stats.norm.cdf(stats.norm.ppf(1 - alphas) - mu), atol=1e-12)
  assert accounting.gdp_mu(accounting.gaussian_event(
      1.0, sampling_rate=0.1)) is None
  assert accounting.gdp_mu(dp_accounting.GaussianDpEvent(0.0)) == math.inf


def test_tradeoff_curve_from_the_pld_is_below_and_close_to_exact():
  # A Gaussian the GDP shortcut does not recognise (sampling rate 1) goes
  # through the PLD; so does the Laplace mechanism, whose curve is known
  # (Dong, Roth & Su 2022, Prop. A.6 form of eps-DP Laplace).
  alphas = np.linspace(0.0, 1.0, 201)
  z = 0.7
  got = accounting.tradeoff_curve(
      dp_accounting.PoissonSampledDpEvent(1.0, dp_accounting.GaussianDpEvent(
          z)), alphas)
  exact = stats.norm.cdf(stats.norm.ppf(1 - alphas) - 1 / z)
  assert np.all(got <= exact + 1e-9) and np.all(got >= exact - 2e-3)
  e = 1.0
  got = accounting.tradeoff_curve(dp_accounting.LaplaceDpEvent(1 / e), alphas)
  a = np.maximum(alphas, 1e-300)
  laplace = np.where(a < np.exp(-e) / 2, 1 - np.exp(e) * a,
                     np.where(a <= 0.5, np.exp(-e) / (4 * a),
                              np.exp(-e) * (1 - a)))
  assert np.all(got <= laplace + 1e-9) and np.all(got >= laplace - 5e-3)


def test_tradeoff_curve_of_subsampled_events_agrees_with_epsilon():
  event = accounting.gaussian_event(1.1, sampling_rate=0.01, steps=500)
  alphas = np.linspace(0.0, 1.0, 51)
  betas = accounting.tradeoff_curve(event, alphas)
  assert np.all(np.diff(betas) <= 1e-12) and np.all(betas <= 1 - alphas)
  eps = accounting.epsilon(event, 1e-5, 'pld')
  assert np.all(betas >= 1 - 1e-5 - np.exp(eps) * alphas - 1e-6)
  # Less private than the full-batch Gaussian it subsamples is impossible.
  full = accounting.tradeoff_curve(accounting.gaussian_event(
      1.1, steps=500), alphas)
  assert np.all(betas >= full - 1e-9)


def test_the_ledger_reports_tradeoff_and_gdp_beside_epsilon():
  ledger = accounting.PrivacyLedger()
  ledger.record(accounting.gaussian_event(2.0), count=4, planned=True)
  assert ledger.gdp_mu() == pytest.approx(1.0)
  np.testing.assert_allclose(ledger.tradeoff_curve([0.05, 0.5]),
                             stats.norm.cdf(stats.norm.ppf([0.95, 0.5]) - 1))
  ledger.record(accounting.gaussian_event(2.0, sampling_rate=0.1),
                count=10, planned=True)
  assert ledger.gdp_mu() is None
  assert ledger.tradeoff_curve([0.05])[0] < stats.norm.cdf(
      stats.norm.ppf(0.95) - 1)


@pytest.mark.parametrize('alphas,error', [
    ([0.1, float('nan')], ValueError), ([-0.1], ValueError),
    ([1.5], ValueError), ([float('inf')], ValueError), ('x', TypeError),
    ([[0.1], 'a'], TypeError)])
def test_tradeoff_curve_refuses_bad_alphas(alphas, error):
  with pytest.raises(error, match='alphas'):
    accounting.tradeoff_curve(dp_accounting.GaussianDpEvent(1.0), alphas)
