"""Correlated noise: strategies, sensitivity, optimizer, streaming noise, events.

Sensitivities, per-query errors and optimized objectives are cross-checked
against jax_privacy's ``matrix_factorization`` (the ``compare`` extra; the
tests that need it skip with the reason if it is absent).
"""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import dpjax
from dpjax import _keys
from dpjax import correlated_noise as cn
from dpjax import noise as noise_lib
from dpjax.transforms import _clipping


def _jax_privacy():
  mf = pytest.importorskip(
      'jax_privacy.matrix_factorization',
      reason='jax_privacy (the compare extra) is not installed')
  return mf


def _random_lower(n, seed):
  rng = np.random.default_rng(seed)
  c = np.tril(rng.normal(size=(n, n)))
  np.fill_diagonal(c, 1.0 + rng.random(n))
  return c


N = 24
STRATEGIES = {
    'optimized_4': lambda: cn.banded_toeplitz(
        cn.optimize_banded_toeplitz(N, 4), N),
    'bisr_6': lambda: cn.banded_toeplitz(cn.inverse_square_root_coefs(6), N),
    'identity': lambda: cn.identity(N),
    'prefix': lambda: cn.prefix_sum(N),
    'tree': lambda: cn.tree_aggregation(N),
    'random_dense': lambda: cn.lower_triangular(_random_lower(N, 0)),
}
# (min_separation, max_participations): single epoch, capped, uncapped.
SETTINGS = ((1, 1), (4, None), (4, 3), (6, 2), (8, None), (1, None), (3, 5))


@pytest.mark.parametrize('name', sorted(STRATEGIES))
def test_sensitivity_equals_jax_privacy(name):
  mf = _jax_privacy()
  s = STRATEGIES[name]()
  with jax.enable_x64():
    c = jnp.asarray(s.matrix())
    for b, k in SETTINGS:
      upper = cn.sensitivity(s, min_separation=b, max_participations=k,
                             bound='upper')
      want_upper = mf.sensitivity.get_min_sep_sensitivity_upper_bound(c, b, k)
      np.testing.assert_allclose(upper, want_upper, rtol=1e-10)
      if s.bands <= b or k == 1:
        exact = cn.sensitivity(s, min_separation=b, max_participations=k)
        want = (mf.sensitivity.single_participation_sensitivity(c) if k == 1
                else mf.sensitivity.get_sensitivity_banded(c, b, k))
        np.testing.assert_allclose(exact, want, rtol=1e-10)
        np.testing.assert_allclose(exact, upper, rtol=1e-10)
      else:
        with pytest.raises(ValueError, match='bands'):
          cn.sensitivity(s, min_separation=b, max_participations=k)
      if s.toeplitz and np.all(np.diff(s.band[-1]) <= 0) and np.all(
          s.band[-1] >= 0):
        coef = jnp.asarray(s.band[-1])
        want_sq = mf.toeplitz.minsep_sensitivity_squared(coef, b, k, n=N)
        if s.bands <= b or k == 1:
          np.testing.assert_allclose(exact**2, want_sq, rtol=1e-10)
    for epochs in (1, 2, 3, 4, 6):
      np.testing.assert_allclose(
          cn.fixed_epoch_sensitivity(s, epochs=epochs),
          mf.sensitivity.fixed_epoch_sensitivity(c, epochs), rtol=1e-10)


def test_sensitivity_of_tree_and_banded_by_hand():
  # The tree on 2^h leaves: one node per level covers a leaf.
  for h in (0, 1, 3, 5):
    s = cn.tree_aggregation(2**h)
    assert cn.sensitivity(s) == pytest.approx(math.sqrt(h + 1), rel=1e-12)
  # A b-banded C with unit columns: k participations cost sqrt(k).
  s = cn.banded_toeplitz(np.ones(3) / np.sqrt(3), 30)
  for k in (1, 2, 5):
    got = cn.sensitivity(s, min_separation=3, max_participations=k)
    assert got == pytest.approx(math.sqrt(k), rel=1e-12)
  # The cap: at most ceil(n / b) participations in n steps.
  assert cn.sensitivity(s, min_separation=3, max_participations=100) == (
      cn.sensitivity(s, min_separation=3, max_participations=None))


@pytest.mark.parametrize('name', sorted(STRATEGIES))
def test_per_query_error_equals_jax_privacy(name):
  mf = _jax_privacy()
  s = STRATEGIES[name]()
  with jax.enable_x64():
    c = jnp.asarray(s.matrix())
    want = mf.dense.per_query_error(strategy_matrix=c,
                                    workload_matrix=jnp.tri(N, dtype=c.dtype))
    np.testing.assert_allclose(cn.per_query_error(s), want, rtol=1e-9)
    if s.toeplitz:
      coef = jnp.asarray(s.band[-1])
      np.testing.assert_allclose(
          cn.per_query_error(s),
          mf.toeplitz.per_query_error(strategy_coef=coef, n=N), rtol=1e-9)


def test_toeplitz_loss_matches_dense_objective_and_its_gradient():
  rng = np.random.default_rng(1)
  coefs = np.concatenate([[1.0], 0.3 * rng.random(4)])
  s = cn.banded_toeplitz(coefs, 20)
  sens_sq = cn.sensitivity(s) ** 2
  for objective, reduce in (('mean', np.mean), ('max', np.max)):
    loss, grad = cn.toeplitz_loss(coefs, 20, objective)
    assert loss == pytest.approx(sens_sq * reduce(cn.per_query_error(s)),
                                 rel=1e-12)
    eps = 1e-6
    numeric = [(cn.toeplitz_loss(coefs + eps * e, 20, objective)[0]
                - cn.toeplitz_loss(coefs - eps * e, 20, objective)[0])
               / (2 * eps) for e in np.eye(5)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5)


@pytest.mark.parametrize('objective', ['mean', 'max'])
def test_optimizer_beats_identity_prefix_and_bisr_and_matches_jax_privacy(
    objective):
  n = 48
  identity = cn.toeplitz_loss(np.ones(1), n, objective)[0]
  prefix = cn.toeplitz_loss(np.ones(n), n, objective)[0]
  last = None
  for bands in (2, 4, 8, 16):
    coefs = cn.optimize_banded_toeplitz(n, bands, objective=objective)
    assert coefs.shape == (bands,)
    assert np.linalg.norm(coefs) == pytest.approx(1.0)
    loss = cn.toeplitz_loss(coefs, n, objective)[0]
    bisr = cn.toeplitz_loss(cn.inverse_square_root_coefs(bands), n,
                            objective)[0]
    assert loss < 0.9 * min(identity, prefix) and loss <= bisr * (1 + 1e-12)
    if last is not None:  # more bands never hurt
      assert loss <= last * (1 + 1e-9)
    last = loss
  mf = _jax_privacy()
  reduce = {'mean': jnp.mean, 'max': jnp.max}[objective]
  with jax.enable_x64(), jax.numpy_dtype_promotion('standard'):
    theirs = np.asarray(mf.toeplitz.optimize_banded_toeplitz(
        n, 4, reduction_fn=reduce))
  ours = cn.optimize_banded_toeplitz(n, 4, objective=objective)
  assert cn.toeplitz_loss(ours, n, objective)[0] <= cn.toeplitz_loss(
      theirs, n, objective)[0] * (1 + 1e-6)


def test_tree_strategy_has_the_tree_gram_and_beats_identity_on_max_error():
  n = 64
  s = cn.tree_aggregation(n)
  t = cn.tree_matrix(n)
  np.testing.assert_allclose(s.matrix().T @ s.matrix(), t.T @ t, atol=1e-10)
  assert np.all(np.triu(s.matrix(), 1) == 0)
  tree = cn.sensitivity(s) ** 2 * np.max(cn.per_query_error(s))
  ident = cn.sensitivity(cn.identity(n)) ** 2 * np.max(
      cn.per_query_error(cn.identity(n)))
  assert tree < 0.5 * ident  # log^2 n against n


# --- The streaming transform --------------------------------------------------


_BOUND = 100.0  # above every test update's norm: clipping keeps it as it is


def _summed(u, bound=_BOUND):
  """``u`` as the ClippedSum of one example clipped to ``bound`` (>= |u|)."""
  rows = jax.tree.map(lambda x: jnp.asarray(x)[None], u)
  return dpjax.clipping.clip_and_sum(rows, bound,
                                     jnp.ones(1, bool)).grad_sum


def _correlated(strategy, stddev, key, bound=_BOUND):
  """``add_dpsgd_noise`` under ``strategy`` whose Z has stddev ``stddev`` on
  sums of ``bound``: sigma = stddev / (bound x the largest column norm)."""
  sigma = stddev / (bound * float(np.max(strategy.column_norms())))
  return dpjax.transforms.add_dpsgd_noise(sigma, key=key, strategy=strategy)


@jax.jit
def _run(key, stddev, updates):
  """The noise of ``updates.shape[0]`` steps of a fixed 3-band strategy."""
  tx = _correlated(_STRATEGY, stddev, key)
  state = tx.init(updates[0])

  def step(state, u):
    out, state = tx.update(_summed(u), state)
    return state, out

  state, outs = jax.lax.scan(step, state, updates)
  return outs, state


_STRATEGY = cn.banded_toeplitz([1.0, -0.6, 0.3], 6)


def test_noise_covariance_is_stddev_squared_c_inverse_c_inverse_transpose():
  n, dim, stddev = _STRATEGY.n, 40_000, 1.5
  outs, _ = _run(jax.random.key(0), stddev, jnp.zeros((n, dim)))
  x = np.asarray(outs, np.float64)
  emp = x @ x.T / dim
  cinv = _STRATEGY.inverse()
  want = stddev**2 * cinv @ cinv.T
  # Standard error of a Gaussian sample covariance entry over dim samples.
  se = np.sqrt((np.outer(np.diag(want), np.diag(want)) + want**2) / dim)
  assert np.max(np.abs(emp - want) / se) < 5.0
  np.testing.assert_allclose(x.mean(axis=1), 0, atol=5 * stddev * 2 / 100)
  # The test rejects the covariance of independent noise (C = I) and of the
  # transposed factorization: the statistic is far above 5 for them.
  for wrong in (stddev**2 * np.eye(n), stddev**2 * cinv.T @ cinv):
    assert np.max(np.abs(emp - wrong) / se) > 20.0


def test_noise_is_c_inverse_of_the_streams_gaussians():
  key = jax.random.key(7)
  outs, state = _run(key, 2.0, jnp.zeros((6, 3)))
  # The stream with sigma folded in; each step's key with the bound.
  stream = _keys.fold_public(_keys.stream(key, 'correlated_noise'),
                             state.noise_multiplier)
  z = np.stack([np.asarray(noise_lib.tree_noise(
      noise_lib.gaussian, _keys.fold_public(jax.random.fold_in(stream, t),
                                            _BOUND),
      jnp.zeros(3), stddev=2.0)) for t in range(6)])
  np.testing.assert_allclose(outs, _STRATEGY.inverse() @ z, rtol=1e-5,
                             atol=1e-5)
  # Another consumer's stream of the same key draws other noise.
  other = noise_lib.tree_noise(noise_lib.gaussian, jax.random.fold_in(
      _keys.stream(key, 'dpsgd_noise'), 0), jnp.zeros(3), stddev=2.0)
  assert not np.allclose(other, z[0])


def test_jittable_reproducible_and_no_recompilation():
  updates = jnp.arange(18.0).reshape(6, 3)
  a, _ = _run(jax.random.key(1), 0.5, updates)
  size = _run._cache_size()
  b, _ = _run(jax.random.key(1), 0.5, updates)
  c, _ = _run(jax.random.key(2), 0.7, updates)  # new key and stddev: no compile
  assert _run._cache_size() == size
  np.testing.assert_array_equal(a, b)
  assert not np.allclose(a, c)
  # Eager equals jit (the noise is fenced; the recursion may differ in ulps)
  # given the same float32 sigma, whose bits key the stream.
  tx = _correlated(_STRATEGY, jnp.float32(0.5), jax.random.key(1))
  state = tx.init(updates[0])
  for t in range(6):
    out, state = tx.update(_summed(updates[t]), state)
    np.testing.assert_allclose(out, a[t], rtol=1e-6, atol=1e-6)
  # Zero noise is the identity.
  d, _ = _run(jax.random.key(1), 0.0, updates)
  np.testing.assert_array_equal(d, updates)


@pytest.mark.parametrize('bands', [1, 2, 5])
def test_state_is_bands_minus_one_copies_of_the_parameters(bands):
  params = {'w': jnp.zeros((7, 3)), 'b': jnp.zeros(5, jnp.bfloat16)}
  s = cn.banded_toeplitz(np.ones(bands), 16)
  tx = _correlated(s, 1.0, jax.random.key(0))
  state = jax.eval_shape(lambda p: tx.update(_summed(p), tx.init(p))[1],
                         params)
  history = state.correlation.history
  sizes = [x.size for x in jax.tree.leaves(history)]
  assert sum(sizes) == (bands - 1) * (21 + 5)
  assert history['w'].shape == (bands - 1, 7, 3)
  other = sum(x.size for x in jax.tree.leaves(state._replace(
      correlation=state.correlation._replace(history=None))))
  assert other <= 12  # counters, key and scalars: O(1)


def test_neighbouring_runs_differ_by_at_most_the_sensitivity():
  """Same key on both: C (y - y') = C (G - G'), within clip x sensitivity."""
  steps, b, clip, dim = 12, 3, 0.5, 4
  s = cn.banded_toeplitz(cn.optimize_banded_toeplitz(steps, b), steps)
  rng = np.random.default_rng(0)
  grads = jnp.asarray(rng.normal(size=(5, dim)) * 3, jnp.float32)
  canary = jnp.asarray(rng.normal(size=dim) * 50, jnp.float32)

  tx = dpjax.bandmf(1.0, clip, 1.0, dpjax.PoissonSampler(5, 1.0), s, key=jax.random.key(3))
  g = jnp.concatenate([grads, canary[None]])

  @jax.jit
  def run(masks):
    params = jnp.zeros(dim)

    def step(state, mask):
      u, state = tx.update(g, state, params, mask=mask)
      return state, -u * 5

    return jax.lax.scan(step, tx.init(params), masks)[1]

  masks = np.ones((steps, 6), bool)
  masks[:, 5] = np.arange(steps) % b == 0
  absent = masks.copy()
  absent[:, 5] = False
  diff = s.matrix() @ (np.asarray(run(masks), np.float64)
                       - np.asarray(run(absent), np.float64))
  bound = clip * cn.sensitivity(s, min_separation=b, max_participations=None)
  assert np.linalg.norm(diff) <= bound * (1 + 1e-4)
  assert np.linalg.norm(diff) >= 0.99 * bound  # the canary attains it


def test_bandmf_takes_vmap_ghost_and_sharded_clipped_sums(standard_draw):
  def loss(params, example):
    x, y = example
    return (jnp.dot(params['w'], x) + params['b'] - y) ** 2

  rng = np.random.default_rng(2)
  x = jnp.asarray(rng.normal(size=(8, 3)), jnp.float32)
  y = jnp.asarray(rng.normal(size=8), jnp.float32)
  params = {'w': jnp.ones(3), 'b': jnp.zeros(())}
  mask = jnp.arange(8) != 5
  s = cn.banded_toeplitz([1.0, 0.5], 4)
  outs = {}
  mesh = jax.make_mesh((4,), ('data',))
  sums = {
      'per_example': None,
      'vmap': dpjax.clipped_grad_sum(loss, 1.0),
      'ghost': dpjax.clipped_grad_sum(loss, 1.0, method='ghost'),
      'sharded': dpjax.clipping.sharded_clipped_grad_sum(loss, 1.0,
                                                         mesh=mesh),
  }
  for name, fn in sums.items():
    tx = dpjax.bandmf(0.1, 1.0 if fn is None else None, 1.3, dpjax.PoissonSampler(8, 1.0), s,
                      key=jax.random.key(5), per_example=fn is None)

    @jax.jit
    def three_steps(params, fn=fn, tx=tx):
      state, got = tx.init(params), []
      for _ in range(3):
        if fn is None:
          g = jax.vmap(jax.grad(loss), in_axes=(None, 0))(params, (x, y))
          u, state = tx.update(g, state, params, mask=mask)
        else:
          u, state = tx.update(fn(params, (x, y), mask).grad_sum, state,
                               params)
        got.append(u)
      return got

    outs[name] = three_steps(params)
  for name in ('vmap', 'ghost', 'sharded'):
    for a, b in zip(outs['per_example'], outs[name]):
      jax.tree.map(lambda p, q: np.testing.assert_allclose(p, q, atol=1e-5),
                   a, b)
  # A bare sum is refused: the noise is calibrated to a clip bound.
  tx = dpjax.bandmf(0.1, None, 1.3, dpjax.PoissonSampler(8, 1.0), s, key=jax.random.key(5),
                    per_example=False)
  with pytest.raises(ValueError, match='updates'):
    tx.update(params, tx.init(params), params)
  # The noise follows the bound the sum carries: sigma x the bound x the
  # strategy's column norm times the stream's standard draw (C[0, 0] = 1).
  for clip in (1.0, 2.0):
    summed = dpjax.clipped_grad_sum(loss, clip)(params, (x, y), mask).grad_sum
    u, state = tx.update(summed, tx.init(params), params)
    assert float(state[0].l2_sensitivity) == clip
    # u = -lr (sum + noise) / batch, with lr 0.1 and batch 8.
    noise = jax.tree.map(lambda a, b: -a * 80.0 - b, u, summed.value)
    scale = 1.3 * clip * float(state[0].correlation.column_norm)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(
        a, scale * b, rtol=1e-4, atol=1e-4), noise,
        standard_draw(state[0], noise))


# --- Events -------------------------------------------------------------------


def test_amplified_event_is_dpsgd_for_the_cycles_and_the_ledger_agrees():
  steps, b, q, sigma = 20, 4, 0.25, 1.1
  s = cn.banded_toeplitz(cn.optimize_banded_toeplitz(steps, b), steps)
  event = cn.bandmf_event(sigma, s, steps=steps, min_separation=b,
                          sampling_rate=q)
  want = dpjax.accounting.gaussian_event(sigma, sampling_rate=q, steps=math.ceil(steps / b))
  assert event == want
  # The step events read from the running state compose to the same.
  sampler = dpjax.sampling.CyclicPoissonSampler(400, q, b, max_batch_size=400)
  assert sampler.expected_batch_size == pytest.approx(25.0)
  tx = dpjax.bandmf(0.1, 1.0, sigma, sampler, s,
                    key=jax.random.key(0))
  params = jnp.zeros(2)
  state = tx.init(params)
  ledger = dpjax.PrivacyLedger()

  @jax.jit
  def step(state, t):
    batch = sampler.sample(jax.random.key(1), t)
    g = jnp.ones((batch.indices.size, 2))
    return tx.update(g, state, params, mask=batch.mask)[1], batch

  for t in range(steps):
    state, batch = step(state, t)
    ledger.record_step(state, sampler, batch)
  got = dpjax.accounting.epsilon(ledger.event(), 1e-5)
  assert got == pytest.approx(
      dpjax.accounting.epsilon(event, 1e-5), rel=1e-6)
  # A sampler with fewer partitions than the bands cannot produce the
  # schedule the event assumes (the same expected batch size of 25, so
  # normalize's divisor matches it), nor can a sampler without partitions.
  with pytest.raises(ValueError, match='num_partitions'):
    dpjax.accounting.step_event(
        state, dpjax.sampling.CyclicPoissonSampler(300, q, b - 1))
  with pytest.raises(ValueError, match='CyclicPoissonSampler'):
    dpjax.accounting.step_event(state, dpjax.sampling.PoissonSampler(100, q))


def test_step_event_refuses_steps_past_n_and_unclipped_chains():
  s = cn.tree_aggregation(2)  # not Toeplitz: it has no row past n = 2
  sampler = dpjax.sampling.CyclicPoissonSampler(40, 0.5, 2)
  tx = dpjax.bandmf(0.1, 1.0, 1.0, sampler, s,
                    key=jax.random.key(0))
  step = jax.jit(lambda state: tx.update(
      jnp.ones((2, 3)), state, jnp.zeros(3), mask=jnp.ones(2, bool))[1])
  state = step(step(tx.init(jnp.zeros(3))))
  event = dpjax.accounting.step_event(state, sampler)
  assert isinstance(event, dp_accounting.NoOpDpEvent)  # step 1 of the cycle
  assert int(state[1].stream.count) == 2
  with pytest.raises(ValueError, match='n=2'):
    dpjax.accounting.step_event(step(state), sampler)
  # A bare pytree has no bound for the noise to follow.
  bare = dpjax.transforms.add_dpsgd_noise(1.0, key=jax.random.key(0),
                                          strategy=s)
  with pytest.raises(ValueError, match='updates'):
    bare.update(jnp.ones(3), bare.init(jnp.zeros(3)))
  # An unclipped sum (the noisy-SGD ablation's) runs, but is never recorded.
  unclipped = optax.chain(_clipping.sum_per_example(1.0), bare)
  _, unclipped_state = unclipped.update(
      jnp.ones((2, 3)), unclipped.init(jnp.zeros(3)), jnp.zeros(3),
      mask=jnp.ones(2, bool))
  with pytest.raises(ValueError, match='unclipped'):
    dpjax.accounting.step_event(unclipped_state, sampler)


def _run_and_record(tx, sampler, steps, key=jax.random.key(1)):
  """Runs ``steps`` steps on ``sampler.sample(key, t)`` and records each."""
  params, ledger = jnp.zeros(2), dpjax.PrivacyLedger()

  @jax.jit
  def step(state, t):
    batch = sampler.sample(key, t)
    g = jnp.ones((batch.indices.size, 2))
    return tx.update(g, state, params, mask=batch.mask)[1], batch

  state = tx.init(params)
  for t in range(steps):
    state, batch = step(state, t)
    ledger.record_step(state, sampler, batch)
  return state, ledger


def test_unamplified_run_is_the_gaussian_of_the_sensitivity_read_from_state():
  """Before: the run without sampling was stated by
  ``bandmf_event(sigma, ...)`` with the caller's sigma (a run at 0.5
  recorded at 1.0 stated 10.0 for 24.4) and the reader refused it. Now the
  cyclic sampler at rate 1 (fixed partitions, no amplification) is its
  schedule, and the ledger composes one Gaussian of the run's sigma and the
  strategy's multi-participation sensitivity."""
  steps, b, sigma = 16, 4, 0.5
  sampler = dpjax.sampling.CyclicPoissonSampler(40, 1.0, b)
  for s, bound in (
      (cn.banded_toeplitz(cn.optimize_banded_toeplitz(steps, b), steps),
       'exact'), (cn.tree_aggregation(steps), 'upper')):
    tx = dpjax.bandmf(0.1, 1.0, sigma, sampler, s,
                      key=jax.random.key(0))
    _, ledger = _run_and_record(tx, sampler, steps)
    sens = cn.sensitivity(s, min_separation=b, max_participations=None,
                          bound=bound)
    col = np.max(s.column_norms())
    whole = np.sqrt(cn.cyclic_squared_sensitivities(s.band, b)[steps])
    assert whole <= sens * (1 + 1e-9)
    if bound == 'exact':  # bands <= b: the DP's optimum is the cyclic one
      assert whole == pytest.approx(sens, rel=1e-9)
    want = dp_accounting.GaussianDpEvent(sigma * col / whole)
    assert ledger.epsilon(1e-5) == pytest.approx(
        dpjax.accounting.epsilon(want, 1e-5), rel=1e-5)
    if bound == 'exact':  # Thm. 4's k-fold composition is never smaller
      amplified = dpjax.accounting.gaussian_event(sigma, steps=steps // b)
      assert ledger.epsilon(1e-5) <= dpjax.accounting.epsilon(
          amplified, 1e-5) * (1 + 1e-6)
  # A truncated partition at rate 1 is not the fixed schedule.
  capped = dpjax.sampling.CyclicPoissonSampler(40, 1.0, b, max_batch_size=5)
  with pytest.raises(ValueError, match='truncated'):
    _run_and_record(tx, capped, 1)


def test_a_strategy_is_accounted_only_on_the_cyclic_sampler_s_own_pattern():
  """Before: any sampler with a ``num_partitions`` attribute was taken at
  its word, e.g. reshuffled epochs declared as n / epochs-separated (stated
  4.38, exact 5.89). A shuffled epoch can put an example in consecutive
  steps across the epoch boundary: only ``CyclicPoissonSampler``'s pattern
  is accounted."""

  class DeclaredShuffle(dpjax.sampling.ShuffleSampler):
    num_partitions = 4  # the epoch length, declared by hand

  s = cn.banded_toeplitz([1.0, 0.5], 16)
  tx = dpjax.bandmf(0.1, 1.0, 1.0, dpjax.PoissonSampler(4, 1.0), s, key=jax.random.key(0))
  _, state = tx.update(jnp.ones((4, 2)), tx.init(jnp.zeros(2)), jnp.zeros(2),
                       mask=jnp.ones(4, bool))
  for sampler in (DeclaredShuffle(16, 4), dpjax.sampling.ShuffleSampler(16, 4)):
    with pytest.raises(ValueError, match='CyclicPoissonSampler.*ShuffleSampler'):
      dpjax.accounting.step_event(state, sampler)


def test_a_step_count_restarted_each_epoch_is_refused():
  """Before: a loop folding the epoch into the sampler key and restarting
  the step at 0 each epoch was recorded (stated 3.71, exact 4.73): its
  partitions no longer follow the step the event is read for."""
  steps_per_epoch, epochs, b, q = 5, 2, 2, 0.5
  sampler = dpjax.sampling.CyclicPoissonSampler(40, q, b)
  s = cn.banded_toeplitz([1.0, 0.5], steps_per_epoch * epochs)
  make = lambda: dpjax.bandmf(0.1, 1.0, 1.0, sampler, s,
                              key=jax.random.key(0))
  tx, params = make(), jnp.zeros(2)
  step = jax.jit(lambda state, batch: tx.update(
      jnp.ones((batch.indices.size, 2)), state, params, mask=batch.mask)[1])
  state, ledger = tx.init(params), dpjax.PrivacyLedger()
  with pytest.raises(ValueError, match='batch=: the batch was drawn at step 0'):
    for epoch in range(epochs):
      key = jax.random.fold_in(jax.random.key(1), epoch)
      for t in range(steps_per_epoch):
        batch = sampler.sample(key, t)
        state = step(state, batch)
        ledger.record_step(state, sampler, batch)
  assert ledger.num_events == steps_per_epoch
  # The honest loop, the run's own step on the sampler's one key.
  _, ledger = _run_and_record(make(), sampler, steps_per_epoch * epochs)
  assert ledger.num_events == steps_per_epoch * epochs


def test_cyclic_sampler_keeps_each_example_in_its_partition():
  sampler = dpjax.sampling.CyclicPoissonSampler(103, 0.5, 5)
  seen = {}
  sample = jax.jit(sampler.sample)
  for t in range(20):
    batch = sample(jax.random.key(0), t)
    idx = np.asarray(batch.indices)[np.asarray(batch.mask)]
    assert np.all(idx % 5 == t % 5) and np.all(idx < 103)
    for i in idx:
      assert t - seen.get(int(i), -5) >= 5  # b-min-separation
      seen[int(i)] = t
  assert len(seen) > 50


# --- Bad input ----------------------------------------------------------------


@pytest.mark.parametrize('call, match', [
    (lambda: cn.lower_triangular(np.triu(np.ones((3, 3)))), 'lower-triang'),
    (lambda: cn.lower_triangular(np.diag([1.0, 0.0, 1.0])), 'invertible'),
    (lambda: cn.lower_triangular(np.diag([1.0, 1e-14, 1.0])), 'condition'),
    (lambda: cn.lower_triangular(np.ones((2, 3))), 'square'),
    (lambda: cn.lower_triangular(np.full((2, 2), np.nan)), 'finite'),
    (lambda: cn.banded_toeplitz([0.0, 1.0], 4), r'coefs\[0\]'),
    (lambda: cn.banded_toeplitz([1e-300], 4), 'coefs'),
    (lambda: cn.lower_triangular([[1e-300]]), 'magnitudes'),
    (lambda: cn.banded_toeplitz([1.0], 0), 'n=0'),
    (lambda: cn.sensitivity(cn.prefix_sum(8), min_separation=2,
                            max_participations=2), 'bands=8'),
    (lambda: cn.sensitivity(cn.identity(8), min_separation=0), 'min_sep'),
    (lambda: cn.sensitivity(cn.identity(8), max_participations=0),
     'max_participations'),
    (lambda: cn.sensitivity(cn.identity(8), bound='tight'), 'bound'),
    (lambda: cn.fixed_epoch_sensitivity(cn.identity(8), epochs=3), 'epochs'),
    (lambda: cn.optimize_banded_toeplitz(4, 5), 'bands=5'),
    (lambda: cn.optimize_banded_toeplitz(4, 2, objective='median'),
     'objective'),
    (lambda: cn.bandmf_event(1.0, cn.prefix_sum(8), steps=8,
                             min_separation=2, sampling_rate=0.1), 'bands=8'),
    (lambda: cn.bandmf_event(1.0, cn.lower_triangular(_random_lower(8, 1)),
                             steps=9, min_separation=8, sampling_rate=0.1),
     'steps=9'),
    (lambda: cn.bandmf_event(-1.0, cn.identity(8), steps=8,
                             min_separation=1, sampling_rate=0.1),
     'noise_multiplier'),
    (lambda: cn.cyclic_squared_sensitivities(cn.identity(8).band, 0),
     'min_separation'),
    (lambda: dpjax.transforms.add_dpsgd_noise(
        1.0, key=jax.random.key(0), strategy=np.triu(np.ones((2, 2)))),
     'lower-triang'),
    (lambda: dpjax.transforms.add_dpsgd_noise(
        -1.0, key=jax.random.key(0), strategy=cn.identity(2)),
     'noise_multiplier'),
    (lambda: dpjax.transforms.add_dpsgd_noise(
        1.0, key=jax.random.key(0), strategy=cn.identity(2), noise='exact'),
     'strategy'),
    (lambda: dpjax.bandmf(0.1, 1.0, 1.0, dpjax.PoissonSampler(8, 1.0), cn.identity(2),
                          key=jax.random.key(0), per_example=False),
     'l2_norm_clip'),
    (lambda: dpjax.sampling.CyclicPoissonSampler(10, 0.5, 0),
     'num_partitions'),
])
def test_bad_input_is_refused_naming_the_value(call, match):
  with pytest.raises(ValueError, match=match):
    call()
