"""Private fine-tuning with low-rank adapters (docs/finetune.md).

DP-SGD on a ``LoRADense`` model clips and noises the adapters A, B only: the
per-example loss closes over the ``FROZEN`` tree, so the frozen weights get
no gradient, no clip and no noise. Ghost clipping taps both adapter products
(no per-example fallback) and equals the vmap path; the noise and the bits
have the adapter dimension; the frozen tree is bit-identical after a private
step; the same holds for flax NNX's ``LoRALinear`` split on ``LoRAParam``.
"""

import flax.linen as nn
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import dpjax
from dpjax.finetune import FROZEN
from dpjax.finetune import LoRADense

C = 0.5
B = 6
T, D_IN, HIDDEN, OUT, RANK = 3, 5, 7, 4, 2


def _pool(h):
  """Mean over the positions of a sequence example ([T, d]); a flat example
  ([d]) is one position."""
  return h.mean(0) if h.ndim == 2 else h


class _Pretrained(nn.Module):
  """The plain model: Dense layers named as the LoRA model's."""

  @nn.compact
  def __call__(self, x):
    h = _pool(jnp.tanh(nn.Dense(HIDDEN, name='hidden')(x)))
    return nn.Dense(OUT, name='out')(h)


class _LoRA(nn.Module):
  """The same network with a rank-r adapter on each layer."""
  alpha: float = 4.0

  @nn.compact
  def __call__(self, x):
    h = jnp.tanh(LoRADense(HIDDEN, RANK, self.alpha, name='hidden')(x))
    return LoRADense(OUT, RANK, self.alpha, name='out')(_pool(h))


def _setup(seed=0, positions=T):
  """A LoRA model on examples of ``positions`` rows (None: flat rows)."""
  keys = jax.random.split(jax.random.key(seed), 4)
  shape = (B, D_IN) if positions is None else (B, positions, D_IN)
  x = jax.random.normal(keys[0], shape)
  y = jax.random.randint(keys[1], (B,), 0, OUT)
  pretrained = _Pretrained().init(keys[2], x[0])['params']
  model = _LoRA()
  adapters = model.init(keys[3], x[0])['params']
  # B starts at zero; move it so that every adapter gradient is non-zero.
  adapters = jax.tree.map(
      lambda a: a + 0.3 * jax.random.normal(keys[3], a.shape), adapters)

  def loss(adapters, example):
    xi, yi = example
    logits = model.apply({'params': adapters, FROZEN: pretrained}, xi)
    return optax.softmax_cross_entropy_with_integer_labels(logits, yi)

  return model, pretrained, adapters, loss, (x, y)


def _adapter_size():
  return RANK * (D_IN + HIDDEN) + RANK * (HIDDEN + OUT)


def test_frozen_tree_is_the_pretrained_tree_and_init_the_pretrained_model():
  model, pretrained, _, _, (x, _) = _setup()
  fresh = model.init(jax.random.key(5), x[0])
  assert (jax.tree.map(jnp.shape, fresh[FROZEN]) ==
          jax.tree.map(jnp.shape, pretrained))
  out = model.apply({'params': fresh['params'], FROZEN: pretrained}, x[0])
  np.testing.assert_array_equal(out, _Pretrained().apply(
      {'params': pretrained}, x[0]))
  assert sum(a.size for a in jax.tree.leaves(fresh['params'])) == (
      _adapter_size())


def test_ghost_taps_both_adapter_products_without_fallback():
  _, _, adapters, loss, batch = _setup()
  plan = dpjax.clipping.ghost_plan(loss, adapters, batch)
  assert len(plan) == 4
  assert all(v.startswith('ghost dense') for v in plan.values()), plan
  assert any('T=3' in v or 'Gram' in v for v in plan.values()), plan
  # 'error' refuses any leaf ghost clipping cannot factor.
  dpjax.clipped_grad_sum(loss, C, 'ghost', fallback='error')(
      adapters, batch, jnp.ones(B, bool))


def _compare(loss, params, batch, mask, rtol):
  """Ghost against vmap on the same batch: norms and clipped sums."""
  fn = jax.jit(lambda p, b, m: [dpjax.clipped_grad_sum(loss, C, method)(
      p, b, m) for method in ('ghost', 'vmap')])
  ghost, exact = fn(params, batch, mask)
  np.testing.assert_allclose(ghost.norms, exact.norms, rtol=rtol)
  # Never below: multi-position norms are certified upper bounds.
  assert bool(jnp.all(ghost.norms >= exact.norms * (1 - 1e-7)))
  assert float(jnp.min(exact.norms[mask])) > C  # every valid row is clipped
  for g, e in zip(jax.tree.leaves(ghost.grad_sum.value),
                  jax.tree.leaves(exact.grad_sum.value)):
    np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol)
  return ghost


@pytest.mark.parametrize('positions, rtol', [
    (None, 1e-6),
    # T = 3 rows into the first layer: its Gram-form norm adds the certified
    # float32 rounding margin (dpjax/clipping/_ghost_norms.py), ~1e-5.
    (T, 2e-5)])
def test_ghost_equals_vmap_on_lora_dense(positions, rtol):
  _, _, adapters, loss, batch = _setup(positions=positions)
  mask = jnp.arange(B) < B - 1  # one padded row
  ghost = _compare(loss, adapters, batch, mask, rtol)
  assert (jax.tree.structure(ghost.grad_sum.value) ==
          jax.tree.structure(adapters))


def _private_step(loss, sampler, sigma):
  tx = dpjax.dpsgd(0.5, None, sigma, sampler,
                   key=jax.random.key(7), per_example=False)
  grad_sum = dpjax.clipped_grad_sum(loss, C, 'ghost')

  @jax.jit
  def step(adapters, frozen, opt_state, batch, mask):
    del frozen  # closed over by ``loss``; returned to check it is untouched
    updates, opt_state = tx.update(grad_sum(adapters, batch, mask).grad_sum,
                                   opt_state, adapters)
    return optax.apply_updates(adapters, updates), updates, opt_state

  return tx, step


def test_private_step_noises_adapters_only_and_leaves_frozen_bits():
  _, pretrained, adapters, loss, batch = _setup()
  before = jax.tree.map(lambda a: np.asarray(a).copy(), pretrained)
  sampler = dpjax.PoissonSampler(100, B / 100)
  tx, step = _private_step(loss, sampler, 1.3)
  new, updates, state = step(adapters, pretrained, tx.init(adapters), batch,
                             jnp.ones(B, bool))
  # Updates, and so the noise, live on the adapters alone.
  assert jax.tree.structure(updates) == jax.tree.structure(adapters)
  assert sum(u.size for u in jax.tree.leaves(updates)) == _adapter_size()
  assert all(bool(jnp.any(n != a)) for n, a in
             zip(jax.tree.leaves(new), jax.tree.leaves(adapters)))
  for b, a in zip(jax.tree.leaves(before), jax.tree.leaves(pretrained)):
    assert b.tobytes() == np.asarray(a).tobytes()
  # The event is read from the state: the sigma that ran, on the bound C
  # that the ghost clipped sum carried.
  noise_state = dpjax.accounting.privacy_states(state)[0]
  assert float(noise_state.l2_sensitivity) == C
  event = dpjax.accounting.step_event(state, sampler)
  assert event == sampler.dp_event(float(np.float32(1.3)))


def test_noise_is_gaussian_of_stddev_sigma_c_on_the_adapter_dimension():
  """The released noise (noisy minus noiseless sum) has d = adapter size
  coordinates of stddev sigma * C; a wrong scale is rejected."""
  _, pretrained, adapters, loss, batch = _setup()
  sampler = dpjax.PoissonSampler(100, B / 100)
  sigma = 2.0
  tx, step = _private_step(loss, sampler, sigma)
  noisy = step(adapters, pretrained, tx.init(adapters), batch,
               jnp.ones(B, bool))[1]
  tx0, step0 = _private_step(loss, sampler, 0.0)
  clean = step0(adapters, pretrained, tx0.init(adapters), batch,
                jnp.ones(B, bool))[1]
  # updates = -lr * (sum + noise) / expected batch size.
  scale = -0.5 / sampler.expected_batch_size
  z = np.concatenate([np.ravel((n - c) / scale) for n, c in zip(
      jax.tree.leaves(noisy), jax.tree.leaves(clean))])
  assert z.size == _adapter_size()
  # chi^2 with d = 60 degrees of freedom: 99.9% interval [30.0, 99.6].
  stat = float(np.sum(np.square(z / (sigma * C))))
  assert 30.0 < stat < 99.6, stat
  assert not 30.0 < float(np.sum(np.square(z / (2 * sigma * C)))) < 99.6


def test_one_record_moves_the_sum_by_at_most_c():
  """Add/remove-one sensitivity: a neighbouring batch (one row masked out)
  changes the clipped adapter sum by at most C, for a huge record too."""
  _, _, adapters, loss, (x, y) = _setup()
  x = x.at[0].multiply(1e4)
  fn = jax.jit(lambda m: dpjax.clipped_grad_sum(loss, C, 'ghost')(
      adapters, (x, y), m).grad_sum.value)
  full, without = fn(jnp.ones(B, bool)), fn(jnp.arange(B) > 0)
  diff = jnp.sqrt(sum(jnp.sum(jnp.square(a - b)) for a, b in zip(
      jax.tree.leaves(full), jax.tree.leaves(without))))
  assert 0.99 * C < float(diff) <= C * (1 + 1e-6)


@pytest.mark.parametrize('kwargs, name', [
    (dict(rank=0), 'rank'), (dict(rank=2, alpha=-1.0), 'alpha'),
    (dict(rank=2, alpha=float('nan')), 'alpha')])
def test_bad_hyperparameters_are_refused_naming_them(kwargs, name):
  with pytest.raises(ValueError, match=name):
    LoRADense(3, **kwargs).init(jax.random.key(0), jnp.ones((1, 4)))


def test_nnx_lora_linear_split_on_lora_param():
  """flax NNX's own ``LoRALinear``: ``nnx.split(model, nnx.LoRAParam,
  ...)`` puts the adapters first; ghost equals vmap on them, and the frozen
  kernel and bias stay in ``rest``."""

  class Net(nnx.Module):

    def __init__(self, rngs):
      self.hidden = nnx.LoRALinear(D_IN, HIDDEN, lora_rank=RANK, rngs=rngs)
      self.out = nnx.LoRALinear(HIDDEN, OUT, lora_rank=RANK, rngs=rngs)

    def __call__(self, x):
      return self.out(jnp.tanh(self.hidden(x)).mean(0))

  graphdef, adapters, rest = nnx.split(Net(nnx.Rngs(0)), nnx.LoRAParam, ...)
  assert sum(a.size for a in jax.tree.leaves(adapters)) == _adapter_size()
  adapters = jax.tree.map(lambda a: a + 0.3, adapters)
  _, _, _, _, batch = _setup()

  def loss(adapters, example):
    xi, yi = example
    logits = nnx.merge(graphdef, adapters, rest)(xi)
    return optax.softmax_cross_entropy_with_integer_labels(logits, yi)

  plan = dpjax.clipping.ghost_plan(loss, adapters, batch)
  assert all(v.startswith('ghost dense') for v in plan.values()), plan
  _compare(loss, adapters, batch, jnp.ones(B, bool), 2e-5)


def test_finetune_experiment_tiny_run_reads_its_privacy_from_the_runs(
    tmp_path):
  """The experiment's LoRA runs noise the adapters only (the noised
  dimension and the bits are the adapter size), and every private row's
  epsilon is read back from its run at the target."""
  from experiments import registry  # pylint: disable=import-outside-toplevel
  exp = registry.get('finetune')
  cfg = exp.configure('quick', num_seeds=2, epochs=1, learning_rates=[0.1],
                      hidden=8, rank=2, pretrain_epochs=1)
  results = exp.results(cfg, str(tmp_path), progress=False)
  record = exp.record.from_dict(results)
  adapters = 2 * (784 + 8) + 2 * (8 + 10)
  dense = 784 * 8 + 8 + 8 * 10 + 10
  for eps in cfg.epsilons:
    runs = {k: record.private[k][str(eps)] for k in
            ('scratch', 'full', 'lora')}
    assert runs['lora']['dimension'] == adapters
    assert runs['full']['dimension'] == runs['scratch']['dimension'] == dense
    for run in runs.values():
      assert run['epsilon'] == pytest.approx(eps, rel=1e-3)
      assert len(run['selected_test']) == 2
  assert record.bits == dict(
      lora=dpjax.transforms.dpsgd_bits(adapters),
      full=dpjax.transforms.dpsgd_bits(dense))
  assert {c['family'] for c in results['claims']} == {'fine-tuning', 'sanity'}
  body = exp.report_body(record, cfg, results['claims'], str(tmp_path))
  assert f'C = {cfg.l2_norm_clip:g}' in body


@pytest.mark.slow
def test_bench_lora_rows_noise_the_adapters_and_ghost_equals_vmap(capsys):
  """``bench finetune``: the LoRA rows train the adapters only, and one DP
  step of ghost and of vmap clipping (same noise key) give the same
  parameters; its quick setting prints every row."""
  # pylint: disable-next=import-outside-toplevel
  from experiments.bench import finetune as bench
  rows = bench.build_rows('mlp', 4, 2)
  assert rows['LoRA | DP ghost'][2] == 2 * (784 + 512 + 512 + 512 + 512 + 10)
  assert rows['full | DP ghost'][2] == 784 * 512 + 512 * 512 + 512 * 10 + (
      512 + 512 + 10)
  for trained in ('full', 'LoRA'):
    (ghost, args, _), (exact, _, _) = (rows[f'{trained} | DP {m}']
                                       for m in ('ghost', 'vmap'))
    for g, e in zip(jax.tree.leaves(ghost(*args)[0]),
                    jax.tree.leaves(exact(*args)[0])):
      np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
  bench.main(bench.QUICK.split())
  table = [line for line in capsys.readouterr().out.splitlines()
           if line.startswith('| mlp |')]
  assert len(table) == 6
