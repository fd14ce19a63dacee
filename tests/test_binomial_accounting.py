"""cpSGD accounting: Binomial mechanism (Theorem 1), its soundness against the
exact privacy profile, sensitivities, composition and the Gaussian baseline."""

import math

import dp_accounting
import jax
import numpy as np
import pytest
from scipy import stats

import dpjax
from dpjax import accounting

NR = dp_accounting.NeighboringRelation
BASE = dict(trials=2000, p=0.5, scale=1.0, delta=1e-6, dimension=1,
            l1_sensitivity=1.0, l2_sensitivity=1.0, linf_sensitivity=1.0)


def _eps(**changes):
  return accounting.binomial_epsilon(**{**BASE, **changes})


def test_published_test_vector():
  assert _eps() == pytest.approx(0.637513, abs=5e-7)



@pytest.mark.parametrize('name,value', [
    ('trials', 0), ('trials', -5), ('trials', 2000.0),
    ('p', 0.0), ('p', 1.0), ('p', 1.5), ('scale', 0.0), ('scale', -1.0),
    ('delta', 0.0), ('delta', 1.0), ('dimension', 0), ('dimension', 1.5),
    ('l1_sensitivity', -1.0), ('l2_sensitivity', -0.1),
    ('linf_sensitivity', -2.0),
])
def test_bad_input_raises_naming_the_value(name, value):
  with pytest.raises(ValueError, match=f'{name}={value}'):
    _eps(**{name: value})


@pytest.mark.parametrize('changes', [
    dict(trials=1400),                    # 350 < 23 ln(1e7) = 370.7
    dict(trials=2000, p=0.1),             # 180 < 370.7
    dict(dimension=10**4),                # 500 < 23 ln(1e11) = 582.4
    dict(linf_sensitivity=251.0),         # 500 < 2 * 251 / 1
    dict(linf_sensitivity=2.6, scale=0.01),  # 500 < 2 * 2.6 / 0.01 = 520
])
def test_theorem_condition_raises(changes):
  with pytest.raises(ValueError, match='Theorem 1 needs'):
    _eps(**changes)


def test_condition_boundary():
  n = math.ceil(4 * 23 * math.log(10 / 1e-6))  # p = 1/2: N / 4 >= 370.7
  assert math.isfinite(_eps(trials=n))
  with pytest.raises(ValueError, match=f'trials={n - 1}'):
    _eps(trials=n - 1)


def test_monotone_in_trials_and_delta():
  eps_n = [_eps(trials=n) for n in (2000, 4000, 10**4, 10**5, 10**7)]
  assert all(a > b for a, b in zip(eps_n, eps_n[1:]))
  eps_d = [_eps(trials=10**5, delta=d)
           for d in (1e-2, 1e-4, 1e-6, 1e-8, 1e-10)]
  assert all(a < b for a, b in zip(eps_d, eps_d[1:]))
  eps_s = [_eps(trials=10**5, l2_sensitivity=x, l1_sensitivity=x,
                linf_sensitivity=x) for x in (1.0, 2.0, 4.0)]
  assert all(a < b for a, b in zip(eps_s, eps_s[1:]))


def test_approaches_gaussian_as_trials_grow():
  # Fig. 1 of cpSGD: with s sqrt(N p (1-p)) = sigma fixed, the Binomial
  # mechanism's epsilon tends to the Gaussian mechanism's, from above, at
  # rate 1 / sqrt(N).
  sigma, sens, delta, p = 10.0, 1.0, 1e-5, 0.5
  gauss = accounting.gaussian_protocol_epsilon(sigma, sens, delta)
  assert gauss == pytest.approx(sens * math.sqrt(2 * math.log(1.25 / delta))
                                / sigma)
  gaps = []
  for n in (10**4, 10**6, 10**8, 10**10):
    s = sigma / math.sqrt(n * p * (1 - p))
    gaps.append(accounting.binomial_epsilon(n, p, s, delta, 1, sens, sens,
                                            sens) - gauss)
  assert all(g > 0 for g in gaps)
  assert all(a > 5 * b for a, b in zip(gaps, gaps[1:]))
  assert gaps[-1] < 1e-3 * gauss


def _hockey_stick(n, p, shift, eps):
  """max over both directions of sum_z max(0, P(z) - e^eps Q(z)), Q = P(. - shift)."""
  z = np.arange(-shift, n + shift + 1)
  log_a = stats.binom.logpmf(z, n, p)
  log_b = stats.binom.logpmf(z - shift, n, p)
  out = []
  for lp, lq in ((log_a, log_b), (log_b, log_a)):
    with np.errstate(invalid='ignore'):
      terms = np.exp(lp) * np.maximum(0.0, -np.expm1(eps + lq - lp))
    out.append(float(np.sum(np.where(np.isfinite(lp), terms, 0.0))))
  return max(out)


def _exact_epsilon(n, p, shift, delta, hi):
  lo = 0.0
  for _ in range(60):
    mid = (lo + hi) / 2
    lo, hi = (lo, mid) if _hockey_stick(n, p, shift, mid) <= delta else (mid,
                                                                        hi)
  return hi


SOUNDNESS = [(n, p, shift) for n in (2000, 10000) for p in (0.5, 0.3)
             for shift in (1, 3)]


@pytest.mark.parametrize('n,p,shift', SOUNDNESS)
def test_theorem1_is_sound_against_exact_profile(n, p, shift):
  delta = 1e-6
  eps = accounting.binomial_epsilon(n, p, 1.0, delta, 1, shift, shift, shift)
  assert _hockey_stick(n, p, shift, eps) <= delta
  exact = _exact_epsilon(n, p, shift, delta, eps)
  assert 0 < exact < eps
  # The check has teeth: slightly below the exact epsilon, delta is exceeded.
  assert _hockey_stick(n, p, shift, 0.99 * exact) > delta


def test_advanced_composition_hand_values():
  # sqrt(200 ln 1e5) 0.1 + 100 0.1 (e^0.1 - 1) = 4.79852 + 1.05171
  eps, delta = accounting.advanced_composition(0.1, 1e-6, 100, 1e-5)
  assert eps == pytest.approx(5.850235, abs=1e-6)
  assert delta == pytest.approx(1.1e-4, rel=1e-12)
  # eps = 1, k = 10: advanced 15.17 + 17.18 > 10, so basic composition.
  assert accounting.advanced_composition(1.0, 1e-6, 10, 1e-5) == (
      10.0, pytest.approx(1e-5))
  assert accounting.advanced_composition(0.0, 0.0, 7, 1e-3) == (0.0, 0.0)


@pytest.mark.parametrize('args,match', [
    ((-0.1, 1e-6, 10, 1e-5), 'epsilon=-0.1'),
    ((0.1, -1e-6, 10, 1e-5), 'delta=-1e-06'),
    ((0.1, 1.0, 10, 1e-5), 'delta=1.0'),
    ((0.1, 1e-6, 0, 1e-5), 'rounds=0'),
    ((0.1, 1e-6, 2.0, 1e-5), 'rounds=2.0'),
    ((0.1, 1e-6, 10, 0.0), 'delta_slack=0.0'),
])
def test_advanced_composition_validates(args, match):
  with pytest.raises(ValueError, match=match):
    accounting.advanced_composition(*args)


def test_binomial_event_composes_under_pld():
  ev = accounting.EpsilonDeltaDpEvent(_eps(), BASE['delta'])
  for relation in (None, NR.REPLACE_ONE):
    eps10 = accounting.epsilon(dp_accounting.SelfComposedDpEvent(ev, 10),
                               delta=1e-4, accountant='pld',
                               neighboring_relation=relation)
    assert math.isfinite(eps10)
    assert ev.epsilon < eps10 <= 10 * ev.epsilon
    adv, _ = accounting.advanced_composition(ev.epsilon, ev.delta, 10, 9e-5)
    assert eps10 <= adv
  with pytest.raises(dp_accounting.UnsupportedEventError, match='pld'):
    accounting.epsilon(ev, 1e-5, 'rdp', steps=2)
  assert accounting.epsilon(ev, 1e-5, 'rdp') == ev.epsilon  # one round


def test_cpsgd_sensitivities_hand_values():
  # d = 4, k = 3, X_max = 1: s = 1, span 2. L2 min(2*2, 2*0.5 + 2*1*2) = 4;
  # L1 min(2*4, 2*2*0.5 + 2*1*4) = 8.
  assert accounting.cpsgd_sensitivities(4, 3, 1.0, 0.5) == (8.0, 4.0, 2.0)
  # k = 9: s = 0.25. L2 min(4, 1 + 2*0.25*2) = 2; L1 min(8, 2 + 2*0.25*4) = 4.
  assert accounting.cpsgd_sensitivities(4, 9, 1.0, 0.5) == (4.0, 2.0, 2.0)
  # d = 100, k = 17, X_max = 0.5, D = 1: s = 1/16. L2 min(10, 2 + 1.25)
  # = 3.25; L1 min(100, 20 + 12.5) = 32.5.
  assert accounting.cpsgd_sensitivities(100, 17, 0.5, 1.0) == pytest.approx(
      (32.5, 3.25, 1.0))


@pytest.mark.parametrize('args,match', [
    ((0, 3, 1.0, 1.0), 'dimension=0'), ((4, 1, 1.0, 1.0), 'levels=1'),
    ((4, 3.0, 1.0, 1.0), 'levels=3.0'), ((4, 3, 0.0, 1.0), 'linf_clip=0.0'),
    ((4, 3, 1.0, -1.0), 'l2_norm_clip=-1.0'),
])
def test_cpsgd_sensitivities_validates(args, match):
  with pytest.raises(ValueError, match=match):
    accounting.cpsgd_sensitivities(*args)


def _clipped(rng, n, d, norm):
  x = rng.standard_normal((n, d))
  x /= np.linalg.norm(x, axis=1, keepdims=True)
  return x * norm * rng.uniform(0, 1, (n, 1)) ** (1 / d)


@pytest.mark.parametrize('d,k,linf_clip,clip', [
    (16, 3, 1.0, 0.3),    # coarse grid: the s (k-1) branches
    (16, 65, 1.0, 1.0),   # fine grid: the clip-norm branches
    (4, 5, 0.5, 2.0),     # X_max < D: clamping
    (64, 9, 0.4, 1.0),
])
def test_cpsgd_sensitivities_hold_for_random_quantizations(d, k, linf_clip,
                                                           clip):
  rng = np.random.default_rng(d * k)
  l1, l2, linf = accounting.cpsgd_sensitivities(d, k, linf_clip, clip)
  quantizer = dpjax.compression.k_level_quantizer(linf_clip, k)
  n = 2000
  x, y = _clipped(rng, n, d, clip), _clipped(rng, n, d, clip)
  # Adversarial pairs: antipodal, on the sphere, and spread out or spiky.
  spread = np.sign(rng.standard_normal((n, d))) * clip / math.sqrt(d)
  spike = np.zeros((n, d))
  spike[np.arange(n), rng.integers(0, d, n)] = clip
  x = np.concatenate([x, spread, spike, x])
  y = np.concatenate([y, -spread, -spike, -x[:n] / np.maximum(
      np.linalg.norm(x[:n], axis=1, keepdims=True), 1e-12) * clip])
  kx, ky = jax.random.split(jax.random.key(k))
  diff = quantizer.spacing * (
      np.asarray(quantizer.quantize(x.astype(np.float32), key=kx), np.int64)
      - np.asarray(quantizer.quantize(y.astype(np.float32), key=ky),
                   np.int64))
  tol = 1 + 1e-9
  assert np.abs(diff).max() <= linf * tol
  assert np.linalg.norm(diff, axis=1).max() <= l2 * tol
  assert np.abs(diff).sum(axis=1).max() <= l1 * tol
  # Not vacuous: the L_inf bound is attained.
  assert np.abs(diff).max() == pytest.approx(linf)


def test_gaussian_protocol():
  sigma, sens, delta = 10.0, 2.0, 1e-5
  classical = accounting.gaussian_protocol_epsilon(sigma, sens, delta)
  assert classical == pytest.approx(2 * math.sqrt(2 * math.log(1.25e5)) / 10)
  ev = accounting.gaussian_event(sigma / sens)
  assert ev == dp_accounting.GaussianDpEvent(5.0)
  tight = accounting.epsilon(ev, delta, 'pld')
  assert tight < classical
  assert tight == pytest.approx(accounting.epsilon(ev, delta, 'rdp'), rel=0.2)
  # dp_accounting's PLD reads REPLACE_ONE as twice the distance: use default.
  assert accounting.epsilon(ev, delta, 'pld', NR.REPLACE_ONE) == (
      pytest.approx(accounting.epsilon(dp_accounting.GaussianDpEvent(2.5),
                                       delta, 'pld')))
  composed = accounting.epsilon(dp_accounting.SelfComposedDpEvent(ev, 10),
                                delta, 'pld')
  assert composed < 10 * classical
  with pytest.raises(ValueError, match='epsilon=.* > 1'):
    accounting.gaussian_protocol_epsilon(1.0, 1.0, 1e-5)
  with pytest.raises(ValueError, match='stddev=0.0'):
    accounting.gaussian_protocol_epsilon(0.0, 1.0, 1e-5)
  with pytest.raises(ValueError, match='delta=1.5'):
    accounting.gaussian_protocol_epsilon(10.0, 1.0, 1.5)
  with pytest.raises(ValueError, match='noise_multiplier=-1.0'):
    accounting.gaussian_event(-1.0)
