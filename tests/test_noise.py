"""Noise samplers: fixed-key KS tests of the scale, purity, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import noise
from dpjax.noise import _discrete
from dpjax.noise import _exact
from dpjax.noise import _threefry

N = 20_000


@pytest.mark.parametrize('sampler,param,dist', [
    (noise.gaussian, 'stddev', 'norm'), (noise.laplace, 'scale', 'laplace')])
@pytest.mark.parametrize('scale', [0.5, 3.0])
def test_ks_accepts_the_true_scale_and_rejects_wrong_ones(sampler, param, dist,
                                                          scale):
  x = np.asarray(sampler(jax.random.key(1), (N,), **{param: scale}))
  assert stats.kstest(x, dist, args=(0, scale)).pvalue > 1e-3
  for wrong in (2 / 3 * scale, 3 / 2 * scale):
    assert stats.kstest(x, dist, args=(0, wrong)).pvalue < 1e-6


def test_samplers_are_pure_functions_of_the_key():
  k = jax.random.key(3)
  np.testing.assert_array_equal(noise.gaussian(k, (5,), stddev=1.0),
                                noise.gaussian(k, (5,), stddev=1.0))
  assert not np.array_equal(
      noise.gaussian(k, (5,), stddev=1.0),
      noise.gaussian(jax.random.key(4), (5,), stddev=1.0))


@pytest.mark.parametrize('key', [
    jax.random.key(3), jax.random.PRNGKey(7), jax.random.key(1, impl='rbg'),
    jax.random.fold_in(jax.random.key(0), 5)], ids=['key', 'raw', 'rbg',
                                                   'folded'])
@pytest.mark.parametrize('dtype', [jnp.float32, jnp.bfloat16])
def test_gaussian_unit_draw_is_jax_random_normal_bit_for_bit(key, dtype):
  # The fusible Threefry bits change the cost of a draw, never its value.
  for shape in [(), (1,), (7,), (3, 5, 7), (300, 70)]:
    want = np.asarray(jax.random.normal(key, shape, dtype))
    for fn in (_threefry.normal, jax.jit(_threefry.normal,
                                         static_argnums=(1, 2))):
      np.testing.assert_array_equal(np.asarray(fn(key, shape, dtype)), want)
  keys = jax.random.split(key, 3) if jnp.ndim(key) == 0 else None
  if keys is not None:
    np.testing.assert_array_equal(
        jax.vmap(lambda k: _threefry.normal(k, (4, 2)))(keys),
        jax.vmap(lambda k: jax.random.normal(k, (4, 2)))(keys))


def test_gaussian_noise_fuses_into_its_use_without_a_loop():
  # jax.random lowers Threefry on CPU as a loop that keeps two counter
  # buffers per draw; the unrolled bits fuse into the add.
  x = jnp.zeros((256, 64))
  add = jax.jit(lambda k, x: x + noise.gaussian(k, x.shape, stddev=1.0))
  compiled = add.lower(jax.random.key(0), x).compile()
  assert ' while(' not in compiled.as_text()
  assert compiled.memory_analysis().temp_size_in_bytes < x.nbytes


def test_zero_scale_gives_zeros():
  key = jax.random.key(0)
  np.testing.assert_array_equal(noise.gaussian(key, (4,), stddev=0.0),
                                jnp.zeros(4))
  np.testing.assert_array_equal(noise.laplace(key, (4,), scale=0.0),
                                jnp.zeros(4))


def test_tree_noise_draws_independent_leaves_of_matching_shape():
  tree = {'a': jnp.zeros((3, 2)), 'b': jnp.zeros((3, 2))}
  out = noise.tree_noise(noise.gaussian, jax.random.key(0), tree, stddev=1.0)
  assert out['a'].shape == (3, 2) and out['a'].dtype == jnp.float32
  assert not np.array_equal(out['a'], out['b'])


def test_tree_noise_draws_every_sampler_with_keyword_parameters():
  tree = {'f': jnp.zeros((3,), jnp.bfloat16), 'i': jnp.zeros((4,), jnp.int16)}
  key = jax.random.key(2)
  keys = jax.random.split(key, 2)  # one subkey a leaf, in flattening order
  out = noise.tree_noise(noise.discrete_gaussian, key, tree, sigma=2.0)
  assert out['f'].dtype == jnp.bfloat16 and out['i'].dtype == jnp.int16
  np.testing.assert_array_equal(
      out['i'], noise.discrete_gaussian(keys[1], (4,), sigma=2.0,
                                        dtype=jnp.int16))
  out = noise.tree_noise(noise.binomial, key, tree, trials=8, p=0.5)
  np.testing.assert_array_equal(
      out['i'],
      noise.binomial(keys[1], (4,), trials=8, p=0.5).astype(jnp.int16))
  # The grid sampler serves float leaves (eta * k) and integer leaves (k).
  out = noise.tree_noise(noise.discrete_gaussian_grid, key,
                         {'f': jnp.zeros(5), 'i': jnp.zeros(5, jnp.int32)},
                         sigma=3.0, eta=1.0)
  np.testing.assert_array_equal(
      out['f'], noise.discrete_gaussian(keys[0], (5,), sigma=3.0,
                                        dtype=jnp.float32))
  np.testing.assert_array_equal(
      out['i'], noise.discrete_gaussian(keys[1], (5,), sigma=3.0))


def test_negative_scales_raise_naming_the_value():
  with pytest.raises(ValueError, match='stddev=-1.0'):
    noise.gaussian(jax.random.key(0), (2,), stddev=-1.0)
  with pytest.raises(ValueError, match='scale=-0.5'):
    noise.laplace(jax.random.key(0), (2,), scale=-0.5)


# --- exact discrete samplers --------------------------------------------------

import fractions  # pylint: disable=g-import-not-at-top,wrong-import-position
import math  # pylint: disable=g-import-not-at-top,wrong-import-position

import mpmath  # pylint: disable=g-import-not-at-top,wrong-import-position

DRAWS = 1_000_000


def _pmf(log_weight, radius):
  x = np.arange(-radius, radius + 1)
  lw = log_weight(x.astype(np.float64))
  p = np.exp(lw - lw.max())
  return x, p / p.sum()


def _chi2_pvalue(samples, support, pmf, min_expected=50.0):
  """Chi-square of integer samples against a pmf on ``support`` (consecutive
  integers), merging neighbouring values until each bin expects
  ``min_expected`` draws."""
  expected = pmf * len(samples)
  groups = np.zeros(len(support), int)
  g, acc = 0, 0.0
  for i, e in enumerate(expected):
    groups[i] = g
    acc += e
    if acc >= min_expected:
      g, acc = g + 1, 0.0
  if acc < min_expected and g > 0:
    groups[groups == g] = g - 1
  ngroups = groups.max() + 1
  idx = np.clip(samples - support[0], 0, len(support) - 1)
  observed = np.bincount(groups[idx], minlength=ngroups)
  exp = np.bincount(groups, weights=expected, minlength=ngroups)
  return stats.chisquare(observed, exp * observed.sum() / exp.sum()).pvalue


def _gaussian_pmf(sigma2, radius):
  return _pmf(lambda x: -x**2 / (2 * sigma2), radius)


@pytest.mark.parametrize('sigma', [0.5, 3.0, 50.0, 1000.0])
def test_discrete_gaussian_chi_square_accepts_true_sigma_rejects_5pct_off(
    sigma):
  x = np.asarray(
      noise.discrete_gaussian(jax.random.key(7), (DRAWS,), sigma=sigma))
  assert x.dtype == np.int32
  s2 = float(noise.discrete_gaussian_sigma_squared(sigma))
  radius = int(40 * sigma + 10)
  support, pmf = _gaussian_pmf(s2, radius)
  assert _chi2_pvalue(x, support, pmf) > 1e-3
  support, wrong = _gaussian_pmf(s2 * 1.05**2, radius)
  assert _chi2_pvalue(x, support, wrong) < 1e-6
  # Exact variance (below sigma^2 for small sigma), and mean 0.
  var = float(pmf @ support.astype(np.float64)**2)
  if sigma < 1:
    assert var < 0.9 * sigma**2
  se = math.sqrt(max(float(pmf @ support.astype(np.float64)**4) - var**2,
                     1e-12) / DRAWS)
  assert abs(np.mean(x.astype(np.float64)**2) - var) < 5 * se
  assert abs(x.mean()) < 5 * math.sqrt(var / DRAWS)


@pytest.mark.parametrize('scale', [0.7, 300.0])
def test_discrete_laplace_chi_square_and_variance(scale):
  n = DRAWS // 2
  x = np.asarray(noise.discrete_laplace(jax.random.key(8), (n,), scale=scale))
  b = float(noise.discrete_laplace_scale(scale))
  radius = int(60 * scale + 20)
  support, pmf = _pmf(lambda v: -np.abs(v) / b, radius)
  assert _chi2_pvalue(x, support, pmf) > 1e-3
  support, wrong = _pmf(lambda v: -np.abs(v) / (1.05 * b), radius)
  assert _chi2_pvalue(x, support, wrong) < 1e-6
  q = math.exp(-1 / b)
  var = 2 * q / (1 - q)**2  # exact variance of the discrete Laplace
  fourth = float(pmf @ support.astype(np.float64)**4)
  assert abs(np.mean(x.astype(np.float64)**2) - var) < 5 * math.sqrt(
      (fourth - var**2) / n)


def test_effective_parameters_are_conservative_and_tight():
  for sigma in [2.0**-10, 0.5, 3.0, 1e4, 2.0**17, 2.0**21]:
    s2 = noise.discrete_gaussian_sigma_squared(sigma)
    exact = fractions.Fraction(sigma)**2
    assert s2 >= exact
    assert s2 / exact - 1 < (2.0**-28 if sigma <= 2**17 else 2.0**-19)
  for scale in [2.0**-10, 0.7, 4.0, 1e5]:
    b = noise.discrete_laplace_scale(scale)
    assert fractions.Fraction(scale) <= b < fractions.Fraction(scale) * (
        1 + fractions.Fraction(1, 2**28))
  assert noise.discrete_gaussian_sigma_squared(4.0, eta=2.0) == (
      noise.discrete_gaussian_sigma_squared(2.0))
  # The int32 range cap keeps at least 1000 sigma' of support.
  for sigma in [2.0**-10, 0.5, 3.0, 1e4, 2.0**15, 2.0**21]:
    p = _discrete._gaussian_params(fractions.Fraction(sigma))
    z_max = (p.v_max + 1) * 2**p.tau - 1
    assert z_max < 2**31
    assert z_max >= 1000 * sigma


def test_discrete_samplers_are_deterministic_with_and_without_jit():
  # Same sigma and size as the chi-square test above: the eager program is
  # already compiled there.
  key = jax.random.key(11)
  eager = noise.discrete_gaussian(key, (DRAWS,), sigma=3.0)
  jitted = jax.jit(
      lambda k: noise.discrete_gaussian(k, (DRAWS,), sigma=3.0))(key)
  np.testing.assert_array_equal(eager, jitted)
  np.testing.assert_array_equal(
      eager, noise.discrete_gaussian(key, (DRAWS,), sigma=3.0))
  assert eager.dtype == jnp.int32
  assert not np.array_equal(
      eager, noise.discrete_gaussian(jax.random.key(12), (DRAWS,), sigma=3.0))


def test_discrete_samplers_handle_zero_scale_scalars_and_empty_shapes():
  key = jax.random.key(0)
  np.testing.assert_array_equal(noise.discrete_gaussian(key, (3,), sigma=0.0),
                                np.zeros(3, np.int32))
  np.testing.assert_array_equal(noise.discrete_laplace(key, (3,), scale=0),
                                np.zeros(3, np.int32))
  assert noise.discrete_gaussian(key, sigma=2.0).shape == ()
  assert noise.discrete_gaussian(key, (0, 4), sigma=2.0).shape == (0, 4)
  assert noise.binomial(key, (2, 0), trials=10, p=0.5).shape == (2, 0)
  np.testing.assert_array_equal(noise.binomial(key, (2,), trials=10, p=1.0),
                                [10, 10])
  np.testing.assert_array_equal(noise.binomial(key, (2,), trials=10, p=0.0),
                                [0, 0])


def test_grid_samplers_live_on_eta_z_with_the_right_scale():
  eta = 0.25  # lattice scale 0.75 / 0.25 = 3, as in the chi-square test
  x = np.asarray(noise.discrete_gaussian_grid(jax.random.key(3), (DRAWS,),
                                              sigma=0.75, eta=eta))
  assert x.dtype == np.float32
  np.testing.assert_array_equal(x / eta, np.round(x / eta))
  assert abs(x.var() / 0.75**2 - 1) < 0.01
  y = np.asarray(noise.discrete_laplace_grid(
      jax.random.key(3), (DRAWS // 2,), scale=150.0, eta=0.5))  # lattice 300
  np.testing.assert_array_equal(y / 0.5, np.round(y / 0.5))
  assert abs(y.var() / (2 * 150.0**2) - 1) < 0.02


@pytest.mark.parametrize('n,p,draws', [(10, 0.5, 200_000),
                                       (1000, 0.3, 50_000),
                                       (2**20, 0.5, 4_000)])
def test_binomial_mean_variance_and_chi_square(n, p, draws):
  x = np.asarray(noise.binomial(jax.random.key(5), (draws,), trials=n, p=p))
  assert x.dtype == np.int32 and x.min() >= 0 and x.max() <= n
  q = float(noise.binomial_p(p))
  mean, var = n * q, n * q * (1 - q)
  assert abs(x.mean() - mean) < 5 * math.sqrt(var / draws)
  assert abs(x.var() / var - 1) < 5 * math.sqrt(2 / draws)
  sd = math.sqrt(var)
  lo, hi = max(0, int(mean - 8 * sd)), min(n, int(mean + 8 * sd) + 1)
  support = np.arange(lo, hi + 1)
  pmf = stats.binom.pmf(support, n, q)
  assert _chi2_pvalue(x, support, pmf / pmf.sum()) > 1e-3
  if n < 2**20:
    wrong = stats.binom.pmf(support, n, q * 1.05)
  else:  # few draws at this n: a 20% wider spread is what they can detect
    wrong = stats.norm.pdf(support, mean, 1.2 * sd)
  assert _chi2_pvalue(x, support, wrong / wrong.sum()) < 1e-6


@pytest.mark.parametrize('p', [0.5, 0.375])
def test_binomial_at_1000_trials_is_exact_and_rejects_p_one_percent_off(p):
  # The bit-sliced sampler at p = 1/2 (one bit per trial) and a dyadic p
  # (3 bits per trial): chi-square against the exact pmf, and the same
  # draws reject Bin(1000, 1.01 p) (mean shift 0.25-0.32 sd).
  n, draws = 1000, 50_000
  assert noise.binomial_p(p) == fractions.Fraction(p)
  x = np.asarray(noise.binomial(jax.random.key(7), (draws,), trials=n, p=p))
  mean, sd = n * p, math.sqrt(n * p * (1 - p))
  support = np.arange(int(mean - 8 * sd), int(mean + 8 * sd) + 1)
  pmf = stats.binom.pmf(support, n, p)
  assert _chi2_pvalue(x, support, pmf / pmf.sum()) > 1e-3
  wrong = stats.binom.pmf(support, n, 1.01 * p)
  assert _chi2_pvalue(x, support, wrong / wrong.sum()) < 1e-6


def test_binomial_p_is_exact_for_dyadic_p():
  assert noise.binomial_p(0.5) == fractions.Fraction(1, 2)
  assert noise.binomial_p(0.375) == fractions.Fraction(3, 8)
  assert abs(noise.binomial_p(0.3) - fractions.Fraction(3, 10)) <= (
      fractions.Fraction(1, 2**33))


def test_discrete_samplers_reject_bad_arguments_naming_the_value():
  key = jax.random.key(0)
  with pytest.raises(ValueError, match='sigma=-1.0'):
    noise.discrete_gaussian(key, (2,), sigma=-1.0)
  with pytest.raises(ValueError, match='sigma=10000000.0'):
    noise.discrete_gaussian(key, (2,), sigma=1e7)
  with pytest.raises(ValueError, match='sigma=1e-05'):
    noise.discrete_gaussian(key, (2,), sigma=1e-5)
  with pytest.raises(ValueError, match='sigma=nan'):
    noise.discrete_gaussian(key, (2,), sigma=float('nan'))
  with pytest.raises(ValueError, match='scale=-2'):
    noise.discrete_laplace(key, (2,), scale=-2)
  with pytest.raises(ValueError, match='eta=0'):
    noise.discrete_gaussian_grid(key, (2,), sigma=1.0, eta=0)
  with pytest.raises(ValueError, match='traced'):
    jax.jit(lambda s: noise.discrete_gaussian(key, (2,), sigma=s))(1.0)
  with pytest.raises(ValueError, match='trials=-3'):
    noise.binomial(key, (2,), trials=-3, p=0.5)
  with pytest.raises(ValueError, match='trials=2.5'):
    noise.binomial(key, (2,), trials=2.5, p=0.5)
  with pytest.raises(ValueError, match='p=1.5'):
    noise.binomial(key, (2,), trials=10, p=1.5)
  with pytest.raises(ValueError, match='key'):
    noise.discrete_gaussian(None, (2,), sigma=1.0)
  with pytest.raises(ValueError, match='eta=1 for an integer dtype'):
    noise.discrete_gaussian_grid(key, (2,), sigma=1.0, eta=0.5,
                                 dtype=jnp.int32)
  with pytest.raises(ValueError, match='dtype=bool'):
    noise.discrete_laplace(key, (2,), scale=1.0, dtype=bool)


# --- the exactness of the building blocks, checked exactly ---------------------


def test_bernoulli_exp_minus_one_inversion_is_exactly_exp_minus_one():
  """P(success) implied by the word tables and the resolution rules is e^-1."""
  fl = [None, None] + _exact._FLOORS  # fl[m] = floor(2^32 / m!)
  total = fractions.Fraction(0)
  # Unambiguous words: count c = #{m in 2..12 : w < fl[m]}, m* = 1 + c.
  for c in range(12):
    lo = fl[c + 2] if c < 11 else 0
    hi = 2**32 if c == 0 else fl[c + 1]
    words = hi - lo - (1 if 1 <= c <= 11 else 0)  # minus the ambiguous word
    if c % 2 == 1:  # m* even
      total += words
  # Ambiguous word fl[m], m = 3..12: m* = m w.p. (2^32 mod m!) / m!.
  for m in range(3, 13):
    q = fractions.Fraction(2**32 % math.factorial(m), math.factorial(m))
    total += q if m % 2 == 0 else 1 - q
  # Word 0: m* >= 12; P(m* >= m | w = 0) = 2^32 / m! for m >= 13.
  tail = mpmath.mpf(0)
  mpmath.mp.dps = 60
  for m in range(12, 60, 2):  # m* = m even
    p_ge = 1 if m == 12 else mpmath.mpf(2**32) / mpmath.factorial(m)
    tail += p_ge - mpmath.mpf(2**32) / mpmath.factorial(m + 1)
  prob = (mpmath.mpf(total.numerator) / total.denominator + tail) / 2**32
  assert abs(prob - mpmath.exp(-1)) < mpmath.mpf(10)**-45
  assert _exact._TAIL_NUM / _exact._TAIL_DEN == pytest.approx(
      2**32 / math.factorial(13), rel=1e-15)


def test_bernoulli_exp_minus_one_flags_exactly_the_ambiguous_words():
  fl = _exact._FLOORS
  words = np.array([0, 1, 7, 8, fl[0] - 1, fl[0], 2**32 - 1] +
                   [f for f in fl[1:]] + [f + 1 for f in fl[1:]] +
                   [f - 1 for f in fl[1:]], np.uint32)
  value, kind, m = (np.asarray(a) for a in jax.jit(
      _exact._bern_exp_minus_one)(jnp.asarray(words)))
  for w, v, k, mm in zip(words.tolist(), value, kind, m):
    count = sum(w < f for f in fl)
    assert v == (count % 2 == 1)
    if w == 0:
      assert k == 2 and mm == 12
    elif w in fl[1:]:
      assert k == 1 and mm == count + 2 and fl[mm - 2] == w
    else:
      assert k == 0


@pytest.mark.parametrize('sigma,laplace', [(0.5, False), (3.0, False),
                                           (1e4, False), (2.0**21, False),
                                           (0.7, True), (300.0, True)])
def test_exponent_is_exact_integer_arithmetic(sigma, laplace):
  s = fractions.Fraction(sigma)
  params = _discrete._laplace_params if laplace else _discrete._gaussian_params
  p = params(s)
  rng = np.random.default_rng(0)
  t = 2**p.tau
  v = np.concatenate([[0, 0, p.v_max, p.v_max, 1],
                      rng.integers(0, min(p.v_max, 50) + 1, 200)])
  u = np.concatenate([[0, t - 1, 0, t - 1, t // 2],
                      rng.integers(0, t, 200)])
  whole, fhi, flo = (np.asarray(a) for a in jax.jit(
      _exact._exponent, static_argnums=0)(
          p, jnp.asarray(v, jnp.int32), jnp.asarray(u, jnp.int32)))
  for i in range(len(v)):
    z = int(v[i]) * t + int(u[i])
    e = fractions.Fraction(p.c2 * z * z + p.c1 * z + p.c0, 2**p.k) - int(v[i])
    assert e >= 0
    assert int(whole[i]) == math.floor(e)
    frac64 = (e - math.floor(e)) * 2**64
    assert frac64.denominator == 1
    assert (int(fhi[i]) << 32) + int(flo[i]) == frac64.numerator


_resolve = jax.jit(_exact._resolve, static_argnums=0)
_step = jax.jit(_exact._step, static_argnums=0)
_exponent = jax.jit(_exact._exponent, static_argnums=0)


def _lanes_like(n, **fields):
  lanes = _exact._fresh_lanes(n)
  return lanes._replace(**{k: jnp.full((n,), v, getattr(lanes, k).dtype)
                           for k, v in fields.items()})


@pytest.mark.parametrize('m', [3, 7, 12])
def test_pending_cell_resolution_has_the_exact_conditional_probability(m):
  n = 200_000
  lanes = _lanes_like(n, phase=_exact._GEO, pend=1, pm=m)
  w = jax.random.bits(jax.random.key(m), (2, n), jnp.uint32)
  flags, _ = _resolve(_discrete._gaussian_params(fractions.Fraction(3)),
                      lanes, w[0], w[1])
  flags = np.asarray(flags)
  known = (flags & 1) == 1
  mstar_is_m = ((flags & 2) == 2) == (m % 2 == 0)
  q = (2**32 % math.factorial(m)) / math.factorial(m)
  keep = 1 - (2**32 % math.factorial(m)) / 2**32  # threshold acceptance
  assert abs(known.mean() - keep) < 5 * math.sqrt(keep * (1 - keep) / n)
  got = mstar_is_m[known].mean()
  assert abs(got - q) < 5 * math.sqrt(q * (1 - q) / known.sum())
  assert (((flags >> 4) & 3)[known] == 0).all()


def test_tail_and_tied_comparisons_resolve_with_exact_probabilities():
  n = 200_000
  p = _discrete._gaussian_params(fractions.Fraction(3))
  w = jax.random.bits(jax.random.key(1), (2, n), jnp.uint32)
  # Tail, first step: m* >= 13 w.p. 2^32 / 13! (else m* = 12, resolved).
  flags, pm = _resolve(p, _lanes_like(n, phase=_exact._GEO, pend=2, pm=12),
                       w[0], w[1])
  flags, pm = np.asarray(flags), np.asarray(pm)
  q = 2**32 / math.factorial(13)
  went_on = pm == 13
  assert abs(went_on.mean() - q) < 5 * math.sqrt(q * (1 - q) / n)
  resolved = (flags & 1) == 1
  assert np.array_equal(resolved | went_on, np.ones(n, bool)) or (
      (~resolved & ~went_on).mean() < 1e-3)  # rare threshold redraws
  assert ((flags[resolved] & 2) == 2).all()  # m* = 12 is even: success
  # Tied Bernoulli(frac / K): success w.p. ((fhi mod K) 2^32 + flo) / (K 2^32).
  kk, v, u = 3, 1, 2
  lanes = _lanes_like(n, phase=_exact._EFRAC, tie=True, kk=kk, v=v, u=u)
  flags, _ = _resolve(p, lanes, w[0], w[1])
  flags = np.asarray(flags)
  _, fhi, flo = _exponent(p, jnp.asarray([v]), jnp.asarray([u]))
  fhi, flo = int(fhi[0]), int(flo[0])
  q = ((fhi % kk) * 2**32 + flo) / (kk * 2**32)
  known = (flags & 4) == 4
  got = ((flags & 8) == 8)[known].mean()
  assert abs(got - q) < 5 * math.sqrt(q * (1 - q) / known.sum())


def test_step_routes_ambiguous_words_to_the_resolution_states():
  p = _discrete._gaussian_params(fractions.Fraction(3))
  fl = _exact._FLOORS
  lanes = _lanes_like(3, phase=_exact._GEO, v=1)
  w0 = jnp.asarray([fl[5], 0, fl[0] + 5], jnp.uint32)  # m = 7, tail, plain
  w1 = jnp.asarray([fl[0] + 5] * 3, jnp.uint32)  # a failure (m* = 1)
  out = _step(p, lanes, w0, w1)
  np.testing.assert_array_equal(out.pend, [1, 2, 0])
  np.testing.assert_array_equal(out.pm, [7, 12, 0])
  np.testing.assert_array_equal(out.phase, [_exact._GEO, _exact._GEO,
                                            _exact._START])
  np.testing.assert_array_equal(out.v, [1, 1, 1])
  # EFRAC: a word equal to floor(fhi / K) ties; the lane waits for resolution.
  lanes = _lanes_like(1, phase=_exact._EFRAC, kk=2, v=0, u=1)
  _, fhi, _ = _exponent(p, lanes.v, lanes.u)
  out = _step(p, lanes, fhi // np.uint32(2), jnp.zeros(1, jnp.uint32))
  assert bool(out.tie[0]) and int(out.kk[0]) == 2
