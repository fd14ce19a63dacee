"""Tests of dpjax.distributed (cpSGD and the Gaussian baseline)."""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import distributed as dist
from dpjax import transforms as _rotation

RUNS = 2000


def _clients(n, d, seed=0, big=(0,)):
  """n client vectors: norms about 0.5, rows in ``big`` scaled far past D=1."""
  rng = np.random.default_rng(seed)
  xs = rng.normal(size=(n, d))
  xs = 0.5 * xs / np.linalg.norm(xs, axis=1, keepdims=True)
  for i in big:
    xs[i] *= 10.0
  return jnp.asarray(xs, jnp.float32)


def _clipped_rows(xs, clip_norm):
  x = np.asarray(xs, np.float64)
  norms = np.linalg.norm(x, axis=1, keepdims=True)
  return x * np.minimum(1.0, clip_norm / norms)


def _clipped_mean(xs, clip_norm):
  return _clipped_rows(xs, clip_norm).mean(axis=0)


def _run_keys(seed, runs=RUNS):
  return jax.random.split(jax.random.key(seed), runs)


def _mean_fixed_rotation(cfg, rotation_key, client_keys, xs):
  """The protocol from its public pieces, with a given shared rotation key."""
  encode = lambda k, x: dist.client_encode(cfg, k, x, rotation_key=rotation_key)
  summed = jnp.sum(jax.vmap(encode)(client_keys, xs), axis=0)
  return dist.server_decode(cfg, rotation_key, summed, xs.shape[0],
                            dimension=xs.shape[1])


# --- Configuration and validation --------------------------------------------


def test_config_defaults():
  cfg = dist.cpsgd(clip_norm=2.0, levels=5, num_trials=8)
  assert cfg.x_max == 2.0 and not cfg.rotate
  assert cfg.spacing == 1.0 and cfg.max_message == 12
  rot = dist.cpsgd(2.0, 5, 8, rotate=True, dimension=1000, num_clients=100,
                   delta=1e-5)
  dp = 1024
  expected = 2.0 * math.sqrt(2 * math.log(2 * 100 * dp / 1e-5) / dp)
  assert rot.x_max == pytest.approx(expected) and rot.rotate
  # Small dimensions: the Hoeffding value exceeds D and is capped at D.
  assert dist.rotated_x_max(2.0, 8, 10, 1e-5) == 2.0


@pytest.mark.parametrize('kwargs, match', [
    (dict(levels=1), r'levels=1\b'),
    (dict(levels=0), r'levels=0\b'),
    (dict(levels=2.5), r'levels=2\.5'),
    (dict(levels=4.0), r'levels=4\.0'),
    (dict(levels=True), r'levels=True'),
    (dict(num_trials=0), r'num_trials=0\b'),
    (dict(num_trials=-3), r'num_trials=-3'),
    (dict(num_trials=1.5), r'num_trials=1\.5'),
    (dict(p=0.0), r'p=0\.0'),
    (dict(p=1.0), r'p=1\.0'),
    (dict(p=-0.2), r'p=-0\.2'),
    (dict(p=1.5), r'p=1\.5'),
    (dict(p=float('nan')), r'p=nan'),
    (dict(clip_norm=0.0), r'clip_norm=0\.0'),
    (dict(clip_norm=-1.0), r'clip_norm=-1\.0'),
    (dict(clip_norm=float('inf')), r'clip_norm=inf'),
    (dict(x_max=0.0), r'x_max=0\.0'),
    (dict(x_max=-2.0), r'x_max=-2\.0'),
    (dict(rotate=True), r'dimension, num_clients, delta'),
    (dict(rotate=True, dimension=8, num_clients=4, delta=2.0), r'delta=2\.0'),
])
def test_bad_config_raises_naming_the_value(kwargs, match):
  args = dict(clip_norm=1.0, levels=4, num_trials=8)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dist.cpsgd(**args)


def test_bad_inputs_raise():
  cfg = dist.cpsgd(1.0, 4, 8)
  key = jax.random.key(0)
  with pytest.raises(ValueError, match='shape'):
    dist.distributed_mean(cfg, key, jnp.ones(3))
  with pytest.raises(ValueError, match='shape'):
    dist.client_encode(cfg, key, jnp.ones((2, 3)))
  with pytest.raises(ValueError, match='key'):
    dist.distributed_mean(cfg, None, jnp.ones((2, 3)))
  with pytest.raises(ValueError, match='rotation_key'):
    dist.client_encode(cfg._replace(rotate=True), key, jnp.ones(3))
  with pytest.raises(ValueError, match='CpsgdConfig'):
    dist.distributed_mean((1.0, 4, 8, 0.5, 1.0, False), key, jnp.ones((2, 3)))
  with pytest.raises(ValueError, match='num_clients=0'):
    dist.server_decode(cfg, None, jnp.zeros(3, jnp.int32), 0)
  with pytest.raises(ValueError, match='integer'):
    dist.server_decode(cfg, None, jnp.zeros(3), 2)
  with pytest.raises(ValueError, match='length 4'):
    dist.server_decode(cfg._replace(rotate=True), key,
                       jnp.zeros(3, jnp.int32), 2, dimension=3)
  with pytest.raises(ValueError, match='< 2\\^31'):
    dist.distributed_mean(dist.cpsgd(1.0, 2**20, 2**20), key,
                          jnp.ones((2**11, 1)))
  with pytest.raises(ValueError, match='clip_norm=0'):
    dist.gaussian_distributed_mean(key, jnp.ones((2, 3)), 0.0, 1.0)
  with pytest.raises(ValueError, match='noise_stddev=-1'):
    dist.gaussian_distributed_mean(key, jnp.ones((2, 3)), 1.0, -1.0)
  with pytest.raises(ValueError, match='mse|p=0'):
    dist.cpsgd_mse_bound(4, 2, 4, 8, 0.0, 1.0)
  with pytest.raises(ValueError, match='levels=1'):
    dist.bits_per_coordinate(1, 8)


# --- Messages and communication ----------------------------------------------


def test_messages_are_integers_in_range():
  k, m, d = 3, 2, 5
  cfg = dist.cpsgd(1.0, k, m, x_max=0.3)
  rng = np.random.default_rng(1)
  # Mix of tiny, ordinary and huge vectors (clamped to [-X_max, X_max]).
  xs = jnp.asarray(rng.normal(size=(512, d)) * rng.choice([1e-3, 0.3, 1e3],
                                                          (512, 1)),
                   jnp.float32)
  keys = jax.random.split(jax.random.key(3), 512)
  msgs = jax.vmap(lambda kk, x: dist.client_encode(cfg, kk, x))(keys, xs)
  assert msgs.dtype == jnp.int32
  assert msgs.shape == (512, dist.message_length(cfg, d)) == (512, d)
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
def test_bits_per_client(k, m, d, rotate, exact, fixed):
  cfg = dist.cpsgd(1.0, k, m, x_max=0.5, rotate=rotate)
  assert dist.bits_per_coordinate(k, m) == pytest.approx(math.log2(k + m))
  assert dist.bits_per_coordinate(k, m, fixed_width=True) == math.ceil(
      math.log2(k + m))
  assert dist.bits_per_client(cfg, d) == pytest.approx(exact)
  assert dist.bits_per_client(cfg, d, fixed_width=True) == fixed
  assert dist.gaussian_bits_per_client(d) == 32 * d


# --- Keys, determinism, jit, sharding ----------------------------------------


def test_key_derivation_is_documented_one():
  key = jax.random.key(5)
  rkey, ckeys = dist.cpsgd_keys(key, 3)
  root = jax.random.split(key)
  assert jnp.all(jax.random.key_data(rkey) == jax.random.key_data(root[0]))
  for i in range(3):
    want = jax.random.fold_in(root[1], i)
    assert jnp.all(jax.random.key_data(ckeys[i]) == jax.random.key_data(want))


# One configuration and input shape per rotation setting, shared by the tests
# below so that jit caches are reused (compiling the protocol dominates the
# runtime of this file).
N, D = 16, 12
CONFIGS = {False: dist.cpsgd(1.0, 16, 32, x_max=0.6),
           True: dist.cpsgd(1.0, 16, 32, x_max=0.6, rotate=True)}
XS = _clients(N, D, seed=3, big=(2, 9))


@pytest.mark.parametrize('rotate', [False, True])
def test_vmapped_equals_public_pieces(rotate):
  cfg = CONFIGS[rotate]
  key = jax.random.key(11)
  rkey, ckeys = dist.cpsgd_keys(key, N)
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


def test_clipping_scales_large_client_to_clip_norm():
  xs = jnp.array([[30.0, 40.0]])
  g = dist.gaussian_distributed_mean(jax.random.key(0), xs, 2.0, 0.0)
  np.testing.assert_allclose(g, [1.2, 1.6], rtol=1e-6)
  # cpSGD with a very fine grid and a single Binomial trial: the estimate is
  # the clipped vector up to s * (|Bin(1, p) - p| + 1) ~ 4e-6.
  cfg = dist.cpsgd(clip_norm=2.0, levels=2**20 + 1, num_trials=1)
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


def _squared_clamp_bias(xs, x_max, rotation_key=None):
  """||mean(clamp(x')) - mean(x')||^2 in the quantizer's coordinates x'."""
  x = jnp.asarray(_clipped_rows(xs, 1.0), jnp.float32)
  if rotation_key is not None:
    pad = _rotation.next_power_of_two(x.shape[1]) - x.shape[1]
    x = jax.vmap(lambda v: _rotation.randomized_hadamard(
        jnp.pad(v, (0, pad)), key=rotation_key))(x)
  x = np.asarray(x, np.float64)
  return np.sum((np.clip(x, -x_max, x_max).mean(axis=0) - x.mean(axis=0))**2)


@pytest.mark.parametrize('k, m, p, x_max', [(5, 4, 0.5, None),
                                            (9, 2, 0.25, None),
                                            (5, 2, 0.375, 0.25)])
def test_mse_matches_exact_prediction_without_rotation(k, m, p, x_max):
  """Unbiased with exact MSE <= derived bound for X_max = D; exact MSE with
  the clamping bias for X_max < D."""
  n, d = 8, 16
  xs = _clients(n, d, seed=5, big=(1, 4))
  xs = xs.at[2, 0].set(0.9)  # a coordinate far past X_max = 0.25
  cfg = dist.cpsgd(1.0, k, m, p=p, x_max=x_max)
  est = np.asarray(jax.jit(jax.vmap(
      lambda kk: dist.distributed_mean(cfg, kk, xs)))(_run_keys(20)),
                   np.float64)
  target = _clipped_mean(xs, 1.0)
  errors = np.sum((est - target)**2, axis=1)
  expected = dist.cpsgd_expected_mse(cfg, xs)
  mean, se = _mse_check(errors, expected)
  if x_max is not None:
    # The clamping bias is a large part of the prediction (leaving it out
    # would fail the check above).
    assert _squared_clamp_bias(xs, x_max) > 10 * se
    return
  assert cfg.x_max == 1.0  # no clamping possible, so exactly unbiased
  _unbiased_check(est, target, xs)
  bound = dist.cpsgd_mse_bound(d, n, k, m, p, cfg.x_max)
  assert expected <= bound
  # The prediction is sharp enough to reject the looser bound (quantization
  # variance s^2/4 everywhere) when the quantization term matters.
  assert abs(mean - bound) > 4 * se


def test_unbiased_with_random_rotation():
  """A fresh shared rotation per run (from the run key), default X_max."""
  n, d = 8, 6
  xs = _clients(n, d, seed=4, big=(0, 5))
  cfg = dist.cpsgd(1.0, 5, 16, rotate=True, dimension=d, num_clients=n,
                   delta=1e-3)
  assert cfg.x_max == 1.0  # capped at D for d' = 8: no clamping possible
  est = np.asarray(jax.jit(jax.vmap(
      lambda k: dist.distributed_mean(cfg, k, xs)))(_run_keys(10)), np.float64)
  _unbiased_check(est, _clipped_mean(xs, 1.0), xs)


def test_mse_matches_exact_prediction_with_rotation_and_clamping():
  """A fixed shared rotation, X_max < D: exact MSE including the bias."""
  n, d = 8, 12
  xs = _clients(n, d, seed=6, big=(0, 3))
  xs = xs.at[2, 0].set(0.9)
  cfg = dist.cpsgd(1.0, 5, 4, x_max=0.25, rotate=True)
  rkey = jax.random.key(123)
  run = jax.jit(jax.vmap(lambda kk: _mean_fixed_rotation(
      cfg, rkey, dist.cpsgd_keys(kk, n)[1], xs)))
  est = np.asarray(run(_run_keys(30)), np.float64)
  errors = np.sum((est - _clipped_mean(xs, 1.0))**2, axis=1)
  expected = dist.cpsgd_expected_mse(cfg, xs, rotation_key=rkey)
  _, se = _mse_check(errors, expected)
  assert _squared_clamp_bias(xs, 0.25, rkey) > 10 * se


def test_rotation_lowers_mse_for_peaked_vectors():
  """Rotation spreads a one-hot vector, so a small X_max suffices."""
  n, d = 8, 256
  xs = jnp.zeros((n, d)).at[:, 0].set(1.0)
  plain = dist.cpsgd(1.0, 4, 8)
  rot = dist.cpsgd(1.0, 4, 8, rotate=True, dimension=d, num_clients=n,
                   delta=1e-3)
  assert rot.x_max < 0.35
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
  cfg = dist.cpsgd(1.0, k, m, rotate=True, x_max=0.05)
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
  ``cpsgd_round_event`` feeds to Theorem 1, for every outcome.
  """
  from dpjax import accounting  # pylint: disable=g-import-not-at-top
  d, k, m = 12, 4, 8
  cfg = dist.cpsgd(1.0, k, m, x_max=0.6 if rotate else None, rotate=rotate)
  dprime = dist.message_length(cfg, d)
  l1, l2, linf = accounting.cpsgd_sensitivities(dprime, k, cfg.x_max,
                                                cfg.clip_norm)
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
