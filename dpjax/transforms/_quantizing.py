"""Stochastic quantization of every update coordinate, as an optax transformation.

The quantizers (``GridQuantizer``, ``low_precision_quantizer``,
``k_level_quantizer``) live in ``dpjax.compression``.
"""

import jax
import jax.numpy as jnp
import optax

from dpjax import _keys
from dpjax import compression
from dpjax.transforms._state import keyed_transformation

_STREAM = _keys.register('stochastic_quantization', __name__)


def quantize_stochastic(quantizer: compression.GridQuantizer, *,
                        key: jax.Array) -> optax.GradientTransformation:
  """Replaces every coordinate by its unbiased stochastic quantization.

  Each leaf is clamped to ``[quantizer.low, quantizer.high]``, rounded to the
  grid with ``quantizer.quantize`` and mapped back with
  ``quantizer.dequantize`` (in the leaf's dtype), so the output is what a
  receiver reconstructs from ``quantizer.bits_per_coordinate`` bits per
  coordinate. Unbiased inside the range, variance <= spacing^2 / 4.

  Args:
    quantizer: e.g. ``low_precision_quantizer(eta, bits)`` (Q-DPSGD) or
      ``k_level_quantizer(x_max, levels)`` (cpSGD).
    key: PRNG key (required). Step t draws from ``fold_in(key, t)``, one
      subkey per leaf.

  Returns:
    An optax transformation with ``KeyStepState``.

  References:
    Ding et al., Q-DPSGD, eq. (5); Agarwal et al., cpSGD, Sec. 3.

  Example:
    >>> tx = quantize_stochastic(
    ...     dpjax.compression.low_precision_quantizer(0.25, 8),
    ...     key=jax.random.key(0))
    >>> out, _ = tx.update(jnp.array([0.3, -1.0]), tx.init(None))
    >>> out.tolist()[1], out.tolist()[0] in (0.25, 0.5)
    (-1.0, True)
  """
  if not isinstance(quantizer, compression.GridQuantizer):
    raise ValueError(
        f'Expected quantizer to be a GridQuantizer, got {quantizer!r}.')

  def step(updates, step_key, params):
    del params
    leaves, treedef = jax.tree.flatten(updates)
    keys = jax.random.split(step_key, max(1, len(leaves)))
    out = []
    for k, g in zip(keys, leaves):
      dtype = g.dtype if jnp.issubdtype(g.dtype, jnp.floating) else jnp.float32
      out.append(quantizer.dequantize(quantizer.quantize(g, key=k), dtype))
    return jax.tree.unflatten(treedef, out)

  return keyed_transformation(key, step, stream=_STREAM)
