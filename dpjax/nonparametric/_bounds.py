"""Public feature bounds: validation, clipping to them, scaling to [0, 1]^d.

Non-parametric releases take the feature bounds as a public input. Data are
clipped to the bounds (a point outside them is moved to the nearest point of
the box, which is what the privacy analysis assumes); nothing is ever scaled
by the minimum and maximum of the private data. A user with no public bounds
can spend part of the budget on ``dp_bounds``.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax import _keys
from dpjax import _validate
from dpjax import accounting
from dpjax.nonparametric import _exponential

_STREAM = _keys.register('private_bounds', __name__)


def check_bounds(bounds: Any, num_features: int) -> tuple[np.ndarray,
                                                          np.ndarray]:
  """Validates ``bounds = (low, high)``; returns float64 arrays ``[d]``.

  Scalars broadcast to every feature. Raises ``ValueError`` when a bound is
  missing, not finite, of the wrong length, or when low >= high.

  Example:
    >>> check_bounds((0.0, [1.0, 2.0]), 2)
    (array([0., 0.]), array([1., 2.]))
  """
  if bounds is None:
    raise ValueError(
        'Expected bounds=(low, high): feature bounds are a public input. '
        'Pass bounds known without looking at the data, or spend budget on '
        'dpjax.nonparametric.dp_bounds.')
  try:
    low, high = bounds
  except (TypeError, ValueError):
    raise ValueError(f'Expected bounds=(low, high), got {bounds!r}.') from None
  low = np.broadcast_to(np.asarray(low, np.float64), (num_features,)).copy()
  high = np.broadcast_to(np.asarray(high, np.float64), (num_features,)).copy()
  if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
    raise ValueError(f'Expected finite bounds, got low={low}, high={high}.')
  bad = np.flatnonzero(~(low < high))
  if bad.size:
    j = int(bad[0])
    raise ValueError(f'Expected bounds low < high for every feature, got '
                     f'low={low[j]} >= high={high[j]} at feature {j}.')
  # Releases compute in float32: bounds that meet there (or a range that
  # overflows) would put every record in one cell.
  with np.errstate(over='ignore'):
    width = high.astype(np.float32) - low.astype(np.float32)
  bad = np.flatnonzero(~(np.isfinite(width) & (width > 0)))
  if bad.size:
    j = int(bad[0])
    raise ValueError(f'Expected bounds low < high with a finite width in '
                     f'float32 for every feature, got low={low[j]}, '
                     f'high={high[j]} at feature {j}.')
  return low, high


def clip_to_box(x: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
  """Clips ``x`` to the box; a NaN (possible only under jit) becomes low.

  Example:
    >>> clip_to_box(jnp.array([[-1.0, jnp.nan]]), 0.0, 1.0)
    Array([[0., 0.]], dtype=float32)
  """
  return jnp.clip(jnp.where(jnp.isnan(x), low, x), low, high)


def check_features(x: ArrayLike, name: str = 'x',
                   num_features: int | None = None) -> jax.Array:
  """Checks ``x`` is ``[n, d]`` and, when concrete, free of NaN; returns it.

  The error names the argument and the rule only, never a value or a row of
  private data. Under jit a NaN cannot be seen; ``clip_to_box`` then maps it
  to the lower bound. ``num_features``, if given, is the width d required.
  """
  x = jnp.asarray(x)
  if x.ndim != 2:
    raise ValueError(f'Expected {name} of shape [n, d], got shape {x.shape}.')
  if num_features is not None and x.shape[1] != num_features:
    raise ValueError(f'Expected {name} with {num_features} features, got '
                     f'{x.shape[1]}.')
  if not jnp.issubdtype(x.dtype, jnp.floating):
    x = x.astype(jnp.float32)
  if not isinstance(x, jax.core.Tracer) and np.any(np.isnan(np.asarray(x))):
    raise ValueError(f'Expected {name} without NaN.')
  return x


def check_labels(y: ArrayLike, num_examples: int, num_classes: int,
                 name: str = 'y') -> jax.Array:
  """Checks integer labels ``[n]`` in ``[0, num_classes)``; returns int32.

  The error names the argument and the rule, never a label value. Under jit
  (traced labels) nothing can be refused: a label that is not an integer in
  ``[0, num_classes)`` becomes ``num_classes``, which every count drops, so
  it is never counted as another class.
  """
  _validate.integer_at_least(2, num_classes=num_classes)
  y = jnp.asarray(y)
  if y.shape != (num_examples,):
    raise ValueError(f'Expected {name} of shape ({num_examples},) to match '
                     f'x, got shape {y.shape}.')
  if not isinstance(y, jax.core.Tracer):
    arr = np.asarray(y)
    if (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))
        or np.any((arr < 0) | (arr >= num_classes))):
      raise ValueError(f'Expected {name} to hold integer labels in '
                       f'[0, num_classes={num_classes}).')
    return y.astype(jnp.int32)
  valid = (y >= 0) & (y < num_classes) & (y == jnp.round(y))
  return jnp.where(valid, y, num_classes).astype(jnp.int32)


def to_unit_cube(x: ArrayLike, bounds: Any) -> jax.Array:
  """Clips ``x`` ``[n, d]`` to the public bounds and maps them onto [0, 1]^d.

  Example:
    >>> to_unit_cube(jnp.array([[-1.0, 5.0], [0.5, 1.0]]), (0.0, 2.0))
    Array([[0.  , 1.  ],
           [0.25, 0.5 ]], dtype=float32)
  """
  x = check_features(x)
  low, high = check_bounds(bounds, x.shape[1])
  low = jnp.asarray(low, x.dtype)
  high = jnp.asarray(high, x.dtype)
  return (clip_to_box(x, low, high) - low) / (high - low)


def dp_bounds(key: jax.Array, x: ArrayLike, *, epsilon: float,
              domain: Any, quantiles: tuple[float, float] = (0.05, 0.95),
              num_candidates: int = 1024):
  """Per-feature private quantiles as bounds, when no public bounds exist.

  For each feature, the lower and upper ``quantiles`` are chosen by the
  exponential mechanism over ``num_candidates`` evenly spaced points of a
  public, generous ``domain`` (a range known without the data, e.g. the
  physical range of a sensor), with utility -|#{x <= r} - q n|, whose
  replace-one sensitivity is 1. The 2 d draws share ``epsilon`` equally
  (basic composition). Without any public domain there is no private way to
  bound the data; this function then refuses.

  Args:
    key: a PRNG key.
    x: ``[n, d]`` private features.
    epsilon: the total budget of the bounds, > 0.
    domain: ``(low, high)``, public and data-independent.
    quantiles: the (lower, upper) quantiles, 0 <= lower < upper <= 1.
    num_candidates: grid size per feature, >= 2.

  Returns:
    ``((low, high), event)``: float64 numpy bounds ``[d]`` with low < high,
    and the event to record before any release that uses them.

  Privacy: (epsilon, delta)-DP (replace-one), delta = 2 d times
  ``exponential_mechanism_delta(epsilon / (2 d), num_candidates)`` (the
  float noise's bounded support); the returned event says so.

  Example:
    >>> x = jnp.linspace(0.0, 1.0, 1000)[:, None]
    >>> (low, high), event = dp_bounds(jax.random.key(0), x,
    ...                                     epsilon=1.0, domain=(-10, 10))
    >>> bool(-0.5 < low[0] < high[0] < 1.5), event.epsilon
    (True, 1.0)
  """
  key = _keys.stream(_validate.key(key), _STREAM)
  _validate.positive(epsilon=epsilon)
  _validate.integer_at_least(2, num_candidates=num_candidates)
  x = check_features(x)
  if domain is None:
    raise ValueError('dp_bounds needs a public domain=(low, high) known '
                     'without the data; without one no private bound exists.')
  q_low, q_high = quantiles
  if not 0 <= q_low < q_high <= 1:
    raise ValueError(f'Expected quantiles 0 <= lower < upper <= 1, got '
                     f'{quantiles}.')
  n, d = x.shape
  d_low, d_high = check_bounds(domain, d)
  grid = jnp.linspace(0.0, 1.0, num_candidates)
  candidates = (jnp.asarray(d_low, jnp.float32)[:, None]
                + jnp.asarray(d_high - d_low, jnp.float32)[:, None] * grid)
  ranks = jnp.sum(x.T[:, None, :] <= candidates[:, :, None], axis=-1)
  per_draw = float(epsilon) / (2 * d)
  keys = jax.random.split(key, 2 * d).reshape(2, d)
  picks = []
  for q, k in zip((q_low, q_high), keys):
    u = -jnp.abs(ranks.astype(jnp.float32) - q * n)
    picks.append(jax.vmap(
        lambda kk, uu: _exponential.exponential_mechanism(
            kk, uu, epsilon=per_draw, sensitivity=1.0))(k, u))
  low = np.asarray(jnp.take_along_axis(candidates, picks[0][:, None], 1))[:, 0]
  high = np.asarray(jnp.take_along_axis(candidates, picks[1][:, None], 1))[:, 0]
  step = (d_high - d_low) / (num_candidates - 1)
  high = np.maximum(high, low + step)  # post-processing keeps low < high
  # 2 d draws of epsilon / (2 d), each with the float noise's delta.
  delta = 2 * d * _exponential.exponential_mechanism_delta(per_draw,
                                                           num_candidates)
  event = accounting.EpsilonDeltaDpEvent(float(epsilon), min(1.0, delta))
  return (low.astype(np.float64), high.astype(np.float64)), event
