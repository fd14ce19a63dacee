"""Fig. 8.2: geometric vs uniform split budgets, by distance to the median.

The thesis grows Alg. 10's tree on normal data with the split budget eps_s
spread over the D depths either geometrically (eps_i = C eps_s (3/2)^i,
eq. 8.6, ``dpjax.nonparametric.depth_budgets``) or uniformly (eps_s / D
each), and compares the mean distance between each node's private median
and the true median of the points in that node. Here: one tree on
``median_samples`` standard normal points in ``median_features``
dimensions, public bounds +-4 per feature (points beyond are clipped), the
same key (attributes and candidates) for both allocations, distances in the
unit-cube coordinates of the bounds, averaged over the non-empty nodes.
"""

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import nonparametric as npm
from dpjax.nonparametric import _trees

BOUND = 4.0


def budgets(kind: str, epsilon: float, depth: int) -> np.ndarray:
  """Per-depth split budgets summing to ``epsilon``.

  >>> budgets('uniform', 1.0, 4).tolist()
  [0.25, 0.25, 0.25, 0.25]
  """
  if kind == 'geometric':
    return npm.depth_budgets(epsilon, depth)
  if kind == 'uniform':
    return np.full(depth, epsilon / depth)
  raise ValueError(f'Expected kind in (geometric, uniform), got {kind!r}.')


def node_median_distance(z: np.ndarray, attributes: np.ndarray,
                         thresholds: np.ndarray, depth: int) -> float:
  """Mean over non-empty nodes of |threshold - median of the node's points
  on the node's attribute|, for one heap-ordered tree.

  >>> z = np.array([[0.1], [0.2], [0.3], [0.9]])
  >>> float(node_median_distance(z, np.array([0]), np.array([0.5]), 1))
  0.25
  """
  node = np.zeros(len(z), np.int64)
  total, count = 0.0, 0
  for lv in range(depth):
    width = 2 ** lv
    heap = width - 1 + node
    attr = attributes[heap]
    v = z[np.arange(len(z)), attr]
    order = np.lexsort((v, node))
    vs = v[order]
    size = np.bincount(node, minlength=width)
    start = np.cumsum(size) - size
    live = size > 0
    lo = (start + (size - 1) // 2)[live]
    hi = (start + size // 2)[live]
    median = (vs[lo] + vs[hi]) / 2
    thr = thresholds[width - 1 + np.arange(width)[live]]
    total += float(np.sum(np.abs(thr - median)))
    count += int(live.sum())
    node = 2 * node + (v > thresholds[heap]).astype(np.int64)
  return total / max(count, 1)


def median_distances(seed: int, cfg) -> dict[str, dict[str, dict[str, float]]]:
  """{depth: {eps: {allocation: mean distance}}} for one seed."""
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((cfg.median_samples, cfg.median_features))
  z = jnp.asarray(np.clip((x + BOUND) / (2 * BOUND), 0.0, 1.0), jnp.float32)
  zn = np.asarray(z)
  tree_of = jnp.zeros((z.shape[0],), jnp.int32)
  keys = jax.random.split(jax.random.key(seed), 1)
  out = {}
  for depth in cfg.median_depths:
    per = out.setdefault(str(depth), {})
    for eps in cfg.median_epsilons:
      row = per.setdefault(str(eps), {})
      for kind in ('geometric', 'uniform'):
        attrs, thrs = _trees.grow(
            keys, z, tree_of, jnp.asarray(budgets(kind, eps, depth),
                                          jnp.float32), depth=depth)
        row[kind] = node_median_distance(zn, np.asarray(attrs[0]),
                                         np.asarray(thrs[0]), depth)
  return out
