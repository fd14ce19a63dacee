"""lm_finetune's model: a GPT-style byte-level decoder with tied embeddings.

``Decoder`` (Radford et al. 2019, GPT-2: pre-LayerNorm blocks of causal
self-attention and a 4x GELU MLP, learned positions, the output layer the
transposed token embedding): ``logits = LN(h_L) E^T`` with the same ``E``
that embeds the input bytes. With ``rank`` set, the model is the LoRA form
(Hu et al. 2022): every Dense (attention's qkv and projection, the MLP's
two layers) is a ``dpjax.finetune.LoRADense``, and every other weight
(embedding, positions, LayerNorms) sits in the ``FROZEN`` collection under
the same name, so a pretrained ``params`` tree is the LoRA model's frozen
tree as it is and only the adapters are trained (clipped and noised).
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from dpjax.finetune import FROZEN
from dpjax.finetune import LoRADense

VOCAB = 256  # bytes


class _Module(nn.Module):
  """Shared by the decoder's parts: a weight trainable or frozen."""
  rank: int | None = None

  def weight(self, name: str, init, shape) -> jax.Array:
    if self.rank is None:
      return self.param(name, init, shape)
    return self.variable(FROZEN, name, lambda: init(
        self.make_rng('params'), shape)).value

  def dense(self, features: int, name: str, alpha: float):
    if self.rank is None:
      return nn.Dense(features, name=name)
    return LoRADense(features, self.rank, alpha, name=name)

  def layer_norm(self, h: jax.Array, name: str) -> jax.Array:
    """LayerNorm (eps 1e-5) with weights ``{name}_scale``, ``{name}_bias``."""
    width = h.shape[-1]
    scale = self.weight(f'{name}_scale', nn.initializers.ones, (width,))
    bias = self.weight(f'{name}_bias', nn.initializers.zeros, (width,))
    mean = jnp.mean(h, -1, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), -1, keepdims=True)
    return (h - mean) * jax.lax.rsqrt(var + 1e-5) * scale + bias


class Block(_Module):
  """One pre-LN block: causal multi-head self-attention, then the MLP."""
  heads: int = 4
  alpha: float = 1.0

  @nn.compact
  def __call__(self, h: jax.Array) -> jax.Array:
    t, width = h.shape[-2:]
    dense = lambda n, name: self.dense(n, name, self.alpha)
    qkv = dense(3 * width, 'qkv')(self.layer_norm(h, 'ln1'))
    q, k, v = (a.reshape(a.shape[:-1] + (self.heads, width // self.heads))
               for a in jnp.split(qkv, 3, axis=-1))
    scores = jnp.einsum('...thd,...shd->...hts', q, k) / jnp.sqrt(
        jnp.float32(width // self.heads))
    causal = jnp.tril(jnp.ones((t, t), bool))
    scores = jnp.where(causal, scores, jnp.finfo(scores.dtype).min)
    att = jnp.einsum('...hts,...shd->...thd', jax.nn.softmax(scores, -1), v)
    h = h + dense(width, 'proj')(att.reshape(att.shape[:-2] + (width,)))
    up = nn.gelu(dense(4 * width, 'up')(self.layer_norm(h, 'ln2')))
    return h + dense(width, 'down')(up)


class Decoder(_Module):
  """Byte ids [..., T] -> next-byte logits [..., T, 256]."""
  width: int = 64
  layers: int = 2
  heads: int = 4
  max_len: int = 128
  alpha: float = 1.0

  @nn.compact
  def __call__(self, ids: jax.Array) -> jax.Array:
    init = nn.initializers.normal(0.02)
    table = self.weight('embedding', init, (VOCAB, self.width))
    pos = self.weight('positions', init, (self.max_len, self.width))
    h = table[ids] + pos[:ids.shape[-1]]
    for i in range(self.layers):
      h = Block(self.rank, self.heads, self.alpha, name=f'block{i}')(h)
    return self.layer_norm(h, 'ln_final') @ table.T


def next_byte_loss(logits: jax.Array, window: jax.Array) -> jax.Array:
  """Mean cross-entropy (nats per byte) of ``logits`` [..., T, 256] against
  the window [..., T + 1] shifted by one."""
  targets = window[..., 1:].astype(jnp.int32)
  logp = jax.nn.log_softmax(logits, -1)
  return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], -1)[..., 0],
                   -1)


def loss_fn(model: Decoder, frozen: Any = None):
  """``loss(params, window) -> nats per byte`` of one window [T + 1]."""
  def loss(params, window):
    variables = {'params': params}
    if frozen is not None:
      variables[FROZEN] = frozen
    ids = window[:-1].astype(jnp.int32)
    return next_byte_loss(model.apply(variables, ids), window)
  return loss
