"""Tests of dpjax.distributed's protocols: cpSGD and the Gaussian baseline."""

import dataclasses
import functools
import math

import chex
import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import accounting
from dpjax import compression as _rotation
from dpjax import distributed as dist
from dpjax import noise

RUNS = 2000


def _clients(n, d, seed=0, big=(0,)):
  """n client vectors: norms about 0.5, rows in ``big`` scaled far past D=1."""
  rng = np.random.default_rng(seed)
  xs = rng.normal(size=(n, d))
  xs = 0.5 * xs / np.linalg.norm(xs, axis=1, keepdims=True)
  for i in big:
    xs[i] *= 10.0
  return jnp.asarray(xs, jnp.float32)


def _clipped_rows(xs, l2_norm_clip):
  x = np.asarray(xs, np.float64)
  norms = np.linalg.norm(x, axis=1, keepdims=True)
  return x * np.minimum(1.0, l2_norm_clip / norms)


def _clipped_mean(xs, l2_norm_clip):
  return _clipped_rows(xs, l2_norm_clip).mean(axis=0)


def _run_keys(seed, runs=RUNS):
  return jax.random.split(jax.random.key(seed), runs)


def _mean_fixed_rotation(cfg, rotation_key, client_keys, xs):
  """The protocol from its public pieces, with a given shared rotation key."""
  encode = lambda k, x: dist.client_encode(cfg, k, x, rotation_key=rotation_key)
  summed = jnp.sum(jax.vmap(encode)(client_keys, xs), axis=0)
  return dist.server_decode(cfg, rotation_key, summed, xs.shape[0],
                            dimension=xs.shape[1])


# --- Configuration and validation --------------------------------------------


def _config(l2_norm_clip=1.0, levels=4, trials=8, **kwargs):
  return dist.CpsgdConfig(l2_norm_clip=l2_norm_clip, levels=levels,
                          trials=trials, **kwargs)


def _rotated(l2_norm_clip, levels, trials, *, dimension, num_clients, delta):
  """A rotated protocol with the paper's X_max (Thm. 4)."""
  return _config(l2_norm_clip, levels, trials, rotate=True,
                 linf_clip=dist.rotated_linf_clip(l2_norm_clip, dimension,
                                                  num_clients, delta))


def test_config_defaults():
  cfg = dist.CpsgdConfig(l2_norm_clip=2.0, levels=5, trials=8)
  assert cfg.linf_clip == 2.0 and cfg.p == 0.5 and not cfg.rotate
  assert cfg.spacing == 1.0 and cfg.max_message == 12
  assert cfg.message_length(10) == 10
  rot = _rotated(2.0, 5, 8, dimension=1000, num_clients=100, delta=1e-5)
  dp = 1024
  expected = 2.0 * math.sqrt(2 * math.log(2 * 100 * dp / 1e-5) / dp)
  assert rot.linf_clip == pytest.approx(expected) and rot.rotate
  assert rot.message_length(1000) == dp
  # Small dimensions: the Hoeffding value exceeds D and is capped at D.
  assert dist.rotated_linf_clip(2.0, 8, 10, 1e-5) == 2.0


def test_config_is_frozen_hashable_and_normalized():
  cfg = _config(1, 4, 8, linf_clip=np.float32(0.5))
  assert (type(cfg.l2_norm_clip), type(cfg.linf_clip)) == (float, float)
  assert cfg == _config(1.0, 4, 8, linf_clip=0.5)
  assert hash(cfg) == hash(_config(1.0, 4, 8, linf_clip=0.5))
  with pytest.raises(dataclasses.FrozenInstanceError):
    cfg.levels = 8  # pytype: disable=not-writable
  with pytest.raises(TypeError):
    dist.CpsgdConfig(1.0, 4, 8)  # pylint: disable=too-many-function-args
  # replace() validates again.
  with pytest.raises(ValueError, match='trials=0'):
    dataclasses.replace(cfg, trials=0)
  assert dataclasses.replace(cfg, rotate=True).rotate


@pytest.mark.parametrize('kwargs, match', [
    (dict(levels=1), r'levels=1\b'),
    (dict(levels=0), r'levels=0\b'),
    (dict(levels=2.5), r'levels=2\.5'),
    (dict(levels=4.0), r'levels=4\.0'),
    (dict(levels=True), r'levels=True'),
    (dict(trials=0), r'trials=0\b'),
    (dict(trials=-3), r'trials=-3'),
    (dict(trials=1.5), r'trials=1\.5'),
    (dict(trials=2**31), r'< 2\^31'),
    (dict(p=0.0), r'p=0\.0'),
    (dict(p=1.0), r'p=1\.0'),
    (dict(p=-0.2), r'p=-0\.2'),
    (dict(p=1.5), r'p=1\.5'),
    (dict(p=float('nan')), r'p=nan'),
    (dict(l2_norm_clip=0.0), r'l2_norm_clip=0\.0'),
    (dict(l2_norm_clip=-1.0), r'l2_norm_clip=-1\.0'),
    (dict(l2_norm_clip=float('inf')), r'l2_norm_clip=inf'),
    (dict(linf_clip=0.0), r'linf_clip=0\.0'),
    (dict(linf_clip=-2.0), r'linf_clip=-2\.0'),
    (dict(rotate=1), r'rotate=1'),
    (dict(rotate=True), r'linf_clip with rotate=True'),
])
def test_bad_config_raises_naming_the_value(kwargs, match):
  args = dict(l2_norm_clip=1.0, levels=4, trials=8)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dist.CpsgdConfig(**args)
  with pytest.raises(ValueError, match=r'delta=2\.0'):
    dist.rotated_linf_clip(1.0, 8, 4, 2.0)


def test_bad_inputs_raise():
  cfg = _config(1.0, 4, 8)
  rot = dataclasses.replace(cfg, rotate=True)
  key = jax.random.key(0)
  with pytest.raises(ValueError, match='shape'):
    dist.distributed_mean(cfg, key, jnp.ones(3))
  with pytest.raises(ValueError, match='shape'):
    dist.client_encode(cfg, key, jnp.ones((2, 3)))
  with pytest.raises(ValueError, match='key'):
    dist.distributed_mean(cfg, None, jnp.ones((2, 3)))
  with pytest.raises(ValueError, match='rotation_key'):
    dist.client_encode(rot, key, jnp.ones(3))
  with pytest.raises(ValueError, match='CpsgdConfig'):
    dist.distributed_mean((1.0, 4, 8, 0.5, 1.0, False), key, jnp.ones((2, 3)))
  with pytest.raises(ValueError, match='num_clients=0'):
    dist.server_decode(cfg, None, jnp.zeros(3, jnp.int32), 0)
  with pytest.raises(ValueError, match='integer'):
    dist.server_decode(cfg, None, jnp.zeros(3), 2)
  with pytest.raises(ValueError, match='length 4'):
    dist.server_decode(rot, key,
                       jnp.zeros(3, jnp.int32), 2, dimension=3)
  with pytest.raises(ValueError, match='< 2\\^31'):
    dist.distributed_mean(_config(1.0, 2**20, 2**20), key,
                          jnp.ones((2**11, 1)))
  with pytest.raises(ValueError, match='l2_norm_clip=0'):
    dist.gaussian_distributed_mean(key, jnp.ones((2, 3)), 0.0, 1.0)
  with pytest.raises(ValueError, match='stddev=-1'):
    dist.gaussian_distributed_mean(key, jnp.ones((2, 3)), 1.0, -1.0)
  with pytest.raises(ValueError, match='mse|p=0'):
    dist.cpsgd_mse_bound(4, 2, 4, 8, 0.0, 1.0)
  with pytest.raises(ValueError, match='levels=1'):
    dist.bits_per_coordinate(1, 8)
  with pytest.raises(ValueError, match='dimension=0'):
    dist.cpsgd_bits(cfg, 0)
  with pytest.raises(ValueError, match='dimension=0'):
    dist.gaussian_protocol_bits(0)


# --- Messages and communication ----------------------------------------------


def test_messages_are_integers_in_range():
  k, m, d = 3, 2, 5
  cfg = _config(1.0, k, m, linf_clip=0.3)
  rng = np.random.default_rng(1)
  # Mix of tiny, ordinary and huge vectors (clamped to [-X_max, X_max]).
  xs = jnp.asarray(rng.normal(size=(512, d)) * rng.choice([1e-3, 0.3, 1e3],
                                                          (512, 1)),
                   jnp.float32)
  keys = jax.random.split(jax.random.key(3), 512)
  msgs = jax.vmap(lambda kk, x: dist.client_encode(cfg, kk, x))(keys, xs)
  assert msgs.dtype == jnp.int32
  assert msgs.shape == (512, cfg.message_length(d)) == (512, d)
  values = set(np.unique(np.asarray(msgs)).tolist())
  # Every value of {0, ..., k - 1 + m} occurs, and nothing else.
  assert values == set(range(k + m))


@pytest.mark.parametrize('k, m, d, rotate, exact, fixed', [
    (16, 16, 10, False, 50.0, 50),
    (16, 64, 100, True, 128 * math.log2(80), 128 * 7),
    (2, 1, 3, False, 3 * math.log2(3), 6),
    (2, 2, 5, True, 16.0, 16),
    (32, 32, 1024, True, 6144.0, 6144),
])
def test_bits(k, m, d, rotate, exact, fixed):
  cfg = _config(1.0, k, m, linf_clip=0.5, rotate=rotate)
  assert dist.bits_per_coordinate(k, m) == pytest.approx(math.log2(k + m))
  assert dist.bits_per_coordinate(k, m, fixed_width=True) == math.ceil(
      math.log2(k + m))
  assert dist.cpsgd_bits(cfg, d) == pytest.approx(exact)
  assert dist.cpsgd_bits(cfg, d, fixed_width=True) == fixed
  assert dist.gaussian_protocol_bits(d) == 32 * d


# --- Keys, determinism, jit, sharding ----------------------------------------


# One configuration and input shape per rotation setting, shared by the tests
# below so that jit caches are reused (compiling the protocol dominates the
# runtime of this file).
N, D = 16, 12
CONFIGS = {False: _config(1.0, 16, 32, linf_clip=0.6),
           True: _config(1.0, 16, 32, linf_clip=0.6, rotate=True)}
XS = _clients(N, D, seed=3, big=(2, 9))


@pytest.mark.parametrize('rotate', [False, True])
def test_vmapped_equals_public_pieces(rotate):
  cfg = CONFIGS[rotate]
  key = jax.random.key(11)
  rkey, ckeys = dist.shared_key(key), dist.client_keys(key, N)
  by_hand = _mean_fixed_rotation(cfg, rkey, ckeys, XS)
  chex.assert_trees_all_equal(dist.distributed_mean(cfg, key, XS), by_hand)


@pytest.mark.parametrize('rotate', [False, True])
def test_deterministic_and_jit_matches_eager(rotate):
  cfg = CONFIGS[rotate]
  key = jax.random.key(1)
  a = dist.distributed_mean(cfg, key, XS)
  b = dist.distributed_mean(cfg, key, XS)
  c = jax.jit(functools.partial(dist.distributed_mean, cfg))(key, XS)
  chex.assert_trees_all_equal(a, b)
  chex.assert_trees_all_equal(a, c)
  other = dist.distributed_mean(cfg, jax.random.key(2), XS)
  assert not jnp.array_equal(a, other)


def test_gaussian_deterministic_and_jit_matches_eager():
  key = jax.random.key(1)
  g = dist.gaussian_distributed_mean(key, XS, 1.0, 0.3)
  chex.assert_trees_all_equal(
      g, dist.gaussian_distributed_mean(key, XS, 1.0, 0.3))
  chex.assert_trees_all_equal(
      g, jax.jit(dist.gaussian_distributed_mean)(key, XS, 1.0, 0.3))
  assert not jnp.array_equal(
      g, dist.gaussian_distributed_mean(jax.random.key(2), XS, 1.0, 0.3))


def test_no_recompilation_across_keys():
  cfg = CONFIGS[True]
  step = jax.jit(chex.assert_max_traces(
      lambda key, x: dist.distributed_mean(cfg, key, x), n=1))
  a = step(jax.random.key(0), XS)
  b = step(jax.random.key(1), XS)
  assert not jnp.array_equal(a, b)
  assert step._cache_size() == 1  # pylint: disable=protected-access
  gauss = jax.jit(chex.assert_max_traces(dist.gaussian_distributed_mean, n=1))
  gauss(jax.random.key(0), XS, 1.0, 0.5)
  gauss(jax.random.key(1), XS, 1.0, 0.7)


def _mesh(size, name):
  if jax.device_count() < size:
    pytest.fail(f'Expected >= {size} host devices (tests/conftest.py forces '
                f'4 with XLA_FLAGS), found {jax.device_count()}.')
  return jax.sharding.Mesh(np.array(jax.devices()[:size]), (name,))


@pytest.mark.parametrize('rotate', [False, True])
@pytest.mark.usefixtures('full_optimization')
def test_sharded_matches_vmapped_bitwise(rotate):
  mesh = _mesh(4, 'clients')
  cfg = CONFIGS[rotate]
  for seed in range(3):
    key = jax.random.key(seed)
    want = dist.distributed_mean(cfg, key, XS)
    got = dist.distributed_mean_sharded(cfg, key, XS, mesh, 'clients')
    chex.assert_trees_all_equal(got, want)
  with pytest.raises(ValueError, match='divisible'):
    dist.distributed_mean_sharded(cfg, key, XS[:6], mesh, 'clients')
  with pytest.raises(ValueError, match="axis_name='batch'"):
    dist.distributed_mean_sharded(cfg, key, XS, mesh, 'batch')


def test_sharded_matches_under_jit_and_other_mesh_sizes():
  cfg = CONFIGS[True]
  key = jax.random.key(9)
  want = dist.distributed_mean(cfg, key, XS)
  mesh = _mesh(4, 'clients')
  run = jax.jit(lambda k, x: dist.distributed_mean_sharded(cfg, k, x, mesh))
  chex.assert_trees_all_equal(run(key, XS), want)
  # A 2-way mesh: other client blocks per device, same per-client keys.
  chex.assert_trees_all_equal(
      dist.distributed_mean_sharded(cfg, key, XS, _mesh(2, 'c'), 'c'), want)


# --- Clipping and degenerate limits ------------------------------------------


def test_clipping_scales_large_client_to_l2_norm_clip():
  xs = jnp.array([[30.0, 40.0]])
  g = dist.gaussian_distributed_mean(jax.random.key(0), xs, 2.0, 0.0)
  np.testing.assert_allclose(g, [1.2, 1.6], rtol=1e-6)
  # cpSGD with a very fine grid and a single Binomial trial: the estimate is
  # the clipped vector up to s * (|Bin(1, p) - p| + 1) ~ 4e-6.
  cfg = _config(2.0, 2**20 + 1, 1)
  est = dist.distributed_mean(cfg, jax.random.key(0), xs)
  np.testing.assert_allclose(est, [1.2, 1.6], atol=1e-5)
  assert float(jnp.linalg.norm(est)) == pytest.approx(2.0, abs=1e-5)
  # A client inside the ball is not scaled.
  small = jnp.array([[0.3, -0.4]])
  np.testing.assert_allclose(
      dist.distributed_mean(cfg, jax.random.key(1), small), [0.3, -0.4],
      atol=1e-5)


# --- Statistics ---------------------------------------------------------------


def _mse_check(errors, expected):
  mean = errors.mean()
  se = errors.std(ddof=1) / math.sqrt(errors.size)
  assert abs(mean - expected) < 4 * se, (mean, expected, se)
  return mean, se


def _unbiased_check(est, target, xs):
  se = est.std(axis=0, ddof=1) / math.sqrt(est.shape[0])
  z = (est.mean(axis=0) - target) / se
  assert np.max(np.abs(z)) < 4.5, z
  # A protocol that forgot to clip (targeting the raw mean) is far outside.
  z_raw = (est.mean(axis=0) - np.asarray(xs, np.float64).mean(axis=0)) / se
  assert np.max(np.abs(z_raw)) > 10


def _squared_clamp_bias(xs, linf_clip, rotation_key=None):
  """||mean(clamp(x')) - mean(x')||^2 in the quantizer's coordinates x'."""
  x = jnp.asarray(_clipped_rows(xs, 1.0), jnp.float32)
  if rotation_key is not None:
    pad = _rotation.next_power_of_two(x.shape[1]) - x.shape[1]
    x = jax.vmap(lambda v: _rotation.randomized_hadamard(
        jnp.pad(v, (0, pad)), key=rotation_key))(x)
  x = np.asarray(x, np.float64)
  clamped = np.clip(x, -linf_clip, linf_clip)
  return np.sum((clamped.mean(axis=0) - x.mean(axis=0))**2)


@pytest.mark.parametrize('k, m, p, linf_clip', [(5, 4, 0.5, None),
                                            (9, 2, 0.25, None),
                                            (5, 2, 0.375, 0.25)])
def test_mse_matches_exact_prediction_without_rotation(k, m, p, linf_clip):
  """Unbiased with exact MSE <= derived bound for X_max = D; exact MSE with
  the clamping bias for X_max < D."""
  n, d = 8, 16
  xs = _clients(n, d, seed=5, big=(1, 4))
  xs = xs.at[2, 0].set(0.9)  # a coordinate far past X_max = 0.25
  cfg = _config(1.0, k, m, p=p, linf_clip=linf_clip)
  est = np.asarray(jax.jit(jax.vmap(
      lambda kk: dist.distributed_mean(cfg, kk, xs)))(_run_keys(20)),
                   np.float64)
  target = _clipped_mean(xs, 1.0)
  errors = np.sum((est - target)**2, axis=1)
  expected = dist.cpsgd_expected_mse(cfg, xs)
  mean, se = _mse_check(errors, expected)
  if linf_clip is not None:
    # The clamping bias is a large part of the prediction (leaving it out
    # would fail the check above).
    assert _squared_clamp_bias(xs, linf_clip) > 10 * se
    return
  assert cfg.linf_clip == 1.0  # no clamping possible, so exactly unbiased
  _unbiased_check(est, target, xs)
  bound = dist.cpsgd_mse_bound(d, n, k, m, p, cfg.linf_clip)
  assert expected <= bound
  # The prediction is sharp enough to reject the looser bound (quantization
  # variance s^2/4 everywhere) when the quantization term matters.
  assert abs(mean - bound) > 4 * se


def test_unbiased_with_random_rotation():
  """A fresh shared rotation per run (from the run key), default X_max."""
  n, d = 8, 6
  xs = _clients(n, d, seed=4, big=(0, 5))
  cfg = _rotated(1.0, 5, 16, dimension=d, num_clients=n, delta=1e-3)
  assert cfg.linf_clip == 1.0  # capped at D for d' = 8: no clamping possible
  est = np.asarray(jax.jit(jax.vmap(
      lambda k: dist.distributed_mean(cfg, k, xs)))(_run_keys(10)), np.float64)
  _unbiased_check(est, _clipped_mean(xs, 1.0), xs)


def test_mse_matches_exact_prediction_with_rotation_and_clamping():
  """A fixed shared rotation, X_max < D: exact MSE including the bias."""
  n, d = 8, 12
  xs = _clients(n, d, seed=6, big=(0, 3))
  xs = xs.at[2, 0].set(0.9)
  cfg = _config(1.0, 5, 4, linf_clip=0.25, rotate=True)
  rkey = jax.random.key(123)
  run = jax.jit(jax.vmap(lambda kk: _mean_fixed_rotation(
      cfg, rkey, dist.client_keys(kk, n), xs)))
  est = np.asarray(run(_run_keys(30)), np.float64)
  errors = np.sum((est - _clipped_mean(xs, 1.0))**2, axis=1)
  expected = dist.cpsgd_expected_mse(cfg, xs, rotation_key=rkey)
  _, se = _mse_check(errors, expected)
  assert _squared_clamp_bias(xs, 0.25, rkey) > 10 * se


def test_rotation_lowers_mse_for_peaked_vectors():
  """Rotation spreads a one-hot vector, so a small X_max suffices."""
  n, d = 8, 256
  xs = jnp.zeros((n, d)).at[:, 0].set(1.0)
  plain = _config(1.0, 4, 8)
  rot = _rotated(1.0, 4, 8, dimension=d, num_clients=n, delta=1e-3)
  assert rot.linf_clip < 0.35
  rkey = jax.random.key(0)
  assert (dist.cpsgd_expected_mse(rot, xs, rotation_key=rkey)
          < 0.2 * dist.cpsgd_expected_mse(plain, xs))


def test_gaussian_baseline_mse():
  n, d, sigma = 8, 16, 0.4
  xs = _clients(n, d, seed=7, big=(0,))
  est = np.asarray(jax.jit(jax.vmap(
      lambda k: dist.gaussian_distributed_mean(k, xs, 1.0, sigma)))(
          _run_keys(40)), np.float64)
  errors = np.sum((est - _clipped_mean(xs, 1.0))**2, axis=1)
  _mse_check(errors, d * sigma**2 / n)
  with pytest.raises(AssertionError):
    _mse_check(errors, d * (1.1 * sigma)**2 / n)


def test_rotated_messages_padded_and_in_range():
  k, m = 3, 2
  cfg = _config(1.0, k, m, rotate=True, linf_clip=0.05)
  x = jnp.asarray(np.random.default_rng(2).normal(size=37), jnp.float32)
  y = dist.client_encode(cfg, jax.random.key(0), x,
                         rotation_key=jax.random.key(1))
  assert y.dtype == jnp.int32
  assert y.shape == (_rotation.rotated_size(x),) == (64,)
  assert set(np.unique(np.asarray(y)).tolist()) == set(range(k + m))


@pytest.mark.parametrize('rotate', [False, True])
def test_replacing_one_client_moves_the_sum_within_the_sensitivities(rotate):
  """Adversarial replace-one neighbours through the whole client encoder.

  The replaced client's rounding and Binomial randomness are coupled (same
  key), so the message sums differ only by its quantized vectors, whose
  difference (in real units s (Y - Y')) must respect the bounds that
  ``cpsgd_event`` feeds to Theorem 1, for every outcome.
  """
  d, k, m = 12, 4, 8
  cfg = _config(1.0, k, m, linf_clip=0.6 if rotate else None, rotate=rotate)
  dprime = cfg.message_length(d)
  l1, l2, linf = accounting.cpsgd_sensitivities(dprime, k, cfg.linf_clip,
                                                cfg.l2_norm_clip)
  rotation_key = jax.random.key(5) if rotate else None
  rng = np.random.default_rng(0)
  pairs = [(np.eye(d)[0], -np.eye(d)[0]),
           (np.ones(d) / math.sqrt(d), -np.ones(d) / math.sqrt(d)),
           (np.eye(d)[0] * 9, np.eye(d)[1] * 9)]
  pairs += [(rng.normal(size=d) * 2, rng.normal(size=d) * 2)
            for _ in range(20)]
  encode = jax.jit(lambda key, x: dist.client_encode(
      cfg, key, x, rotation_key=rotation_key))
  worst = np.zeros(3)
  for i, (x, x2) in enumerate(pairs):
    for j in range(10):
      key = jax.random.key(100 * i + j)
      diff = cfg.spacing * np.asarray(
          encode(key, jnp.asarray(x, jnp.float32))
          - encode(key, jnp.asarray(x2, jnp.float32)), np.float64)
      worst = np.maximum(worst, [np.abs(diff).sum(), np.linalg.norm(diff),
                                 np.abs(diff).max()])
  assert (worst <= np.array([l1, l2, linf]) * (1 + 1e-6)).all(), (
      worst, (l1, l2, linf))
  assert worst[2] > 0.5 * linf  # the adversarial pairs get close to it


# --- Privacy events from the protocols' hyperparameters -----------------------


def test_cpsgd_event_is_theorem1_on_the_summed_messages():
  # The docstring's example: D = 1, k = 16, m = 2000, d = 10, n = 100.
  event = dist.cpsgd_event(_config(1.0, 16, 2000), 10, 100, 1e-5)
  s, root_d = 2 / 15, math.sqrt(10)
  want = accounting.binomial_epsilon(
      100 * 2000, 0.5, s, 1e-5, 10,
      l1_sensitivity=min(2 * 10, 2 * root_d + 2 * s * 10),
      l2_sensitivity=min(2 * root_d, 2 + 2 * s * root_d),
      linf_sensitivity=2.0)
  assert isinstance(event, accounting.EpsilonDeltaDpEvent)
  assert event.epsilon == pytest.approx(want, rel=1e-12)
  assert (round(event.epsilon, 3), event.delta) == (0.515, 1e-5)
  # Rotated: Theorem 1 on the d' = 16 padded coordinates, with X_max and the
  # p the Binomial sampler actually uses.
  rot = _config(1.0, 16, 2000, p=0.3, linf_clip=0.5, rotate=True)
  sens = accounting.cpsgd_sensitivities(16, 16, linf_clip=0.5,
                                        l2_norm_clip=1.0)
  want = accounting.binomial_epsilon(
      100 * 2000, float(noise.binomial_p(0.3)), 1 / 15, 1e-5, 16, *sens)
  assert dist.cpsgd_event(rot, 10, 100, 1e-5).epsilon == (
      pytest.approx(want, rel=1e-12))
  # n m p (1 - p) = 50 is below Theorem 1's condition: no event.
  with pytest.raises(ValueError, match='Theorem 1 needs'):
    dist.cpsgd_event(_config(1.0, 16, 2), 10, 100, 1e-5)
  with pytest.raises(ValueError, match='num_clients=0'):
    dist.cpsgd_event(_config(1.0, 16, 2000), 10, 0, 1e-5)


def test_gaussian_round_event_is_the_gaussian_mechanism_on_the_sum():
  # The docstring's example: D = 1, sigma = 1, n = 100: the sum has noise
  # stddev sqrt(n) sigma = 10 and replace-one sensitivity 2 D = 2.
  event = dist.gaussian_distributed_mean_protocol(1.0, 1.0, 100, 4).event
  assert event == dp_accounting.GaussianDpEvent(5.0)
  assert event == accounting.gaussian_event(10.0 / 2.0)
  eps = accounting.epsilon(event, 1e-5, 'pld')
  assert round(eps, 3) == 0.726
  # The exact privacy profile of the Gaussian mechanism (Balle & Wang 2018,
  # Thm. 8) at that epsilon is the target delta.
  z = 5.0
  profile = (stats.norm.cdf(1 / (2 * z) - eps * z)
             - math.exp(eps) * stats.norm.cdf(-1 / (2 * z) - eps * z))
  assert profile == pytest.approx(1e-5, rel=1e-3)
  assert eps < accounting.gaussian_protocol_epsilon(10.0, 2.0, 1e-5)
  assert dist.gaussian_distributed_mean_protocol(1.0, 0.0, 100, 4).event is (
      None)
  with pytest.raises(ValueError, match='l2_norm_clip=-1.0'):
    dist.gaussian_distributed_mean_protocol(-1.0, 1.0, 100, 4)
  with pytest.raises(ValueError, match='num_clients=0'):
    dist.gaussian_distributed_mean_protocol(1.0, 1.0, 0, 4)
