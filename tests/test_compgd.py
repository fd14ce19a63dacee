"""CompGD, DP-CompGD, DP-CompSGD: sensitivity, noise, accounting, sweeps."""

from typing import NamedTuple

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

import dpjax
from dpjax import transforms as T

N, D, M, L = 5, 8, 3, 1.0


class _Matrix(NamedTuple):
  """Any Phi (an adversary's choice), in the interface of the release."""
  a: jax.Array

  @property
  def num_rows(self):
    return self.a.shape[0]

  @property
  def active_rows(self):
    return self.a.shape[0]

  def matvec(self, v):
    return v @ self.a.T


def _ours(rows, a):
  """The released estimate of dp_compgd without its noise (sigma = 0)."""
  return T.dp_gradient_estimate(rows, _Matrix(a), L, 0.0, jax.random.key(0),
                                sensitivity_factor=2.0, divisor=N)


def _thesis(rows, a):
  """Alg. 8's release s_t Phi g, g the mean of gradients clipped to L."""
  norms = jnp.linalg.norm(rows, axis=1, keepdims=True)
  g = (rows * jnp.minimum(1.0, L / jnp.maximum(norms, 1e-30))).mean(0)
  pg = a @ g
  return jnp.linalg.norm(g) * pg / jnp.linalg.norm(pg)


def _change(release, rest, x, x_prime, a):
  return jnp.linalg.norm(release(jnp.vstack([x[None], rest]), a) -
                         release(jnp.vstack([x_prime[None], rest]), a))


def _adversarial_search(release, seed, steps=100):
  """Gradient ascent on ||release(D) - release(D')|| over the replaced
  example, the others and Phi, from a random start."""
  k = jax.random.split(jax.random.key(seed), 4)
  params = dict(rest=3 * jax.random.normal(k[0], (N - 1, D)),
                x=3 * jax.random.normal(k[1], (D,)),
                xp=3 * jax.random.normal(k[2], (D,)),
                a=jax.random.normal(k[3], (M, D)) / np.sqrt(M))
  loss = lambda p: -_change(release, p['rest'], p['x'], p['xp'], p['a'])

  @jax.jit
  def step(p):  # normalized gradient ascent on the change, per leaf
    g = jax.grad(loss)(p)
    return jax.tree.map(
        lambda x, gx: x - 0.05 * gx / (jnp.linalg.norm(gx) + 1e-12), p, g)

  p = params
  best = -float(loss(p))
  for _ in range(steps):
    p = step(p)
    best = max(best, -float(loss(p)))
  return best


def test_released_estimate_never_exceeds_2L_over_n_on_adversarial_neighbours():
  bound = 2 * L / N
  found = max(_adversarial_search(_ours, seed) for seed in range(3))
  assert found <= bound * (1 + 1e-5)
  # Constructed worst case: the replaced example maps to +-c Phi^T u; the
  # bound is attained, so it is tight.
  for seed in range(5):
    a = jax.random.normal(jax.random.key(seed), (M, D)) / np.sqrt(M)
    u = a.T @ jnp.ones(M)
    rest = jax.random.normal(jax.random.key(100 + seed), (N - 1, D))
    change = float(_change(_ours, rest, 50 * u, -50 * u, a))
    assert bound * 0.999 <= change <= bound * (1 + 1e-5)


def test_thesis_release_breaks_the_2L_over_n_bound():
  """s_t Phi g: a null-space direction of Phi lets a tiny change of g flip
  the released direction; the change approaches 2 ||g|| (sensitivity 2L),
  n times the 2L / n the thesis calibrates to."""
  a = jax.random.normal(jax.random.key(0), (M, D)) / np.sqrt(M)
  _, _, vt = jnp.linalg.svd(a)
  null = vt[-1]  # Phi null = 0
  w = vt[0]
  b = 1e-3
  rest = jnp.tile(0.9 * L * null, (N - 1, 1))
  x, xp = 0.9 * L * null + N * b * w, 0.9 * L * null - N * b * w
  change = float(_change(_thesis, rest, x, xp, a))
  assert change > 0.8 * 2 * 0.9 * L  # ~ 2 ||g||
  assert change > 3 * (2 * L / N)
  # ... and the search never finds more than its true sensitivity 2L
  found = max(_adversarial_search(_thesis, seed) for seed in range(2))
  assert found <= 2 * L * (1 + 1e-5)


def test_noise_stddev_matches_the_calibration():
  sigma = dpjax.accounting.calibrate(dpjax.accounting.gaussian_event, 2.0,
                                     0.01, steps=5)
  eps = dpjax.accounting.epsilon(
      dpjax.accounting.gaussian_event(sigma, steps=5), 0.01)
  assert 2.0 * (1 - 1e-3) <= eps <= 2.0
  keys = jax.random.split(jax.random.key(1), 400)
  phi = T.gaussian_projection(jax.random.key(2), 10, 40)
  draw = jax.vmap(lambda k: T.dp_gradient_estimate(
      jnp.zeros((N, 40)), phi, L, sigma, k, sensitivity_factor=2.0,
      divisor=N))
  z = np.asarray(draw(keys), np.float64).ravel() * N / (2 * L * sigma)
  assert stats.kstest(z, 'norm').pvalue > 1e-3
  # std of 4000 draws: standard error 0.011; a 10% scale error is caught
  assert abs(z.std() - 1) < 0.04
  assert abs((z / 1.1).std() - 1) > 0.04
  tx = T.dp_compgd(0.1, 3, 1.0, L, sigma, N, key=jax.random.key(0))
  s = jax.jit(lambda: tx.update(jnp.ones((N, D)), tx.init(jnp.zeros(D)),
                                jnp.zeros(D))[1])()
  np.testing.assert_allclose(float(s.noise_multiplier), sigma, rtol=1e-6)


def test_minibatch_event_and_masked_rows():
  q, steps, sigma = 0.05, 100, 1.5
  event = dpjax.accounting.gaussian_event(sigma, sampling_rate=q,
                                         steps=steps)
  assert isinstance(event.event, dp_accounting.PoissonSampledDpEvent)
  assert event.event.event.noise_multiplier == sigma and event.count == steps
  sampler = dpjax.sampling.PoissonSampler(200, q)
  batch = sampler.sample(jax.random.key(0), 0)
  grads = jax.random.normal(jax.random.key(1), (sampler.max_batch_size, D))
  tx = T.dp_compsgd(0.1, M, 1.0, L, sigma, sampler,
                    key=jax.random.key(2))
  w = jnp.zeros(D)
  update = jax.jit(lambda g: tx.update(g, tx.init(w), w, mask=batch.mask)[0])
  u = update(grads)
  v = update(jnp.where(batch.mask[:, None], grads, jnp.nan))
  np.testing.assert_array_equal(u, v)


def test_a_vmapped_sigma_sweep_compiles_once():
  traces = []
  grads = jax.random.normal(jax.random.key(0), (N, D))

  def step(sigma):
    traces.append(1)
    tx = T.dp_compgd(0.1, M, 1.0, L, sigma, N, key=jax.random.key(1))
    w = jnp.zeros(D)
    return tx.update(grads, tx.init(w), w)[0]

  sweep = jax.jit(jax.vmap(step))
  a = sweep(jnp.array([0.5, 1.0, 2.0]))
  b = sweep(jnp.array([3.0, 4.0, 5.0]))
  assert len(traces) == 1
  assert not np.allclose(a, b)


def test_a_sweep_from_one_key_draws_independent_noise():
  """Before: every member of a sweep over sigma (or L) from one key drew one
  noise z, so two releases gave the clipped sum without noise. sigma and L
  are folded into the noise key. Zero gradients and a radius no step
  reaches: the update is -eta noise / n, noise ~ N(0, (2 L sigma)^2)."""
  dim, n = 4000, 2

  def z(sigma, clip):
    tx = T.dp_projected_gd(1.0, 1e6, clip, sigma, n, key=jax.random.key(1))
    w = jnp.zeros(dim)
    return -tx.update(jnp.zeros((n, dim)), tx.init(w), w)[0] * n / (
        2 * clip * sigma)

  zs = jax.jit(jax.vmap(z))(jnp.array([1.0, 2.0, 1.0]),
                            jnp.array([1.0, 1.0, 3.0]))
  assert 0.9 < float(np.std(zs[0])) < 1.1
  assert abs(float(np.corrcoef(zs[0], zs[1])[0, 1])) < 0.1
  assert abs(float(np.corrcoef(zs[0], zs[2])[0, 1])) < 0.1


def test_zero_noise_no_clip_is_compgd_and_same_key_same_step():
  grads = jax.random.normal(jax.random.key(0), (N, D))
  w = jnp.full(D, 0.05)
  key = jax.random.key(3)
  dp = T.dp_compgd(0.5, M, 1.0, 1e30, 0.0, N, key=key)
  plain = T.compgd(0.5, M, 1.0, key=key)
  u = jax.jit(lambda: dp.update(grads, dp.init(w), w)[0])()
  v = jax.jit(lambda: plain.update(grads.mean(0), plain.init(w), w)[0])()
  np.testing.assert_allclose(u, v, atol=1e-6)
  again = jax.jit(lambda: plain.update(grads.mean(0), plain.init(w), w)[0])()
  np.testing.assert_array_equal(again, v)
  assert float(jnp.abs(w + v).sum()) <= 1.0 + 1e-5  # stays in C
  dpg = T.dp_projected_gd(0.5, 1.0, 1e30, 0.0, N, key=key)
  np.testing.assert_allclose(
      dpg.update(grads, dpg.init(w), w)[0],
      T.projected_gd(0.5, 1.0).update(grads.mean(0), dpg.init(w), w)[0],
      atol=1e-6)


def test_average_iterate_is_step_size_weighted():
  tx = T.projected_gd(lambda c: 1.0 / (c.astype(jnp.float32) + 1), 10.0,
                      ball='l2')
  w = jnp.array([1.0])
  s = tx.init(w)
  ws, etas = [], []
  for t in range(3):
    ws.append(float(w[0]))
    etas.append(1.0 / (t + 1))
    u, s = tx.update(jnp.array([1.0]), s, w)
    w = optax.apply_updates(w, u)
  want = np.dot(etas, ws) / np.sum(etas)
  np.testing.assert_allclose(T.average_iterate(s), [want], rtol=1e-6)


def test_compgd_decreases_a_logistic_loss():
  k = jax.random.split(jax.random.key(0), 2)
  d, n = 40, 400
  z = jax.random.normal(k[0], (n, d))
  z = z / jnp.linalg.norm(z, axis=1, keepdims=True)
  w_star = jnp.zeros(d).at[0].set(4 * np.sqrt(d))
  y = jax.random.bernoulli(k[1], jax.nn.sigmoid(z @ w_star)).astype(
      jnp.float32)
  loss = lambda w: jnp.mean(jax.nn.softplus(z @ w) - y * (z @ w))
  tx = T.compgd(100.0, 20, float(jnp.abs(w_star).sum()), key=jax.random.key(2))
  w = jnp.zeros(d)
  s = tx.init(w)
  step = jax.jit(lambda w, s: tx.update(jax.grad(loss)(w), s, w))
  for _ in range(10):
    u, s = step(w, s)
    w = optax.apply_updates(w, u)
  assert float(loss(T.average_iterate(s))) < float(loss(jnp.zeros(d))) - 0.02


@pytest.mark.parametrize('make, match', [
    (lambda: T.dp_compgd(0.1, 0, 1.0, 1.0, 1.0, N, key=jax.random.key(0)),
     'num_rows=0'),
    (lambda: T.dp_compgd(0.1, 9, 1.0, 1.0, 1.0, N,
                         key=jax.random.key(0)).init(jnp.zeros(D)),
     'num_rows=9'),
    (lambda: T.compgd(0.1, 2, 0.0, key=jax.random.key(0)), 'radius=0.0'),
    (lambda: T.dp_projected_gd(0.1, -1.0, 1.0, 1.0, N, key=jax.random.key(0)),
     'radius=-1.0'),
    (lambda: T.dp_compgd(0.1, 2, 1.0, 1.0, -1.0, N, key=jax.random.key(0)),
     'noise_multiplier=-1.0'),
    (lambda: T.dp_compgd(0.1, 2, 1.0, 0.0, 1.0, N, key=jax.random.key(0)),
     'l2_norm_clip=0.0'),
    (lambda: T.dp_compgd(0.1, 2, 1.0, 1.0, 1.0, 0, key=jax.random.key(0)),
     'num_examples=0'),
    (lambda: T.compgd(0.1, 2, 1.0, key=jax.random.key(0), ball='l3'),
     "ball='l3'"),
    (lambda: T.dp_compsgd(0.1, 2, 1.0, 1.0, 1.0, 4.0, key=jax.random.key(0)),
     'pass the sampler'),
])
def test_bad_input_names_the_value(make, match):
  with pytest.raises(ValueError, match=match):
    make()


def test_a_nonfinite_row_is_dropped_and_the_others_kept():
  """One inf (or NaN) row used to make the projected sum NaN, which was then
  zeroed: every other record's signal was erased."""
  grads = jax.random.normal(jax.random.key(0), (N, D))
  w = jnp.zeros(D)
  for tx in (T.dp_compgd(0.5, M, 1.0, L, 0.0, N, key=jax.random.key(1)),
             T.dp_compsgd(0.5, M, 1.0, L, 0.0, dpjax.PoissonSampler(4, 1.0), key=jax.random.key(1))):
    step = jax.jit(lambda g, tx=tx: tx.update(g, tx.init(w), w,
                                              mask=jnp.ones(N, bool)))
    clean, _ = step(grads.at[2].set(0.0))
    assert float(jnp.linalg.norm(clean)) > 0
    for bad in (jnp.inf, jnp.nan):
      u, s = step(grads.at[2].set(0.0).at[2, 1].set(bad))
      np.testing.assert_array_equal(u, clean)
      assert int(s.num_dropped) == 1
    _, s = step(grads.at[2].set(1e30))  # finite and huge: clipped, kept
    assert int(s.num_dropped) == 0


@pytest.mark.parametrize('make', [
    lambda: T.dp_compsgd(0.1, M, 1.0, L, 1.0, dpjax.PoissonSampler(4, 1.0), key=jax.random.key(0)),
    lambda: T.dp_projected_sgd(0.1, 1.0, L, 1.0, dpjax.PoissonSampler(4, 1.0), key=jax.random.key(0)),
])
def test_poisson_steps_refuse_a_batch_without_its_mask(make):
  """A padded Poisson batch without mask= counted every padded row (copies
  of one example) as data."""
  tx = make()
  w = jnp.zeros(D)
  with pytest.raises(ValueError, match='mask='):
    tx.update(jnp.ones((N, D)), tx.init(w), w)
  with pytest.raises(ValueError, match='boolean mask'):
    tx.update(jnp.ones((N, D)), tx.init(w), w, mask=jnp.ones(N))


def test_full_batch_steps_refuse_a_missing_batch_axis_or_unmasked_padding():
  w = jnp.zeros(D)
  for tx in (T.dp_compgd(0.1, M, 1.0, L, 1.0, N, key=jax.random.key(0)),
             T.dp_projected_gd(0.1, 1.0, L, 1.0, N, key=jax.random.key(0))):
    with pytest.raises(ValueError, match='Missing batch axis'):
      tx.update(jnp.ones(D), tx.init(w), w)  # the mean gradient, not rows
    with pytest.raises(ValueError, match=f'num_examples={N}'):
      tx.update(jnp.ones((N + 3, D)), tx.init(w), w)


def _run_full_batch(sigma, steps=2, key=jax.random.key(0)):
  """The state after ``steps`` full-batch steps at a traced sigma (a sweep),
  with the state after each step."""
  w = jnp.zeros(D)

  @jax.jit
  def run(sigma):
    tx = T.dp_compgd(0.1, M, 1.0, L, sigma, N, key=key)
    s, states = tx.init(w), []
    for _ in range(steps):
      s = tx.update(jnp.ones((N, D)), s, w)[1]
      states.append(s)
    return states

  return run(sigma)


def test_the_one_reader_reads_the_sigma_that_ran():
  """A planned gaussian_event(1.0, steps=T) was accepted for a run at sigma
  0.2; the reader records the sigma that ran."""
  s = _run_full_batch(0.2)[-1]
  sigma = float(np.float32(0.2))  # the state keeps sigma in float32
  assert dpjax.accounting.step_event(s, None) == (
      dp_accounting.GaussianDpEvent(sigma))
  with pytest.raises(ValueError, match='sampler=None for a full-batch'):
    dpjax.accounting.step_event(s, dpjax.sampling.PoissonSampler(100, 0.05))
  w = jnp.zeros(D)
  tx = T.dp_compgd(0.1, M, 1.0, L, 0.2, N, key=jax.random.key(0))
  with pytest.raises(ValueError, match='before any step'):
    dpjax.accounting.step_event(tx.init(w), None)
  seeds = jax.tree.map(lambda x: jnp.stack([x, x]), s)
  with pytest.raises(ValueError, match='index the run'):
    dpjax.accounting.step_event(seeds, None)


def test_record_step_of_a_dp_compgd_run_is_the_event_of_the_run():
  """The ledger of T full-batch steps, each read from the state that ran,
  is what dp_compgd_step_event(state) gave for the run:
  gaussian_event(sigma that ran, steps=T)."""
  states = _run_full_batch(0.2, steps=3)
  ledger = dpjax.accounting.PrivacyLedger()
  for s in states:
    ledger.record_step(s, None, None)
  ran = dpjax.accounting.gaussian_event(float(np.float32(0.2)), steps=3)
  assert ledger.runs == [(ran.event, ran.count)]
  assert ledger.epsilon(1e-5) == dpjax.accounting.epsilon(ran, 1e-5)


def test_record_step_refuses_a_replayed_compgd_state():
  """The same state twice, or a second run from the same key, replays the
  step's Phi and noise: its guarantee is void."""
  first = _run_full_batch(0.5, steps=1)[0]
  ledger = dpjax.accounting.PrivacyLedger()
  ledger.record_step(first, None, None)
  with pytest.raises(ValueError, match='already spent'):
    ledger.record_step(first, None, None)
  again = _run_full_batch(0.5, steps=1)[0]  # a second init, same key
  with pytest.raises(ValueError, match='already spent'):
    ledger.record_step(again, None, None)
  assert ledger.num_events == 1
  ledger.record_step(_run_full_batch(0.5, 1, jax.random.key(1))[0], None,
                     None)
  assert ledger.num_events == 2


@pytest.mark.parametrize('make', [
    lambda: T.dp_compsgd(0.1, M, 1.0, L, 1.3, dpjax.PoissonSampler(5, 1.0), key=jax.random.key(0)),
    lambda: T.dp_projected_sgd(0.1, 1.0, L, 1.3, dpjax.PoissonSampler(5, 1.0), key=jax.random.key(0)),
])
def test_a_poisson_step_is_read_with_its_sampler(make):
  """sampler.dp_event(sigma): what dp_compsgd_step_event gave per step."""
  sampler = dpjax.sampling.PoissonSampler(100, 0.05)
  tx, w = make(), jnp.zeros(D)
  ledger = dpjax.accounting.PrivacyLedger()
  s = tx.init(w)
  for t in range(2):
    batch = sampler.sample(jax.random.key(7), t)
    grads = jnp.ones((batch.mask.size, D))
    s = tx.update(grads, s, w, mask=batch.mask)[1]
    ledger.record_step(s, sampler, batch)
  one = sampler.dp_event(float(np.float32(1.3)))
  assert dpjax.accounting.step_event(s, sampler) == one
  assert ledger.runs == [(one, 2)]
  with pytest.raises(ValueError, match='batch sampler of a Poisson step'):
    dpjax.accounting.step_event(s, None)
  users = dpjax.sampling.UserPoissonSampler(np.arange(100), 0.05,
                                            max_examples_per_user=1)
  with pytest.raises(ValueError, match='accounts per user'):
    dpjax.accounting.step_event(s, users)


def test_the_reader_refuses_non_private_runs_and_extra_privacy_parts():
  w = jnp.zeros(D)
  for tx in (T.compgd(0.1, M, 1.0, key=jax.random.key(0)),
             T.projected_gd(0.1, 1.0)):
    s = tx.update(jnp.ones(D), tx.init(w), w)[1]
    with pytest.raises(ValueError, match='non-private run'):
      dpjax.accounting.step_event(s, None)
  tx = optax.chain(T.normalize(float(N)),
                   T.dp_compgd(0.1, M, 1.0, L, 1.0, N, key=jax.random.key(0)))
  s = tx.update(jnp.ones((N, D)), tx.init(w), w)[1]
  with pytest.raises(ValueError, match="NormalizeState"):
    dpjax.accounting.step_event(s, None)


def test_a_dpsgd_state_refuses_sampler_none():
  """Before, sampler=None died in an AttributeError deep in the reader."""
  tx = dpjax.dpsgd(0.1, 1.0, 1.1, dpjax.PoissonSampler(10, 1.0), key=jax.random.key(0))
  _, s = tx.update(jnp.ones((2, 3)), tx.init(jnp.zeros(3)), jnp.zeros(3),
                   mask=jnp.ones(2, bool))
  with pytest.raises(ValueError, match='full-batch steps'):
    dpjax.accounting.step_event(s, None)
