"""Flax (linen) models for the experiments.

Input convention: every model knows the rank of ONE example (``(H, W, C)`` for
the CNNs; ``example_ndim`` trailing axes for the flattening models, default 1,
i.e. a feature vector ``(d,)``). All axes before those are batch axes, so the
same model takes a single unbatched example (the usual case: the training loop
vmaps a per-example loss) or a batch with any number of leading axes, and
returns logits of shape ``batch_shape + (num_outputs,)``. Both give the same
numbers. To feed images to ``MLP``, ``LinearRegression`` or
``LogisticRegression`` set ``example_ndim=3`` (``make_model(...,
input_shape=ds.input_shape)`` does this).

Models (``MODELS``, built by ``make_model``):

* ``mlp``: ``MLP`` with 'sigmoid', 'tanh', 'relu' or 'tempered_sigmoid'
  activations.
* ``mnist_cnn``: Tramer & Boneh (2021) DP-CNN for 28x28x1, 26,010 params.
* ``cifar_cnn``: Tramer & Boneh (2021) DP-CNN for 32x32x3, 550,570 params.
* ``digits_cnn``: a small CNN for scikit-learn's 8x8x1 digits, 6,090 params.
* ``linear``: ``LinearRegression``; ``logistic``: ``LogisticRegression``.

References:
  Tramer & Boneh, "Differentially Private Learning Needs Better Features (or
  Much More Data)", ICLR 2021; code ftramer/Handcrafted-DP ``models.py``.
  Papernot et al., "Tempered Sigmoid Activations for Deep Learning with
  Differential Privacy", AAAI 2021.

Example:
  >>> model = make_model('mnist_cnn', 10)
  >>> x = jnp.zeros((28, 28, 1))
  >>> num_params(jax.eval_shape(model.init, jax.random.key(0), x))
  26010
"""

from collections.abc import Callable, Sequence
import functools
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

ACTIVATIONS = ('sigmoid', 'tanh', 'relu', 'tempered_sigmoid')
MODELS = ('mlp', 'mnist_cnn', 'cifar_cnn', 'digits_cnn', 'linear', 'logistic')


def tempered_sigmoid(x: jax.typing.ArrayLike, scale: float = 2.0,
                     inverse_temperature: float = 2.0,
                     offset: float = 1.0) -> jax.Array:
  """Tempered sigmoid ``scale * sigmoid(inverse_temperature * x) - offset``.

  The defaults (s = 2, T = 2, o = 1) give tanh (Papernot et al. 2021).

  Example:
    >>> float(tempered_sigmoid(0.0))
    0.0
  """
  return scale * jax.nn.sigmoid(inverse_temperature * x) - offset


def get_activation(name: str, scale: float = 2.0,
                   inverse_temperature: float = 2.0,
                   offset: float = 1.0) -> Callable[[jax.Array], jax.Array]:
  """The activation function named ``name`` (one of ``ACTIVATIONS``).

  ``scale``, ``inverse_temperature`` and ``offset`` apply to
  'tempered_sigmoid' only.
  """
  if name == 'sigmoid':
    return jax.nn.sigmoid
  if name == 'tanh':
    return jnp.tanh
  if name == 'relu':
    return jax.nn.relu
  if name == 'tempered_sigmoid':
    return lambda x: tempered_sigmoid(x, scale, inverse_temperature, offset)
  raise ValueError(f'Unknown activation {name!r}; known activations: '
                   f'{", ".join(ACTIVATIONS)}.')


def _split_batch(x: jax.Array, example_ndim: int, name: str
                 ) -> tuple[tuple[int, ...], jax.Array]:
  """Returns ``(batch_shape, x reshaped to [prod(batch_shape), *example])``."""
  if x.ndim < example_ndim:
    raise ValueError(f'{name} expects examples with {example_ndim} axes; got '
                     f'input of shape {x.shape}.')
  batch_shape = x.shape[:x.ndim - example_ndim]
  return batch_shape, x.reshape((math.prod(batch_shape),)
                                + x.shape[x.ndim - example_ndim:])


def _flatten_call(x: jax.Array, example_ndim: int, name: str,
                  body: Callable[[jax.Array], jax.Array]) -> jax.Array:
  batch_shape, x = _split_batch(jnp.asarray(x), example_ndim, name)
  out = body(x.reshape(x.shape[0], -1))
  return out.reshape(batch_shape + out.shape[1:])


class MLP(nn.Module):
  """Fully connected network on the flattened example.

  Attributes:
    hidden: widths of the hidden layers (may be empty).
    num_outputs: number of logits.
    activation: one of ``ACTIVATIONS``.
    scale, inverse_temperature, offset: tempered-sigmoid parameters s, T, o
      (defaults 2, 2, 1 give tanh).
    example_ndim: number of trailing axes forming one example.
  """
  hidden: Sequence[int]
  num_outputs: int
  activation: str = 'tanh'
  scale: float = 2.0
  inverse_temperature: float = 2.0
  offset: float = 1.0
  example_ndim: int = 1

  @nn.compact
  def __call__(self, x: jax.typing.ArrayLike) -> jax.Array:
    act = get_activation(self.activation, self.scale, self.inverse_temperature,
                         self.offset)

    def body(h):
      for width in self.hidden:
        h = act(nn.Dense(width)(h))
      return nn.Dense(self.num_outputs)(h)

    return _flatten_call(x, self.example_ndim, 'MLP', body)


class LinearRegression(nn.Module):
  """A single Dense layer on the flattened example (regression outputs).

  Attributes:
    num_outputs: number of outputs; predictions have shape
      ``(..., num_outputs)`` (index ``[..., 0]`` for a scalar target).
    use_bias: whether to add a bias.
    example_ndim: number of trailing axes forming one example.
  """
  num_outputs: int = 1
  use_bias: bool = True
  example_ndim: int = 1

  @nn.compact
  def __call__(self, x: jax.typing.ArrayLike) -> jax.Array:
    dense = nn.Dense(self.num_outputs, use_bias=self.use_bias)
    return _flatten_call(x, self.example_ndim, 'LinearRegression', dense)


class LogisticRegression(nn.Module):
  """A single Dense layer on the flattened example (logits).

  Attributes:
    num_outputs: number of logits (1 for a sigmoid-loss binary model, or the
      number of classes for softmax cross-entropy).
    use_bias: whether to add a bias.
    example_ndim: number of trailing axes forming one example.
  """
  num_outputs: int
  use_bias: bool = True
  example_ndim: int = 1

  @nn.compact
  def __call__(self, x: jax.typing.ArrayLike) -> jax.Array:
    dense = nn.Dense(self.num_outputs, use_bias=self.use_bias)
    return _flatten_call(x, self.example_ndim, 'LogisticRegression', dense)


class _ImageModel(nn.Module):
  """Shared fields and batching of the CNNs; subclasses define ``body``.

  Attributes:
    num_outputs: number of logits.
    activation: one of ``ACTIVATIONS`` (tanh in the papers).
    scale, inverse_temperature, offset: tempered-sigmoid parameters.
  """
  num_outputs: int = 10
  activation: str = 'tanh'
  scale: float = 2.0
  inverse_temperature: float = 2.0
  offset: float = 1.0

  def body(self, h: jax.Array, act: Callable[[jax.Array], jax.Array]
           ) -> jax.Array:
    """The network on a batch ``[B, H, W, C]``."""
    raise NotImplementedError

  @nn.compact
  def __call__(self, x: jax.typing.ArrayLike) -> jax.Array:
    act = get_activation(self.activation, self.scale, self.inverse_temperature,
                         self.offset)
    batch_shape, x = _split_batch(jnp.asarray(x), 3, type(self).__name__)
    out = self.body(x, act)
    return out.reshape(batch_shape + out.shape[1:])


class PatchConv(nn.Module):
  """A 2-D convolution computed as a matmul over its input patches.

  Same parameters as ``nn.Conv`` (names, shapes, initializers) and the same
  outputs, but the patches are strided slices of the padded input, so the
  per-example kernel gradient under ``jax.vmap`` is a batched matmul
  rather than a grouped convolution (the "unfold" view of a convolution,
  as in Opacus's per-sample conv gradients). With ``max_pool_stride1`` the
  DP-CNN trains in 0.67x the time of its ``nn.Conv`` twin on 2 CPU cores
  (``python -m experiments bench patch_conv``).

  Attributes:
    features: output channels.
    kernel_size: (height, width) of the kernel.
    stride: the stride along both spatial axes.
    padding: zeros added on every side of both spatial axes.
  """
  features: int
  kernel_size: tuple[int, int]
  stride: int = 1
  padding: int = 0

  @nn.compact
  def __call__(self, h: jax.Array) -> jax.Array:
    kh, kw = self.kernel_size
    kernel = self.param('kernel', nn.initializers.lecun_normal(),
                        (kh, kw, h.shape[-1], self.features))
    bias = self.param('bias', nn.initializers.zeros_init(), (self.features,))
    p, s = self.padding, self.stride
    h = jnp.pad(h, ((0, 0), (p, p), (p, p), (0, 0)))
    rows = (h.shape[1] - kh) // s + 1
    cols = (h.shape[2] - kw) // s + 1
    patches = jnp.concatenate(  # [B, rows, cols, kh * kw * C], HWI order
        [h[:, i:i + s * (rows - 1) + 1:s, j:j + s * (cols - 1) + 1:s]
         for i in range(kh) for j in range(kw)], axis=-1)
    return patches @ kernel.reshape(-1, self.features) + bias


def max_pool_stride1(h: jax.Array, window: int = 2) -> jax.Array:
  """``nn.max_pool(h, (window, window), strides=(1, 1))`` on ``[B, H, W,
  C]``, as the maximum of the window's shifted views.

  The same outputs; under ``jax.vmap`` its gradient is elementwise, where
  ``nn.max_pool``'s is a select-and-scatter, so the DP-CNN's per-example
  gradients take about 30% less time on CPU. At a tie the gradient is
  split among the tied inputs (``nn.max_pool`` gives all of it to the
  first); both are subgradients of the same function.
  """
  rows, cols = h.shape[1] - window + 1, h.shape[2] - window + 1
  views = [h[:, i:i + rows, j:j + cols]
           for i in range(window) for j in range(window)]
  return functools.reduce(jnp.maximum, views)


class MnistCNN(_ImageModel):
  """Tramer & Boneh DP-CNN for 28x28x1 images (26,010 params).

  Conv(16, 8x8, stride 2, pad 2) -> act -> MaxPool(2, stride 1) -> Conv(32,
  4x4, stride 2, VALID) -> act -> MaxPool(2, stride 1) -> flatten (512) ->
  Dense 32 -> act -> Dense ``num_outputs``. The convolutions are
  ``PatchConv`` and the pools ``max_pool_stride1`` (``nn.Conv``'s and
  ``nn.max_pool``'s outputs, faster per-example gradients).
  """

  def body(self, h, act):
    h = act(PatchConv(16, (8, 8), stride=2, padding=2, name='Conv_0')(h))
    h = max_pool_stride1(h)
    h = act(PatchConv(32, (4, 4), stride=2, name='Conv_1')(h))
    h = max_pool_stride1(h)
    h = act(nn.Dense(32)(h.reshape(h.shape[0], -1)))
    return nn.Dense(self.num_outputs)(h)


class CifarCNN(_ImageModel):
  """Tramer & Boneh DP-CNN for 32x32x3 images (550,570 params).

  Three blocks of two 3x3 convolutions (SAME padding, i.e. pad 1 as in the
  reference code) with 32, 64 and 128 channels, each block followed by
  MaxPool(2, stride 2); flatten (4x4x128 = 2048) -> Dense 128 -> act -> Dense
  ``num_outputs``. Every conv is followed by the activation.
  """

  def body(self, h, act):
    for channels in (32, 64, 128):
      h = act(nn.Conv(channels, (3, 3), padding='SAME')(h))
      h = act(nn.Conv(channels, (3, 3), padding='SAME')(h))
      h = nn.max_pool(h, (2, 2), strides=(2, 2))
    h = act(nn.Dense(128)(h.reshape(h.shape[0], -1)))
    return nn.Dense(self.num_outputs)(h)


class DigitsCNN(_ImageModel):
  """Small CNN for 8x8x1 digits (6,090 params with 10 outputs).

  Conv(16, 3x3, SAME) -> act -> MaxPool 2 -> Conv(32, 3x3, SAME) -> act ->
  MaxPool 2 -> flatten (2x2x32 = 128) -> Dense ``num_outputs``.
  """

  def body(self, h, act):
    h = act(nn.Conv(16, (3, 3), padding='SAME')(h))
    h = nn.max_pool(h, (2, 2), strides=(2, 2))
    h = act(nn.Conv(32, (3, 3), padding='SAME')(h))
    h = nn.max_pool(h, (2, 2), strides=(2, 2))
    return nn.Dense(self.num_outputs)(h.reshape(h.shape[0], -1))


_FLAT_MODELS = {'mlp': MLP, 'linear': LinearRegression,
                'logistic': LogisticRegression}
_IMAGE_MODELS = {'mnist_cnn': MnistCNN, 'cifar_cnn': CifarCNN,
                 'digits_cnn': DigitsCNN}


def make_model(name: str, num_outputs: int, *,
               input_shape: Sequence[int] | None = None,
               **kwargs: Any) -> nn.Module:
  """Builds the model named ``name`` (one of ``MODELS``).

  Args:
    name: model name.
    num_outputs: number of logits (or regression outputs).
    input_shape: shape of one example (``Dataset.input_shape``); sets
      ``example_ndim`` of the flattening models and is checked to be
      ``(H, W, C)`` for the CNNs.
    **kwargs: further module attributes, e.g. ``hidden=(64,)`` and
      ``activation='relu'`` for 'mlp' (default ``hidden=(64,)``).

  Returns:
    An unbound flax module.

  Raises:
    ValueError: unknown name or activation, or an input shape the model cannot
      take.
  """
  if name not in MODELS:
    raise ValueError(
        f'Unknown model {name!r}; known models: {", ".join(MODELS)}.')
  if 'activation' in kwargs:
    get_activation(kwargs['activation'])  # Fail early on a bad name.
  if name in _FLAT_MODELS:
    if input_shape is not None:
      kwargs.setdefault('example_ndim', len(input_shape))
    if name == 'mlp':
      kwargs.setdefault('hidden', (64,))
    return _FLAT_MODELS[name](num_outputs=num_outputs, **kwargs)
  if input_shape is not None and len(input_shape) != 3:
    raise ValueError(f'{name} expects image examples (H, W, C); got '
                     f'input_shape={tuple(input_shape)}.')
  return _IMAGE_MODELS[name](num_outputs=num_outputs, **kwargs)


def default_model_name(dataset_name: str) -> str:
  """The model the experiments use for a dataset (by ``Dataset.name``)."""
  return {'mnist': 'mnist_cnn', 'mnist5k': 'mnist_cnn',
          'fashion_mnist': 'mnist_cnn',
          'cifar10': 'cifar_cnn', 'svhn_cropped': 'cifar_cnn',
          'digits': 'digits_cnn', 'diabetes': 'linear',
          'sphere_logistic': 'logistic'}.get(dataset_name, 'mlp')


def for_dataset(ds: Any, name: str = '', **kwargs: Any) -> tuple[str, Any]:
  """(name, module): the model ``name`` ('': ``default_model_name``) sized
  for ``ds`` (a ``data.Dataset``: its classes and input shape)."""
  name = name or default_model_name(ds.name)
  return name, make_model(name, ds.num_classes, input_shape=ds.input_shape,
                          **kwargs)


def num_params(params: Any) -> int:
  """Total number of scalars in a parameter pytree (or variables dict).

  Leaves may be arrays or ``jax.ShapeDtypeStruct`` (from ``jax.eval_shape``).
  """
  return sum(int(math.prod(getattr(leaf, 'shape', None) or jnp.shape(leaf)))
             for leaf in jax.tree_util.tree_leaves(params))
