"""A Dense layer with a frozen kernel and a trainable low-rank update.

``y = x W + b + (alpha / r) (x A) B`` (Hu et al. 2022, "LoRA: Low-Rank
Adaptation of Large Language Models", eq. 3 and Sec. 4.1, in the row-vector
convention): W [in, out] and b are the pretrained weights, kept in the
``FROZEN`` collection under flax's ``nn.Dense`` names (``kernel``, ``bias``)
so that a pretrained Dense tree is the frozen tree as it is; A [in, r]
(He-uniform) and B [r, out] (zeros, so the model starts as the pretrained one)
are the only ``params``.

Both adapter products are plain ``dot_general``s on the activations, the
contractions ghost clipping taps (``dpjax.clipping``): A's per-example
gradient is x^T (g B^T) s, B's is (s x A)^T g, each an outer product whose
norm is ``||a|| ||g||`` per position, so ghost and vmap clipping agree and no
per-example gradient is built. The frozen product x W is a constant of the
loss (not an input), so no rule ever sees W.
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from dpjax import _validate

# The variable collection of the frozen (pretrained) weights. Pass it to
# ``apply`` beside ``params``; never give it to the optimizer or clipping.
FROZEN = 'frozen'


class LoRADense(nn.Module):
  """``x W + b + (alpha / rank) (x A) B``: W, b frozen; A, B trainable.

  Attributes:
    features: output width (W is [in, features]).
    rank: r, the inner width of A [in, r] and B [r, features] (>= 1).
    alpha: the scale numerator (Hu et al. 2022, Sec. 4.1); None means
      ``alpha = rank`` (scale 1).
    use_bias: whether the frozen layer has a bias.
    dtype: compute dtype (None: promoted from the input and weights, as
      ``nn.Dense``).
    param_dtype: dtype of A and B (and of a freshly initialized W, b).
    kernel_init, bias_init: initializers of W and b, used by ``init`` only;
      replace the ``FROZEN`` tree with the pretrained weights.
    a_init: initializer of A (B is zeros).

  Privacy:
    Only ``params`` (A, B) are arguments of the per-example loss, so DP-SGD
    clips and noises ``r * (in + features)`` numbers per layer; the frozen
    weights are public (pretrained on public data) and are read, never
    released or changed. See docs/finetune.md for the recipe.

  Example:
    >>> layer = LoRADense(3, rank=2, alpha=4.0)
    >>> v = layer.init(jax.random.key(0), jnp.ones((1, 5)))
    >>> dense = nn.Dense(3).bind({'params': v[FROZEN]})
    >>> x = jnp.ones((2, 5))
    >>> bool(jnp.allclose(layer.apply(v, x), dense(x)))  # B = 0 at init
    True
  """
  features: int
  rank: int
  alpha: float | None = None
  use_bias: bool = True
  dtype: Any = None
  param_dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.lecun_normal()
  bias_init: Any = nn.initializers.zeros_init()
  a_init: Any = nn.initializers.he_uniform()

  @nn.compact
  def __call__(self, x: jax.typing.ArrayLike) -> jax.Array:
    _validate.positive_int(rank=self.rank)
    _validate.positive_int(features=self.features)
    if self.alpha is not None:
      _validate.positive(alpha=self.alpha)
      _validate.finite(alpha=self.alpha)
    x = jnp.asarray(x)
    fan_in = x.shape[-1]
    kernel = self.variable(
        FROZEN, 'kernel', lambda: self.kernel_init(
            self.make_rng('params'), (fan_in, self.features),
            self.param_dtype)).value
    bias = self.variable(FROZEN, 'bias', lambda: self.bias_init(
        self.make_rng('params'), (self.features,),
        self.param_dtype)).value if self.use_bias else None
    lora_a = self.param('lora_a', self.a_init, (fan_in, self.rank),
                        self.param_dtype)
    lora_b = self.param('lora_b', nn.initializers.zeros_init(),
                        (self.rank, self.features), self.param_dtype)
    scale = (self.rank if self.alpha is None else self.alpha) / self.rank
    x, kernel, bias, lora_a, lora_b = nn.dtypes.promote_dtype(
        x, kernel, bias, lora_a, lora_b, dtype=self.dtype)
    y = x @ kernel
    if bias is not None:
      y = y + bias
    low = (x @ lora_a) * jnp.asarray(scale, x.dtype)
    return y + low @ lora_b
