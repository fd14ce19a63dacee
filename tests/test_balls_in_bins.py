"""Balls-in-bins sampler and its epoch event: sampling law and accounting."""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax import accounting
from dpjax.accounting import _balls_in_bins
from dpjax.sampling import BallsInBinsSampler


def _epoch_batches(sampler, key, epoch):
  steps = epoch * sampler.steps_per_epoch + jnp.arange(sampler.steps_per_epoch)
  return jax.jit(jax.vmap(sampler.sample, in_axes=(None, 0)))(key, steps)


def test_every_example_is_in_exactly_one_batch_per_epoch():
  sampler = BallsInBinsSampler(500, 7)
  for epoch in range(3):
    b = _epoch_batches(sampler, jax.random.key(1), epoch)
    assert b.indices.shape == b.mask.shape == (7, sampler.max_batch_size)
    kept = np.asarray(b.indices)[np.asarray(b.mask)]
    assert np.array_equal(np.sort(kept), np.arange(500))
    assert int(b.num_sampled.sum()) == 500
  other = _epoch_batches(sampler, jax.random.key(1), 1)
  first = _epoch_batches(sampler, jax.random.key(1), 0)
  assert not np.array_equal(np.asarray(other.indices),
                            np.asarray(first.indices))


def test_each_example_lands_uniformly_and_independently():
  n, k, epochs = 40, 5, 1500
  sampler = BallsInBinsSampler(n, k)
  draws = np.asarray(jax.jit(jax.vmap(sampler.assignment, in_axes=(None, 0)))(
      jax.random.key(2), jnp.arange(epochs)))  # [epochs, n]
  counts = np.stack([np.bincount(draws[:, i], minlength=k) for i in range(n)])
  # Uniform marginal for every example (Bonferroni over n examples).
  p = [stats.chisquare(c).pvalue for c in counts]
  assert min(p) > 1e-3 / n
  # Pairs: same step with probability 1 / k (independence).
  same = (draws[:, :1] == draws[:, 1:]).mean(axis=0)
  se = math.sqrt((1 / k) * (1 - 1 / k) / epochs)
  assert np.all(np.abs(same - 1 / k) < 5 * se)
  # Batch sizes: Binomial(n, 1/k).
  sizes = np.stack([np.bincount(d, minlength=k) for d in draws]).ravel()
  assert abs(sizes.mean() - n / k) < 5 * math.sqrt(n / k / sizes.size * 4)
  assert abs(sizes.var() / (n * (1 / k) * (1 - 1 / k)) - 1) < 0.1


@pytest.mark.parametrize('k', [3, 1000, 65521, 65535])
def test_the_32_bit_draw_is_the_64_bit_residue(k):
  words = np.random.default_rng(k).integers(0, 2**32, (2, 2000),
                                            dtype=np.uint64)
  want = (words[0] * 2**32 + words[1]) % k
  kk = jnp.uint32(k)
  w = jnp.asarray(words.astype(np.uint32))
  got = ((w[0] % kk) * jnp.uint32(2**32 % k) + w[1] % kk) % kk
  assert np.array_equal(np.asarray(got).astype(np.uint64), want)


def test_a_full_batch_keeps_the_cap_and_the_event_carries_its_chance():
  small = BallsInBinsSampler(200, 4, max_batch_size=40)
  b = _epoch_batches(small, jax.random.key(0), 0)
  assert np.all(np.asarray(b.mask.sum(1)) == np.minimum(
      np.asarray(b.num_sampled), 40))
  assert np.any(np.asarray(b.num_sampled) > 40)
  default = BallsInBinsSampler(200, 4)
  assert default.truncation_probability <= 1e-12 + 2**-60
  assert small.truncation_probability > 0.5
  assert small.dp_event(1.0).truncation_probability == (
      small.truncation_probability)
  # The cap is the smallest meeting the target.
  assert BallsInBinsSampler(
      200, 4, default.max_batch_size - 1).truncation_probability > 1e-12
  eps_default = accounting.epsilon(default.dp_event(1.0), 1e-5)
  assert eps_default.note == ''
  eps_small = accounting.epsilon(small.dp_event(1.0), 1e-5)
  assert math.isinf(eps_small) and 'too small' in eps_small.note


def _gauss_hermite_2d(f, n=120):
  x, w = np.polynomial.hermite_e.hermegauss(n)
  w = w / w.sum()
  y1, y2 = np.meshgrid(x, x, indexing='ij')
  return float((np.outer(w, w) * f(y1, y2)).sum())


@pytest.mark.parametrize('sigma,alpha', [(1.5, 2), (1.5, 5), (2.0, 8)])
def test_rdp_bounds_both_directions_of_two_steps(sigma, alpha):
  """k = 2 by quadrature: remove is exact, add is an upper bound."""
  def ratio(y1, y2):  # P / Q at y = sigma * z
    l1 = np.exp(y1 / sigma - 1 / (2 * sigma**2))
    l2 = np.exp(y2 / sigma - 1 / (2 * sigma**2))
    return (l1 + l2) / 2
  remove = math.log(_gauss_hermite_2d(lambda a, b: ratio(a, b)**alpha)) / (
      alpha - 1)
  add = math.log(_gauss_hermite_2d(lambda a, b: ratio(a, b)**(1 - alpha))) / (
      alpha - 1)
  bound = float(accounting.balls_in_bins_rdp(sigma, 2, [alpha])[0])
  assert bound == pytest.approx(max(remove, add), rel=1e-6) or bound > max(
      remove, add)
  assert bound >= remove and bound >= add


@pytest.mark.parametrize('sigma,k,alpha', [(1.0, 200, 4.0), (1.5, 100, 6.0)])
def test_add_bound_is_above_a_monte_carlo_estimate_at_many_steps(
    sigma, k, alpha):
  """Where the Taylor-and-tail bound is the one used (below AM-GM)."""
  orders = np.array([alpha])
  refined = _balls_in_bins._add_rdp(sigma**2, k, orders)[0]
  assert refined < alpha / (2 * k * sigma**2) + (1 - 1 / k) / (2 * sigma**2)
  y = np.random.default_rng(0).standard_normal((20000, k))
  ratio = np.exp(y / sigma - 1 / (2 * sigma**2)).mean(axis=1)  # P / Q
  v = ratio**(1 - alpha)
  high = v.mean() + 5 * v.std() / math.sqrt(v.size)
  assert refined >= math.log(high) / (alpha - 1)
  assert accounting.balls_in_bins_rdp(sigma, k, orders)[0] >= refined


def test_lower_tail_bound_is_above_the_frequency():
  sigma, k = 1.0, 50
  a0 = np.array([[0.6, 0.75, 0.9]])
  bound = np.exp(_balls_in_bins._log_lower_tail(sigma**2, k, a0))[0]
  y = np.random.default_rng(1).standard_normal((40000, k))
  ratio = np.exp(y / sigma - 1 / (2 * sigma**2)).mean(axis=1)
  freq = (ratio[:, None] < a0).mean(axis=0)
  assert np.all(freq > 0)  # the check is not vacuous
  assert np.all(bound >= freq + 5 * np.sqrt(freq * (1 - freq) / y.shape[0]))


def test_rdp_of_one_step_is_the_gaussian_and_matches_the_package():
  orders = [1.5, 2.0, 8.0, 64.0]
  np.testing.assert_allclose(accounting.balls_in_bins_rdp(1.3, 1, orders),
                             np.ceil(orders) / (2 * 1.3**2), rtol=1e-8)
  # random-allocation 1.0.5, random_allocation_scheme.direct.
  # allocation_RDP_remove(alpha, sigma, num_steps) (exact remove RDP):
  #   [allocation_RDP_remove(a, 1.0, 1000) for a in (2, 3, 8, 32)]
  #   [allocation_RDP_remove(a, 0.5, 3) for a in (2, 3)]
  ref = {(1.0, 1000): [0.0017168072711353233, 0.0025777319528152987,
                       0.006909064419539439, 9.092244721053362],
         (0.5, 3): [2.9373640110800823, 4.9023992195887]}
  for (sigma, k), want in ref.items():
    a = np.array([2, 3, 8, 32][:len(want)], float)
    got = accounting.balls_in_bins_rdp(sigma, k, a)
    add = a / (2 * k * sigma**2) + (1 - 1 / k) / (2 * sigma**2)  # AM-GM
    for g, w, ad in zip(got, want, add):
      assert w * (1 + 1e-9) <= g <= max(w, ad) * (1 + 1e-8)


# (sigma, k, epochs, delta) -> epsilon reported by random-allocation 1.0.5
# (Feldman & Shenfeld's package; it needs numpy < 2.2, so it ran in a
# separate environment: pip install random-allocation==1.0.5 pandas), by
#   from random_allocation.comparisons.definitions import (
#       PrivacyParams, SchemeConfig, Direction, Verbosity)
#   from random_allocation.random_allocation_scheme import (
#       allocation_epsilon_direct, allocation_epsilon_RDP_DCO,
#       allocation_epsilon_decomposition, allocation_epsilon_lower_bound)
#   p = PrivacyParams(sigma=s, num_steps=k, num_selected=1,
#                     num_epochs=epochs, delta=delta)
#   cfg = SchemeConfig(verbosity=Verbosity.NONE, MC_sample_size=100_000,
#                      allocation_direct_alpha_orders=list(range(2, 61)))
#   f(p, cfg, Direction.BOTH) for f = direct, RDP_DCO; f(p, cfg) for
#   decomposition and lower_bound (one epoch only: None for more).
# direct's add direction adds (1 - 1/k) / (2 sigma^2) once whatever the
# epochs; composing the per-epoch loss bound adds it per epoch.
PACKAGE = {
    (1.0, 1000, 1, 1e-5): dict(direct=0.6775, dco=1.0343,
                               decomposition=0.2368, lower=0.0766),
    (2.0, 100, 1, 1e-6): dict(direct=0.316, dco=0.5946,
                              decomposition=0.3493, lower=0.0818),
    (0.8, 10000, 1, 1e-5): dict(direct=0.8185, dco=1.1388,
                                decomposition=0.1034, lower=0.0287),
    (1.0, 1000, 10, 1e-5): dict(direct=0.8402, dco=1.7362,
                                decomposition=None, lower=None),
    (3.0, 50, 5, 1e-6): dict(direct=0.4743, dco=0.6918,
                             decomposition=None, lower=None),
}


@pytest.mark.parametrize('setting', sorted(PACKAGE))
def test_epsilon_lies_between_the_package_and_no_amplification(setting):
  sigma, k, epochs, delta = setting
  ref = PACKAGE[setting]
  eps = accounting.epsilon(accounting.balls_in_bins_event(sigma, k), delta,
                           steps=epochs)
  tightest = min(v for v in (ref['direct'], ref['dco'], ref['decomposition'])
                 if v is not None)
  # Never below what the package proves (tolerance: its 1e-3 search step).
  assert eps >= tightest - 2e-3
  if ref['lower'] is not None:  # its lower bound (Chua et al.'s)
    assert eps >= ref['lower']
  # Never above the unamplified Gaussian, and far below it at small 1 / k.
  plain = accounting.epsilon(accounting.gaussian_event(sigma, steps=epochs),
                             delta)
  assert eps < plain
  if k >= 1000:
    assert eps < 0.35 * plain


def test_calibrate_and_delta_invert_epsilon():
  make = lambda s: accounting.balls_in_bins_event(s, 100)
  sigma = accounting.calibrate(make, 2.0, 1e-5, steps=3)
  assert accounting.epsilon(make(sigma), 1e-5, steps=3) <= 2.0 + 1e-6
  assert accounting.epsilon(make(0.98 * sigma), 1e-5, steps=3) > 2.0
  eps = accounting.epsilon(make(1.0), 1e-5)
  assert accounting.delta(make(1.0), eps) <= 1e-5 * (1 + 1e-6)


def test_more_steps_per_epoch_amplify_more():
  eps = [accounting.epsilon(accounting.balls_in_bins_event(1.0, k), 1e-5)
         for k in (1, 10, 100, 1000)]
  assert eps == sorted(eps, reverse=True)
  # One step is the Gaussian; fractional orders are taken at the next
  # integer, a little above it.
  plain = accounting.epsilon(accounting.gaussian_event(1.0), 1e-5)
  assert plain <= eps[0] <= 1.01 * plain


def test_the_event_is_amplified_serializable_and_rdp_only():
  event = BallsInBinsSampler(1000, 10).dp_event(1.0)
  assert accounting.is_amplified(event)
  assert accounting.event_from_dict(accounting.event_to_dict(event)) == event
  with pytest.raises(ValueError, match='does not support BallsInBins'):
    accounting.epsilon(event, 1e-5, accountant='pld')
  with pytest.raises(dp_accounting.UnsupportedEventError,
                     match='add/remove-one'):
    accounting.epsilon(event, 1e-5, accountant='rdp',
                       neighboring_relation=(
                           dp_accounting.NeighboringRelation.REPLACE_ONE))
  assert math.isinf(accounting.epsilon(accounting.balls_in_bins_event(0, 5),
                                       1e-5))


@pytest.mark.parametrize('args,error', [
    ((0, 5), ValueError), ((10, 0), ValueError), ((10, 2**16), ValueError),
    ((10, 5, 0), ValueError), ((10.5, 5), (ValueError, TypeError)),
])
def test_sampler_validates(args, error):
  with pytest.raises(error):
    BallsInBinsSampler(*args)


def test_event_and_rdp_validate():
  with pytest.raises(ValueError):
    accounting.balls_in_bins_event(-1.0, 5)
  with pytest.raises(ValueError):
    accounting.balls_in_bins_event(1.0, 0)
  with pytest.raises(ValueError):
    accounting.balls_in_bins_event(1.0, 5, truncation_probability=1.5)
  with pytest.raises(ValueError):
    accounting.balls_in_bins_rdp(1.0, 5, [1.0])
  with pytest.raises(ValueError):
    accounting.balls_in_bins_rdp(1.0, 5, [[2.0]])
  with pytest.raises(ValueError):
    BallsInBinsSampler(10, 5).dp_event(-1.0)


def test_sampler_is_exported_and_unit_is_example():
  assert dpjax.sampling.BallsInBinsSampler is BallsInBinsSampler
  assert BallsInBinsSampler(10, 5).expected_batch_size == 2.0
