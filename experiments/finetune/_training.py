"""finetune's models and training: one MLP, plain or with LoRA adapters.

``Net(hidden, rank=None)`` is a 784-h-10 tanh MLP of ``nn.Dense`` layers;
with a rank its layers are ``dpjax.finetune.LoRADense`` of the same names,
so the pretrained parameters are its frozen tree as they are. Every trainer
is one ``lax.scan`` over the steps, vmapped over seeds and over (noise
multiplier, clip, learning rate) members, with ghost clipping (two compiled
programs in all: dense and LoRA); it returns
the trained tree (all parameters, or the adapters) and the last optimizer
state, from which the run's event is read (``dpjax.accounting.step_event``).
The chain's noise follows the bound the ``ClippedSum`` carries.
"""

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from dpjax.finetune import FROZEN
from dpjax.finetune import LoRADense

KINDS = ('scratch', 'full', 'lora')


class Net(nn.Module):
  """784-h-10 tanh MLP; ``rank`` set: every layer a ``LoRADense``."""
  hidden: int
  rank: int | None = None
  alpha: float = 1.0

  @nn.compact
  def __call__(self, x):
    x = jnp.reshape(x, x.shape[:-3] + (784,))

    def dense(features, name):
      if self.rank is None:
        return nn.Dense(features, name=name)
      return LoRADense(features, self.rank, self.alpha, name=name)

    return dense(10, 'out')(jnp.tanh(dense(self.hidden, 'hidden')(x)))


def public_digits() -> tuple[np.ndarray, np.ndarray]:
  """scikit-learn's 1,797 digits as MNIST-like images: [N, 28, 28, 1] in
  [0, 1], the 8x8 image resized (bilinear) to 20x20 and padded by 4."""
  from sklearn import datasets  # pylint: disable=import-outside-toplevel
  d = datasets.load_digits()
  x = (d.images / 16.0).astype(np.float32)[..., None]
  x = jax.image.resize(x, (len(x), 20, 20, 1), 'linear')
  x = jnp.pad(jnp.clip(x, 0, 1), ((0, 0), (4, 4), (4, 4), (0, 0)))
  return np.asarray(x), d.target.astype(np.int32)


def _xent(logits, y):
  return optax.softmax_cross_entropy_with_integer_labels(logits, y)


def _shift(x, key, max_shift: int):
  """Each image moved by a random (dy, dx) in [-max_shift, max_shift]^2
  (zeros rolled in at the border are the padding's)."""
  shifts = jax.random.randint(key, (len(x), 2), -max_shift, max_shift + 1)
  return jax.vmap(lambda im, s: jnp.roll(im, s, axis=(0, 1)))(x, shifts)


def pretrain(cfg, x, y, key: jax.Array) -> dict[str, Any]:
  """Non-private AdamW on the public set, minibatches of 64, each image
  shifted at random by up to ``cfg.pretrain_shift`` pixels (public: no
  accounting)."""
  net = Net(cfg.hidden)
  x, y = jnp.asarray(x), jnp.asarray(y)
  params = net.init(key, x[:1])['params']
  tx = optax.adamw(cfg.pretrain_learning_rate,
                   weight_decay=cfg.pretrain_weight_decay)
  per_epoch = len(x) // 64
  steps = cfg.pretrain_epochs * per_epoch

  @jax.jit
  def train(params, key):
    def body(carry, t):
      params, state = carry
      order_key, shift_key = jax.random.split(key)
      order = jax.random.permutation(
          jax.random.fold_in(order_key, t // per_epoch), len(x))
      idx = jax.lax.dynamic_slice(order, ((t % per_epoch) * 64,), (64,))
      xb = _shift(x[idx], jax.random.fold_in(shift_key, t),
                  cfg.pretrain_shift)
      grads = jax.grad(lambda p: jnp.mean(_xent(net.apply(
          {'params': p}, xb), y[idx])))(params)
      updates, state = tx.update(grads, state, params)
      return (optax.apply_updates(params, updates), state), None

    (params, _), _ = jax.lax.scan(body, (params, tx.init(params)),
                                  jnp.arange(steps))
    return params

  # optax's Adam raises an int32 step count to a float power, which strict
  # dtype promotion (the tests') rejects; the promotion here is harmless.
  with jax.numpy_dtype_promotion('standard'):
    return train(params, jax.random.fold_in(key, 1))


def _scan(params, tx, steps: int, step_grads: Callable, key: jax.Array):
  """Runs ``steps`` steps; ``step_grads(params, t, key) -> grads``."""
  state = tx.init(params)

  def body(carry, t):
    params, state = carry
    updates, state = tx.update(step_grads(params, t, key), state, params)
    return (optax.apply_updates(params, updates), state), None

  (params, state), _ = jax.lax.scan(body, (params, state), jnp.arange(steps))
  return params, state


def _apply(cfg, kind: str, frozen):
  """apply(trainable, x) of a run of ``kind`` (``KINDS``)."""
  if kind == 'lora':
    net = Net(cfg.hidden, cfg.rank, cfg.alpha)
    return lambda p, x: net.apply({'params': p, FROZEN: frozen}, x)
  net = Net(cfg.hidden)
  return lambda p, x: net.apply({'params': p}, x)


def init_scratch(cfg, keys: jax.Array, x0) -> dict[str, Any]:
  """A random MLP per seed key (the from-scratch runs' start)."""
  return jax.vmap(lambda k: Net(cfg.hidden).init(
      jax.random.split(k)[0], x0)['params'])(keys)


def _program(cfg, sampler, steps: int, one_start: Callable,
             kind: str) -> Callable:
  """jit(vmap over seeds x (sigma, clip, lr) members) of DP-SGD with ghost
  clipping; ``one_start(key, start) -> trainable tree``."""

  def one(key, start, frozen, sigma, clip, lr, x, y):
    apply = _apply(cfg, kind, frozen)
    loss = lambda p, ex: _xent(apply(p, ex[0]), ex[1])
    grad_sum = dpjax.clipped_grad_sum(loss, clip, 'ghost')
    tx = dpjax.dpsgd(lr, None, sigma, sampler, key=key,
                     momentum=cfg.momentum, per_example=False)

    def step_grads(p, t, key):
      batch = sampler.sample(key, t)
      return grad_sum(p, (x[batch.indices], y[batch.indices]),
                      batch.mask).grad_sum

    return _scan(one_start(key, start, x[:1]), tx, steps, step_grads, key)

  over = jax.vmap(one, in_axes=(None, None, None, 0, 0, 0, None, None))
  return jax.jit(jax.vmap(over, in_axes=(0, 0, None, None, None, None, None,
                                         None)))


def dense_program(cfg, sampler, steps: int) -> Callable:
  """``fn(keys, starts, None, sigmas, clips, lrs, x, y) -> (params,
  state)``: every parameter trained from ``starts`` (one tree per seed: the
  pretrained one for full fine-tuning, ``init_scratch`` from scratch). A
  member with sigma 0 and a clip no gradient reaches is the non-private run
  on the same batches."""
  return _program(cfg, sampler, steps, lambda key, start, x0: start, 'full')


def lora_program(cfg, sampler, steps: int) -> Callable:
  """``fn(keys, seeds, pretrained, sigmas, clips, lrs, x, y) -> (adapters,
  state)``: LoRA adapters (fresh A per seed key, B = 0) on the frozen
  ``pretrained`` tree; ``seeds`` is any per-seed array (unused)."""

  def start(key, _, x0):
    return Net(cfg.hidden, cfg.rank, cfg.alpha).init(
        jax.random.split(key)[0], x0)['params']

  return _program(cfg, sampler, steps, start, 'lora')


def evaluate(cfg, kind: str, trained, pretrained, x, y) -> np.ndarray:
  """Accuracy of a [seeds, members] stack of trained trees."""
  apply = _apply(cfg, kind, pretrained)
  fn = lambda p: jnp.mean(jnp.argmax(apply(p, x), -1) == y)
  return np.asarray(jax.jit(jax.vmap(jax.vmap(fn)))(trained))
