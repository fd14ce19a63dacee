"""Top-k sparsification and the compressive mechanism (Farokhi, Alg. 2-3)."""

import itertools
import math

import chex
import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

import dpjax
from dpjax import accounting

mechanism = jax.jit(dpjax.transforms.compressive_mechanism,
                    static_argnames=('kappa', 'num_measurements', 'epsilon',
                                     'noise_calibration', 'exact'))


def _box_input(key, n, xi):
  return jax.random.uniform(key, (n,), minval=-2 * xi, maxval=2 * xi)


# -- sparsify_top_k ---------------------------------------------------------


def test_sparsify_top_k_keeps_largest_over_the_whole_tree():
  tx = dpjax.transforms.sparsify_top_k(3)
  g = {'a': jnp.array([[1., -9.], [2., 0.]]), 'b': jnp.array([5., -3., 4.])}
  out, _ = tx.update(g, tx.init(g))
  chex.assert_trees_all_equal(
      out, {'a': jnp.array([[0., -9.], [0., 0.]]),
            'b': jnp.array([5., 0., 4.])})


def test_sparsify_top_k_exact_count_under_jit():
  tx = dpjax.transforms.sparsify_top_k(7)
  g = jax.random.normal(jax.random.key(0), (10, 10))
  out, _ = jax.jit(tx.update)(g, tx.init(g))
  assert int((out != 0).sum()) == 7
  kept = np.sort(np.abs(np.asarray(g)).ravel())[-7:]
  np.testing.assert_array_equal(np.sort(np.abs(np.asarray(out)).ravel())[-7:],
                                kept)


@pytest.mark.parametrize('k', [0, -1, 2.5])
def test_sparsify_top_k_bad_k(k):
  with pytest.raises(ValueError, match='k='):
    dpjax.transforms.sparsify_top_k(k)


def test_sparsify_top_k_larger_than_update():
  tx = dpjax.transforms.sparsify_top_k(5)
  with pytest.raises(ValueError, match='k=5'):
    tx.update(jnp.ones(4), tx.init(None))


# -- sensitivity --------------------------------------------------------------


def test_sensitivity_is_the_max_column_norm_for_kappa_one():
  psi = dpjax.recovery.gaussian_sensing_matrix(jax.random.key(0), 20, 50)
  col = np.abs(np.asarray(psi)).sum(axis=0)
  assert float(dpjax.recovery.sensing_l1_sensitivity(psi, 1)) == pytest.approx(
      col.max(), rel=1e-6)
  # The bound is attained: x = e_j / 2, x' = -e_j / 2 on the largest column.
  j = col.argmax()
  d = np.zeros(50)
  d[j] = 1.0
  assert np.abs(np.asarray(psi) @ d).sum() == pytest.approx(col.max(),
                                                            rel=1e-5)


@pytest.mark.parametrize('kappa', [1, 2, 3])
def test_sensitivity_bounds_every_pair_of_inputs(kappa):
  """Brute force: every vertex of the difference polytope, and random pairs."""
  n, p, xi = 8, 6, 0.7
  psi = np.asarray(dpjax.recovery.gaussian_sensing_matrix(jax.random.key(kappa), p, n),
                   np.float64)
  bound = float(dpjax.recovery.sensing_l1_sensitivity(psi, kappa))
  worst = 0.0
  # Vertices of {|d_j| <= 1/kappa, ||d||_1 <= 1}: kappa coordinates at
  # +-1/kappa; each is x - x' for x = d/2, x' = -d/2, both kappa-sparse.
  for support in itertools.combinations(range(n), kappa):
    for signs in itertools.product((-1, 1), repeat=kappa):
      d = np.zeros(n)
      d[list(support)] = np.array(signs) / kappa
      worst = max(worst, np.abs(psi @ d).sum())
  pairs = jax.random.uniform(jax.random.key(0), (2000, 2, n),
                             minval=-3 * xi, maxval=3 * xi)
  x = np.asarray(jnp.clip(jax.vmap(jax.vmap(
      lambda u: dpjax.compression.keep_top_k(u, kappa)))(pairs), -xi, xi), np.float64)
  diff = (x[:, 0] - x[:, 1]) / (2 * xi * kappa)
  worst = max(worst, np.abs(diff @ psi.T).sum(axis=1).max())
  assert worst <= bound * (1 + 1e-6)
  if kappa == 1:
    assert worst == pytest.approx(bound, rel=1e-6)


def _log_likelihood_ratio(release, v, v2, kappa, xi):
  """log p(y | v) - p(y | v') at the released measurements' noise model."""
  psi = np.asarray(release.sensing_matrix, np.float64)
  scale = float(release.noise_scale)
  x, x2 = (np.clip(np.asarray(dpjax.compression.keep_top_k(jnp.asarray(u), kappa)),
                   -xi, xi) / (2 * xi * kappa) for u in (v, v2))
  return float(np.abs(psi @ (x - x2)).sum() / scale)


def test_certified_release_is_epsilon_dp_on_adversarial_neighbours():
  """Given Psi, the worst-case log-likelihood ratio of y is <= epsilon."""
  n, kappa, p, eps, xi = 40, 2, 12, 0.5, 1.0
  worst_certified, worst_paper = 0.0, 0.0
  for seed in range(50):
    key = jax.random.key(seed)
    cert = mechanism(key, jnp.zeros(n), kappa=kappa, num_measurements=p, epsilon=eps, linf_clip=xi, noise_calibration='certified')
    paper = mechanism(key, jnp.zeros(n), kappa=kappa, num_measurements=p, epsilon=eps, linf_clip=xi, noise_calibration='paper')
    col = np.abs(np.asarray(cert.sensing_matrix)).sum(axis=0)
    # Adversarial pair: +-xi on the kappa columns of largest L1 norm.
    top = np.argsort(-col)[:kappa]
    v = np.zeros(n)
    v[top] = xi
    worst_certified = max(worst_certified,
                          _log_likelihood_ratio(cert, v, -v, kappa, xi))
    worst_paper = max(worst_paper,
                      _log_likelihood_ratio(paper, v, -v, kappa, xi))
    assert float(cert.epsilon) == pytest.approx(eps, rel=1e-5)
    assert float(paper.epsilon) == pytest.approx(
        eps * float(dpjax.recovery.sensing_l1_sensitivity(cert.sensing_matrix, kappa))
        / math.sqrt(p), rel=1e-5)
  assert worst_certified <= eps * (1 + 1e-5)
  # The paper's calibration overshoots its claimed epsilon on some Psi, and
  # its recorded realized epsilon covers that.
  assert worst_paper > eps


def test_measurement_noise_is_laplace_of_the_stated_scale():
  """kappa = n = p: CoSaMP inverts Psi, so Psi (out - x) / (2 xi kappa) = e."""
  kappa = p = 4  # n = kappa
  xi, eps = 1.0, 2.0
  v = jnp.array([0.3, -0.2, 0.5, 0.1])

  def noise(key):
    r = dpjax.transforms.compressive_mechanism(key, v, kappa=kappa, num_measurements=p, epsilon=eps, linf_clip=xi, noise_calibration='paper')
    e = r.sensing_matrix @ (r.value - v) / (2 * xi * kappa)
    return e / r.noise_scale

  e = np.asarray(jax.jit(jax.vmap(noise))(
      jax.random.split(jax.random.key(0), 5000))).ravel()
  e = e[np.isfinite(e)]
  assert stats.kstest(e, stats.laplace().cdf).pvalue > 1e-3
  assert stats.kstest(e, stats.laplace(scale=1.1).cdf).pvalue < 1e-3


@pytest.mark.parametrize('calibration', ['certified', 'paper'])
def test_exact_measurements_are_grid_values_with_laplace_noise(calibration):
  """exact=True (default): y = unit * eta * (integer), unit = the margined
  Delta(Psi) (certified) or 1 (paper), and y - Psi x is Laplace of the
  stated noise scale (accepted; 1.15x rejected). Before: float Laplace."""
  n, kappa, p, eps, xi = 30, 3, 10, 0.5, 1.0
  v = _box_input(jax.random.key(1), n, xi)
  x = jnp.clip(dpjax.compression.keep_top_k(v, kappa), -xi, xi) / (2 * xi * kappa)

  def one(key):
    r = dpjax.transforms.compressive_mechanism(
        key, v, kappa=kappa, num_measurements=p, epsilon=eps, linf_clip=xi,
        noise_calibration=calibration)
    unit = dpjax.recovery.sensing_l1_sensitivity(r.sensing_matrix, kappa) * (
        dpjax.transforms.compressive_sensitivity_margin(p, kappa))
    if calibration == 'paper':
      unit = jnp.ones_like(unit)
    e = (r.measurements - r.sensing_matrix @ x) / r.noise_scale
    return r.measurements / unit, e, r.noise_scale / unit

  codes, e, grid_scale = jax.jit(jax.vmap(one))(
      jax.random.split(jax.random.key(0), 2000))
  base = math.sqrt(p) / eps if calibration == 'paper' else 1 / eps
  eta = dpjax.transforms.laplace_grid_spacing(base)
  codes = np.asarray(codes, np.float64) / eta
  # float32 y = unit * (eta k) rounds: |k| < 2^20 stays within 2^-3 of k.
  np.testing.assert_allclose(codes, np.round(codes), atol=0.125 if
                             calibration == 'certified' else 0)
  np.testing.assert_allclose(grid_scale, eta * float(
      dpjax.noise.discrete_laplace_scale(
          dpjax.transforms.laplace_grid_scale(base, eta))), rtol=1e-6)
  e = np.asarray(e).ravel()
  assert stats.kstest(e, stats.laplace().cdf).pvalue > 1e-3
  assert stats.kstest(e, stats.laplace(scale=1.15).cdf).pvalue < 1e-6


def test_exact_compressive_needs_a_concrete_epsilon():
  args = dict(kappa=2, num_measurements=8, linf_clip=1.0)
  with pytest.raises(ValueError, match='exact=False'):
    jax.jit(lambda e: dpjax.transforms.compressive_mechanism(
        jax.random.key(0), jnp.ones(16), epsilon=e, **args).value)(1.0)
  out = jax.jit(lambda e: dpjax.transforms.compressive_mechanism(
      jax.random.key(0), jnp.ones(16), epsilon=e, exact=False, **args).value)
  assert out(1.0).shape == (16,)
  with pytest.raises(ValueError, match='exact=False'):
    dpjax.transforms.compressive_privatizer(epsilon=2.0**50,
                                            key=jax.random.key(0),
                                            **args)


@pytest.mark.parametrize('exact', [False, True])
def test_noise_scales_of_the_two_calibrations(exact):
  """Float: the nominal scales. Exact: at least those (the grid's noise is
  widened so the stated epsilon holds exactly) and at most 2^-10 above."""
  key, v = jax.random.key(3), jnp.ones(30)
  cert = mechanism(key, v, kappa=3, num_measurements=10, epsilon=0.5, linf_clip=1.0, noise_calibration='certified', exact=exact)
  paper = mechanism(key, v, kappa=3, num_measurements=10, epsilon=0.5, linf_clip=1.0, noise_calibration='paper', exact=exact)
  delta_psi = float(dpjax.recovery.sensing_l1_sensitivity(cert.sensing_matrix, 3))
  slack = 2.0**-10 if exact else 1e-6
  for release, nominal in ((cert, delta_psi / 0.5), (paper, math.sqrt(10) / 0.5)):
    assert nominal * (1 - 1e-6) <= float(release.noise_scale) <= nominal * (1 + slack)
  chex.assert_trees_all_equal(cert.sensing_matrix, paper.sensing_matrix)


@pytest.mark.slow  # statistical, about 17 s: CI's second stage
def test_output_error_has_the_order_of_prop_2():
  """E||M(v) - Q(v)||^2 eps^2 / (xi^2 kappa^4 log^2(n / kappa)) is Theta(1).

  Across a grid where the bound itself varies by > 3000x, the normalized
  error stays within one narrow band (Prop. 2's order, with p = 3 kappa
  log(n / kappa)).
  """
  ratios = []
  for n, kappa, eps, xi in [(64, 1, 1.0, 1.0), (64, 8, 10.0, 0.5),
                            (512, 1, 100.0, 2.0), (512, 8, 1.0, 1.0)]:
    p = math.ceil(3 * kappa * math.log(n / kappa))
    v = _box_input(jax.random.key(1), n, xi)
    target = jnp.clip(dpjax.compression.keep_top_k(v, kappa), -xi, xi)

    def sq_err(key, v=v, target=target, kappa=kappa, p=p, eps=eps, xi=xi):
      out = dpjax.transforms.compressive_mechanism(key, v, kappa=kappa, num_measurements=p, epsilon=eps, linf_clip=xi)
      return jnp.sum((out.value - target)**2)

    mse = float(jax.jit(jax.vmap(sq_err))(
        jax.random.split(jax.random.key(0), 200)).mean())
    ratios.append(mse * eps**2 / (xi**2 * kappa**4 * math.log(n / kappa)**2))
  assert max(ratios) / min(ratios) < 5, ratios
  assert 1 < min(ratios) and max(ratios) < 500, ratios


def test_noise_free_limit_returns_the_sparsified_clipped_update():
  v = jnp.array([0.1, -3.0, 0.2, 0.9, -0.05, 0.4, 0.0, 0.3] * 4)
  out = mechanism(jax.random.key(0), v, kappa=2, num_measurements=24, epsilon=1e9, linf_clip=1.0, noise_calibration='certified')
  np.testing.assert_allclose(out.value, jnp.clip(dpjax.compression.keep_top_k(v, 2),
                                                 -1, 1), atol=1e-4)


@pytest.mark.parametrize('kwargs,match', [
    ({'kappa': 0}, 'kappa=0'),
    ({'kappa': 31}, 'kappa=31'),
    ({'num_measurements': 2}, 'num_measurements=2'),
    ({'epsilon': 0.0}, 'epsilon=0.0'),
    ({'epsilon': -1.0}, 'epsilon=-1.0'),
    ({'linf_clip': 0.0}, 'linf_clip=0.0'),
    ({'noise_calibration': 'loose'}, 'noise_calibration'),
])
def test_bad_arguments(kwargs, match):
  args = dict(kappa=2, num_measurements=8, epsilon=1.0, linf_clip=1.0)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dpjax.transforms.compressive_mechanism(jax.random.key(0), jnp.ones(30), **args)
  if 'kappa' not in kwargs or kwargs['kappa'] < 1:
    with pytest.raises(ValueError, match=match):
      dpjax.transforms.compressive_privatizer(**args, key=jax.random.key(0))


# -- compressive_privatizer ---------------------------------------------------


def _privatizer(**kwargs):
  args = dict(kappa=3, num_measurements=12, epsilon=1.0, linf_clip=0.5,
              key=jax.random.key(7))
  args.update(kwargs)
  return dpjax.transforms.compressive_privatizer(**args)


def test_privatizer_is_pure_and_steps_differ():
  tx = _privatizer()
  g = {'w': jnp.ones((4, 5)), 'b': jnp.arange(6.)}
  state = tx.init(g)
  out1, s1 = tx.update(g, state)
  out2, _ = tx.update(g, state)
  chex.assert_trees_all_equal(out1, out2)
  out3, s2 = tx.update(g, s1)
  assert not np.array_equal(out1['w'], out3['w'])
  assert int(s2.count) == 2
  chex.assert_trees_all_equal_shapes(out1, g)
  nonzero = sum(int((x != 0).sum()) for x in jax.tree.leaves(out1))
  assert nonzero <= 3


def test_privatizer_matches_mechanism_and_jit():
  tx = _privatizer()
  g = jnp.linspace(-1, 1, 26)
  out, state = jax.jit(tx.update)(g, tx.init(g))
  want = dpjax.transforms.compressive_mechanism(
      jax.random.fold_in(tx.init(g).key, 0), g, kappa=3, num_measurements=12,
      epsilon=1.0, linf_clip=0.5)
  chex.assert_trees_all_close(out, want.value, atol=1e-6)
  assert float(state.epsilon) == pytest.approx(1.0, rel=1e-6)


def test_privatizer_paper_state_records_realized_epsilon():
  tx = _privatizer(noise_calibration='paper')
  g = jnp.ones(40)
  _, state = tx.update(g, tx.init(g))
  release = dpjax.transforms.compressive_mechanism(
      jax.random.fold_in(tx.init(g).key, 0), g, kappa=3, num_measurements=12,
      epsilon=1.0, linf_clip=0.5, noise_calibration='paper')
  assert float(state.epsilon) == pytest.approx(float(release.epsilon))
  assert float(state.epsilon) != pytest.approx(1.0, abs=1e-3)


def test_alg3_step_compiles_once():
  tx = optax.chain(_privatizer(), optax.sgd(0.1))
  params = jnp.zeros(20)
  state = tx.init(params)

  @jax.jit
  def step(params, state, g):
    updates, state = tx.update(g, state, params)
    return optax.apply_updates(params, updates), state

  params, state = step(params, state, jnp.ones(20))
  params, state = step(params, state, -jnp.ones(20))
  assert step._cache_size() == 1


# -- laplace_privatizer and accounting ---------------------------------------


def test_laplace_baseline_scale_and_clipping():
  n, xi, eps = 500, 0.5, 4.0
  tx = dpjax.transforms.laplace_privatizer(eps, xi, key=jax.random.key(0))
  g = jnp.full(n, 10.0)  # clipped to xi
  samples = []
  state = tx.init(g)
  update = jax.jit(tx.update)
  for _ in range(40):
    out, state = update(g, state)
    samples.append(np.asarray(out) - xi)
  e = np.concatenate(samples) / (2 * xi * n / eps)
  assert stats.kstest(e, stats.laplace().cdf).pvalue > 1e-3
  assert stats.kstest(e, stats.laplace(scale=1.1).cdf).pvalue < 1e-3


def test_laplace_baseline_sensitivity_covers_any_two_inputs():
  n, xi, eps = 6, 1.0, 2.0
  rng = np.random.default_rng(0)
  scale = 2 * xi * n / eps
  for _ in range(200):
    v, w = rng.uniform(-5, 5, n), rng.uniform(-5, 5, n)
    d = np.clip(v, -xi, xi) - np.clip(w, -xi, xi)
    assert np.abs(d).sum() / scale <= eps + 1e-12


@pytest.mark.parametrize('kwargs,match', [({'epsilon': 0.0}, 'epsilon'),
                                          ({'linf_clip': -1.0}, 'linf_clip')])
def test_laplace_baseline_bad_arguments(kwargs, match):
  args = dict(epsilon=1.0, linf_clip=1.0)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dpjax.transforms.laplace_privatizer(**args, key=jax.random.key(0))


def test_laplace_event_composes():
  ledger = accounting.PrivacyLedger()
  for t in range(100):
    ledger.record(accounting.laplace_event(0.1), noise=(jax.random.key(0), t))
  assert accounting.basic_composition(ledger.event()) == pytest.approx(
      (10.0, 0.0))
  pld = ledger.epsilon(1e-5, 'pld')
  rdp = ledger.epsilon(1e-5, 'rdp')
  assert pld < rdp < 10.0
  direct = dp_accounting.pld.PLDAccountant().compose(
      dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(10.0),
                                        100)).get_epsilon(1e-5)
  assert pld == pytest.approx(direct, rel=1e-9)
  with pytest.raises(ValueError, match='epsilon'):
    accounting.laplace_event(0.0)
