"""CoSaMP against a direct NumPy transcription of Farokhi's Alg. 1."""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax

# One compilation per (shape, sparsity, option) instead of one per call.
cosamp = jax.jit(dpjax.recovery.cosamp, static_argnums=2,
                 static_argnames=('keep_best', 'num_iterations'))


def numpy_cosamp(psi: np.ndarray, y: np.ndarray, kappa: int,
                 iterations: int | None = None) -> np.ndarray:
  """Alg. 1 line by line, in float64 (the oracle)."""
  psi = psi.astype(np.float64)
  y = y.astype(np.float64)
  n = psi.shape[1]
  z = np.zeros(n)
  u = y.copy()
  for _ in range(iterations or 6 * (kappa + 1)):
    proxy = np.abs(psi.T @ u)
    top = np.argsort(-proxy, kind='stable')[:2 * kappa]
    support = set(top.tolist()) | set(np.flatnonzero(z).tolist())
    t = np.array(sorted(support))
    b = np.zeros(n)
    b[t] = np.linalg.pinv(psi[:, t]) @ y
    keep = np.argsort(-np.abs(b), kind='stable')[:kappa]
    z = np.zeros(n)
    z[keep] = b[keep]
    u = y - psi @ z
  return z


def _instance(seed: int, n: int, kappa: int, p: int, noise: float = 0.0):
  rng = np.random.default_rng(seed)
  psi = (rng.standard_normal((p, n)) / math.sqrt(p)).astype(np.float32)
  x = np.zeros(n, np.float32)
  x[rng.choice(n, kappa, replace=False)] = rng.standard_normal(kappa)
  e = (noise * rng.standard_normal(p)).astype(np.float32)
  return psi, x, psi @ x + e, e


@pytest.mark.parametrize('n,kappa,p', [(100, 1, 20), (100, 3, 40),
                                       (256, 5, 60), (1000, 2, 40)])
def test_exact_recovery_without_noise(n, kappa, p):
  # p >= 2.5 kappa log(n / kappa) in every case.
  assert p >= 2.5 * kappa * math.log(n / kappa)
  instances = [_instance(s, n, kappa, p) for s in range(100)]
  psi = jnp.stack([i[0] for i in instances])
  x = np.stack([i[1] for i in instances])
  y = jnp.stack([i[2] for i in instances])
  z = jax.jit(jax.vmap(lambda a, b: dpjax.recovery.cosamp(a, b, kappa)))(psi, y)
  err = np.linalg.norm(np.asarray(z) - x, axis=1) / np.linalg.norm(x, axis=1)
  assert err.max() < 1e-4, err.max()
  assert (np.count_nonzero(np.asarray(z), axis=1) <= kappa).all()


def test_error_proportional_to_noise():
  n, kappa, p = 256, 4, 64
  errors = {}
  for noise in (1e-3, 4e-3, 1.6e-2):
    err, enorm = [], []
    for s in range(60):
      psi, x, y, e = _instance(s, n, kappa, p, noise)
      z = cosamp(psi, y, kappa)
      err.append(np.linalg.norm(np.asarray(z) - x))
      enorm.append(np.linalg.norm(e))
    # Needell & Tropp, Thm A: ||x - z|| <= C ||e|| for exactly sparse x.
    assert max(a / b for a, b in zip(err, enorm)) < 5.0
    errors[noise] = np.mean(err)
  assert errors[4e-3] / errors[1e-3] == pytest.approx(4, rel=0.15)
  assert errors[1.6e-2] / errors[4e-3] == pytest.approx(4, rel=0.15)


@pytest.mark.parametrize('noise', [0.0, 0.05, 0.5])
def test_matches_numpy_oracle(noise):
  n, kappa, p = 64, 3, 24
  for s in range(20):
    psi, _, y, _ = _instance(100 + s, n, kappa, p, noise)
    got = np.asarray(cosamp(psi, y, kappa, keep_best=False))
    want = numpy_cosamp(psi, y, kappa)
    np.testing.assert_allclose(got, want, atol=2e-4 * max(1, np.abs(want).max()))


def test_keep_best_never_has_a_larger_residual():
  n, kappa, p = 100, 5, 20  # below the recovery threshold: iterates wander
  worse = 0
  for s in range(30):
    psi, _, y, _ = _instance(s, n, kappa, p, 0.3)
    best = cosamp(psi, y, kappa)
    last = cosamp(psi, y, kappa, keep_best=False)
    r_best = float(jnp.linalg.norm(y - psi @ best))
    r_last = float(jnp.linalg.norm(y - psi @ last))
    assert r_best <= r_last + 1e-6
    worse += r_last > r_best + 1e-6
  assert worse > 0  # the option matters on these instances


def test_vmap_equals_loop_and_jit_compiles_once():
  instances = [_instance(s, 50, 2, 16, 0.1) for s in range(4)]
  psi = jnp.stack([i[0] for i in instances])
  y = jnp.stack([i[2] for i in instances])
  fn = jax.jit(jax.vmap(lambda a, b: dpjax.recovery.cosamp(a, b, 2)))
  batched = fn(psi, y)
  for i in range(4):
    chex.assert_trees_all_close(batched[i], cosamp(psi[i], y[i], 2),
                                atol=1e-5)
  fn(psi + 1e-3, y)
  assert fn._cache_size() == 1


def test_keep_top_k():
  v = jnp.array([1., -7., 3., 7., 0.5])
  np.testing.assert_array_equal(dpjax.compression.keep_top_k(v, 2), [0, -7, 0, 7, 0])
  np.testing.assert_array_equal(dpjax.compression.keep_top_k(v, 5), v)


@pytest.mark.parametrize('kwargs,match', [
    ({'sparsity': 0}, 'sparsity=0'),
    ({'sparsity': 11}, 'sparsity=11'),
    ({'sparsity': 2.0}, 'integer'),
    ({'sparsity': 2, 'num_iterations': 0}, 'num_iterations'),
])
def test_bad_arguments(kwargs, match):
  psi, y = jnp.ones((4, 10)), jnp.ones(4)
  with pytest.raises(ValueError, match=match):
    dpjax.recovery.cosamp(psi, y, **kwargs)


def test_bad_shapes():
  with pytest.raises(ValueError, match='shapes'):
    dpjax.recovery.cosamp(jnp.ones((4, 10)), jnp.ones(5), 2)
