"""Clipped sums in micro-batches (``clipped_grad_sum(..., microbatch_size=m)``).

k micro-batches of 8 rows give the clipped sum, the update (same noise key)
and the one ledger event of one batch of 8k rows, also per shard of a
mesh; the compiled temporary memory falls with m; bad sizes and
``optax.MultiSteps`` are refused.
"""

import functools

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import dpjax

N, B, M = 256, 32, 8  # k = 4 micro-batches of 8 rows
SIGMA = 1.3
CLIP = {'w1': 0.5, 'b1': 0.3, 'w2': 1.0}  # per-layer: norms are a pytree
SAMPLER = dpjax.PoissonSampler(num_examples=N, sampling_rate=0.08,
                               max_batch_size=B)


def _params(d_in=6, width=16, key=0):
  k1, k2 = jax.random.split(jax.random.key(key))
  return {'w1': jax.random.normal(k1, (d_in, width)) / np.sqrt(d_in),
          'b1': jnp.zeros(width),
          'w2': jax.random.normal(k2, (width, 2)) / np.sqrt(width)}


def _loss(p, example):
  x, y = example
  logits = jnp.tanh(x @ p['w1'] + p['b1']) @ p['w2']
  return optax.softmax_cross_entropy_with_integer_labels(logits, y)


def _deep_loss(p, example):
  x, y = example
  h = jnp.tanh(jnp.tanh(x @ p['w1'] + p['b1']) @ p['w_mid'])
  return optax.softmax_cross_entropy_with_integer_labels(h @ p['w2'], y)


def _data():
  x = jax.random.normal(jax.random.key(1), (N, 6))
  return x, (x[:, 0] + x[:, 1] > 0).astype(jnp.int32)


@functools.lru_cache(maxsize=None)
def _step(method):
  """One jitted program per method: the whole batch and its micro-batches,
  summed and noised with the same key, with and without a coordinate mask."""
  whole = dpjax.clipped_grad_sum(_loss, CLIP, method)
  micro = dpjax.clipped_grad_sum(_loss, CLIP, method, microbatch_size=M)

  @jax.jit
  def step(key):
    x, y = _data()
    params = _params()
    batch = SAMPLER.sample(jax.random.key(3), 0)
    # Scattered padding inside every micro-batch, with garbage in its rows:
    # a mask chunked out of step with its rows would let them in.
    mask = batch.mask & (jnp.arange(B) % 5 != 2)
    rows = (jnp.where(mask[:, None], x[batch.indices], 1e4),
            y[batch.indices])
    coordinate_mask = jax.tree.map(
        lambda p: (jnp.arange(p.size) % 3 != 0).reshape(p.shape).astype(
            p.dtype), params)
    out = {}
    for name, fn in (('whole', whole), ('micro', micro)):
      summed = fn(params, rows, mask)
      tx = dpjax.dpsgd(0.5, None, SIGMA, SAMPLER, per_example=False, key=key)
      updates, state = tx.update(summed.grad_sum, tx.init(params), params)
      out[name] = (summed, fn(params, rows, mask, coordinate_mask).grad_sum,
                   updates, state)
    return batch, mask, out

  return step


def _run(method, key=2):
  return _step(method)(jax.random.key(key))


@pytest.mark.parametrize('method', dpjax.clipping.METHODS)
def test_k_microbatches_of_8_give_the_update_of_one_batch_of_8k(method):
  batch, mask, out = _run(method)
  assert int(jnp.sum(mask)) >= 2 * M  # several micro-batches hold real rows
  (s_whole, c_whole, u_whole, st_whole) = out['whole']
  (s_micro, c_micro, u_micro, st_micro) = out['micro']
  # Same clipped sum, norms and bound, up to float32 summation order.
  close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6)
  jax.tree.map(close, s_micro.grad_sum.value, s_whole.grad_sum.value)
  jax.tree.map(close, c_micro.value, c_whole.value)
  jax.tree.map(close, s_micro.norms, s_whole.norms)
  assert all(n.shape == (B,) for n in jax.tree.leaves(s_micro.norms))
  bound = dpjax.clipping.clipped_norm_bound(CLIP)
  assert np.isclose(float(s_micro.grad_sum.l2_norm_clip), bound)
  assert np.isclose(float(st_micro[0].l2_sensitivity), bound)
  # The same noise on the same sum: the same update, and noise was added.
  jax.tree.map(close, u_micro, u_whole)
  noiseless = jax.tree.map(lambda v: -0.5 * v / SAMPLER.expected_batch_size,
                           s_whole.grad_sum.value)
  assert not np.allclose(u_whole['w1'], noiseless['w1'], atol=1e-3)
  # One step of the logical batch, in the ledger and the one event reader.
  events = []
  for state in (st_whole, st_micro):
    assert int(state[0].stream.count) == 1
    ledger = dpjax.PrivacyLedger()
    ledger.record_step(state, SAMPLER, batch)
    assert ledger.num_events == 1
    events.append(ledger.event())
  event = dpjax.accounting.step_event(st_micro, SAMPLER)
  assert event == SAMPLER.dp_event(float(np.float32(SIGMA)))
  assert events[0] == events[1] == dp_accounting.ComposedDpEvent(
      [dp_accounting.SelfComposedDpEvent(event, 1)])


def test_another_key_draws_other_noise():
  _, _, out = _run('vmap', key=5)
  _, _, first = _run('vmap')
  assert not np.allclose(out['micro'][2]['w2'], first['micro'][2]['w2'])


def test_sharded_microbatches_give_the_whole_batch_sum():
  # 30 rows on 4 devices in micro-batches of 4: padded with masked rows to
  # 32, two micro-batches per shard; the sum of one device's whole batch.
  mesh = jax.make_mesh((4,), ('data',))
  sharded = dpjax.clipping.sharded_clipped_grad_sum(
      _loss, CLIP, 'ghost', mesh=mesh, microbatch_size=4)
  whole = dpjax.clipped_grad_sum(_loss, CLIP)

  @jax.jit
  def sums():
    x, y = _data()
    rows, mask = (x[:30], y[:30]), jnp.arange(30) % 7 != 3
    return sharded(_params(), rows, mask), whole(_params(), rows, mask)

  micro, one = sums()
  close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6)
  jax.tree.map(close, micro.grad_sum.value, one.grad_sum.value)
  jax.tree.map(close, micro.norms, one.norms)
  assert np.isclose(float(micro.grad_sum.l2_norm_clip),
                    dpjax.clipping.clipped_norm_bound(CLIP))


@pytest.mark.parametrize('method,rows,limit', [('vmap', 64, 0.3),
                                               ('ghost', 4096, 0.3)])
def test_temporary_memory_falls_with_the_microbatch(method, rows, limit):
  # Measured (XLA CPU): vmap 33.8 MB -> 8.5 MB (0.25) at B = 64, ghost
  # 21.0 MB -> 5.4 MB (0.26) at B = 4096, for m = B -> B / 4.
  shape = lambda *dims: jax.ShapeDtypeStruct(dims, jnp.float32)
  params = {'w1': shape(32, 256), 'b1': shape(256), 'w_mid': shape(256, 256),
            'w2': shape(256, 2)}  # lowered from shapes: nothing runs
  x, y = shape(rows, 32), jax.ShapeDtypeStruct((rows,), jnp.int32)
  temp = {}
  for m in (rows, rows // 4):
    fn = jax.jit(dpjax.clipped_grad_sum(_deep_loss, 1.0, method,
                                        microbatch_size=m))
    temp[m] = fn.lower(params, (x, y), jax.ShapeDtypeStruct(
        (rows,), jnp.bool_)).compile(
        ).memory_analysis().temp_size_in_bytes
  assert temp[rows // 4] < limit * temp[rows], temp


@pytest.mark.parametrize('size,error', [(0, ValueError), (-8, ValueError),
                                        (8.0, TypeError), (True, TypeError),
                                        (np.float32(8), TypeError)])
def test_bad_microbatch_sizes_are_refused(size, error):
  with pytest.raises(error, match='microbatch_size'):
    dpjax.clipped_grad_sum(_loss, 1.0, microbatch_size=size)


def test_a_microbatch_that_does_not_divide_the_batch_is_refused():
  fn = dpjax.clipped_grad_sum(_loss, 1.0, microbatch_size=M)
  params = jax.eval_shape(_params)
  x, y = jax.eval_shape(_data)
  rows = lambda n, m=None: (jax.ShapeDtypeStruct((n, 6), x.dtype),
                            jax.ShapeDtypeStruct((m or n,), y.dtype))
  mask = lambda n: jax.ShapeDtypeStruct((n,), jnp.bool_)
  for batch, flags, match in ((rows(30), mask(30), 'divide the batch size 30'),
                              (rows(B), mask(B - 1), 'mask of shape'),
                              (rows(B, B - 1), mask(B), 'leading example')):
    with pytest.raises(ValueError, match=match):
      jax.eval_shape(fn, params, batch, flags)


@pytest.mark.parametrize('per_example,tree', [(True, True), (False, True),
                                               (False, False)])
def test_multisteps_around_the_privatizer_is_refused(per_example, tree):
  # optax.MultiSteps hands the noise its bare accumulator (optax #515), and
  # traces that branch whatever the step: refused at trace time. Around a
  # ClippedSum, a tree of parameters fails optax's own tree_map first.
  # Traced only (jax.eval_shape): the refusal comes at trace time.
  loss = _loss if tree else lambda w, ex: jnp.sum(w * ex[0])

  def update(key):
    params = _params() if tree else jnp.zeros(6)
    tx = optax.MultiSteps(dpjax.dpsgd(
        0.5, 1.0 if per_example else None, SIGMA, SAMPLER,
        per_example=per_example, key=key), every_k_schedule=4)
    x, y = _data()
    rows, mask = (x[:M], y[:M]), jnp.ones(M, bool)
    if per_example:
      grads = dpjax.per_example_grads(loss)(params, rows)
      return tx.update(grads, tx.init(params), params, mask=mask)
    summed = dpjax.clipped_grad_sum(loss, 1.0)(params, rows, mask)
    return tx.update(summed.grad_sum, tx.init(params), params)

  match = ('batch axis' if per_example else
           'ClippedSum' if tree else 'optax.MultiSteps passes')
  with pytest.raises(ValueError, match=match):
    jax.eval_shape(update, jax.eval_shape(lambda: jax.random.key(0)))
