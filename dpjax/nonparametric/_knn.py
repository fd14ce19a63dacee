"""DP-kNN (Alg. 3): noisy class counts of the k nearest neighbours.

The N test points are part of the release's input; the release holds, for
each of them, the int32 class counts among its k nearest training points
plus exact discrete Laplace noise. Nearest neighbours come from a jitted, blocked search
(``lax.map`` over blocks of test points, ``lax.top_k``) in the public box
rescaled to [0, 1]^d, so no [n, N] matrix bigger than a block exists.
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
from dpjax.nonparametric import _count_noise
from dpjax.nonparametric import _neighbours
from dpjax.nonparametric import _padding
from dpjax.nonparametric import _predict

_STREAM = _keys.register('dp_knn', __name__)


class DpKnnRelease(NamedTuple):
  """DP-kNN's release: the test points and their noisy class counts.

  Attributes:
    x_test: float32 ``[N, d]`` the (public) test points.
    counts: int32 ``[N, K]`` noisy neighbour class counts (exact counts
      plus exact discrete Laplace noise).
    low, high: float32 ``[d]`` public feature bounds.
  """
  x_test: jax.Array
  counts: jax.Array
  low: jax.Array
  high: jax.Array
  privacy_model = 'add_remove'


def _dp_knn_event(epsilon: float, num_test: int):
  """The epsilon-DP event of one ``dp_knn`` release of ``num_test`` points.

  The epsilon is that of the discrete Laplace noise actually sampled,
  2 N / b' (``dpjax.noise.discrete_laplace_scale``): at most ``epsilon``.

  Example:
    >>> _dp_knn_event(2.0, 4)
    EpsilonDeltaDpEvent(epsilon=2.0, delta=0.0)
  """
  _validate.positive(epsilon=epsilon)
  _validate.positive_int(num_test=num_test)
  return accounting.pure_dp_event(
      _count_noise.count_epsilon(epsilon, 2 * num_test))


def dp_knn(key: jax.Array, x: ArrayLike, y: ArrayLike, x_test: ArrayLike, *,
           epsilon: float, bounds: Any, num_classes: int,
           k: int | None = None):
  """Private kNN answers for a fixed test set (Alg. 3, Laplace(2N/eps)).

  For each of the N test points, the int32 class counts among its k nearest
  training points (squared Euclidean distance after clipping to ``bounds``
  and rescaling the box to [0, 1]^d; ties to the lower training index) plus
  exact discrete Laplace noise of scale 2 N / epsilon per class
  (``dpjax.noise.discrete_laplace``; integers, so no float low bits leak
  the counts, Mironov 2012). Binary: counts (S + alpha,
  k - S + beta) are the thesis's alpha, beta; its rule (S + alpha) / (k +
  alpha + beta) >= 1/2 equals the argmax of the noisy counts whenever k +
  alpha + beta > 0, and prediction uses the argmax.

  Args:
    key: a PRNG key.
    x: ``[n, d]`` private training features.
    y: ``[n]`` private labels in ``[0, num_classes)``.
    x_test: ``[N, d]`` public test points.
    epsilon: the budget of the whole release (all N answers), > 0,
      concrete (inf: exact counts).
    bounds: public ``(low, high)`` feature bounds.
    num_classes: K >= 2.
    k: neighbours per test point, >= 1; default 2 N (the thesis's choice);
      capped at n (with no training point, every count is noise alone).

  Returns:
    ``(release, event)``: a ``DpKnnRelease`` and its pure-DP
    ``EpsilonDeltaDpEvent``, at the epsilon of the noise actually sampled
    (2 N / b', at most ``epsilon``).
    ``predict(release, x)`` answers each row of x with the noisy argmax of
    the nearest released test point (exact at the test points themselves).

  Privacy: epsilon-DP under add-or-remove-one AND under replace-one. Adding,
  removing or replacing one training point changes each test point's
  neighbour set by at most one swap (relative order of the others is kept),
  so its count vector moves by L1 <= 2; over the N test points 2N, against
  discrete Laplace of scale b' >= 2N / eps (the event states 2N / b'). Deviation: the thesis (Thm 5.1) uses Laplace(N / eps),
  counting sensitivity 1 per test point; that is 2 epsilon-DP.

  References:
    Huang thesis (paper 002), Alg. 3, Thm 5.1, section 5.4 (k = 2N);
    Canonne, Kamath, Steinke 2020 (discrete Laplace).

  Example:
    >>> x = jnp.array([[0.0], [0.1], [0.9], [1.0]])
    >>> release, event = dp_knn(jax.random.key(0), x, jnp.array([0, 0, 1, 1]),
    ...                         jnp.array([[0.05]]), epsilon=1.0,
    ...                         bounds=(0.0, 1.0), num_classes=2)
    >>> release.counts.shape, event.epsilon
    ((1, 2), 1.0)
  """
  key = _keys.stream(_validate.key(key), _STREAM)
  _validate.positive(epsilon=epsilon)
  x = _bounds.check_features(x).astype(jnp.float32)
  n, d = x.shape
  y = _bounds.check_labels(y, n, num_classes)
  x_test = _bounds.check_features(x_test, 'x_test', num_features=d)
  x_test = x_test.astype(jnp.float32)
  num_test = x_test.shape[0]
  if num_test == 0:
    raise ValueError('Expected x_test with at least one (public) test point.')
  if k is None:
    k = 2 * num_test
  _validate.positive_int(k=k)
  scale = _count_noise.count_noise_scale(epsilon, 2 * num_test)
  low, high = _bounds.check_bounds(bounds, d)
  low = jnp.asarray(low, jnp.float32)
  high = jnp.asarray(high, jnp.float32)
  if n == 0:  # no neighbours: the release is the noise alone, no refusal
    counts = jnp.zeros((num_test, num_classes), jnp.int32)
  else:
    x, y, w = _padding.pad_rows(x, y)
    counts = knn_counts(x, y, w > 0, x_test, low, high, min(k, n),
                        num_classes)
  counts = _count_noise.add_count_noise(key, counts, scale)
  return (DpKnnRelease(x_test, counts, low, high),
          _dp_knn_event(epsilon, num_test))


@functools.partial(jax.jit, static_argnums=(6, 7))
def knn_counts(x, y, valid, x_test, low, high, k, num_classes):
  """Exact int32 class counts ``[N, K]`` among the k nearest valid rows."""
  u = _unit(x, low, high)
  idx, _ = _neighbours.nearest(_unit(x_test, low, high), u, valid, k)
  return jnp.sum(jax.nn.one_hot(y[idx], num_classes, dtype=jnp.int32),
                 axis=1)


def _unit(x, low, high):
  return (_bounds.clip_to_box(x, low, high) - low) / (high - low)


@jax.jit
def _predict_knn(release, x):
  u = _unit(x, release.low, release.high)
  t = _unit(release.x_test, release.low, release.high)
  idx, _ = _neighbours.nearest(u, t, jnp.ones(t.shape[0], bool), 1)
  label = jnp.argmax(release.counts, axis=1).astype(jnp.int32)
  return label[idx[:, 0]]


@_predict.predict.register(DpKnnRelease)
def _(release: DpKnnRelease, x: ArrayLike) -> jax.Array:
  x = _bounds.check_features(x, num_features=release.low.shape[0])
  x = x.astype(jnp.float32)
  return _predict_knn(release, x)
