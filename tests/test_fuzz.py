"""Fuzzing the public mechanisms: every call raises a clear error or returns
finite output whose replace-one change stays within the stated sensitivity.

Random shapes, dtypes (f32, bf16, f16, int32), NaN/inf positions, masks and
hyperparameters. Same key on both neighbours, so the noise cancels and the
difference of the outputs is the difference of the clipped inputs.
"""

import hypothesis
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax import distributed

# Property-based and slow (about 2 minutes): CI's second stage, make test-slow.
pytestmark = pytest.mark.slow

SETTINGS = hypothesis.settings(max_examples=60, deadline=None,
                               suppress_health_check=list(
                                   hypothesis.HealthCheck))
DTYPES = (jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32)
SPECIALS = (np.nan, np.inf, -np.inf, 1e30, -1e30)


@st.composite
def per_example_case(draw):
  """(params, per-example grads, neighbour grads, mask, clip, dtype)."""
  batch = draw(st.integers(0, 5))
  shapes = draw(st.lists(st.lists(st.integers(1, 3), max_size=2), min_size=1,
                         max_size=3))
  dtype = draw(st.sampled_from(DTYPES))
  seed = draw(st.integers(0, 2**31 - 1))
  rng = np.random.default_rng(seed)
  params = {f'p{i}': jnp.zeros(s, jnp.float32) for i, s in enumerate(shapes)}
  grads = {}
  for k, p in params.items():
    g = rng.normal(size=(batch,) + p.shape) * 10.0 ** rng.integers(-3, 4)
    if g.size and draw(st.booleans()):
      g.flat[rng.integers(g.size)] = draw(st.sampled_from(SPECIALS))
    grads[k] = g
  neighbour = {k: v.copy() for k, v in grads.items()}
  if batch:
    row = rng.integers(batch)
    for v in neighbour.values():
      v[row] = rng.normal(size=v.shape[1:]) * 100.0
  mask = rng.random(batch) < 0.8
  clip = float(10.0 ** draw(st.floats(-3, 3)))
  cast = lambda t: {k: jnp.asarray(v).astype(dtype) for k, v in t.items()}
  return params, cast(grads), cast(neighbour), jnp.asarray(mask), clip, dtype


def _norm(tree):
  return float(np.sqrt(sum(np.sum(np.square(np.asarray(x, np.float64)))
                           for x in jax.tree.leaves(tree))))


@SETTINGS
@hypothesis.given(case=per_example_case())
def test_clip_aggregator_is_finite_and_within_sensitivity(case):
  params, grads, neighbour, mask, clip, dtype = case
  tx = dpjax.clip_per_example(clip)
  try:
    a, _ = tx.update(grads, tx.init(params), params, mask=mask)
  except ValueError as e:  # only integer gradients may be refused
    assert dtype == jnp.int32 and 'floating' in str(e)
    return
  b, _ = tx.update(neighbour, tx.init(params), params, mask=mask)
  for out in (a, b):
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(out))
  # One row replaced: the sums differ by at most 2 C (half-precision slack).
  tol = {jnp.float32: 1e-4, jnp.bfloat16: 2e-2, jnp.float16: 5e-3}[dtype]
  assert _norm(jax.tree.map(lambda x, y: np.asarray(x, np.float64) -
                            np.asarray(y, np.float64), a, b)) <= (
                                2 * clip * (1 + tol) + 1e-6)


@SETTINGS
@hypothesis.given(case=per_example_case(), sigma=st.floats(0, 5))
def test_dpsgd_step_is_finite_or_refused(case, sigma):
  params, grads, _, mask, clip, dtype = case
  tx = dpjax.dpsgd(0.1, clip, sigma, 4.0, key=jax.random.key(0))
  try:
    out, _ = tx.update(grads, tx.init(params), params, mask=mask)
  except ValueError as e:
    assert dtype == jnp.int32 and 'floating' in str(e)
    return
  assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(out))


@st.composite
def vector_case(draw):
  n = draw(st.integers(3, 12))
  rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
  v = rng.normal(size=n) * 10.0 ** rng.integers(-2, 3)
  for _ in range(draw(st.integers(0, 3))):
    v[rng.integers(n)] = draw(st.sampled_from(SPECIALS))
  w = v.copy()
  w[rng.integers(n)] = rng.normal() * 50
  return jnp.asarray(v, jnp.float32), jnp.asarray(w, jnp.float32)


@SETTINGS
@hypothesis.given(case=vector_case(), eps=st.floats(0.1, 10),
                  xi=st.floats(0.01, 10))
def test_laplace_privatizer_is_finite_and_within_l1_sensitivity(case, eps, xi):
  v, w = case
  tx = dpjax.laplace_privatizer(eps, xi, key=jax.random.key(1))
  a = tx.update(v, tx.init(None))[0]
  b = tx.update(w, tx.init(None))[0]
  assert bool(jnp.all(jnp.isfinite(a))) and bool(jnp.all(jnp.isfinite(b)))
  # ANY two inputs differ by at most 2 xi n in L1 after clipping.
  assert float(jnp.sum(jnp.abs(a - b))) <= 2 * xi * v.size * (1 + 1e-4)


@SETTINGS
@hypothesis.given(case=vector_case(), eps=st.floats(0.1, 10),
                  noise=st.sampled_from(['gaussian', 'laplace']))
def test_noise_transforms_are_finite(case, eps, noise):
  v, _ = case
  add = dpjax.add_gaussian_noise if noise == 'gaussian' else (
      dpjax.add_laplace_noise)
  tx = add(1.0 / eps, key=jax.random.key(2))
  assert bool(jnp.all(jnp.isfinite(tx.update(v, tx.init(None))[0])))


@SETTINGS
@hypothesis.given(case=vector_case(), calibration=st.sampled_from(
    ['certified', 'paper']))
def test_compressive_privatizer_is_finite(case, calibration):
  v, _ = case
  tx = dpjax.compressive_privatizer(2, 6, 1.0, 1.0, key=jax.random.key(3),
                                    noise_calibration=calibration)
  out, state = tx.update(v, tx.init(None))
  assert bool(jnp.all(jnp.isfinite(out))) and np.isfinite(float(state.epsilon))


@SETTINGS
@hypothesis.given(case=vector_case(), rotate=st.booleans())
def test_cpsgd_and_gaussian_protocols_are_finite(case, rotate):
  v, w = case
  xs = jnp.stack([v, w, jnp.ones_like(v)])
  d = v.shape[0]
  cfg = distributed.CpsgdConfig(
      l2_norm_clip=1.0, levels=4, trials=8, rotate=rotate,
      linf_clip=distributed.rotated_linf_clip(1.0, d, 3, 1e-5)
      if rotate else None)
  key = jax.random.key(4)
  assert bool(jnp.all(jnp.isfinite(distributed.distributed_mean(cfg, key, xs))))
  assert bool(jnp.all(jnp.isfinite(
      distributed.gaussian_distributed_mean(key, xs, 1.0, 0.5))))


# --- non-parametric entry points ---------------------------------------------

NP_SETTINGS = hypothesis.settings(SETTINGS, max_examples=12)
NP_ARGUMENTS = ('x', 'y', 'x_test', 'x_labelled', 'y_labelled',
                'x_unlabelled', 'bounds', 'utilities', 'mask')


@st.composite
def nonparametric_case(draw):
  """(x, y, x_test, bounds): specials in x, labels possibly out of [0, 2),
  possibly no rows, a test set possibly of the wrong width."""
  n = draw(st.sampled_from([0, 1, 4]))
  d = draw(st.integers(1, 2))
  rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
  x = rng.uniform(-0.5, 1.5, size=(n, d))
  if n and draw(st.booleans()):
    x.flat[rng.integers(x.size)] = draw(st.sampled_from(SPECIALS))
  y = rng.integers(0, 2, size=n)
  if n and draw(st.booleans()):
    y[rng.integers(n)] = draw(st.sampled_from([-1, 2, 7]))
  x_test = rng.uniform(size=(2, d + draw(st.sampled_from([0, 0, 1]))))
  bounds = draw(st.sampled_from([(0.0, 1.0), (0.0, 1.0), (1.0, 1.0 + 1e-12),
                                 (2.0, 1.0)]))
  return x.astype(np.float32), y, x_test.astype(np.float32), bounds


def _refused_or_safe(call, x_query):
  """A ValueError naming an argument, or predictions that are classes."""
  try:
    release, _ = call()
  except ValueError as e:
    assert str(e).startswith('Expected'), str(e)
    assert any(name in str(e) for name in NP_ARGUMENTS), str(e)
    assert 'row' not in str(e) and 'value' not in str(e), str(e)
    return
  for leaf in jax.tree.leaves(release):
    if jnp.issubdtype(leaf.dtype, jnp.floating):
      assert bool(jnp.all(jnp.isfinite(leaf)))
  labels = np.asarray(dpjax.nonparametric.predict(release, x_query))
  assert labels.shape == (x_query.shape[0],)
  assert np.all((labels >= 0) & (labels < 2))


@NP_SETTINGS
@hypothesis.given(case=nonparametric_case(), fn=st.sampled_from(
    ['noisy_reg', 'private_histogram', 'random_decision_trees', 'spe']))
def test_nonparametric_releases_are_refused_or_safe(case, fn):
  x, y, _, bounds = case
  npm = dpjax.nonparametric
  kw = dict(epsilon=1.0, bounds=bounds, num_classes=2)
  extra = {'noisy_reg': dict(bins=2), 'private_histogram': dict(bins=2),
           'random_decision_trees': dict(num_trees=2, depth=1),
           'spe': dict(num_trees=2, depth=1, num_candidates=2)}[fn]
  _refused_or_safe(lambda: getattr(npm, fn)(jax.random.key(0), x, y,
                                            **kw, **extra),
                   np.full((2, x.shape[1]), 0.5, np.float32))


@NP_SETTINGS
@hypothesis.given(case=nonparametric_case(), fn=st.sampled_from(
    ['dp_knn', 'sspe1', 'sspe2', 'pte']))
def test_nonparametric_with_a_second_set_are_refused_or_safe(case, fn):
  x, y, x_test, bounds = case
  npm = dpjax.nonparametric
  kw = dict(epsilon=1.0, bounds=bounds, num_classes=2)
  trees = dict(num_trees=2, depth=1)
  call = {
      'dp_knn': lambda: npm.dp_knn(jax.random.key(0), x, y, x_test, **kw),
      'sspe1': lambda: npm.sspe(jax.random.key(0), x, y, x_test, setting=1,
                                num_candidates=2, **trees, **kw),
      'sspe2': lambda: npm.sspe(jax.random.key(0), x, y, x_test, setting=2,
                                **trees, **kw),
      'pte': lambda: npm.pte(jax.random.key(0), x, y, x_test, **trees, **kw),
  }[fn]
  _refused_or_safe(call, np.full((2, x.shape[1]), 0.5, np.float32))


@NP_SETTINGS
@hypothesis.given(case=vector_case(), masked=st.integers(0, 3))
def test_exponential_mechanism_is_refused_or_draws_a_candidate(case, masked):
  u, _ = case
  mask = jnp.arange(u.shape[0]) >= masked * u.shape[0] // 3
  try:
    i = int(dpjax.nonparametric.exponential_mechanism(
        jax.random.key(5), u, epsilon=1.0, sensitivity=1.0, mask=mask))
  except ValueError as e:
    assert 'utilities' in str(e) or 'mask' in str(e), str(e)
    return
  assert 0 <= i < u.shape[0] and bool(mask[i])
