"""Tests of the DDG and Skellam protocols: encoding, modular sum, decoding."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import compression
from dpjax import distributed as dist
from dpjax import noise
from dpjax import transforms

N, D = 8, 12  # d' = 16


def _clients(n=N, d=D, seed=0):
  rng = np.random.default_rng(seed)
  xs = rng.normal(size=(n, d))
  xs = 0.8 * xs / np.linalg.norm(xs, axis=1, keepdims=True)
  xs[0] *= 5.0  # clipped
  return jnp.asarray(xs, jnp.float32)


def _config(mechanism='ddg', **kw):
  base = dict(mechanism=mechanism, l2_norm_clip=1.0, bits=16, gamma=1 / 64,
              stddev=0.5, num_clients=N)
  base.update(kw)
  return dist.DistributedDpConfig(**base)


CFG_DDG = _config('ddg')
CFG_SKELLAM = _config('skellam')
NOISE_FREE = _config('ddg', stddev=0.0)


def _mesh(size, name='clients'):
  if jax.device_count() < size:
    pytest.fail(f'Expected >= {size} host devices (tests/conftest.py forces '
                f'4), found {jax.device_count()}.')
  return jax.sharding.Mesh(np.array(jax.devices()[:size]), (name,))


_conditional_round = jax.jit(dist.conditional_round, static_argnums=(0, 3))


def _rounded_codes(cfg, key, xs):
  """Each client's conditionally rounded codes, from the public pieces."""
  rkey = dist.shared_key(key)
  keys = dist.client_keys(key, xs.shape[0])
  d = xs.shape[1]
  dp = cfg.message_length(d)
  out = []
  for i in range(xs.shape[0]):
    x = xs[i] * jnp.minimum(1.0, cfg.l2_norm_clip / jnp.linalg.norm(xs[i]))
    y = compression.randomized_hadamard(jnp.pad(x, (0, dp - d)), key=rkey)
    round_key = jax.random.split(keys[i])[0]
    z, failed = _conditional_round(cfg, round_key, y / cfg.gamma,
                                   cfg.norm_bound(d))
    assert not bool(failed)
    out.append(np.asarray(z, np.int64))
  return np.stack(out)


def test_noise_free_decoding_recovers_the_rounded_sum_exactly():
  cfg = NOISE_FREE
  key = jax.random.key(3)
  xs = _clients()
  codes = _rounded_codes(cfg, key, xs)
  summed = dist.secure_sum(cfg, key, xs)
  np.testing.assert_array_equal(
      np.asarray(dist.centered(summed, cfg.bits)), codes.sum(0))
  est = dist.secure_sum_round(cfg, key, xs).estimate
  want = compression.inverse_randomized_hadamard(
      jnp.asarray(codes.sum(0), jnp.float32) * cfg.gamma,
      key=dist.shared_key(key))[:D] / N
  np.testing.assert_allclose(np.asarray(est), np.asarray(want), atol=1e-6)
  # ... and the rounding is unbiased: close to the mean of the clipped rows.
  clipped = np.asarray(xs) * np.minimum(
      1.0, 1.0 / np.linalg.norm(np.asarray(xs), axis=1, keepdims=True))
  assert np.max(np.abs(np.asarray(est) - clipped.mean(0))) < 3 * cfg.gamma


@pytest.mark.usefixtures('full_optimization')
def test_sharded_modular_sum_equals_vmapped_bitwise():
  cfg, masked, devices = CFG_DDG, True, 4
  key = jax.random.key(5)
  xs = _clients()
  r1 = dist.secure_sum_round(cfg, key, xs, masked=masked)
  r2 = dist.secure_sum_round(cfg, key, xs, masked=masked,
                             mesh=_mesh(devices))
  np.testing.assert_array_equal(np.asarray(r1.estimate),
                                np.asarray(r2.estimate))
  np.testing.assert_array_equal(
      np.asarray(dist.secure_sum(cfg, key, xs, masked=masked)),
      np.asarray(dist.secure_sum(cfg, key, xs, masked=masked,
                                 mesh=_mesh(devices))))
  six = _config('ddg', num_clients=6)
  with pytest.raises(ValueError, match='divisible'):
    dist.secure_sum(six, key, xs[:6], mesh=_mesh(4))


def test_masks_cancel_and_hide_each_message():
  cfg = CFG_DDG
  key = jax.random.key(7)
  xs = _clients()
  np.testing.assert_array_equal(
      np.asarray(dist.secure_sum(cfg, key, xs, masked=True)),
      np.asarray(dist.secure_sum(cfg, key, xs)))
  # A masked message is message + u_i - u_{i-1}: uniform on Z_M whatever the
  # message. Chi-square of masks over 4096 coordinates in 16 bins of Z_4096.
  m = np.asarray(dist.pairwise_mask(jax.random.key(1), 3, N, (4096,), 12))
  counts = np.bincount(m // 256, minlength=16)
  assert stats.chisquare(counts).pvalue > 1e-3
  total = sum(np.asarray(dist.pairwise_mask(jax.random.key(1), i, N, (64,),
                                            12), np.int64) for i in range(N))
  assert np.all(total % 4096 == 0)
  # Not the zero mask (the test could fail if masks were trivial).
  assert np.count_nonzero(m) > 4000


def test_modular_helpers_roundtrip_every_width():
  v = jnp.array([-5, -1, 0, 1, 7], jnp.int32)
  for bits in (4, 16, 31, 32):
    np.testing.assert_array_equal(
        np.asarray(dist.centered(dist.to_modular(v, bits), bits)),
        np.asarray(v))
  assert int(dist.to_modular(jnp.array([-1], jnp.int32), 32)[0]) == 2**32 - 1


def test_conditional_rounding_keeps_its_norm_bound():
  # beta close to 1: the bound is tight, so plain rounding often breaks it.
  cfg = _config('ddg', stddev=0.0, beta=0.9, gamma=1 / 8)
  d = 256
  bound = cfg.norm_bound(d)
  y = jnp.full((d,), 0.5)  # ||y|| = 8 = c / gamma; each coordinate 0 or 1
  keys = jax.random.split(jax.random.key(0), 200)
  z, failed = jax.vmap(lambda k: dist.conditional_round(cfg, k, y, bound))(
      keys)
  norms = np.linalg.norm(np.asarray(z, np.float64), axis=1)
  assert not np.any(np.asarray(failed))
  assert np.all(norms <= bound)
  plain = jax.vmap(lambda k: noise.randomized_round(k, y))(keys)
  plain_norms = np.linalg.norm(np.asarray(plain, np.float64), axis=1)
  assert np.mean(plain_norms > bound) > 0.05  # the retry matters here
  # One attempt only: failures send zeros and are reported.
  one = _config('ddg', stddev=0.0, beta=0.9, gamma=1 / 8,
                max_rounding_attempts=1)
  z1, f1 = jax.vmap(lambda k: dist.conditional_round(one, k, y, bound))(keys)
  f1 = np.asarray(f1)
  assert f1.any() and not f1.all()
  assert np.all(np.asarray(z1)[f1] == 0)


def _centred_noise(cfg, key, d=4096):
  """Sum of n noise shares: zero inputs round to zero exactly."""
  xs = jnp.zeros((cfg.num_clients, d), jnp.float32)
  return np.asarray(dist.centered(dist.secure_sum(cfg, key, xs), cfg.bits),
                    np.int64)


def _chi2_pvalue(sample, pmf):
  lo, hi = int(np.percentile(sample, 0.5)), int(np.percentile(sample, 99.5))
  edges = np.linspace(lo, hi + 1, 25).astype(int)
  edges = np.unique(edges)
  counts, _ = np.histogram(sample, bins=np.concatenate(
      [[-10**9], edges[1:-1], [10**9]]))
  support = np.arange(lo - 2000, hi + 2000)
  p = pmf(support)
  p = p / p.sum()
  idx = np.searchsorted(edges[1:-1], support, side='right')
  expected = np.bincount(idx, weights=p, minlength=len(counts)) * len(sample)
  expected = np.maximum(expected, 1e-12)  # an empty bin rejects, no warning
  return stats.chisquare(counts, expected).pvalue


def _dg_pmf(var):
  return lambda x: np.exp(-x.astype(np.float64)**2 / (2 * var))


def test_ddg_noise_shares_sum_to_the_stated_total():
  # n = 4 shares of N_Z(0, 3^2): the sum is close to N_Z(0, 36) (tau ~ 0).
  cfg = _config('ddg', num_clients=4, gamma=1.0, stddev=6.0)
  assert cfg.local_sigma == 3.0
  s = _centred_noise(cfg, jax.random.key(11))
  assert _chi2_pvalue(s, _dg_pmf(36.0)) > 1e-3
  assert _chi2_pvalue(s, _dg_pmf(36.0 * 1.3)) < 1e-6  # rejects a wrong scale


def test_skellam_noise_shares_sum_to_the_stated_total():
  # n = 4 shares of Sk(mu = 18): the sum is Sk(72), variance 144.
  cfg = _config('skellam', num_clients=4, gamma=1.0, stddev=12.0)
  assert math.isclose(cfg.local_mu, 18.0)
  s = _centred_noise(cfg, jax.random.key(12))
  sk = lambda mu: (lambda x: stats.skellam.pmf(x, mu, mu))
  assert _chi2_pvalue(s, sk(72.0)) > 1e-3
  assert _chi2_pvalue(s, sk(72.0 * 1.3)) < 1e-6


@pytest.mark.parametrize('lam', [0.7, 25.0, 900.0, 2.0**16])
def test_jax_poisson_sampler_matches_the_poisson_pmf(lam):
  # jax.random.poisson is not an exact sampler (float32 arithmetic; Knuth's
  # product below lam = 10, transformed rejection above): test its law.
  x = np.asarray(jax.random.poisson(jax.random.key(int(lam)), lam, (20000,),
                                    dtype=jnp.int32), np.int64)
  assert _chi2_pvalue(x, lambda k: stats.poisson.pmf(k, lam)) > 1e-3
  assert _chi2_pvalue(x, lambda k: stats.poisson.pmf(k, 1.15 * lam)) < 1e-6


def test_large_skellam_rates_are_split_into_tested_parts():
  # mu = 3e6 > 2^16: 46 parts; the sum is Sk(3e6) (variance 6e6).
  x = np.asarray(noise.skellam(jax.random.key(4), (20000,), mu=3e6),
                 np.float64)
  z = x / math.sqrt(6e6)
  assert abs(z.mean()) < 0.03 and abs(z.var() - 1) < 0.04
  assert stats.kstest(z, 'norm').pvalue > 1e-3
  assert np.abs(z).max() < 6  # no outliers from the unreliable regime


def test_public_skellam_sampler_checks_its_arguments_and_shapes():
  x = noise.skellam(jax.random.key(0), (3, 2), mu=5.0, dtype=jnp.int64
                    if jax.config.jax_enable_x64 else jnp.int16)
  assert x.shape == (3, 2) and jnp.issubdtype(x.dtype, jnp.integer)
  assert noise.skellam(jax.random.key(0), mu=0.0).shape == ()
  assert int(noise.skellam(jax.random.key(0), (5,), mu=0.0).sum()) == 0
  for bad in (-1.0, float('nan'), 2 * noise.MAX_SKELLAM_MU):
    with pytest.raises(ValueError, match='mu'):
      noise.skellam(jax.random.key(0), (2,), mu=bad)
  with pytest.raises(ValueError, match='dtype'):
    noise.skellam(jax.random.key(0), (2,), mu=1.0, dtype=jnp.float32)
  with pytest.raises(ValueError, match='key'):
    noise.skellam(None, (2,), mu=1.0)


def test_skellam_beyond_the_sampler_range_is_refused():
  big = _config('skellam', bits=24, gamma=1e-6, stddev=1.0)  # mu ~ 6e10
  assert big.local_mu > dist.MAX_SKELLAM_MU
  with pytest.raises(ValueError, match='local Skellam parameter mu'):
    dist.secure_sum_round(big, jax.random.key(0), _clients())


def test_wraparound_is_measured_and_flags_the_round():
  xs = _clients()
  r = dist.secure_sum_round(CFG_DDG, jax.random.key(0), xs)
  assert float(r.wraparound_rate) == 0 and bool(r.accepted)
  # 6 bits with a fine grid: the sum of 8 clients wraps on many coordinates.
  bad = _config('ddg', bits=6, stddev=0.0)
  r = dist.secure_sum_round(bad, jax.random.key(0), xs,
                            max_wraparound_rate=0.05)
  assert float(r.wraparound_rate) > 0.05 and not bool(r.accepted)
  assert int(r.rounding_failures) == 0


def test_deterministic_and_key_sensitive():
  cfg = CFG_SKELLAM
  xs = _clients()
  a = dist.secure_sum_round(cfg, jax.random.key(1), xs).estimate
  b = dist.secure_sum_round(cfg, jax.random.key(1), xs).estimate
  c = dist.secure_sum_round(cfg, jax.random.key(2), xs).estimate
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert not np.array_equal(np.asarray(a), np.asarray(c))
  m = dist.client_encode_modular(cfg, jax.random.key(0), xs[1],
                                 rotation_key=jax.random.key(9))
  assert m.dtype == jnp.uint32 and m.shape == (16,)
  assert int(jnp.max(m)) < cfg.modulus


@pytest.mark.parametrize('kwargs,match', [
    (dict(bits=1), 'bits=1'), (dict(bits=33), 'bits=33'),
    (dict(num_clients=0), 'num_clients=0'),
    (dict(l2_norm_clip=0.0), 'l2_norm_clip=0.0'),
    (dict(l2_norm_clip=-1.0), 'l2_norm_clip=-1.0'),
    (dict(gamma=0.0), 'gamma=0.0'), (dict(gamma=-2.0), 'gamma=-2.0'),
    (dict(stddev=-1.0), 'stddev=-1.0'), (dict(beta=1.0), 'beta=1.0'),
    (dict(mechanism='binomial'), "mechanism='binomial'"),
    (dict(max_rounding_attempts=0), 'max_rounding_attempts=0'),
])
def test_bad_config_raises_naming_the_value(kwargs, match):
  with pytest.raises(ValueError, match=match):
    _config(**kwargs)


def test_bad_inputs_raise():
  cfg = _config()
  with pytest.raises(ValueError, match='num_clients=8'):
    dist.secure_sum_round(cfg, jax.random.key(0), _clients(n=4))
  with pytest.raises(ValueError, match='max_wraparound_rate=2'):
    dist.secure_sum_round(cfg, jax.random.key(0), _clients(),
                          max_wraparound_rate=2)
  with pytest.raises(ValueError, match='stddev > 0'):
    dist.distributed_dp_event(_config(stddev=0.0), D)
  for kw, match in ((dict(epsilon=0.0), 'epsilon=0.0'),
                    (dict(epsilon=-1.0), 'epsilon=-1.0'),
                    (dict(bits=1), 'bits=1'), (dict(bits=40), 'bits=40'),
                    (dict(num_clients=0), 'num_clients=0'),
                    (dict(l2_norm_clip=0.0), 'l2_norm_clip=0.0')):
    args = dict(epsilon=1.0, delta=1e-5, num_clients=10, dimension=8,
                bits=16, l2_norm_clip=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
      dist.calibrate_distributed_dp('ddg', **args)


def test_bits_count():
  assert dist.distributed_dp_bits(_config(bits=14), 100) == 14 * 128
