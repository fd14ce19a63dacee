"""Private median-split ensembles: SPE, SSPE (settings I, II) and PTE.

Huang thesis ch. 8: Alg. 11 (supervised, ``spe``), Alg. 12 (semi-supervised,
``sspe``) and Alg. 13 (transductive, ``pte``), on the fixed-shape trees of
``_trees``. Neighbouring datasets differ by adding or removing one record
(the thesis's relation); every docstring also states the replace-one
guarantee, which is twice as large: a replacement is a removal and an
addition that may land in two different nodes.

Deviations from the thesis, all on the side of privacy: trees are complete
(Alg. 10 stops at |S| <= 10, a data-dependent stop that the analysis does not
pay for); the median's candidates come from the node's public box (the
bounds refined by the splits above), not from [min V, max V] of the private
data; the partition into trees is i.i.d. uniform ids (``partition``).

Leaf counts are int32 with exact discrete Laplace noise
(``dpjax.noise.discrete_laplace``; float Laplace's low bits would tell a
count of 0 from 1, Mironov 2012), and each event states the epsilon of the
noise scale actually sampled (``_count_noise.count_epsilon``).
"""

import fractions
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax import _keys
from dpjax import _validate
from dpjax import accounting
from dpjax.nonparametric import _bounds
from dpjax.nonparametric import _count_noise
from dpjax.nonparametric import _exponential
from dpjax.nonparametric import _trees
from dpjax.nonparametric._predict import predict
from dpjax.nonparametric._trees import TreeEnsemble

_SPE = _keys.register('spe', __name__)
_SSPE = _keys.register('sspe', __name__)
_PTE = _keys.register('pte', __name__)


MIN_SIZE = 10  # exact trees: a node of <= 10 points is a leaf (Alg. 10)


def default_depth(num_features: int) -> int:
  """The thesis's depth d (the number of features), capped at 10 so that a
  tree's ``2^D`` leaves stay small.

  Example:
    >>> default_depth(4), default_depth(64)
    (4, 10)
  """
  return max(1, min(int(num_features), _trees.MAX_DEFAULT_DEPTH))


def _check(epsilon, num_trees, depth, num_candidates, num_features) -> int:
  """Checks the public parameters only.

  Nothing is refused for the number of records: a refusal that depends on
  the private n is itself a release of n. With fewer records than trees
  some parts are empty; their trees get random splits and noise-only leaf
  counts, as for any n.
  """
  _validate.positive(epsilon=epsilon)
  _validate.positive_int(num_trees=num_trees)
  _validate.integer_at_least(2, num_candidates=num_candidates)
  depth = default_depth(num_features) if depth is None else depth
  _validate.integer_at_least(1, depth=depth)
  return depth


def _prepare(x, bounds, name):
  x = _bounds.check_features(x, name)
  low, high = _bounds.check_bounds(bounds, x.shape[1])
  return _bounds.to_unit_cube(x, (low, high)), low, high


def _labels(x, y, num_classes, bounds, name='x'):
  z, low, high = _prepare(x, bounds, name)
  y = _bounds.check_labels(y, z.shape[0], num_classes)
  return z, y, low, high


def _split_event(epsilon, eps_s, depth, num_candidates):
  """(epsilon, delta): a record is in one node per depth, so the private
  medians add one ``exponential_mechanism_delta`` per depth; ``epsilon``
  is the total stated."""
  delta = sum(_exponential.exponential_mechanism_delta(float(e),
                                                       num_candidates)
              for e in _trees.depth_budgets(eps_s, depth))
  return accounting.EpsilonDeltaDpEvent(float(epsilon), min(1.0, delta))


def _release(attributes, thresholds, counts, low, high) -> TreeEnsemble:
  return TreeEnsemble(attributes, thresholds, counts,
                      jnp.asarray(low, jnp.float32),
                      jnp.asarray(high, jnp.float32))


def _distribute(key, attributes, thresholds, z, y, tree_of, num_classes,
                epsilon):
  """DistributeLabels (Alg. 11): exact int32 leaf counts + exact discrete
  Laplace noise of scale 1 / epsilon (sensitivity 1)."""
  counts = _trees.leaf_counts(attributes, thresholds, z, y, tree_of,
                              num_classes)
  keys = jax.random.split(key, attributes.shape[0])
  return _trees.noisy_counts(keys, counts,
                             _count_noise.count_noise_scale(epsilon, 1))


def _leaf_epsilon(epsilon) -> float:
  """The epsilon of the leaf noise ``_distribute`` samples (<= epsilon)."""
  return _count_noise.count_epsilon(epsilon, 1)


def _exact_trees(key, z, num_trees, depth):
  """``num_trees`` exact-median trees, each on every row of ``z``."""
  n = z.shape[0]
  rows = jnp.tile(z, (num_trees, 1))
  tree_of = jnp.repeat(jnp.arange(num_trees, dtype=jnp.int32), n)
  return _trees.grow(jax.random.split(key, num_trees), rows, tree_of, None,
                     depth=depth, min_size=MIN_SIZE)


def spe(key: jax.Array, x: ArrayLike, y: ArrayLike, *, epsilon: float,
        bounds: Any, num_classes: int, num_trees: int = 10,
        depth: int | None = None,
        num_candidates: int = _trees.DEFAULT_CANDIDATES,
        split_fraction: float = 0.5) -> tuple[TreeEnsemble, Any]:
  """Supervised Private Ensemble (thesis Alg. 11, with Alg. 10's trees).

  The records are split into ``num_trees`` disjoint parts (i.i.d. uniform
  tree ids from the key, ``partition``). Tree t is grown on part t: every
  node splits a uniformly random attribute at a private median, the
  exponential mechanism over ``num_candidates`` points drawn uniformly from
  the node's public range with utility -|rank(r) - |V|/2| (sensitivity 1/2,
  probability proportional to exp(eps_i u)), eps_i = C eps_s (3/2)^i at depth
  i (``depth_budgets``). Leaves store the part's int32 class counts plus
  exact discrete Laplace noise of scale 1 / eps_l. eps_s =
  ``split_fraction`` eps, eps_l = eps - eps_s.
  ``predict`` sums the noisy counts over the trees and takes the majority.

  Args:
    key: a PRNG key.
    x: ``[n, d]`` private features, clipped to ``bounds``.
    y: ``[n]`` private integer labels in ``[0, num_classes)``.
    epsilon: the total budget, > 0.
    bounds: public ``(low, high)`` feature bounds.
    num_classes: K >= 2.
    num_trees: N >= 1 (any n: a tree whose part is empty releases noise).
    depth: split levels D >= 1; default ``default_depth(d)`` = min(d, 10).
    num_candidates: candidates per private median, >= 2 (the thesis leaves
      the number open).
    split_fraction: the share of epsilon spent on splits, in (0, 1).

  Returns:
    ``(release, event)``: a ``TreeEnsemble`` and its (epsilon, delta) event.

  Privacy: (epsilon, delta)-DP under add/remove-one; (2 epsilon, 2 delta)
  under replace-one; delta sums ``exponential_mechanism_delta(eps_i, m)``
  over the depths (the float noise of the private medians). The event
  states eps_s + 1 / b' (b' >= 1 / eps_l the sampled leaf-noise scale), at
  most epsilon.
  A record is in one tree (parallel composition over trees); at each depth
  it is in one node (parallel composition over nodes) and the depths compose
  to eps_s; it is in one leaf (counts change by 1: eps_l). A replacement
  changes two nodes per depth and two counts.

  References:
    Huang thesis (paper 002), Alg. 10-11, eq. 8.1-8.6.

  Example:
    >>> x = jax.random.uniform(jax.random.key(1), (200, 2))
    >>> y = (x[:, 0] > 0.5).astype(jnp.int32)
    >>> release, event = spe(jax.random.key(2), x, y, epsilon=50.0,
    ...                      bounds=(0.0, 1.0), num_classes=2, num_trees=2)
    >>> predict(release, jnp.array([[0.1, 0.5], [0.9, 0.5]])).tolist()
    [0, 1]
    >>> event.epsilon
    50.0
  """
  key = _keys.stream(_validate.key(key), _SPE)
  z, y, low, high = _labels(x, y, num_classes, bounds)
  depth = _check(epsilon, num_trees, depth, num_candidates, z.shape[1])
  _validate.open_unit(split_fraction=split_fraction)
  eps_s = float(epsilon) * float(split_fraction)
  eps_l = float(epsilon) - eps_s
  k_part, k_tree, k_leaf = jax.random.split(key, 3)
  tree_of = _trees.partition(k_part, z.shape[0], num_trees)
  attrs, thrs = _trees.grow(
      jax.random.split(k_tree, num_trees), z, tree_of,
      jnp.asarray(_trees.depth_budgets(eps_s, depth), z.dtype), depth=depth,
      num_candidates=num_candidates)
  counts = _distribute(k_leaf, attrs, thrs, z, y, tree_of, num_classes,
                       eps_l)
  stated = _count_noise.float_up(fractions.Fraction(eps_s)
                                 + fractions.Fraction(_leaf_epsilon(eps_l)))
  return (_release(attrs, thrs, counts, low, high),
          _split_event(stated, eps_s, depth, num_candidates))


def sspe(key: jax.Array, x_labelled: ArrayLike, y_labelled: ArrayLike,
         x_unlabelled: ArrayLike, *, epsilon: float, bounds: Any,
         num_classes: int, setting: int = 1, num_trees: int = 10,
         depth: int | None = None,
         num_candidates: int = _trees.DEFAULT_CANDIDATES
         ) -> tuple[TreeEnsemble, Any]:
  """Semi-Supervised Private Ensemble (thesis Alg. 12).

  Setting 1 (features and labels private): the unlabelled set D and the
  labelled set S are each split into ``num_trees`` parts; tree t is grown
  privately on D_t with the whole budget (eps_i = C eps (3/2)^i) and its
  leaves get S_t's int32 class counts + exact discrete Laplace noise of
  scale 1 / eps. Setting 2 (labels private, features public): every tree is
  grown with exact medians on the features of S and D together; the leaves
  get S_t's counts + the same noise.

  Args:
    key: a PRNG key.
    x_labelled: ``[n_l, d]`` features of S.
    y_labelled: ``[n_l]`` labels of S.
    x_unlabelled: ``[n_u, d]`` features of D.
    epsilon: the total budget, > 0.
    bounds: public ``(low, high)`` feature bounds.
    num_classes: K >= 2.
    setting: 1 or 2, as above.
    num_trees: N >= 1 (parts may be empty).
    depth: split levels D >= 1; default min(d, 10).
    num_candidates: candidates per private median (setting 1).

  Returns:
    ``(release, event)``: a ``TreeEnsemble`` and its event.

  Privacy: setting 1 is (epsilon, delta)-DP, delta as in ``spe`` (the
  private medians' float noise), under add/remove of one record of S or of
  D (a person's row is in S or in D, not both): a row of D moves only its
  tree's splits (eps by the per-depth composition), a row of S only one
  count of its tree (eps). Under replace-one it is 2 epsilon-DP. Setting 2
  is label-DP: epsilon-DP when one label is added or removed (the features
  of S and D are public, so the trees are fixed) and 2 epsilon-DP when one
  label is changed (two counts of one leaf move); it protects no feature.
  The event is (epsilon, delta) in setting 1 and pure DP in setting 2
  (exact medians), with the epsilon 1 / b' of the sampled leaf-noise scale
  b' >= 1 / epsilon (at most epsilon).

  References:
    Huang thesis (paper 002), Alg. 12.

  Example:
    >>> x = jax.random.uniform(jax.random.key(1), (400, 2))
    >>> y = (x[:, 0] > 0.5).astype(jnp.int32)
    >>> release, _ = sspe(jax.random.key(2), x[:100], y[:100], x[100:],
    ...                   epsilon=50.0, bounds=(0.0, 1.0), num_classes=2,
    ...                   setting=2, num_trees=2)
    >>> predict(release, jnp.array([[0.1, 0.5], [0.9, 0.5]])).tolist()
    [0, 1]
  """
  key = _keys.stream(_validate.key(key), _SSPE)
  z_l, y_l, low, high = _labels(x_labelled, y_labelled, num_classes, bounds,
                                'x_labelled')
  _bounds.check_features(x_unlabelled, 'x_unlabelled', z_l.shape[1])
  z_u, _, _ = _prepare(x_unlabelled, (low, high), 'x_unlabelled')
  if setting not in (1, 2):
    raise ValueError(f'Expected setting=1 or 2, got setting={setting!r}.')
  depth = _check(epsilon, num_trees, depth, num_candidates, z_l.shape[1])
  eps = float(epsilon)
  k_pl, k_pu, k_tree, k_leaf = jax.random.split(key, 4)
  if setting == 1:
    tree_of_u = _trees.partition(k_pu, z_u.shape[0], num_trees)
    attrs, thrs = _trees.grow(
        jax.random.split(k_tree, num_trees), z_u, tree_of_u,
        jnp.asarray(_trees.depth_budgets(eps, depth), z_u.dtype), depth=depth,
        num_candidates=num_candidates)
  else:
    if z_l.shape[0] + z_u.shape[0] == 0:  # public features (label-DP)
      raise ValueError('Expected setting=2 to get at least one row in '
                       'x_labelled or x_unlabelled (public features).')
    attrs, thrs = _exact_trees(k_tree, jnp.concatenate([z_l, z_u]),
                               num_trees, depth)
  tree_of_l = _trees.partition(k_pl, z_l.shape[0], num_trees)
  counts = _distribute(k_leaf, attrs, thrs, z_l, y_l, tree_of_l, num_classes,
                       eps)
  event = (_split_event(epsilon, eps, depth, num_candidates) if setting == 1
           else accounting.pure_dp_event(_leaf_epsilon(eps)))
  return _release(attrs, thrs, counts, low, high), event


def pte(key: jax.Array, x_labelled: ArrayLike, y_labelled: ArrayLike,
        x_unlabelled: ArrayLike, *, epsilon: float, bounds: Any,
        num_classes: int, num_trees: int = 10,
        num_trees_second: int | None = None,
        depth: int | None = None) -> tuple[TreeEnsemble, Any]:
  """Private Transductive Ensemble (thesis Alg. 13); labels private only.

  Ensemble 1 is ``sspe`` setting 2 (``num_trees`` exact-median trees on the
  features of S and D, leaves from S's disjoint parts + exact discrete
  Laplace noise of scale 1 / eps). It labels D; ensemble 2
  (``num_trees_second`` trees, default ``num_trees``, exact medians on S and
  D) takes every tree's leaf counts from all of the newly labelled D, + the
  same noise as the thesis does (that noise is not needed: D's labels are a
  post-processing of ensemble 1). All released counts are int32. The release is
  the union; ``predict`` sums the noisy counts of both.

  Args:
    key: a PRNG key.
    x_labelled: ``[n_l, d]`` public features of S.
    y_labelled: ``[n_l]`` private labels of S.
    x_unlabelled: ``[n_u, d]`` public features of D.
    epsilon: the total budget, > 0.
    bounds: public ``(low, high)`` feature bounds.
    num_classes: K >= 2.
    num_trees: N1 >= 1.
    num_trees_second: N2 >= 1; default N1.
    depth: split levels D >= 1; default min(d, 10).

  Returns:
    ``(release, event)``: a ``TreeEnsemble`` of N1 + N2 trees and
    ensemble 1's pure-DP event (``sspe`` setting 2).

  Privacy: label-DP: epsilon-DP when one label of S is added or removed
  (ensemble 1 spends epsilon; ensemble 2 is post-processing of it and of
  public features), 2 epsilon-DP when one label is changed. The features of
  S and D are public and not protected. The event states 1 / b', the
  epsilon of ensemble 1's sampled leaf-noise scale b' >= 1 / epsilon.

  References:
    Huang thesis (paper 002), Alg. 13.

  Example:
    >>> x = jax.random.uniform(jax.random.key(1), (400, 2))
    >>> y = (x[:, 0] > 0.5).astype(jnp.int32)
    >>> release, _ = pte(jax.random.key(0), x[:100], y[:100], x[100:],
    ...                  epsilon=50.0, bounds=(0.0, 1.0), num_classes=2,
    ...                  num_trees=2)
    >>> release.counts.shape
    (4, 4, 2)
  """
  key = _keys.stream(_validate.key(key), _PTE)
  n2 = num_trees if num_trees_second is None else num_trees_second
  _validate.positive_int(num_trees_second=n2)
  k1, k_tree, k_leaf = jax.random.split(key, 3)
  first, event = sspe(k1, x_labelled, y_labelled, x_unlabelled,
                      epsilon=epsilon, bounds=bounds, num_classes=num_classes,
                      setting=2, num_trees=num_trees, depth=depth)
  low, high = first.low, first.high
  z_u, _, _ = _prepare(x_unlabelled, (low, high), 'x_unlabelled')
  z_l, _, _ = _prepare(x_labelled, (low, high), 'x_labelled')
  y_u = predict(first, x_unlabelled)
  depth = int(first.attributes.shape[1] + 1).bit_length() - 1
  attrs, thrs = _exact_trees(k_tree, jnp.concatenate([z_l, z_u]), n2, depth)
  rows = jnp.tile(z_u, (n2, 1))
  tree_of = jnp.repeat(jnp.arange(n2, dtype=jnp.int32), z_u.shape[0])
  counts = _distribute(k_leaf, attrs, thrs, rows, jnp.tile(y_u, n2),
                       tree_of, num_classes, float(epsilon))
  release = TreeEnsemble(
      jnp.concatenate([first.attributes, attrs]),
      jnp.concatenate([first.thresholds, thrs]),
      jnp.concatenate([first.counts, counts]), low, high)
  return release, event
