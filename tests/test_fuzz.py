"""Fuzzing the public mechanisms: every call raises a clear error or returns
finite output whose replace-one change stays within the stated sensitivity.

Random shapes, dtypes (f32, bf16, f16, int32), NaN/inf positions, masks and
hyperparameters; ghost clipping gets adversarial gather ids (out of range,
negative, repeated, with opposite output gradients), also summed in
micro-batches (vmap and ghost), and sequence records whose positions cancel; the CompGD steps and the
decentralized rounds also get misuse (no mask, no batch axis, a non-boolean
or misshapen mask), which must raise a ValueError; user-level clipping
refuses any mask not carried by a UserBatch; the Gaussian noise on a
clipped sum gets a scaled sum (its bound follows), a non-linear map of the
sum and a per-example sum under a user-level sampler (both refused);
adaptive clipping under a BandMF strategy records its count noise, or a
sampler without the cyclic schedule its analysis needs is refused; BandMF
at rate 1 claims a sensitivity that covers every example's cyclic pattern,
a reshuffling sampler is refused, and so is a cyclic step restarted each
epoch (``record_step``). Same key on both neighbours, so the noise cancels and the difference of the
outputs is the difference of the clipped inputs.
"""

import dp_accounting
import hypothesis
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import optax
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
  tx = dpjax.dpsgd(0.1, clip, sigma, dpjax.PoissonSampler(4, 1.0), key=jax.random.key(0))
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
  tx = dpjax.transforms.laplace_privatizer(eps, xi, key=jax.random.key(1))
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
@hypothesis.given(case=vector_case(), stddev=st.sampled_from(
    [2.0**-6, 0.25, 1.0, 16.0]))
def test_exact_gaussian_is_on_the_grid_and_within_its_sensitivity(case,
                                                                  stddev):
  # Powers of two: one lattice sigma (2^18), so one sampler per length.
  v, w = case
  gamma = dpjax.transforms.exact_gaussian_grid(stddev)
  tx = dpjax.transforms.add_exact_gaussian_noise(stddev, key=jax.random.key(3))
  a = np.asarray(tx.update(v, tx.init(None))[0], np.float64)
  b = np.asarray(tx.update(w, tx.init(None))[0], np.float64)
  for out in (a, b):
    assert np.all(np.isfinite(out)) and np.all(out / gamma ==
                                               np.round(out / gamma))
  # Same key, so the noise cancels: the releases differ by the inputs
  # (non-finite as 0) plus less than 2 grid steps a coordinate (rounding),
  # where the codes plus noise stay below 2^24 (exact in float32; beyond,
  # the release is fl(code) gamma, still a function of the integer).
  inputs = [np.nan_to_num(np.asarray(x, np.float64), nan=0.0, posinf=0.0,
                          neginf=0.0) for x in (v, w)]
  small = np.maximum(np.abs(inputs[0]), np.abs(inputs[1])) < 2.0**22 * gamma
  gap = np.abs((a - b) - (inputs[0] - inputs[1]))
  assert np.all(gap[small] < 2 * gamma)


@SETTINGS
@hypothesis.given(case=vector_case(), calibration=st.sampled_from(
    ['certified', 'paper']))
def test_compressive_privatizer_is_finite(case, calibration):
  v, _ = case
  tx = dpjax.transforms.compressive_privatizer(2,
                                               6,
                                               1.0,
                                               1.0,
                                               key=jax.random.key(3),
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
  for field in ('counts', 'leaf_counts'):  # released counts: exact integers
    if hasattr(release, field):
      assert getattr(release, field).dtype == jnp.int32, field
  labels = np.asarray(dpjax.nonparametric.predict(release, x_query))
  assert labels.shape == (x_query.shape[0],)
  assert np.all((labels >= 0) & (labels < 2))


@NP_SETTINGS
@hypothesis.given(case=nonparametric_case(), fn=st.sampled_from(
    ['noisy_reg', 'dp_histogram', 'random_decision_trees', 'spe']))
def test_nonparametric_releases_are_refused_or_safe(case, fn):
  x, y, _, bounds = case
  npm = dpjax.nonparametric
  kw = dict(epsilon=1.0, bounds=bounds, num_classes=2)
  extra = {'noisy_reg': dict(bins=2), 'dp_histogram': dict(bins=2),
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


# --- CompGD and the decentralized rounds: fixed shapes, one program each ---

CB, CD = 4, 6  # batch rows and dimension of the CompGD cases


@st.composite
def compgd_case(draw):
  """(rows, neighbour rows, mask, clip, sigma): specials anywhere."""
  rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
  rows = rng.normal(size=(CB, CD)) * 10.0 ** rng.integers(-3, 4)
  for _ in range(draw(st.integers(0, 3))):
    rows[rng.integers(CB), rng.integers(CD)] = draw(st.sampled_from(SPECIALS))
  neighbour = rows.copy()
  neighbour[rng.integers(CB)] = draw(st.sampled_from(
      [np.nan, np.inf, 100.0])) * rng.normal(size=CD)
  mask = rng.random(CB) < 0.8
  clip = float(10.0 ** draw(st.floats(-2, 2)))
  sigma = draw(st.floats(0, 5))
  return (jnp.asarray(rows, jnp.float32), jnp.asarray(neighbour, jnp.float32),
          jnp.asarray(mask), clip, sigma)


@jax.jit
def _compgd_releases(rows, neighbour, mask, clip, sigma):
  """Both neighbours' released estimates (same Phi and noise)."""
  phi = dpjax.transforms.gaussian_projection(jax.random.key(0), 3, CD)
  est = lambda r: dpjax.transforms.dp_gradient_estimate(
      r, phi, clip, sigma, jax.random.key(1), sensitivity_factor=2.0,
      divisor=CB, mask=mask)
  return est(rows), est(neighbour)


_COMPGD_STEPS = {}


def _compgd_step(name):
  """One jitted step per entry point; clip and sigma are traced."""
  if name not in _COMPGD_STEPS:
    t = dpjax.transforms
    make = {
        'dp_compgd': lambda c, s: t.dp_compgd(0.1, 3, 1.0, c, s, CB,
                                              key=jax.random.key(0)),
        'dp_compsgd': lambda c, s: t.dp_compsgd(0.1, 3, 1.0, c, s, dpjax.PoissonSampler(2, 1.0),
                                                key=jax.random.key(0)),
        'dp_projected_gd': lambda c, s: t.dp_projected_gd(
            0.1, 1.0, c, s, CB, key=jax.random.key(0)),
        'dp_projected_sgd': lambda c, s: t.dp_projected_sgd(
            0.1, 1.0, c, s, dpjax.PoissonSampler(2, 1.0), key=jax.random.key(0)),
    }[name]

    def step(rows, mask, clip, sigma):
      tx = make(clip, sigma)
      w = jnp.zeros(CD)
      return tx.update(rows, tx.init(w), w, mask=mask)

    _COMPGD_STEPS[name] = (make, jax.jit(step))
  return _COMPGD_STEPS[name]


@SETTINGS
@hypothesis.given(case=compgd_case())
def test_compgd_release_is_finite_and_within_sensitivity(case):
  rows, neighbour, mask, clip, sigma = case
  a, b = _compgd_releases(rows, neighbour, mask, clip, sigma)
  assert bool(jnp.all(jnp.isfinite(a))) and bool(jnp.all(jnp.isfinite(b)))
  # Replace one row: the sums differ by at most 2 L, divided by n.
  assert float(jnp.linalg.norm(a - b)) <= 2 * clip / CB * (1 + 1e-4) + 1e-6


# --- ghost clipping on adversarial gather ids: one program per dtype ----

GV, GT, GD, GB = 5, 4, 3, 4  # table rows, lookups, row width, batch rows
GATHER_IDS = (0, 1, GV - 1, GV, GV + 1, 2**20, -1, -GV, -GV - 1, -2**31)


def _gather_loss(params, example):
  """One table per gather mode: table[ids], clip, fill (drop)."""
  ids, t = example['ids'], example['t'].astype(params['plain'].dtype)
  return (jnp.sum(params['plain'][ids] * t)
          + jnp.sum(params['clip'].at[ids].get(mode='clip') * t)
          + jnp.sum(params['fill'].at[ids].get(mode='fill', fill_value=0)
                    * t))


@st.composite
def gather_case(draw):
  """(params, batch, neighbour, mask, clip, dtype): ids out of range,
  negative, repeated; output gradients in opposite pairs, specials."""
  rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
  dtype = draw(st.sampled_from((jnp.float32, jnp.bfloat16)))
  params = {m: jnp.asarray(rng.normal(size=(GV, GD)), dtype)
            for m in ('plain', 'clip', 'fill')}

  def rows(k):
    ids = rng.choice(GATHER_IDS, size=(k, GT))
    t = rng.normal(size=(k, GT, GD)) * 10.0 ** rng.integers(-3, 4, (k, 1, 1))
    if draw(st.booleans()):  # opposite output gradients on two lookups
      t[:, 1] = -t[:, 0]
    return ids, t

  ids, t = rows(GB)
  if draw(st.booleans()):
    t[rng.integers(GB), rng.integers(GT), 0] = draw(st.sampled_from(SPECIALS))
  ids2, t2 = ids.copy(), t.copy()
  row = rng.integers(GB)
  ids2[row], t2[row] = (x[0] for x in rows(1))
  batch = lambda i, x: {'ids': jnp.asarray(i, jnp.int32),
                        't': jnp.asarray(x, jnp.float32)}
  mask = jnp.asarray(rng.random(GB) < 0.8)
  clip = float(10.0 ** draw(st.floats(-2, 2)))
  return params, batch(ids, t), batch(ids2, t2), mask, clip, dtype


@jax.jit
def _gather_sums(params, batch, neighbour, mask, clip):
  clips = jax.tree.map(lambda _: clip, params)
  ghost = dpjax.clipped_grad_sum(_gather_loss, clips, 'ghost')
  exact = dpjax.clipped_grad_sum(_gather_loss, clips)
  return (ghost(params, batch, mask), ghost(params, neighbour, mask),
          exact(params, batch, mask))


@SETTINGS
@hypothesis.given(case=gather_case())
def test_ghost_gather_is_finite_within_sensitivity_and_matches_vmap(case):
  params, batch, neighbour, mask, clip, dtype = case
  a, b, exact = _gather_sums(params, batch, neighbour, mask, clip)
  tol = {jnp.float32: 1e-4, jnp.bfloat16: 2e-2}[dtype]
  for mode in params:
    x, y = (np.asarray(s.grad_sum.value[mode], np.float64) for s in (a, b))
    assert np.all(np.isfinite(x)) and np.all(np.isfinite(y))
    # Replace one row: each table's sum moves by at most 2 C.
    assert np.linalg.norm(x - y) <= 2 * clip * (1 + tol) + 1e-6, mode
    # The ghost norm of a kept row is the norm of the gradient jax.grad
    # gives (a non-finite one, NaN or inf, drops the row on both paths); a
    # masked row's norm is not computed overflow-safely (it counts nowhere).
    kept = np.asarray(mask)
    ghost_n = np.asarray(a.norms[mode])[kept]
    exact_n = np.asarray(exact.norms[mode])[kept]
    finite = np.isfinite(exact_n)
    np.testing.assert_array_equal(np.isfinite(ghost_n), finite, err_msg=mode)
    np.testing.assert_allclose(ghost_n[finite], exact_n[finite], rtol=tol,
                               atol=1e-6, err_msg=mode)


@jax.jit
def _microbatch_sums(params, batch, neighbour, mask, clip):
  clips = jax.tree.map(lambda _: clip, params)
  out = []
  for method in dpjax.clipping.METHODS:
    whole = dpjax.clipped_grad_sum(_gather_loss, clips, method)
    micro = dpjax.clipped_grad_sum(_gather_loss, clips, method,
                                   microbatch_size=GB // 2)
    out.append((micro(params, batch, mask), micro(params, neighbour, mask),
                whole(params, batch, mask)))
  return out


@SETTINGS
@hypothesis.given(case=gather_case())
def test_microbatched_sums_are_within_sensitivity_and_match_the_whole(case):
  # Two micro-batches of the gather records (padding, specials, ids out of
  # range): the accumulated sum claims C, so one replaced row moves it by at
  # most 2 C, and it is the whole batch's sum up to summation order.
  params, batch, neighbour, mask, clip, dtype = case
  tol = {jnp.float32: 1e-4, jnp.bfloat16: 2e-2}[dtype]
  for a, b, whole in _microbatch_sums(params, batch, neighbour, mask, clip):
    assert a.grad_sum.l2_norm_clip == whole.grad_sum.l2_norm_clip
    for mode in params:
      x, y, w = (np.asarray(s.grad_sum.value[mode], np.float64)
                 for s in (a, b, whole))
      assert np.all(np.isfinite(x)) and np.all(np.isfinite(y))
      assert np.linalg.norm(x - y) <= 2 * clip * (1 + tol) + 1e-6, mode
      np.testing.assert_allclose(x, w, rtol=tol, atol=1e-5 * clip,
                                 err_msg=mode)


# --- ghost clipping on cancelling sequence records -------------------------

ST, SK, SN = 3, 4, 4  # positions, inputs, outputs: T^2 <= K N, the Gram form


def _seq_loss(params, example):
  """A Dense layer on T positions (Gram form) and a conv with T output
  positions (Gram form); the output gradient is the record's ``t``."""
  seq, t = example['seq'], example['t']
  img = seq[None, :, None, :]
  y = jax.lax.conv_general_dilated(img, params['conv'], (1, 1), 'VALID',
                                   dimension_numbers=('NHWC', 'HWIO', 'NHWC'))
  return jnp.sum((seq @ params['dense']) * t) + jnp.sum(y[0, :, 0] * t)


@st.composite
def cancelling_case(draw):
  """(batch, neighbour, mask, clip): records whose positions share one input
  and carry output gradients that cancel up to a small perturbation."""
  rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))

  def rows(k):
    a = rng.normal(size=(k, 1, SK)) * 10.0 ** rng.integers(-1, 3, (k, 1, 1))
    seq = np.repeat(a, ST, axis=1)
    big = rng.normal(size=(k, 1, SN)) * 10.0 ** rng.integers(2, 7, (k, 1, 1))
    signs = np.array([1.0, -1.0] + [0.0] * (ST - 2))[None, :, None]
    small = rng.normal(size=(k, ST, SN)) * 10.0 ** rng.integers(
        -2, 3, (k, 1, 1))
    return seq, big * signs + small

  seq, t = rows(GB)
  seq2, t2 = seq.copy(), t.copy()
  row = rng.integers(GB)
  seq2[row], t2[row] = (x[0] for x in rows(1))
  batch = lambda s, x: {'seq': jnp.asarray(s, jnp.float32),
                        't': jnp.asarray(x, jnp.float32)}
  mask = jnp.asarray(rng.random(GB) < 0.8)
  clip = float(10.0 ** draw(st.floats(-2, 2)))
  return batch(seq, t), batch(seq2, t2), mask, clip


@jax.jit
def _seq_sums(params, batch, neighbour, mask, clip):
  clips = jax.tree.map(lambda _: clip, params)
  ghost = dpjax.clipped_grad_sum(_seq_loss, clips, 'ghost')
  return ghost(params, batch, mask), ghost(params, neighbour, mask)


@SETTINGS
@hypothesis.given(case=cancelling_case())
def test_ghost_cancelling_sequences_are_within_sensitivity(case):
  batch, neighbour, mask, clip = case
  params = {'dense': jnp.ones((SK, SN)), 'conv': jnp.ones((1, 1, SK, SN))}
  a, b = _seq_sums(params, batch, neighbour, mask, clip)
  for name in params:
    x, y = (np.asarray(s.grad_sum.value[name], np.float64) for s in (a, b))
    assert np.all(np.isfinite(x)) and np.all(np.isfinite(y))
    # Replace one row: each layer's sum moves by at most 2 C.
    assert np.linalg.norm(x - y) <= 2 * clip * (1 + 1e-4) + 1e-6, name
    # The ghost norm bounds the record's exact gradient norm.
    seq, t = (np.asarray(batch[k], np.float64) for k in ('seq', 't'))
    exact = np.linalg.norm(np.einsum('btk,btn->bkn', seq, t).reshape(
        len(seq), -1), axis=1)
    assert np.all(np.asarray(a.norms[name]) >= exact * (1 - 1e-6)), name


@SETTINGS
@hypothesis.given(case=compgd_case(), name=st.sampled_from(
    ['dp_compgd', 'dp_compsgd', 'dp_projected_gd', 'dp_projected_sgd']),
                  misuse=st.sampled_from([None, 'no_mask', 'no_batch_axis',
                                          'int_mask']))
def test_compgd_steps_are_finite_or_refused(case, name, misuse):
  rows, _, mask, clip, sigma = case
  make, step = _compgd_step(name)
  if misuse is not None:
    tx, w = make(clip, sigma), jnp.zeros(CD)
    kwargs = {'no_mask': {}, 'no_batch_axis': dict(mask=mask),
              'int_mask': dict(mask=mask.astype(jnp.int32))}[misuse]
    g = rows[0] if misuse == 'no_batch_axis' else rows
    if misuse == 'no_mask' and name in ('dp_compgd', 'dp_projected_gd'):
      tx.update(g, tx.init(w), w)  # a full batch of n rows needs no mask
      return
    with pytest.raises(ValueError):
      tx.update(g, tx.init(w), w, **kwargs)
    return
  u, s = step(rows, mask, clip, sigma)
  assert bool(jnp.all(jnp.isfinite(u)))
  bad = np.asarray(mask) & ~np.all(np.isfinite(np.asarray(rows)), axis=1)
  assert int(s.num_dropped) == int(bad.sum())


_AGENTS, _CAP = 4, 3
_ROUNDS = {}


def _agent_loss(params, example):
  x, y = example
  return 0.5 * jnp.square(jnp.dot(params, x) - y)


def _algorithm(name):
  if name not in _ROUNDS:
    w = distributed.mixing_matrix(distributed.ring(_AGENTS))
    q = dpjax.compression.low_precision_quantizer(0.125, 4)
    common = dict(l2_norm_clip=0.5, noise_multiplier=1.0, learning_rate=0.1)
    _ROUNDS[name] = {
        'qdpsgd1': lambda: distributed.qdpsgd1(
            _agent_loss, w, mixing_rate=0.5, quantizer=q, **common),
        'qdpsgd2': lambda: distributed.qdpsgd2(
            _agent_loss, w, mixing_rate=0.5, quantizer=q, **common),
        'sdm': lambda: distributed.sdm(_agent_loss, w, **common),
        # ghost clipping's certified norms on the same non-finite inputs
        'qdpsgd1_ghost': lambda: distributed.qdpsgd1(
            _agent_loss, w, mixing_rate=0.5, quantizer=q, clip_method='ghost',
            **common),
    }[name]()
  return _ROUNDS[name]


@SETTINGS
@hypothesis.given(seed=st.integers(0, 2**31 - 1),
                  specials=st.integers(0, 3),
                  name=st.sampled_from(['qdpsgd1', 'qdpsgd2', 'sdm',
                                        'qdpsgd1_ghost']),
                  misuse=st.sampled_from([None, None, 'int_mask',
                                          'no_batch_axis', 'agent_mask']))
def test_decentralized_rounds_are_finite_or_refused(seed, specials, name,
                                                    misuse):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(_AGENTS, _CAP, 2)) * 10.0 ** rng.integers(-2, 3)
  y = rng.normal(size=(_AGENTS, _CAP))
  for _ in range(specials):
    x[rng.integers(_AGENTS), rng.integers(_CAP), rng.integers(2)] = (
        rng.choice(SPECIALS))
  mask = rng.random((_AGENTS, _CAP)) < 0.7
  alg = _algorithm(name)
  state = alg.init(jnp.zeros(2))
  examples = (jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32))
  if misuse is not None:
    batch = {
        'int_mask': distributed.AgentBatch(examples, jnp.asarray(mask, int)),
        'no_batch_axis': distributed.AgentBatch(
            (examples[0][:, 0], examples[1][:, 0]), jnp.asarray(mask)),
        'agent_mask': distributed.AgentBatch(examples,
                                             jnp.asarray(mask[0])),
    }[misuse]
    with pytest.raises(ValueError):
      alg.round(state, jax.random.key(0), batch)
    return
  out, metrics = alg.round(state, jax.random.key(0),
                           distributed.AgentBatch(examples, jnp.asarray(mask)))
  assert bool(jnp.all(jnp.isfinite(out.params)))
  np.testing.assert_array_equal(metrics.batch_size, mask.sum(axis=1))
  assert float(metrics.noise_multiplier) == 1.0


@SETTINGS
@hypothesis.given(size=st.integers(-3, 40), sigma=st.floats(0, 100),
                  claimed=st.floats(0, 100), amplified=st.booleans())
def test_decentralized_events_are_valid_or_refused(size, sigma, claimed,
                                                   amplified):
  setting = distributed.DecentralizedPrivacy('qdpsgd1', claimed, 0.5, 30,
                                             amplified=amplified)
  metrics = distributed.RoundMetrics(np.array([max(size, 0)]), np.zeros(1),
                                     0.0, np.float32(sigma))
  refused = size < 0 or size > 30 or not np.isclose(
      claimed, float(np.float32(sigma)), rtol=1e-6, atol=0)
  try:
    if size < 0:
      distributed.qdpsgd_event(setting, size)
    else:
      distributed.qdpsgd_step_event(metrics, setting, 0)
  except ValueError:
    assert refused
    return
  assert not refused


# Fewer examples: every drawn shape compiles anew (eager), about 1 s each.
NEW_PATH_SETTINGS = hypothesis.settings(SETTINGS, max_examples=20)


@NEW_PATH_SETTINGS
@hypothesis.given(case=per_example_case(), sigma=st.floats(0, 5),
                  scale=st.floats(-100, 100),
                  misuse=st.sampled_from([None, 'scaled', 'non_linear',
                                          'user_sampler']))
def test_dpsgd_noise_follows_the_carried_bound_or_is_refused(
    case, sigma, scale, misuse):
  """The Gaussian privatizer on a clipped sum: a scaled sum carries |a| C and
  is recorded at sigma; a non-linear map of the sum is refused (by the noise
  when concrete, by step_event when traced), and so is a per-example sum
  under a user-level sampler."""
  params, grads, _, mask, clip, dtype = case
  try:
    summed = dpjax.clipping.clip_and_sum(grads, clip, mask).grad_sum
  except ValueError as e:
    assert dtype == jnp.int32 and 'floating' in str(e)
    return
  sampler = dpjax.PoissonSampler(100, 0.04)
  tx = dpjax.transforms.add_dpsgd_noise(sigma, key=jax.random.key(0))
  if misuse == 'non_linear':
    with pytest.raises(ValueError, match='non-linear map'):
      tx.update(jax.tree.map(jnp.sign, summed), tx.init(params))
    _, state = jax.jit(lambda m: tx.update(jax.tree.map(jnp.sign, m),
                                           tx.init(params)))(summed)
    with pytest.raises(ValueError, match='non-linear map'):
      dpjax.accounting.step_event(state, sampler)
    return
  bound = clip
  if misuse == 'scaled':
    summed = jax.tree.map(lambda x: scale * x, summed)
    bound = abs(scale) * clip
  out, state = tx.update(summed, tx.init(params))
  assert float(state.l2_sensitivity) == pytest.approx(bound, rel=1e-6)
  if misuse is None:
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(out))
  if misuse == 'user_sampler':
    users = dpjax.sampling.UserPoissonSampler(
        np.repeat(np.arange(50), 2), 0.04, max_examples_per_user=2)
    with pytest.raises(ValueError, match='clipped per example, but the '
                       'sampler accounts per user'):
      dpjax.accounting.step_event(state, users)
    return
  assert dpjax.accounting.step_event(state, sampler) == sampler.dp_event(
      float(np.float32(sigma)))


@NEW_PATH_SETTINGS
@hypothesis.given(case=per_example_case(), quantile=st.floats(0.01, 0.99))
def test_adaptive_clip_is_finite_and_within_sensitivity(case, quantile):
  params, grads, neighbour, mask, clip, dtype = case
  tx = dpjax.transforms.adaptive_clip_per_example(
      clip, target_quantile=quantile, learning_rate=0.2, count_stddev=0.0,
      expected_batch_size=4.0, key=jax.random.key(0))
  try:
    a, sa = tx.update(grads, tx.init(params), params, mask=mask)
  except ValueError as e:
    assert dtype == jnp.int32 and 'floating' in str(e)
    return
  b, sb = tx.update(neighbour, tx.init(params), params, mask=mask)
  for out in (a.value, b.value):
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(out))
  assert bool(jnp.isfinite(sa.l2_norm_clip)) and float(sa.l2_norm_clip) > 0
  tol = {jnp.float32: 1e-4, jnp.bfloat16: 2e-2, jnp.float16: 5e-3}[dtype]
  diff = jax.tree.map(lambda x, y: np.asarray(x, np.float64) -
                      np.asarray(y, np.float64), a.value, b.value)
  assert _norm(diff) <= 2 * clip * (1 + tol) + 1e-6
  # One row replaced moves the centred count by at most 1.
  moved = abs(float(sa.unclipped_fraction) - float(sb.unclipped_fraction)) * 4
  assert moved <= 1 + 1e-5


def _user_batch(mask):
  """A UserBatch for data grouped by user, padded with index 0 where masked."""
  indices = np.where(mask, np.arange(mask.size).reshape(mask.shape), 0)
  return dpjax.sampling.UserBatch(
      jnp.asarray(indices, jnp.int32), jnp.asarray(mask),
      jnp.asarray(mask.any(axis=1).sum(), jnp.int32))


@NEW_PATH_SETTINGS
@hypothesis.given(users=st.integers(1, 4), per_user=st.integers(1, 4),
                  seed=st.integers(0, 2**31 - 1), special=st.booleans(),
                  clip=st.floats(1e-3, 1e3), method=st.sampled_from(
                      ['vmap', 'ghost']), bare_mask=st.booleans())
def test_user_clipping_is_finite_and_within_user_sensitivity(
    users, per_user, seed, special, clip, method, bare_mask):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(users, per_user, 3)) * 10.0 ** rng.integers(-3, 6)
  if special:
    x.flat[rng.integers(x.size)] = rng.choice(SPECIALS)
  mask = rng.random((users, per_user)) < 0.7
  other_x, other_mask = x.copy(), mask.copy()
  row = rng.integers(users)  # replace one user: new examples, new count
  other_x[row] = rng.normal(size=x.shape[1:]) * 1e4
  other_mask[row] = rng.random(per_user) < 0.5
  fn = dpjax.clipping.clipped_user_grad_sum(
      lambda w, e: jnp.sum(w * e), clip, method)
  w = jnp.zeros(3)
  if bare_mask:  # misuse: any bare mask (all-True or the right one)
    for bare in (np.ones_like(mask), mask):
      with pytest.raises(ValueError, match='UserBatch'):
        fn(w, jnp.asarray(x, jnp.float32), jnp.asarray(bare))
    return
  a = fn(w, jnp.asarray(x, jnp.float32), _user_batch(mask)).grad_sum.value
  b = fn(w, jnp.asarray(other_x, jnp.float32),
         _user_batch(other_mask)).grad_sum.value
  assert bool(jnp.all(jnp.isfinite(a))) and bool(jnp.all(jnp.isfinite(b)))
  assert _norm(np.asarray(a, np.float64) - np.asarray(b, np.float64)) <= (
      2 * clip * (1 + 1e-4) + 1e-6)


@st.composite
def strategy_case(draw):
  """A random square matrix: banded or dense, with zeros, specials or an
  entry above the diagonal."""
  n = draw(st.integers(1, 7))
  rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
  c = np.tril(rng.normal(size=(n, n)) * 10.0 ** rng.integers(-3, 4))
  bands = draw(st.integers(1, n))
  c = c - np.tril(c, -bands)
  flaw = draw(st.sampled_from(('none', 'none', 'zero_diag', 'upper',
                               'special', 'tiny_diag')))
  i = rng.integers(n)
  if flaw == 'zero_diag':
    c[i, i] = 0.0
  elif flaw == 'upper' and n > 1:
    c[0, n - 1] = 1.0
  elif flaw == 'special':
    c[i, rng.integers(i + 1)] = draw(st.sampled_from(SPECIALS))
  elif flaw == 'tiny_diag':
    c[i, i] = 1e-300
  return c


@SETTINGS
@hypothesis.given(c=strategy_case(), b=st.integers(1, 8),
                  k=st.one_of(st.none(), st.integers(1, 8)))
def test_strategies_are_refused_or_have_consistent_sensitivities(c, b, k):
  try:
    s = dpjax.correlated_noise.lower_triangular(c)
  except ValueError as e:
    assert 'strategy' in str(e)
    return
  np.testing.assert_array_equal(s.matrix(), c)
  upper = dpjax.correlated_noise.sensitivity(
      s, min_separation=b, max_participations=k, bound='upper')
  assert np.isfinite(upper) and upper > 0
  try:
    exact = dpjax.correlated_noise.sensitivity(
        s, min_separation=b, max_participations=k)
  except ValueError as e:
    assert 'bands' in str(e) and s.bands > b
    return
  assert exact <= upper * (1 + 1e-12)
  # One participation: the largest column norm.
  single = dpjax.correlated_noise.sensitivity(s)
  assert single == pytest.approx(np.max(np.linalg.norm(c, axis=0)),
                                 rel=1e-12)
  assert single <= exact * (1 + 1e-12)


@NEW_PATH_SETTINGS
@hypothesis.given(case=per_example_case(), sigma=st.floats(0, 5),
                  bands=st.integers(1, 4))
def test_bandmf_noise_is_data_independent_and_within_sensitivity(
    case, sigma, bands):
  """Same key: a neighbour at step 0 moves step 0 by at most 2 C and leaves
  step 1 bit-identical (the state carries noise only, never data)."""
  params, grads, neighbour, mask, clip, dtype = case
  strategy = dpjax.correlated_noise.banded_toeplitz(
      dpjax.correlated_noise.inverse_square_root_coefs(bands), 4)
  # Noise stddev sigma x C: the noise multiplier is over C's column norm.
  column_norm = float(strategy.column_norms().max())
  tx = optax.chain(
      dpjax.clip_per_example(clip),
      dpjax.transforms.add_dpsgd_noise(sigma / column_norm,
                                       key=jax.random.key(0),
                                       strategy=strategy))
  try:
    a0, sa = tx.update(grads, tx.init(params), params, mask=mask)
  except ValueError as e:
    assert dtype == jnp.int32 and 'floating' in str(e)
    return
  b0, sb = tx.update(neighbour, tx.init(params), params, mask=mask)
  a1, _ = tx.update(grads, sa, params, mask=mask)
  b1, _ = tx.update(grads, sb, params, mask=mask)
  for out in (a0, b0, a1, b1):
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(out))
  tol = {jnp.float32: 1e-4, jnp.bfloat16: 2e-2, jnp.float16: 5e-3}[dtype]
  diff = jax.tree.map(lambda x, y: np.asarray(x, np.float64) -
                      np.asarray(y, np.float64), a0, b0)
  size = sum(x.size for x in jax.tree.leaves(a0))
  # float32 rounding of (sum + noise) on both sides: ulps of the noise.
  slack = 1e-5 * sigma * clip * (1 + np.sqrt(size)) * 4
  assert _norm(diff) <= 2 * clip * (1 + tol) + 1e-6 + slack
  jax.tree.map(np.testing.assert_array_equal, a1, b1)


@NEW_PATH_SETTINGS
@hypothesis.given(sigma=st.floats(0.1, 5), count_stddev=st.one_of(
    st.just(0.0), st.floats(0.01, 5)), bands=st.integers(1, 3),
                  partitions=st.integers(1, 3), cyclic=st.booleans())
def test_adaptive_clip_under_a_strategy_records_its_count_or_is_refused(
    sigma, count_stddev, bands, partitions, cyclic):
  """Adaptive clipping chained with the BandMF noise: every step's event is
  the cycle's Gaussian at the combined noise multiplier (the count release
  included, Andrew et al. 2021, Thm 1) or free; a sampler without the
  cyclic schedule, or one whose cycle is shorter than the bands, is
  refused."""
  strategy = dpjax.correlated_noise.banded_toeplitz(
      dpjax.correlated_noise.inverse_square_root_coefs(bands), 8)
  tx = optax.chain(
      dpjax.transforms.adaptive_clip_per_example(
          1.0, target_quantile=0.5, learning_rate=0.2,
          count_stddev=count_stddev, expected_batch_size=4.0,
          key=jax.random.key(0)),
      dpjax.transforms.add_dpsgd_noise(sigma, key=jax.random.key(0),
                                       strategy=strategy))
  sampler = (dpjax.sampling.CyclicPoissonSampler(12, 0.5, partitions)
             if cyclic else dpjax.PoissonSampler(12, 0.5))
  combined = dpjax.transforms.adaptive_effective_noise_multiplier(
      np.float32(sigma), np.float32(count_stddev))
  params, state = jnp.zeros(3), tx.init(jnp.zeros(3))
  grads = jnp.arange(12.0).reshape(4, 3)
  for step in range(3):
    _, state = tx.update(grads, state, params, mask=jnp.ones(4, bool))
    if not cyclic or bands > partitions:
      with pytest.raises(ValueError,
                         match='CyclicPoissonSampler|num_partitions'):
        dpjax.accounting.step_event(state, sampler)
      return
    event = dpjax.accounting.step_event(state, sampler)
    if step % partitions:
      assert event == dp_accounting.NoOpDpEvent()
    else:
      assert event == sampler.dp_event(combined)


@NEW_PATH_SETTINGS
@hypothesis.given(sigmas=st.lists(st.floats(0.0625, 32, width=32), min_size=2,
                                  max_size=2, unique=True),
                  clips=st.lists(st.floats(0.0625, 32, width=32), min_size=2,
                                 max_size=2),
                  seed=st.integers(0, 2**31 - 1))
def test_privatizers_of_one_key_that_differ_draw_independent_noise(
    sigmas, clips, seed):
  """Two Gaussian privatizers built from one key with different (sigma, C)
  (a sweep; dpsgd beside adaptive_dpsgd): the standardized noises are
  uncorrelated, so no combination of the two releases cancels the noise."""
  dim = 4096
  rows = jnp.ones((1, dim)) / jnp.sqrt(dim)

  @jax.jit
  def z(sigma, clip):
    summed = dpjax.clipping.clip_and_sum(rows, clip,
                                         jnp.ones(1, bool)).grad_sum
    tx = dpjax.transforms.add_dpsgd_noise(sigma,
                                          key=jax.random.key(seed))
    out, _ = tx.update(summed, tx.init(None))
    return (out - summed.value) / (sigma * clip)

  za, zb = z(sigmas[0], clips[0]), z(sigmas[1], clips[1])
  assert abs(float(np.corrcoef(za, zb)[0, 1])) < 0.1


def _cyclic_run(strategy, sampler, batches, sigma):
  """Clip and BandMF noise over the batches; the chain's state per step."""
  grads = jnp.ones((sampler.num_examples, 2))
  tx = optax.chain(dpjax.clip_per_example(1.0),
                   dpjax.transforms.add_dpsgd_noise(
                       sigma, key=jax.random.key(0), strategy=strategy))
  params, state, states = jnp.zeros(2), tx.init(jnp.zeros(2)), []
  for batch in batches:
    _, state = tx.update(grads[batch.indices], state, params, mask=batch.mask)
    states.append(state)
  return states


@NEW_PATH_SETTINGS
@hypothesis.given(coefs=st.lists(st.floats(0.05, 2), min_size=1, max_size=3),
                  partitions=st.integers(1, 3), steps=st.integers(1, 6),
                  sigma=st.floats(0.5, 5))
def test_bandmf_claim_covers_the_cyclic_pattern_and_refuses_reshuffles(
    coefs, partitions, steps, sigma):
  """At rate 1 the composed step events are the Gaussian of every example's
  own pattern or a larger sensitivity (the b-min-separation the claim
  assumes holds for the batches drawn at the run's steps); a reshuffling
  sampler (ShuffleSampler: consecutive steps across an epoch boundary) is
  refused, whatever separation its epoch length suggests."""
  strategy = dpjax.correlated_noise.banded_toeplitz([1.0] + coefs, steps)
  n = 2 * partitions
  sampler = dpjax.sampling.CyclicPoissonSampler(n, 1.0, partitions)
  batches = [sampler.sample(jax.random.key(1), t) for t in range(steps)]
  states = _cyclic_run(strategy, sampler, batches, sigma)
  column_norm = float(np.float32(strategy.column_norms().max()))
  claimed = 0.0  # the claim's squared sensitivity, composed over the steps
  for state in states:
    event = dpjax.accounting.step_event(state, sampler)
    if event != dp_accounting.NoOpDpEvent():
      claimed += (float(np.float32(sigma)) * column_norm
                  / event.noise_multiplier) ** 2
    with pytest.raises(ValueError, match='CyclicPoissonSampler'):
      dpjax.accounting.step_event(
          state, dpjax.sampling.ShuffleSampler(n, n // partitions))
  c = strategy.matrix()[:steps, :steps]
  for i in range(n):  # each example's participation pattern
    pattern = np.array([float(np.any((np.asarray(b.indices) == i)
                                     & np.asarray(b.mask))) for b in batches])
    assert np.sum((c @ pattern) ** 2) <= claimed * (1 + 1e-5) + 1e-9


@NEW_PATH_SETTINGS
@hypothesis.given(partitions=st.integers(2, 4), epoch_len=st.integers(1, 5),
                  steps=st.integers(1, 7), rate=st.sampled_from([0.5, 1.0]))
def test_record_step_refuses_a_cyclic_step_restarted_each_epoch(
    partitions, epoch_len, steps, rate):
  """A loop that restarts its step count each epoch draws
  sample(fold_in(key, epoch), t mod epoch_len): every batch key is new, so a
  check of (key, step) replays alone passes it, but its partition is not the
  one the run's step t accounts; record_step refuses any batch step other
  than the run's and records the run's own."""
  strategy = dpjax.correlated_noise.banded_toeplitz([1.0, 0.5], 8)
  sampler = dpjax.sampling.CyclicPoissonSampler(12, rate, partitions)
  key = jax.random.key(1)
  honest = [sampler.sample(key, t) for t in range(steps)]
  states = _cyclic_run(strategy, sampler, honest, 1.0)
  ledger = dpjax.accounting.PrivacyLedger()
  for t, (state, batch) in enumerate(zip(states, honest)):
    epoch, step = divmod(t, epoch_len)
    restarted = sampler.sample(jax.random.fold_in(key, epoch), step)
    if step != t:
      with pytest.raises(ValueError, match='restarted each epoch'):
        ledger.record_step(state, sampler, restarted)
    ledger.record_step(state, sampler, batch)
  assert ledger.batches_spent == {
      dpjax.accounting.key_fingerprint(key): [(0, steps)]}
