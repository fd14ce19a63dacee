"""The DP-SGD benchmark's models (Flax) and their random batches.

The 784-512-512-10 MLP (tanh); the Tramer & Boneh (2021) MNIST DP-CNN (Conv
16 8x8 /2 pad 2 -> MaxPool 2 /1 -> Conv 32 4x4 /2 -> MaxPool 2 /1 -> Dense 32
-> Dense 10, tanh, 26,010 parameters); one pre-LN transformer block.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp



class MLP(nn.Module):
  """784-512-512-10, tanh."""

  @nn.compact
  def __call__(self, x):
    x = x.reshape(x.shape[:-3] + (-1,))
    for width in (512, 512):
      x = jnp.tanh(nn.Dense(width)(x))
    return nn.Dense(10)(x)


class CNN(nn.Module):
  """Tramer & Boneh (2021) MNIST DP-CNN, 26,010 parameters."""

  @nn.compact
  def __call__(self, x):
    x = jnp.tanh(nn.Conv(16, (8, 8), strides=2, padding=((2, 2), (2, 2)))(x))
    x = nn.max_pool(x, (2, 2), strides=(1, 1))
    x = jnp.tanh(nn.Conv(32, (4, 4), strides=2, padding='VALID')(x))
    x = nn.max_pool(x, (2, 2), strides=(1, 1))
    x = jnp.tanh(nn.Dense(32)(x.reshape(x.shape[:-3] + (-1,))))
    return nn.Dense(10)(x)


class Transformer(nn.Module):
  """One pre-LN transformer block over 32 tokens of a 256-word vocabulary.

  Token + position embeddings (dim 128), LayerNorm -> 4-head self-attention
  -> residual, LayerNorm -> MLP 512 (gelu) -> residual, LayerNorm, mean over
  tokens, Dense 10; 236,682 parameters.
  """
  vocab: int = 256
  seq_len: int = 32
  dim: int = 128
  heads: int = 4
  hidden: int = 512

  @nn.compact
  def __call__(self, tokens):
    x = nn.Embed(self.vocab, self.dim)(tokens)
    x = x + nn.Embed(self.seq_len, self.dim)(jnp.arange(self.seq_len))
    h = nn.LayerNorm()(x)
    x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(h, h)
    h = nn.LayerNorm()(x)
    x = x + nn.Dense(self.dim)(nn.gelu(nn.Dense(self.hidden)(h)))
    return nn.Dense(10)(nn.LayerNorm()(x).mean(axis=-2))


MODELS = {'mlp-784-512-512-10': MLP, 'tb-mnist-cnn': CNN,
          'transformer-128x4-seq32': Transformer}


def random_batch(name: str, batch_size: int, key: jax.Array):
  """(inputs, labels): 28x28x1 images, or token ids for the transformer."""
  kx, ky = jax.random.split(key)
  if name.startswith('transformer'):
    cfg = Transformer()
    x = jax.random.randint(kx, (batch_size, cfg.seq_len), 0, cfg.vocab)
  else:
    x = jax.random.normal(kx, (batch_size, 28, 28, 1))
  return x, jax.random.randint(ky, (batch_size,), 0, 10)

