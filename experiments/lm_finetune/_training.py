"""lm_finetune's training: public pretraining, then private fine-tuning.

Pretraining is plain AdamW on the public windows (no accounting: the data
is public). Fine-tuning is one compiled program per method (full or LoRA):
a ``lax.scan`` over DP-Adam steps (ghost-clipped sum, the one Gaussian
privatizer ``dpjax.transforms.add_dpsgd_noise``, division by the expected
batch size, then Adam: Li et al. 2022's DP-Adam), vmapped over seeds and
over (noise multiplier, clip, learning rate) members. A member with noise 0
and a clip no per-example gradient reaches is the non-private twin, on the
same batches. The returned optimizer state holds the run's event
(``dpjax.accounting.step_event``).
"""

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from experiments.lm_finetune import _model

KINDS = ('full', 'lora')


def model(cfg, kind: str) -> _model.Decoder:
  rank = cfg.rank if kind == 'lora' else None
  return _model.Decoder(rank=rank, width=cfg.width, layers=cfg.layers,
                        heads=cfg.heads, max_len=cfg.seq_len,
                        alpha=cfg.alpha)


def _init(cfg, kind: str, key: jax.Array) -> dict[str, Any]:
  variables = model(cfg, kind).init(key, jnp.zeros(cfg.seq_len, jnp.int32))
  return variables['params']


def pretrain(cfg, public: np.ndarray, key: jax.Array) -> dict[str, Any]:
  """Non-private AdamW on the public windows, minibatches of
  ``cfg.pretrain_batch_size`` drawn by shuffling each epoch."""
  loss = _model.loss_fn(model(cfg, 'full'))
  windows = jnp.asarray(public)
  batch, n = cfg.pretrain_batch_size, len(public)
  per_epoch = n // batch
  tx = optax.adamw(cfg.pretrain_learning_rate,
                   weight_decay=cfg.pretrain_weight_decay)

  @jax.jit
  def train(params, key):
    def body(carry, t):
      params, state = carry
      order = jax.random.permutation(jax.random.fold_in(key, t // per_epoch),
                                     n)
      idx = jax.lax.dynamic_slice(order, ((t % per_epoch) * batch,), (batch,))
      grads = jax.grad(lambda p: jnp.mean(jax.vmap(loss, (None, 0))(
          p, windows[idx])))(params)
      updates, state = tx.update(grads, state, params)
      return (optax.apply_updates(params, updates), state), None

    (params, _), _ = jax.lax.scan(body, (params, tx.init(params)),
                                  jnp.arange(cfg.pretrain_steps))
    return params

  # optax's Adam raises an int32 count to a float power, which strict dtype
  # promotion (the tests') rejects; the promotion here is harmless.
  with jax.numpy_dtype_promotion('standard'):
    return train(_init(cfg, 'full', key), jax.random.fold_in(key, 1))


def dp_adam(learning_rate, noise_multiplier, sampler, key: jax.Array
            ) -> optax.GradientTransformation:
  """The privatized sum (noise calibrated to the bound the ``ClippedSum``
  carries), divided by the expected batch size, then Adam."""
  return optax.chain(
      dpjax.transforms.add_dpsgd_noise(noise_multiplier, key=key),
      dpjax.transforms.normalize(sampler.expected_batch_size),
      optax.adam(learning_rate))


def program(cfg, sampler, steps: int, kind: str) -> Callable:
  """``fn(keys, pretrained, sigmas, clips, lrs, windows) -> (trained,
  states)``: [seeds, members] stacks of the trained tree (every parameter
  for ``'full'``, the adapters for ``'lora'``) and of the last state."""

  def one(key, pretrained, sigma, clip, lr, windows):
    if kind == 'lora':
      start, frozen = _init(cfg, 'lora', jax.random.split(key)[0]), pretrained
    else:
      start, frozen = pretrained, None
    grad_sum = dpjax.clipped_grad_sum(
        _model.loss_fn(model(cfg, kind), frozen), clip, 'ghost')
    tx = dp_adam(lr, sigma, sampler, key)

    def body(carry, t):
      params, state = carry
      batch = sampler.sample(key, t)
      grads = grad_sum(params, windows[batch.indices], batch.mask).grad_sum
      updates, state = tx.update(grads, state, params)
      return (optax.apply_updates(params, updates), state), None

    (params, state), _ = jax.lax.scan(body, (start, tx.init(start)),
                                      jnp.arange(steps))
    return params, state

  over = jax.vmap(one, in_axes=(None, None, 0, 0, 0, None))
  fn = jax.jit(jax.vmap(over, in_axes=(0, None, None, None, None, None)))

  def run(*args):
    with jax.numpy_dtype_promotion('standard'):  # optax's Adam (above)
      return fn(*args)

  return run


def evaluate(cfg, kind: str, trained, pretrained, windows: np.ndarray
             ) -> np.ndarray:
  """Mean next-byte loss (nats) on ``windows`` of a [seeds, members]
  stack of trained trees, in chunks of 256 windows."""
  frozen = pretrained if kind == 'lora' else None
  loss = jax.vmap(_model.loss_fn(model(cfg, kind), frozen), (None, 0))
  fn = jax.jit(jax.vmap(jax.vmap(lambda p, w: jnp.sum(loss(p, w)),
                                 (0, None)), (0, None)))
  total = 0.0
  for start in range(0, len(windows), 256):
    total = total + np.asarray(fn(trained, jnp.asarray(
        windows[start:start + 256])), np.float64)
  return total / len(windows)
