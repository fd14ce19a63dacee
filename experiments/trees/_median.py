"""Fig. 8.2: geometric vs uniform split budgets, by distance to the median.

The thesis grows Alg. 10's tree on normal data with the split budget eps_s
spread over the D depths either geometrically (eps_i = C eps_s (3/2)^i,
eq. 8.6, ``dpjax.nonparametric.depth_budgets``) or uniformly (eps_s / D
each), and compares the mean distance between each node's private median
and the true median of the points in that node. Here: one tree on
``median_num_examples`` standard normal points in ``median_dimension``
dimensions, public bounds +-4 per feature (points beyond are clipped), the
same randomness (attributes, candidates, mechanism keys) for both
allocations, distances in the unit-cube coordinates of the bounds, averaged
over the non-empty nodes. The tree is grown here with dpjax's public
``exponential_mechanism`` and SPE's utility and candidates, since SPE
itself fixes the geometric allocation.
"""

import functools

import jax
import numpy as np

from dpjax import nonparametric as npm

BOUND = 4.0
CANDIDATES = 32  # SPE's default number of median candidates per node
SENSITIVITY = 0.5  # of the median utility -|rank(r) - |V|/2| (SPE's)


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


@functools.partial(jax.jit, static_argnums=3)
def _pick(key, utilities, epsilon, width):
  """One exponential-mechanism draw per node row (public dpjax primitive)."""
  keys = jax.random.split(key, width)
  return jax.vmap(lambda k, u: npm.exponential_mechanism(
      k, u, epsilon=epsilon, sensitivity=SENSITIVITY))(keys, utilities)


def tree_median_distance(seed: int, z: np.ndarray, level_budgets) -> float:
  """Grows one Alg. 10 tree (random attribute, private median over
  ``CANDIDATES`` points uniform in the node's box, budget
  ``level_budgets[i]`` at depth i) and returns the mean over its non-empty
  nodes of |private median - true median of the node's points|. The same
  ``seed`` draws the same attributes, candidates and mechanism keys for any
  budgets, so two allocations are compared on identical randomness.
  """
  rng = np.random.default_rng(seed)
  key = jax.random.key(seed)
  n, d = z.shape
  depth = len(level_budgets)
  pad = 2 ** (depth - 1)
  node = np.zeros(n, np.int64)
  low, high = np.zeros((1, d)), np.ones((1, d))
  total, count = 0.0, 0
  for lv in range(depth):
    width = 2 ** lv
    attr = rng.integers(0, d, width)
    lo, hi = low[np.arange(width), attr], high[np.arange(width), attr]
    cand = lo[:, None] + rng.uniform(size=(width, CANDIDATES)) * (
        hi - lo)[:, None]
    v = z[np.arange(n), attr[node]]
    order = np.lexsort((v, node))
    vs, ns = v[order], node[order]
    size = np.bincount(node, minlength=width)
    start = np.cumsum(size) - size
    rank = np.zeros((width, CANDIDATES))
    live = size > 0
    below = (vs[:, None] <= cand[ns]).astype(np.float64)
    rank[live] = np.add.reduceat(below, start[live], axis=0)
    util = np.zeros((pad, CANDIDATES), np.float32)
    util[:width] = -np.abs(rank - size[:, None] / 2)
    pick = np.asarray(_pick(jax.random.fold_in(key, lv), util,
                            np.float32(level_budgets[lv]), pad))[:width]
    thr = cand[np.arange(width), pick]
    lo_i = (start + (size - 1) // 2)[live]
    hi_i = (start + size // 2)[live]
    total += float(np.sum(np.abs(thr[live] - (vs[lo_i] + vs[hi_i]) / 2)))
    count += int(live.sum())
    right = v > thr[node]
    cut = np.eye(d, dtype=bool)[attr]
    low = np.stack([low, np.where(cut, thr[:, None], low)], 1).reshape(-1, d)
    high = np.stack([np.where(cut, thr[:, None], high), high],
                    1).reshape(-1, d)
    node = 2 * node + right
  return total / max(count, 1)


def median_distances(seed: int, cfg) -> dict[str, dict[str, dict[str, float]]]:
  """{depth: {eps: {allocation: mean distance}}} for one seed."""
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((cfg.median_num_examples, cfg.median_dimension))
  z = np.clip((x + BOUND) / (2 * BOUND), 0.0, 1.0)
  out = {}
  for depth in cfg.median_depths:
    per = out.setdefault(str(depth), {})
    for i, eps in enumerate(cfg.median_epsilons):
      per[str(eps)] = {
          kind: tree_median_distance(1000 * seed + i, z,
                                     budgets(kind, eps, depth))
          for kind in ('geometric', 'uniform')}
  return out
