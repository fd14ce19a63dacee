"""Histogram classifiers: non-private, NoisyReg (label-DP), fully private.

Features are clipped to public bounds and mapped onto [0, 1]^d, optionally
through a Gaussian JL projection Phi (the compressed histogram, on Phi x with
bounds derived from Phi and the box only), then binned into cells of width
1 / b. ``histogram`` and ``noisy_reg`` store only the occupied cells, found
again exactly at prediction; an empty query cell takes the label of the
nearest occupied cell within squared cell-index distance m (the thesis's
"within distance d", Alg. 2: the Moore neighbourhood and beyond along a
few axes), else class ``default_class``. ``dp_histogram`` releases
every one of the b^m cells.
"""

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax import _keys
from dpjax import _validate
from dpjax import accounting
from dpjax.nonparametric import _bounds
from dpjax.nonparametric import _cells
from dpjax.nonparametric import _count_noise
from dpjax.nonparametric import _padding
from dpjax.nonparametric import _predict

_HISTOGRAM_PROJECTION = _keys.register('histogram_projection', __name__)
_NOISY_REG = _keys.register('noisy_reg', __name__)
_PRIVATE_HISTOGRAM = _keys.register('private_histogram', __name__)

MAX_DENSE_CELLS = 1 << 20


class HistogramRelease(NamedTuple):
  """A histogram over its occupied cells (a pytree of arrays).

  Attributes:
    cells: int32 ``[P, m]`` occupied cells, lexicographic, then sentinel rows.
    num_cells: int32 scalar, the number of occupied cells.
    scores: float32 ``[P, K]`` per-cell class fractions (noisy if private).
    low, high: float32 ``[d]`` public feature bounds.
    projection: float32 ``[m, d]`` JL matrix, or ``[0, d]`` for none.
    bins: int32 scalar b.
    default_class: int32 scalar, the label where no neighbour is found.
  """
  cells: jax.Array
  num_cells: jax.Array
  scores: jax.Array
  low: jax.Array
  high: jax.Array
  projection: jax.Array
  bins: jax.Array
  default_class: jax.Array
  privacy_model = 'none'


class NoisyRegRelease(HistogramRelease):
  """``noisy_reg``'s release; ``privacy_model = 'label'`` (label-DP only)."""
  privacy_model = 'label'


class DpHistogramRelease(NamedTuple):
  """``dp_histogram``'s release: noisy counts of all b^m cells.

  Attributes:
    counts: int32 ``[b^m, K]`` noisy class counts (cell index sum c_i b^i):
      exact counts plus exact discrete Laplace noise.
    low, high: float32 ``[d]`` public feature bounds.
    projection: float32 ``[m, d]`` JL matrix, or ``[0, d]`` for none.
    bins: int32 scalar b.
  """
  counts: jax.Array
  low: jax.Array
  high: jax.Array
  projection: jax.Array
  bins: jax.Array
  privacy_model = 'add_remove'


def _to_unit(x, low, high, projection):
  u = (_bounds.clip_to_box(x, low, high) - low) / (high - low)
  if projection.shape[0]:
    u = _cells.project_unit(u, projection)
  return u


def _prepare(key, x, y, bounds, num_classes, bins, projection_dim):
  """Validated float32 data, bounds and projection shared by all three."""
  _validate.positive_int(bins=bins)
  x = _bounds.check_features(x).astype(jnp.float32)
  n, d = x.shape
  y = _bounds.check_labels(y, n, num_classes)
  low, high = _bounds.check_bounds(bounds, d)
  if projection_dim is None:
    projection = jnp.zeros((0, d), jnp.float32)
  else:
    _validate.positive_int(projection_dim=projection_dim)
    projection = _cells.jl_projection(key, d, projection_dim)
  return (x, y, jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32),
          projection)


@functools.partial(jax.jit, static_argnums=(5, 6))
def _occupied(x, y, w, low, high, num_classes, bins, projection):
  """Occupied cells, their number and int32 class counts of a padded
  dataset."""
  cells = _cells.cell_coordinates(_to_unit(x, low, high, projection), bins)
  unique, group, num = _cells.group_cells(cells, w > 0, bins)
  class_counts = jnp.zeros((x.shape[0], num_classes), jnp.int32).at[
      group, y].add(w.astype(jnp.int32), mode='drop')  # label K: nowhere
  return unique, num, class_counts


def histogram(x: ArrayLike, y: ArrayLike, *, bounds: Any, num_classes: int,
              bins: int, key: jax.Array | None = None,
              projection_dim: int | None = None) -> HistogramRelease:
  """The non-private histogram classifier (majority class of each cell).

  A baseline: no noise, no privacy. ``key`` is needed only to draw the JL
  projection when ``projection_dim`` is given.

  Args:
    x: ``[n, d]`` features, clipped to ``bounds``.
    y: ``[n]`` labels in ``[0, num_classes)``.
    bounds: public ``(low, high)`` feature bounds.
    num_classes: K >= 2.
    bins: cells per axis b >= 1.
    key: PRNG key of the projection (only with ``projection_dim``).
    projection_dim: m, the compressed histogram's dimension, or None.

  Returns:
    A ``HistogramRelease`` read by ``dpjax.nonparametric.predict``.

  References:
    Huang thesis (paper 002), eq. (4.20), Alg. 2, section 4.4 (compressed).

  Example:
    >>> release = histogram(jnp.array([[0.1], [0.9]]), jnp.array([0, 1]),
    ...                     bounds=(0.0, 1.0), num_classes=2, bins=2)
    >>> dpjax.nonparametric.predict(release, jnp.array([[0.2], [0.7]]))
    Array([0, 1], dtype=int32)
  """
  if projection_dim is not None:
    key = _keys.stream(_validate.key(key), _HISTOGRAM_PROJECTION)
  x, y, low, high, projection = _prepare(key, x, y, bounds, num_classes,
                                         bins, projection_dim)
  x, y, w = _padding.pad_rows(x, y)
  unique, num, counts = _occupied(x, y, w, low, high, num_classes, bins,
                                  projection)
  counts = counts.astype(jnp.float32)
  scores = counts / jnp.maximum(jnp.sum(counts, axis=1, keepdims=True), 1.0)
  return HistogramRelease(unique, num, scores, low, high, projection,
                          jnp.int32(bins), jnp.int32(0))


def _noisy_reg_event(epsilon: float, num_classes: int = 2):
  """The label-DP event of ``noisy_reg`` (features public).

  Pure DP with the epsilon of the discrete Laplace noise actually sampled
  (``Delta / b'``, Delta = 1 for two classes and 2 otherwise): at most
  ``epsilon``.

  Example:
    >>> _noisy_reg_event(2.0)
    EpsilonDeltaDpEvent(epsilon=2.0, delta=0.0)
  """
  _validate.positive(epsilon=epsilon)
  return accounting.pure_dp_event(
      _count_noise.count_epsilon(epsilon, _label_sensitivity(num_classes)))


def _label_sensitivity(num_classes: int) -> int:
  """L1 change of the released counts when one label changes."""
  return 1 if num_classes == 2 else 2


def noisy_reg(key: jax.Array, x: ArrayLike, y: ArrayLike, *, epsilon: float,
              bounds: Any, num_classes: int, bins: int,
              projection_dim: int | None = None,
              default_class: int = 0):
  """NoisyReg (Alg. 4): per-cell class fractions plus Laplace(1/(n_j eps)).

  For binary labels the released score of cell j is eta_j (the fraction of
  class 1) plus noise of scale 1 / (n_j eps), as in the thesis; for K > 2
  classes the fraction vector gets scale 2 / (n_j eps) per class (its L1
  sensitivity to one label is 2 / n_j). The noise is exact: the integer
  class count c_j gets discrete Laplace noise Z of scale 1 / eps (2 / eps
  for K > 2; ``dpjax.noise.discrete_laplace``) and the score is (c_j + Z) /
  n_j in float32, the discrete Laplace on the grid (1 / n_j) Z, a function
  of the noisy integer and the public n_j alone, so no float bit depends on
  the labels beyond it (Mironov 2012). Only the occupied cells are stored;
  an empty query cell is answered by Alg. 2's neighbour search
  (post-processing).

  Args:
    key: a PRNG key (noise, and the projection if ``projection_dim``).
    x: ``[n, d]`` features (public under label-DP), clipped to ``bounds``.
    y: ``[n]`` private labels in ``[0, num_classes)``.
    epsilon: the label-privacy budget, > 0, concrete.
    bounds: public ``(low, high)`` feature bounds.
    num_classes: K >= 2.
    bins: cells per axis b >= 1.
    projection_dim: m for the compressed histogram on Phi x, or None.
    default_class: the label where no neighbour lies within distance m.

  Returns:
    ``(release, event)``: a ``NoisyRegRelease`` (``privacy_model =
    'label'``, float32 scores on the grid (1 / n_j) Z) and its pure
    label-DP ``EpsilonDeltaDpEvent``, at the epsilon of the noise actually
    sampled (at most ``epsilon``).

  Privacy: epsilon-DP in the label-DP model only: features public, labels
  private, neighbouring datasets differ in one label (for this model
  add/remove and replace-one of a label coincide). n_j is then fixed, a
  label moves c_j by 1 (L1 2 for the K-class vector), and each record lies
  in one cell (parallel composition). NOT differentially private when
  features are private: the noise scale 1/(n_j eps) depends on the data, so
  adding a point to a cell changes the scale and the density ratio of far
  outputs is unbounded (a test shows it). Thm 5.5 of the thesis claims
  eps-DP without this restriction. For full DP use ``dp_histogram``.

  References:
    Huang thesis (paper 002), Alg. 4, Thm 5.5-5.6, Alg. 2; Canonne, Kamath,
    Steinke 2020 (discrete Laplace).

  Example:
    >>> x = jnp.array([[0.1], [0.15], [0.9], [0.95]])
    >>> release, event = noisy_reg(jax.random.key(0), x, jnp.array([0, 0, 1, 1]),
    ...                            epsilon=50.0, bounds=(0.0, 1.0),
    ...                            num_classes=2, bins=2)
    >>> release.privacy_model, int(release.num_cells)
    ('label', 2)
  """
  key = _keys.stream(_validate.key(key), _NOISY_REG)
  _validate.positive(epsilon=epsilon)
  k_proj, k_noise = jax.random.split(key)
  x, y, low, high, projection = _prepare(k_proj, x, y, bounds, num_classes,
                                         bins, projection_dim)
  if not 0 <= default_class < num_classes:
    raise ValueError(f'Expected default_class={default_class} in '
                     f'[0, {num_classes}).')
  sensitivity = _label_sensitivity(num_classes)
  scale = _count_noise.count_noise_scale(epsilon, sensitivity)
  m = projection.shape[0] or x.shape[1]
  x, y, w = _padding.pad_rows(x, y)
  unique, num, counts = _occupied(x, y, w, low, high, num_classes, bins,
                                  projection)
  # No dataset occupies more than b^m cells: rows from there on are always
  # empty sentinels, released as 0 without noise (a data-independent cut).
  rows = min(counts.shape[0], bins ** m)
  if num_classes == 2:  # one noisy count per cell: class 1
    noisy = _count_noise.add_count_noise(k_noise, counts[:rows, 1], scale)
  else:
    noisy = _count_noise.add_count_noise(k_noise, counts[:rows], scale)
  noisy = jnp.pad(noisy, [(0, counts.shape[0] - rows)]
                  + [(0, 0)] * (noisy.ndim - 1))
  scores = _noisy_fractions(counts, noisy)
  release = NoisyRegRelease(unique, num, scores, low, high, projection,
                            jnp.int32(bins), jnp.int32(default_class))
  return release, _noisy_reg_event(epsilon, num_classes)


@jax.jit
def _noisy_fractions(counts, noisy):
  """Scores (noisy count) / n_j from the exact int32 counts and the noisy
  int32 counts (class 1's ``[P]`` for two classes, ``[P, K]`` otherwise)."""
  n_j = jnp.maximum(jnp.sum(counts, axis=1), 1).astype(jnp.float32)
  if noisy.ndim == 1:
    eta1 = noisy.astype(jnp.float32) / n_j
    return jnp.stack([1.0 - eta1, eta1], axis=1)
  return noisy.astype(jnp.float32) / n_j[:, None]


def _dp_histogram_event(epsilon: float):
  """The epsilon-DP (add/remove) event of ``dp_histogram``.

  The epsilon is that of the discrete Laplace noise actually sampled,
  1 / b' (``dpjax.noise.discrete_laplace_scale``): at most ``epsilon``.

  Example:
    >>> _dp_histogram_event(1.0)
    EpsilonDeltaDpEvent(epsilon=1.0, delta=0.0)
  """
  _validate.positive(epsilon=epsilon)
  return accounting.pure_dp_event(_count_noise.count_epsilon(epsilon, 1))


def dp_histogram(key: jax.Array, x: ArrayLike, y: ArrayLike, *,
                 epsilon: float, bounds: Any, num_classes: int,
                 bins: int, projection_dim: int | None = None,
                 max_cells: int = MAX_DENSE_CELLS):
  """The fully private histogram: Laplace(1/eps) on every (cell, class) count.

  The release is int32 counts plus exact discrete Laplace noise of scale
  1 / eps (``dpjax.noise.discrete_laplace``): integers, so no float low bits
  tell a count of 0 from 1 (Mironov 2012). All b^m cells are released (releasing only the occupied ones would leak
  which cells hold data), so the release is dense and refuses when b^m
  exceeds ``max_cells``; the compressed histogram (small ``projection_dim``
  m) is where it is usable. Prediction: the argmax of the noisy counts of
  the query's cell.

  Args:
    key: a PRNG key (noise, and the projection if ``projection_dim``).
    x: ``[n, d]`` private features, clipped to ``bounds``.
    y: ``[n]`` private labels in ``[0, num_classes)``.
    epsilon: the privacy budget, > 0, concrete (inf: exact counts; above
      1024 the noise stays at the sampler's smallest scale 2^-10).
    bounds: public ``(low, high)`` feature bounds.
    num_classes: K >= 2.
    bins: cells per axis b >= 1.
    projection_dim: m for the histogram on Phi x, or None (m = d).
    max_cells: the largest b^m allowed.

  Returns:
    ``(release, event)``: a ``DpHistogramRelease`` and its pure-DP
    ``EpsilonDeltaDpEvent``, at the epsilon of the noise actually sampled
    (1 / b', at most ``epsilon``).

  Privacy: epsilon-DP under add-or-remove-one (one record moves one count
  by 1: L1 sensitivity 1 against discrete Laplace of scale b' >= 1/eps);
  2 epsilon-DP under replace-one (L1 2). Features and labels are both
  private. The event's epsilon is 1 / b', the sampled scale's.

  References:
    Huang thesis (paper 002), section 5.2 (private histogram), section 4.4
    (compressed histogram); Canonne, Kamath, Steinke 2020 (discrete
    Laplace).

  Example:
    >>> release, event = dp_histogram(
    ...     jax.random.key(0), jnp.array([[0.1], [0.9]]), jnp.array([0, 1]),
    ...     epsilon=1.0, bounds=(0.0, 1.0), num_classes=2, bins=4)
    >>> release.counts.shape, event.epsilon
    ((4, 2), 1.0)
  """
  key = _keys.stream(_validate.key(key), _PRIVATE_HISTOGRAM)
  _validate.positive(epsilon=epsilon)
  scale = _count_noise.count_noise_scale(epsilon, 1)
  k_proj, k_noise = jax.random.split(key)
  x, y, low, high, projection = _prepare(k_proj, x, y, bounds, num_classes,
                                         bins, projection_dim)
  m = projection.shape[0] or x.shape[1]
  if bins ** m > max_cells:
    raise ValueError(f'Expected bins^dim <= max_cells={max_cells}, got '
                     f'{bins}^{m} = {bins ** m} cells; use a smaller '
                     f'projection_dim or fewer bins.')
  x, y, w = _padding.pad_rows(x, y)
  counts = _dense_counts(x, y, w, low, high, projection, num_classes, bins,
                         bins ** m)
  counts = _count_noise.add_count_noise(k_noise, counts, scale)
  release = DpHistogramRelease(counts, low, high, projection,
                               jnp.int32(bins))
  return release, _dp_histogram_event(epsilon)


def _flat_index(cells, bins):
  powers = jnp.cumprod(jnp.concatenate([
      jnp.ones((1,), jnp.int32),
      jnp.full((cells.shape[1] - 1,), bins, jnp.int32)]))
  return jnp.sum(cells * powers, axis=1)


@functools.partial(jax.jit, static_argnums=(6, 7, 8))
def _dense_counts(x, y, w, low, high, projection, num_classes, bins,
                  num_cells):
  cells = _cells.cell_coordinates(_to_unit(x, low, high, projection), bins)
  return jnp.zeros((num_cells, num_classes), jnp.int32).at[
      _flat_index(cells, bins), y].add(w.astype(jnp.int32), mode='drop')


@jax.jit
def _predict_sparse(release, x):
  u = _to_unit(x, release.low, release.high, release.projection)
  q = _cells.cell_coordinates(u, release.bins)
  idx = _cells.find_cells(release.cells, release.num_cells, q)
  near = _cells.nearest_cells(release.cells, release.num_cells, q,
                              q.shape[1])
  idx = jnp.where(idx >= 0, idx, near)
  label = jnp.argmax(release.scores, axis=1).astype(jnp.int32)
  return jnp.where(idx >= 0, label[jnp.maximum(idx, 0)],
                   release.default_class)


@_predict.predict.register(HistogramRelease)
def _(release: HistogramRelease, x: ArrayLike) -> jax.Array:
  x = _bounds.check_features(x, num_features=release.low.shape[0])
  x = x.astype(jnp.float32)
  return _predict_sparse(release, x)


@_predict.predict.register(DpHistogramRelease)
def _(release: DpHistogramRelease, x: ArrayLike) -> jax.Array:
  x = _bounds.check_features(x, num_features=release.low.shape[0])
  x = x.astype(jnp.float32)
  return _predict_dense(release, x)


@jax.jit
def _predict_dense(release, x):
  u = _to_unit(x, release.low, release.high, release.projection)
  q = _cells.cell_coordinates(u, release.bins)
  label = jnp.argmax(release.counts, axis=1).astype(jnp.int32)
  return label[_flat_index(q, release.bins)]
