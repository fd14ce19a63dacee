"""Median-split trees as fixed-shape arrays (Huang thesis Alg. 10-11).

A forest of ``N`` complete trees of depth ``D`` is four arrays: per tree a
heap of ``2^D - 1`` split attributes and thresholds (node ``j`` of level
``l`` sits at ``2^l - 1 + j``, its children at ``2 j`` and ``2 j + 1`` of
level ``l + 1``) and ``[2^D, K]`` leaf class counts. Trees grow level by
level without Python recursion: each point carries its (tree, node) id, a
node's statistics are one ``segment_sum`` over those ids, and every random
draw of tree ``t`` comes from ``fold_in(keys[t], level)`` (``vmap`` over the
tree keys), so a tree depends only on its key and its own points: built
alone it is bit-identical to the same tree inside the ensemble. The cost per
level is O(n m) for m candidates, independent of the number of trees.

Features live in the unit cube of the public bounds (``to_unit_cube``);
every node keeps its public box (the bounds refined by the released splits
above it), and the private median's candidates are drawn uniformly from the
box's range of the node's attribute, never from the data.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax import noise
from dpjax.nonparametric import _bounds
from dpjax.nonparametric import _exponential
from dpjax.nonparametric._predict import predict

MEDIAN_SENSITIVITY = 0.5  # of -|rank(r) - |V|/2| under add/remove-one
DEFAULT_CANDIDATES = 32
MAX_DEFAULT_DEPTH = 10


class TreeEnsemble(NamedTuple):
  """A released forest of complete median-split trees.

  Attributes:
    attributes: int32 ``[N, 2^D - 1]`` split attribute of every node (heap).
    thresholds: float32 ``[N, 2^D - 1]`` split point in unit-cube coordinates
      (a point goes right when its coordinate is > the threshold).
    counts: int32 ``[N, 2^D, K]`` noisy class counts of every leaf (exact
      counts plus exact discrete Laplace noise).
    low: float32 ``[d]`` public lower bounds.
    high: float32 ``[d]`` public upper bounds.
  """
  attributes: jax.Array
  thresholds: jax.Array
  counts: jax.Array
  low: jax.Array
  high: jax.Array


def depth_budgets(epsilon: float, depth: int) -> np.ndarray:
  """The per-depth split budgets eps_i = C eps (3/2)^i, i = 0..depth-1.

  C = 1 / (2 (3/2)^depth - 2) (thesis eq. 8.6, with k = depth = the number
  of split levels; the leaves sit at depth ``depth`` and split nothing), so
  the budgets sum to ``epsilon``; the root, which holds the most data, gets
  the least.

  Example:
    >>> b = depth_budgets(1.0, 3)
    >>> [round(float(e), 4) for e in b], round(float(b.sum()), 6)
    ([0.2105, 0.3158, 0.4737], 1.0)
  """
  c = 1.0 / (2.0 * 1.5 ** depth - 2.0)
  return c * float(epsilon) * 1.5 ** np.arange(depth)


@functools.partial(jax.jit, static_argnums=(1, 2))
def partition(key: jax.Array, num_records: int, num_parts: int) -> jax.Array:
  """A data-independent partition: record i goes to part ``ids[i]``.

  ``ids[i]`` is uniform on ``[0, num_parts)`` and drawn from
  ``fold_in(key, i)`` alone, so the ids are i.i.d., a record's part depends
  only on the key and its own index, and appending (or removing the last)
  record moves no other record. Since the ids are exchangeable, the
  partition of a dataset (a multiset) has the same law whatever the order of
  its rows, so a neighbour may be taken to differ in the last row.

  Example:
    >>> ids = partition(jax.random.key(0), 5, 2)
    >>> bool(jnp.all(partition(jax.random.key(0), 6, 2)[:5] == ids))
    True
  """
  idx = jnp.arange(num_records, dtype=jnp.uint32)
  return jax.vmap(lambda i: jax.random.randint(
      jax.random.fold_in(key, i), (), 0, num_parts))(idx).astype(jnp.int32)


def median_utility(values: jax.Array, node: jax.Array,
                   candidates: jax.Array) -> jax.Array:
  """u(V_g, r) = -|rank_g(r) - |V_g|/2| for every node g and candidate r.

  Args:
    values: ``[M]`` each point's value of its node's attribute.
    node: ``[M]`` int32 node ids in ``[0, G)``.
    candidates: ``[G, m]`` candidate split points per node.

  Returns:
    ``[G, m]`` utilities; adding or removing one point changes each by at
    most 1/2 (``MEDIAN_SENSITIVITY``): |V|/2 moves by 1/2 and the rank by 0
    or 1 in the same direction.
  """
  num_nodes = candidates.shape[0]
  below = (values[:, None] <= candidates[node]).astype(jnp.float32)
  rank = jax.ops.segment_sum(below, node, num_nodes)
  size = jax.ops.segment_sum(jnp.ones_like(values, jnp.float32), node,
                             num_nodes)
  return -jnp.abs(rank - size[:, None] / 2)


def _exact_median(values, node, num_nodes, box_low, box_high):
  """Per node, the midpoint between the lower median and the next value
  (half the points go left); the box midpoint for an empty node."""
  order = jnp.lexsort((values, node))
  v = values[order]
  size = jax.ops.segment_sum(jnp.ones_like(node), node, num_nodes)
  start = jnp.cumsum(size) - size
  last = values.shape[0] - 1
  lo = jnp.clip(start + (size - 1) // 2, 0, last)
  a, b = v[lo], v[jnp.clip(lo + 1, 0, last)]
  return jnp.where(size >= 2, (a + b) / 2,
                   jnp.where(size == 1, a, (box_low + box_high) / 2))


@functools.partial(jax.jit, static_argnames=('depth', 'num_candidates',
                                             'min_size'))
def grow(keys: jax.Array, z: jax.Array, tree_of: jax.Array,
         budgets: jax.Array | None, *, depth: int,
         num_candidates: int = DEFAULT_CANDIDATES,
         min_size: int = 0) -> tuple[jax.Array, jax.Array]:
  """Grows ``len(keys)`` complete trees of ``depth`` levels of splits.

  Args:
    keys: ``[N]`` one PRNG key per tree.
    z: ``[M, d]`` points in the unit cube.
    tree_of: ``[M]`` int32 tree of each point (each point is in one tree;
      duplicate rows to put a point in several trees).
    depth: the number of split levels D >= 1.
    budgets: ``[depth]`` per-level epsilon of the private median
      (``depth_budgets``; may be traced), or None for the exact median (no
      privacy for the features).
    depth: the number of split levels D >= 1 (static).
    num_candidates: m, the candidates per node of the private median.
    min_size: exact medians only: a node with at most ``min_size`` points
      becomes a leaf (thesis Alg. 10, |S| <= 10): its threshold is its box's
      upper end, so all its points, and any query reaching it, go left.

  Returns:
    ``(attributes, thresholds)``, int32 and float32 ``[N, 2^D - 1]``.
  """
  num_trees = keys.shape[0]
  num_points, d = z.shape
  width = 2 ** (depth - 1)  # nodes of the widest split level
  num_nodes = num_trees * width
  rows = jnp.arange(num_points)

  def level(lv, state):
    box_low, box_high, node, attrs, thrs = state
    lk = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, lv), 3))(
        keys)
    attr = jax.vmap(lambda k: jax.random.randint(k, (width,), 0, d))(
        lk[:, 0]).astype(jnp.int32)                          # [N, W]
    lo = jnp.take_along_axis(box_low, attr[..., None], -1)[..., 0]
    hi = jnp.take_along_axis(box_high, attr[..., None], -1)[..., 0]
    g = tree_of * width + node
    v = z[rows, attr.reshape(-1)[g]]
    if budgets is None:
      size = jax.ops.segment_sum(jnp.ones_like(g), g, num_nodes)
      thr = _exact_median(v, g, num_nodes, lo.reshape(-1), hi.reshape(-1))
      thr = jnp.where(size <= min_size, hi.reshape(-1), thr).reshape(
          num_trees, width)
    else:
      u01 = jax.vmap(lambda k: jax.random.uniform(
          k, (width, num_candidates), z.dtype))(lk[:, 1])
      cand = lo[..., None] + u01 * (hi - lo)[..., None]     # [N, W, m]
      util = median_utility(v, g, cand.reshape(num_nodes, -1))
      eps = budgets[lv]
      pick = jax.vmap(lambda k, u: _exponential.exponential_mechanism(
          k, u, epsilon=eps, sensitivity=MEDIAN_SENSITIVITY))(
              lk[:, 2], util.reshape(num_trees, width, -1))
      thr = jnp.take_along_axis(cand, pick[..., None], -1)[..., 0]
    thr = jnp.clip(thr, lo, hi).astype(z.dtype)
    node = 2 * node + (v > thr.reshape(-1)[g]).astype(jnp.int32)
    onehot = attr[..., None] == jnp.arange(d)
    cut = thr[..., None]
    # children of node j are 2j and 2j+1; only the first 2^lv nodes are live
    box_low = jnp.stack([box_low, jnp.where(onehot, cut, box_low)],
                        2).reshape(num_trees, 2 * width, d)[:, :width]
    box_high = jnp.stack([jnp.where(onehot, cut, box_high), box_high],
                         2).reshape(num_trees, 2 * width, d)[:, :width]
    return (box_low, box_high, node, attrs.at[lv].set(attr),
            thrs.at[lv].set(thr))

  state = (jnp.zeros((num_trees, width, d), z.dtype),
           jnp.ones((num_trees, width, d), z.dtype),
           jnp.zeros((num_points,), jnp.int32),
           jnp.zeros((depth, num_trees, width), jnp.int32),
           jnp.zeros((depth, num_trees, width), z.dtype))
  _, _, _, attrs, thrs = jax.lax.fori_loop(0, depth, level, state)
  lv_of, j_of = _heap_index(depth)
  return attrs[lv_of, :, j_of].T, thrs[lv_of, :, j_of].T


def _heap_index(depth: int) -> tuple[np.ndarray, np.ndarray]:
  """(level, position) of every heap node 0..2^depth - 2."""
  lv = np.concatenate([np.full(2 ** i, i) for i in range(depth)])
  j = np.concatenate([np.arange(2 ** i) for i in range(depth)])
  return lv, j


def route(attributes: jax.Array, thresholds: jax.Array, z: jax.Array,
          tree_of: jax.Array) -> jax.Array:
  """The leaf ``[M]`` reached by point i in its tree ``tree_of[i]``."""
  depth = int(np.log2(attributes.shape[1] + 1))
  rows = jnp.arange(z.shape[0])

  def level(lv, node):
    idx = jnp.left_shift(1, lv) - 1 + node
    a = attributes[tree_of, idx]
    t = thresholds[tree_of, idx]
    return 2 * node + (z[rows, a] > t).astype(jnp.int32)

  node = jax.lax.fori_loop(0, depth, level,
                           jnp.zeros(z.shape[:1], jnp.int32))
  return node


@functools.partial(jax.jit, static_argnames=('num_classes',))
def leaf_counts(attributes: jax.Array, thresholds: jax.Array, z: jax.Array,
                y: jax.Array, tree_of: jax.Array,
                num_classes: int) -> jax.Array:
  """Exact int32 class counts ``[N, 2^D, K]``: each point counts once, in
  the leaf it reaches in its own tree (sensitivity 1 under add/remove-one)."""
  num_trees, num_nodes = attributes.shape
  num_leaves = num_nodes + 1
  leaf = route(attributes, thresholds, z, tree_of)
  onehot = jax.nn.one_hot(y, num_classes, dtype=jnp.int32)
  counts = jax.ops.segment_sum(onehot, tree_of * num_leaves + leaf,
                               num_trees * num_leaves)
  return counts.reshape(num_trees, num_leaves, num_classes)


def noisy_counts(keys: jax.Array, counts: jax.Array, scale) -> jax.Array:
  """int32 counts + exact discrete Laplace noise of ``scale`` per entry
  (``dpjax.noise.discrete_laplace``, a concrete scale), tree t's noise from
  ``keys[t]``."""
  shape = counts.shape[1:]
  lap = jax.vmap(lambda k: noise.discrete_laplace(k, shape, scale=scale))(
      keys)
  return counts.astype(jnp.int32) + lap


def votes(release: TreeEnsemble, x: ArrayLike) -> jax.Array:
  """Summed noisy leaf counts ``[m, K]`` over the trees (thesis step 5)."""
  return _votes(release, _bounds.check_features(
      x, num_features=release.low.shape[0]))


@jax.jit
def _votes(release: TreeEnsemble, x: jax.Array) -> jax.Array:
  x = _bounds.clip_to_box(x, release.low, release.high)
  z = (x - release.low) / (release.high - release.low)
  num_trees = release.attributes.shape[0]
  zeros = jnp.zeros(z.shape[:1], jnp.int32)
  leaves = jax.vmap(lambda a, t: route(a[None], t[None], z, zeros))(
      release.attributes, release.thresholds)              # [N, m]
  per_tree = release.counts[jnp.arange(num_trees)[:, None], leaves]
  return per_tree.sum(0)


@predict.register(TreeEnsemble)
def _predict_trees(release: TreeEnsemble, x: ArrayLike) -> jax.Array:
  return jnp.argmax(votes(release, x), axis=-1).astype(jnp.int32)
