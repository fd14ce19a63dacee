"""Q-DPSGD-1/2, DSGD and SDM rounds: purity, sharding, grids, sensitivity."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import distributed as dd
from dpjax import sampling
from dpjax.compression import low_precision_quantizer

N, D, M = 4, 3, 12
QUANT = low_precision_quantizer(0.125, 4)


def loss(params, example):
  x, y = example
  return 0.5 * jnp.square(jnp.dot(params['w'], x) + params['b'] - y)


def _data(key=0):
  k1, k2 = jax.random.split(jax.random.key(key))
  x = jax.random.normal(k1, (N, M, D))
  y = jax.random.normal(k2, (N, M))
  return x, y


def _batch(x, y, key, sampler=sampling.DeadlineSampler(M, 5)):
  b = sampler.sample(key, N)
  take = jax.vmap(lambda a, i: a[i])
  return dd.AgentBatch((take(x, b.indices), take(y, b.indices)), b.mask)


W = dd.mixing_matrix(dd.ring(N))
PARAMS = {'w': jnp.full((D,), 0.1), 'b': jnp.zeros(())}


_MESH = []


def _make(name, sharded=False):
  """One compiled algorithm per (name, sharded), shared by the tests."""
  if (name, sharded) not in _CACHE:
    if sharded and not _MESH:
      _MESH.append(dd.agent_mesh(4))
    _CACHE[name, sharded] = _build(name, _MESH[0] if sharded else None)
  return _CACHE[name, sharded]


_CACHE = {}


def _build(name, mesh=None, **kw):
  common = dict(learning_rate=0.2, mesh=mesh)
  if name == 'qdpsgd1':
    return dd.qdpsgd1(loss, W, l2_norm_clip=0.5, noise_multiplier=1.0,
                      mixing_rate=0.5, quantizer=QUANT, **common, **kw)
  if name == 'qdpsgd2':
    return dd.qdpsgd2(loss, W, l2_norm_clip=0.5, noise_multiplier=0.5,
                      mixing_rate=0.5, quantizer=QUANT, **common, **kw)
  if name == 'sdm':
    return dd.sdm(loss, W, l2_norm_clip=0.5, noise_multiplier=1.0, **common,
                  **kw)
  return dd.dsgd(loss, W, **common, **kw)


def _run(alg, rounds=3, key=0):
  x, y = _data()
  state = alg.init(PARAMS)
  metrics = []
  for t in range(rounds):
    state, m = alg.round(state, jax.random.key(key),
                         _batch(x, y, jax.random.key(100 + t)))
    metrics.append(m)
  return state, metrics


def _leaves_equal(a, b):
  return all(np.array_equal(np.asarray(u), np.asarray(v))
             for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.mark.parametrize('name', dd.ALGORITHMS)
@pytest.mark.usefixtures('full_optimization')
def test_sharded_rounds_equal_vmapped_rounds_bitwise(name):
  assert len(jax.devices()) >= 4
  s1, m1 = _run(_make(name))
  s2, m2 = _run(_make(name, sharded=True))
  assert _leaves_equal(s1, s2)
  assert _leaves_equal(m1, m2)


@pytest.mark.parametrize('name', ['qdpsgd1', 'qdpsgd2', 'sdm'])
def test_rounds_are_pure_and_a_reused_key_still_draws_fresh_noise(name):
  alg = _make(name)
  x, y = _data()
  batch = _batch(x, y, jax.random.key(5))
  state = alg.init(PARAMS)
  a, _ = alg.round(state, jax.random.key(1), batch)
  b, _ = alg.round(state, jax.random.key(1), batch)
  assert _leaves_equal(a, b)  # same state, key and data: same output
  # The same key in the next round: the round counter moves the noise.
  c, _ = alg.round(a, jax.random.key(1), batch)
  step_a = jax.tree.map(lambda u, v: u - v, a.params, state.params)
  step_c = jax.tree.map(lambda u, v: u - v, c.params, a.params)
  assert not _leaves_equal(step_a, step_c)
  assert int(c.step) == 2


def test_qdpsgd2_broadcasts_stay_on_the_grid():
  # W swaps two agents; with mixing rate 1 and a zero gradient every agent's
  # new model IS its neighbour's broadcast.
  w = np.array([[0.0, 1.0], [1.0, 0.0]])
  zero_loss = lambda p, ex: 0.0 * jnp.sum(p['w'])
  alg = dd.qdpsgd2(zero_loss, w, l2_norm_clip=0.5, noise_multiplier=2.0,
                   learning_rate=0.1, mixing_rate=1.0, quantizer=QUANT)
  state = alg.init({'w': jnp.linspace(-3.0, 3.0, 257)})
  batch = dd.AgentBatch(jnp.zeros((2, 1, 1)), jnp.ones((2, 1), bool))
  state, _ = alg.round(state, jax.random.key(0), batch)
  z = np.asarray(state.params['w'], np.float64)
  codes = z / QUANT.spacing
  np.testing.assert_array_equal(codes, np.round(codes))  # on eta Z
  assert codes.min() >= QUANT.code_min and codes.max() <= QUANT.code_max
  # The noise moved some values (sigma K / eta = 8 grid steps).
  start = np.clip(np.linspace(-3, 3, 257), QUANT.low, QUANT.high)
  assert np.mean(np.abs(z[0] - start) > QUANT.spacing) > 0.3


def test_qdpsgd1_broadcast_is_the_unbiased_quantizer():
  # Same swap construction with Q-DPSGD-1: the new model is Q(neighbour),
  # which must be on the grid and unbiased.
  w = np.array([[0.0, 1.0], [1.0, 0.0]])
  zero_loss = lambda p, ex: 0.0 * jnp.sum(p['w'])
  alg = dd.qdpsgd1(zero_loss, w, l2_norm_clip=0.5, noise_multiplier=0.0,
                   learning_rate=0.1, mixing_rate=1.0, quantizer=QUANT)
  x0 = jnp.full((4000,), 0.3)  # between grid points 0.25 and 0.375
  state = alg.init({'w': x0})
  batch = dd.AgentBatch(jnp.zeros((2, 1, 1)), jnp.ones((2, 1), bool))
  state, _ = alg.round(state, jax.random.key(0), batch)
  z = np.asarray(state.params['w'][0], np.float64)
  assert set(np.unique(z).tolist()) == {0.25, 0.375}
  # P[up] = 0.4; 4000 draws: sd 0.0077 in the fraction, 5 sd.
  assert abs(np.mean(z == 0.375) - 0.4) < 0.04
  assert abs(z.mean() - 0.3) < 0.005


def test_empty_batch_gives_a_zero_gradient_and_no_noise():
  alg = _make('qdpsgd1')
  x, y = _data()
  batch = _batch(x, y, jax.random.key(3))
  empty = dd.AgentBatch(batch.examples, jnp.zeros_like(batch.mask))
  state = alg.init(PARAMS)
  a, m = alg.round(state, jax.random.key(0), empty)
  b, _ = alg.round(state, jax.random.key(0), empty,
                   dict(noise_multiplier=0.0))
  assert _leaves_equal(a.params, b.params)  # no data, no noise
  np.testing.assert_array_equal(m.batch_size, np.zeros(N))


def test_traced_hyperparameters_do_not_recompile():
  alg = _make('qdpsgd1')
  x, y = _data()
  batch = _batch(x, y, jax.random.key(0))
  state = alg.init(PARAMS)
  run = jax.jit(lambda st, s: alg.round(st, jax.random.key(0), batch,
                                        dict(noise_multiplier=s))[0])
  run(state, 1.0)
  before = run._cache_size()  # pylint: disable=protected-access
  outs = [run(state, s) for s in (0.5, 2.0, 3.0)]
  assert run._cache_size() == before  # pylint: disable=protected-access
  assert not _leaves_equal(outs[0], outs[1])
  sweep = jax.vmap(lambda s: run(state, s))(jnp.array([0.5, 2.0]))
  np.testing.assert_allclose(sweep.params['w'][1], outs[1].params['w'],
                             rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="Cannot override 'noise_multiplier'"):
    _make('qdpsgd2').round(state, jax.random.key(0), batch,
                           dict(noise_multiplier=1.0))


@pytest.mark.parametrize('clip_method', dd.CLIP_METHODS)
def test_qdpsgd1_noisy_gradient_has_the_stated_sensitivity(clip_method):
  """Replace one example adversarially: the mean clipped gradient that
  Q-DPSGD-1 noises moves by at most 2K / |S|, and nearly that much, with
  either clipping method (ghost's certified norms only clip more)."""
  k = 0.5  # the cached algorithm's K, with alpha = eps = 1 and sigma = 0
  alg = (_make('qdpsgd1') if clip_method == 'vmap'
         else _build('qdpsgd1', clip_method=clip_method))
  hyper = dict(learning_rate=1.0, mixing_rate=1.0, noise_multiplier=0.0)
  x, y = _data()
  batch = _batch(x, y, jax.random.key(7))
  sizes = np.asarray(batch.mask.sum(axis=1))
  state = alg.init(PARAMS)
  base, _ = alg.round(state, jax.random.key(0), batch, hyper)
  worst = np.zeros(N)
  for target in (-1e3, 1e3):  # a huge label: a gradient clipped to K
    xs, ys = batch.examples
    ys2 = ys.at[:, 0].set(target)  # row 0 is real for every agent with |S|>0
    other, _ = alg.round(state, jax.random.key(0),
                         dd.AgentBatch((xs, ys2), batch.mask), hyper)
    # With mixing rate 1 and learning rate 1, the models differ by the mean
    # gradients' difference (the broadcasts are identical: same keys).
    diff = np.sqrt(sum(
        np.sum((np.asarray(a) - np.asarray(b)).reshape(N, -1)**2, axis=1)
        for a, b in zip(jax.tree.leaves(base.params),
                        jax.tree.leaves(other.params))))
    worst = np.maximum(worst, diff)
  bound = np.where(sizes > 0, 2 * k / np.maximum(sizes, 1), 0)
  assert (worst <= bound * (1 + 1e-5) + 1e-6).all(), (worst, bound)
  assert (worst[sizes > 0] >= 0.5 * bound[sizes > 0]).all()


@pytest.mark.parametrize('name', ['qdpsgd1', 'qdpsgd2', 'sdm'])
def test_ghost_clipping_gives_the_vmap_rounds(name):
  """clip_method='ghost' forms the same clipped mean gradient without
  per-example gradients: the same states and metrics to float rounding."""
  s1, m1 = _run(_make(name))
  s2, m2 = _run(_build(name, clip_method='ghost'))
  for a, b in zip(jax.tree.leaves((s1, m1)), jax.tree.leaves((s2, m2))):
    np.testing.assert_allclose(np.asarray(a, np.float64),
                               np.asarray(b, np.float64), rtol=1e-5,
                               atol=1e-6)


def test_qdpsgd2_broadcast_sensitivity_stays_below_the_drift_bound():
  """Two coupled runs on neighbouring data (sigma = 0, the same uniforms):
  every broadcast Q(x_t) differs by at most Delta_t of
  ``qdpsgd2_sensitivities``. W = I keeps what each agent receives equal in
  both runs, as the bound conditions on (and gives the slowest contraction,
  1 - eps + eps w_ii = 1)."""
  k, alpha, rate = 0.5, 0.3, 0.7
  eye = np.eye(N)
  alg = dd.qdpsgd2(loss, eye, l2_norm_clip=k, noise_multiplier=0.0,
                   learning_rate=alpha, mixing_rate=rate, quantizer=QUANT)
  x, y = _data()
  y_adv = y.at[:, 0].set(1e3)  # one replaced record per agent
  full = dd.AgentBatch((x, y), jnp.ones((N, M), bool))
  adv = dd.AgentBatch((x, y_adv), jnp.ones((N, M), bool))
  s1, s2 = alg.init(PARAMS), alg.init(PARAMS)
  gaps = []
  for t in range(6):
    key = jax.random.fold_in(jax.random.key(0), t)
    flat = lambda s: jnp.concatenate([s.params['w'], s.params['b'][:, None]],
                                     axis=1)
    q1 = QUANT.dequantize(QUANT.quantize(flat(s1), key=key))
    q2 = QUANT.dequantize(QUANT.quantize(flat(s2), key=key))
    gaps.append(np.asarray(jnp.linalg.norm(q1 - q2, axis=1)))
    s1, _ = alg.round(s1, jax.random.key(1), full)
    s2, _ = alg.round(s2, jax.random.key(1), adv)
  setting = dd.DecentralizedPrivacy(
      'qdpsgd2', 1.0, k, M, alpha, rate, QUANT.spacing, D + 1, (1.0,) * N)
  bound = dd.qdpsgd2_sensitivities(setting, [[M] * N] * 6)
  gaps = np.asarray(gaps)
  assert (gaps[0] == 0).all() and (bound[0] == 0).all()
  assert (gaps <= bound + 1e-6).all(), (gaps, bound)
  assert gaps.max() > 0  # the replaced record did move the broadcasts


@pytest.mark.parametrize('call, match', [
    (lambda: dd.qdpsgd1(loss, W, l2_norm_clip=0.0, noise_multiplier=1.0,
                        learning_rate=0.1, mixing_rate=0.5, quantizer=QUANT),
     'l2_norm_clip=0.0'),
    (lambda: dd.qdpsgd1(loss, W, l2_norm_clip=-1.0, noise_multiplier=1.0,
                        learning_rate=0.1, mixing_rate=0.5, quantizer=QUANT),
     'l2_norm_clip=-1.0'),
    (lambda: dd.qdpsgd2(loss, W, l2_norm_clip=0.5, noise_multiplier=-1.0,
                        learning_rate=0.1, mixing_rate=0.5, quantizer=QUANT),
     'noise_multiplier=-1.0'),
    (lambda: dd.qdpsgd1(loss, W, l2_norm_clip=0.5, noise_multiplier=1.0,
                        learning_rate=0.1, mixing_rate=0.5,
                        quantizer=low_precision_quantizer(0.1, 0)),
     'bits=0'),
    (lambda: dd.qdpsgd1(loss, np.ones((2, 2)), l2_norm_clip=0.5,
                        noise_multiplier=1.0, learning_rate=0.1,
                        mixing_rate=0.5, quantizer=QUANT),
     'doubly stochastic'),
    (lambda: dd.sdm(loss, W, l2_norm_clip=0.5, noise_multiplier=1.0,
                    learning_rate=0.1, rate=1.5), 'rate=1.5'),
    (lambda: dd.dsgd(loss, W, learning_rate=0.0), 'learning_rate=0.0'),
    (lambda: dd.sdm(loss, W, l2_norm_clip=0.5, noise_multiplier=1.0,
                    learning_rate=0.1, clip_method='jit'), "clip_method"),
])
def test_bad_input_names_the_value(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_bad_batch_is_refused():
  alg = _make('dsgd')
  state = alg.init(PARAMS)
  with pytest.raises(ValueError, match='bool'):
    alg.round(state, jax.random.key(0),
              dd.AgentBatch(_data(), jnp.ones((N, M))))
  with pytest.raises(ValueError, match=r'\[4, cap\]'):
    alg.round(state, jax.random.key(0),
              dd.AgentBatch(_data(), jnp.ones((M,), bool)))


def test_metrics_record_the_sigma_that_ran():
  """A sweep override of sigma is in the round's metrics, and the
  accounting refuses a setting that claims the factory's sigma."""
  x, y = _data()
  batch = _batch(x, y, jax.random.key(0))
  alg = _make('qdpsgd1')  # built with sigma 1.0
  state, m = alg.round(alg.init(PARAMS), jax.random.key(0), batch,
                       dict(noise_multiplier=3.0))
  assert float(m.noise_multiplier) == 3.0
  claimed = dd.DecentralizedPrivacy('qdpsgd1', 1.0, 0.5, M)
  with pytest.raises(ValueError, match='Claimed noise_multiplier=1.0'):
    dd.qdpsgd_step_event(m, claimed, 0)
  ran = claimed._replace(noise_multiplier=3.0)
  assert dd.qdpsgd_step_event(m, ran, 1) == dd.qdpsgd_event(
      ran, int(m.batch_size[1]))
  _, m2 = alg.round(state, jax.random.key(0), batch)  # the default sigma
  both = jax.tree.map(lambda *a: np.stack(a), m, m2)
  with pytest.raises(ValueError, match=r'ran noise_multiplier=\[1.0, 3.0\]'):
    dd.run_epsilon(ran, both, 1e-5)
  assert float(_make('qdpsgd2').round(
      alg.init(PARAMS), jax.random.key(0), batch)[1].noise_multiplier) == 0.5
  assert float(_make('dsgd').round(
      alg.init(PARAMS), jax.random.key(0), batch)[1].noise_multiplier) == 0.0


def test_examples_without_the_agent_and_batch_axes_are_refused():
  alg = _make('dsgd')
  x, y = _data()
  with pytest.raises(ValueError, match=r'batch.examples leaves of shape'):
    alg.round(alg.init(PARAMS), jax.random.key(0),
              dd.AgentBatch((x[:, 0], y[:, 0]), jnp.ones((N, M), bool)))
