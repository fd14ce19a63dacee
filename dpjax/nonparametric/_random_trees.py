"""Random decision trees (RDT) with discrete Laplace leaf counts.

The structure of every tree is drawn from the key and the public bounds only
(Fan et al. 2005): at each node a random attribute, and a threshold uniform
in that node's public range of the attribute. The data only fill the leaves
with int32 class counts, which get exact discrete Laplace noise
(Jagannathan, Pillaipakkamnatt & Wright 2009, with the noise of Canonne,
Kamath & Steinke 2020 in place of float Laplace, whose low bits leak). Trees are complete binary trees of a fixed depth stored as
fixed-shape arrays (heap order), built and read with ``jax.vmap`` over trees.
"""

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax import _keys
from dpjax import _validate
from dpjax import accounting
from dpjax.nonparametric import _bounds
from dpjax.nonparametric import _count_noise
from dpjax.nonparametric import _padding
from dpjax.nonparametric import _predict

_STREAM = _keys.register('random_decision_trees', __name__)

MAX_DEPTH = 20


class RandomTreesRelease(NamedTuple):
  """A released random-decision-tree ensemble (a pytree of arrays).

  Attributes:
    attributes: int32 ``[T, 2^D - 1]`` split attribute of each internal node.
    thresholds: float32 ``[T, 2^D - 1]`` split thresholds on [0, 1] scale.
    leaf_counts: int32 ``[T, 2^D, K]`` noisy class counts of each leaf
      (exact counts plus exact discrete Laplace noise).
    low: float32 ``[d]`` public lower bounds of the features.
    high: float32 ``[d]`` public upper bounds of the features.
  """
  attributes: jax.Array
  thresholds: jax.Array
  leaf_counts: jax.Array
  low: jax.Array
  high: jax.Array


def default_depth(num_features: int) -> int:
  """Fan et al.'s depth, half the number of features, clipped to [1, 10].

  Example:
    >>> default_depth(10), default_depth(64)
    (5, 10)
  """
  return int(min(max(num_features // 2, 1), 10))


def _random_decision_trees_event(epsilon: float, num_trees: int):
  """The epsilon-DP event of one ``random_decision_trees`` release.

  The epsilon is that of the discrete Laplace noise actually sampled,
  T / b' (``dpjax.noise.discrete_laplace_scale``): at most ``epsilon``.

  Example:
    >>> _random_decision_trees_event(2.0, 4)
    EpsilonDeltaDpEvent(epsilon=2.0, delta=0.0)
  """
  _validate.positive(epsilon=epsilon)
  _validate.positive_int(num_trees=num_trees)
  return accounting.pure_dp_event(
      _count_noise.count_epsilon(epsilon, num_trees))


def random_decision_trees(key: jax.Array, x: ArrayLike, y: ArrayLike, *,
                          epsilon: float, bounds: Any, num_classes: int,
                          num_trees: int = 10, depth: int | None = None):
  """Random decision trees with discrete Laplace(T / eps) leaf-count noise.

  Each of the ``num_trees`` trees splits, at every internal node, on a
  uniformly random attribute at a threshold uniform in the node's public range
  of that attribute (the box given by ``bounds`` cut by the ancestors'
  splits). Features are clipped to ``bounds``. Every tree sees all the data;
  each leaf stores its int32 class counts plus exact discrete Laplace noise
  of scale num_trees / epsilon (``dpjax.noise.discrete_laplace``).
  Prediction sums the noisy counts of the leaves a point falls in over the
  trees and returns the argmax (Jagannathan et al.'s vote).

  Args:
    key: a PRNG key (structure and noise both come from it).
    x: ``[n, d]`` private features.
    y: ``[n]`` private integer labels in ``[0, num_classes)``.
    epsilon: the privacy budget, > 0, concrete (``inf`` releases exact
      counts).
    bounds: public ``(low, high)`` feature bounds, scalars or ``[d]``.
    num_classes: K >= 2.
    num_trees: T >= 1.
    depth: tree depth D in [1, 20]; default ``default_depth(d)`` (Fan et
      al.'s d / 2, clipped to [1, 10]). Leaves per tree: 2^D.

  Returns:
    ``(release, event)``: a ``RandomTreesRelease`` read by
    ``dpjax.nonparametric.predict``, and its pure-DP
    ``EpsilonDeltaDpEvent``.

  Privacy: epsilon-DP under add-or-remove-one: the structure does not depend
  on the data, and one record changes one class count of one leaf in each of
  the T trees, an L1 change of T, against discrete Laplace noise of scale
  b' >= T / epsilon. Replace-one: L1 change 2 T, so 2 epsilon-DP. The event
  states the epsilon of the noise actually sampled, T / b'.

  References:
    Fan, Wang, Yu & Ma, "Is random model better?", ICDM 2003/2005;
    Jagannathan, Pillaipakkamnatt & Wright, "A practical differentially
    private random decision tree classifier", ICDM Workshops 2009;
    Huang thesis (paper 002), Table 5.3 (the RDT column).

  Example:
    >>> x = jnp.array([[0.1, 0.1], [0.9, 0.9]] * 50)
    >>> y = jnp.array([0, 1] * 50)
    >>> release, event = random_decision_trees(
    ...     jax.random.key(0), x, y, epsilon=10.0, bounds=(0.0, 1.0),
    ...     num_classes=2, num_trees=5, depth=2)
    >>> dpjax.nonparametric.predict(release, jnp.array([[0.1, 0.1]])).shape
    (1,)
  """
  key = _keys.stream(_validate.key(key), _STREAM)
  _validate.positive(epsilon=epsilon)
  _validate.positive_int(num_trees=num_trees)
  x = _bounds.check_features(x)
  n, d = x.shape
  y = _bounds.check_labels(y, n, num_classes)
  if depth is None:
    depth = default_depth(d)
  _validate.positive_int(depth=depth)
  if depth > MAX_DEPTH:
    raise ValueError(f'Expected depth={depth} <= {MAX_DEPTH} (complete trees '
                     f'store 2^depth leaves).')
  low, high = _bounds.check_bounds(bounds, d)
  u = _bounds.to_unit_cube(x, (low, high)).astype(jnp.float32)
  scale = _count_noise.count_noise_scale(epsilon, num_trees)
  u, y, w = _padding.pad_rows(u, y)
  k_struct, k_noise = jax.random.split(key)
  attrs, thrs, exact = _fit(k_struct, u, y, w, num_trees, depth, num_classes)
  release = RandomTreesRelease(
      attrs, thrs, _count_noise.add_count_noise(k_noise, exact, scale),
      jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32))
  return release, _random_decision_trees_event(epsilon, num_trees)


def _structure(key: jax.Array, num_features: int, depth: int):
  """One random tree: attributes and thresholds ``[2^depth - 1]`` (heap)."""
  lo = jnp.zeros((1, num_features), jnp.float32)
  hi = jnp.ones((1, num_features), jnp.float32)
  attrs, thrs = [], []
  for level, k in enumerate(jax.random.split(key, depth)):
    ka, kt = jax.random.split(k)
    width = 2 ** level
    a = jax.random.randint(ka, (width,), 0, num_features, jnp.int32)
    r = jax.random.uniform(kt, (width,), jnp.float32)
    rows = jnp.arange(width)
    a_lo, a_hi = lo[rows, a], hi[rows, a]
    t = a_lo + r * (a_hi - a_lo)
    attrs.append(a)
    thrs.append(t)
    onehot = jax.nn.one_hot(a, num_features, dtype=bool)
    left_hi = jnp.where(onehot, t[:, None], hi)
    right_lo = jnp.where(onehot, t[:, None], lo)
    # Children of level node j are next-level nodes 2j (left), 2j+1 (right).
    lo = jnp.stack([lo, right_lo], axis=1).reshape(2 * width, num_features)
    hi = jnp.stack([left_hi, hi], axis=1).reshape(2 * width, num_features)
  return jnp.concatenate(attrs), jnp.concatenate(thrs)


def _leaves(attributes: jax.Array, thresholds: jax.Array, u: jax.Array,
            depth: int) -> jax.Array:
  """Leaf index in ``[0, 2^depth)`` of each row of ``u`` in one tree."""
  node = jnp.zeros(u.shape[0], jnp.int32)
  rows = jnp.arange(u.shape[0])
  for _ in range(depth):
    go_right = u[rows, attributes[node]] >= thresholds[node]
    node = 2 * node + 1 + go_right.astype(jnp.int32)
  return node - (2 ** depth - 1)


@functools.partial(jax.jit, static_argnums=(4, 5, 6))
def _fit(k_struct, u, y, w, num_trees, depth, num_classes):
  """The random structures and their exact int32 leaf counts."""
  attrs, thrs = jax.vmap(lambda k: _structure(k, u.shape[1], depth))(
      jax.random.split(k_struct, num_trees))
  num_leaves = 2 ** depth

  def counts(a, t):
    leaf = _leaves(a, t, u, depth)
    flat = jnp.zeros(num_leaves * num_classes, jnp.int32).at[
        leaf * num_classes + y].add(
            jnp.where(y < num_classes, w, 0.0).astype(jnp.int32))
    return flat.reshape(num_leaves, num_classes)

  return attrs, thrs, jax.vmap(counts)(attrs, thrs)


@_predict.predict.register(RandomTreesRelease)
def _predict_trees(release: RandomTreesRelease, x: ArrayLike) -> jax.Array:
  x = _bounds.check_features(x, num_features=release.low.shape[0])
  depth = int(np.log2(release.leaf_counts.shape[1]))
  return _predict_jit(release, x.astype(jnp.float32), depth)


@functools.partial(jax.jit, static_argnums=(2,))
def _predict_jit(release, x, depth):
  u = (_bounds.clip_to_box(x, release.low, release.high) - release.low) / (
      release.high - release.low)
  votes = jax.vmap(
      lambda a, t, c: c[_leaves(a, t, u, depth)])(
          release.attributes, release.thresholds, release.leaf_counts)
  return jnp.argmax(jnp.sum(votes, axis=0), axis=-1).astype(jnp.int32)
