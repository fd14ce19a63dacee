"""Correlated noise of the matrix mechanism, streamed: G_t + (C^{-1} Z)_t.

For a lower-triangular strategy C with ``bands`` diagonals, x = C^{-1} Z
solves C x = Z by forward substitution, x_t = (Z_t - sum_{j=1}^{bands-1}
C[t, t-j] x_{t-j}) / C[t, t], so step t needs only the last ``bands - 1``
noise outputs: the state is O(bands x parameters) (Choquette-Choo et al.
2023, "(Amplified) banded matrix factorization", Alg. 9; Kairouz et al.
2021 and Denisov et al. 2022 for the matrix mechanism view of DP-FTRL).
Z_t is i.i.d. N(0, stddev^2) per coordinate, drawn from ``fold_in(stream,
t)`` of the ``correlated_noise`` stream of the key, so the whole noise
sequence is a pure function of the key.
"""

from typing import Any, NamedTuple

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _keys
from dpjax import _numerics
from dpjax import _validate
from dpjax import noise as noise_lib
from dpjax import _clipped_sum
from dpjax import clipping
from dpjax import correlated_noise as cn_lib
from dpjax.transforms._dpsgd_noise import _scalar
from dpjax.transforms._dpsgd_noise import _states
from dpjax.transforms._normalizing import NormalizeState
from dpjax.transforms._state import KeyStepState

_STREAM = _keys.register('correlated_noise', __name__)


class CorrelatedNoiseState(NamedTuple):
  """State of ``add_correlated_noise``.

  Attributes:
    stream: the noise stream (``KeyStepState``: key and steps taken).
    history: the last ``bands - 1`` noise outputs (float32, leading axis,
      newest first), a pytree like the updates.
    stddev: float32, the stddev of Z at the last step.
    l2_sensitivity: float32, ``clipped_norm_bound(l2_norm_clip)`` of a
      clipped chain (inf when the factory had no ``l2_norm_clip``).
    sum_bound: float32, the bound of the last step's ``ClippedSum`` (inf
      before a step and for a bare sum).
    column_norm: float32, the largest column norm of C (its sensitivity to
      one participation).
    bands: int32, the strategy's bands.
    num_steps: int32, the strategy's n (-1 for a Toeplitz strategy, which
      continues past n).
  """
  stream: KeyStepState
  history: Any
  stddev: jax.Array
  l2_sensitivity: jax.Array
  sum_bound: jax.Array
  column_norm: jax.Array
  bands: jax.Array
  num_steps: jax.Array


def as_strategy(strategy: Any) -> cn_lib.Strategy:
  """A ``Strategy`` as it is, or a concrete matrix validated into one."""
  if isinstance(strategy, cn_lib.Strategy):
    return strategy
  return cn_lib.lower_triangular(strategy)


def add_correlated_noise(strategy: Any, *, stddev: Any, key: jax.Array,
                         l2_norm_clip: Any = None
                         ) -> optax.GradientTransformation:
  """Adds the t-th row of C^{-1} Z to the t-th aggregated update.

  Args:
    strategy: a ``dpjax.correlated_noise.Strategy`` or a concrete square,
      lower-triangular, invertible matrix C (validated).
    stddev: the stddev of Z, >= 0 (may be traced). For BandMF on clipped
      sums: ``noise_multiplier * clipped_norm_bound(C) * column norm``.
    key: PRNG key (required); step t draws Z_t from ``fold_in(stream, t)``.
    l2_norm_clip: if given, the updates must be a ``ClippedSum`` clipped to
      at most it (as ``add_dpsgd_noise``); recorded for
      ``bandmf_step_event``. None accepts any aggregate (not recordable).

  Returns:
    An optax transformation with ``CorrelatedNoiseState``; memory
    (bands - 1) x the update's size. Steps past n repeat row n - 1's
    recursion (exact for a Toeplitz C); ``bandmf_step_event`` refuses them
    for a non-Toeplitz C.

  Raises:
    ValueError: naming ``strategy``, ``stddev`` or ``updates``.

  Privacy:
    Releases C^{-1}(C G + Z) prefix by prefix: the Gaussian mechanism on
    C G with noise stddev (ibid.), whose sensitivity is
    ``dpjax.correlated_noise.sensitivity`` times the clip norm;
    ``bandmf_step_event`` reads the event from the state.

  Example:
    >>> s = dpjax.correlated_noise.banded_toeplitz([1.0, 0.5], 8)
    >>> tx = add_correlated_noise(s, stddev=1.0, key=jax.random.key(0))
    >>> out, st = tx.update(jnp.zeros(3), tx.init(jnp.zeros(3)))
    >>> out.shape, st.history.shape
    ((3,), (1, 3))
  """
  strategy = as_strategy(strategy)
  _validate.non_negative(stddev=stddev)
  _validate.finite(stddev=stddev)
  clipped = l2_norm_clip is not None
  if clipped:
    _validate.l2_norm_clip(l2_norm_clip)
  band = np.asarray(strategy.band, np.float32)
  n, bands = band.shape
  column_norm = float(strategy.column_norms().max())
  stream0 = KeyStepState.create(key, stream=_STREAM)

  def bound():
    return (clipping.clipped_norm_bound(l2_norm_clip) if clipped
            else float('inf'))

  def state(stream, history, sum_bound):
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    return CorrelatedNoiseState(
        stream, history, f32(stddev), f32(bound()), f32(sum_bound),
        f32(column_norm), jnp.asarray(bands, jnp.int32),
        jnp.asarray(-1 if strategy.toeplitz else n, jnp.int32))

  def init_fn(params):
    history = jax.tree.map(
        lambda p: jnp.zeros((bands - 1,) + jnp.shape(p), jnp.float32), params)
    return state(stream0, history, float('inf'))

  def update_fn(updates, s, params=None):
    del params
    updates, sum_bound = _clipped_sum.unwrap(updates, bound(),
                                             clipped=clipped)
    updates = _numerics.zero_nonfinite(updates)
    like = jax.tree.map(lambda u: jnp.zeros(jnp.shape(u), jnp.float32),
                        updates)
    z = noise_lib.tree_noise(noise_lib.gaussian, s.stream.step_key(), like,
                             stddev=stddev)
    row = jnp.asarray(band)[jnp.minimum(s.stream.count, n - 1)]

    def step(zt, hist):
      acc = zt
      if bands > 1:
        acc = zt - jnp.tensordot(row[1:], hist, axes=1)
      x = acc / row[0]
      if bands > 1:
        hist = jnp.concatenate([x[None], hist[:-1]], axis=0)
      return x, hist

    pairs = jax.tree.map(step, z, s.history)
    outer = jax.tree.structure(updates)
    x, history = jax.tree.transpose(outer, jax.tree.structure((0, 0)), pairs)
    out = jax.tree.map(lambda u, xi: u + xi.astype(jnp.result_type(u)),
                       updates, x)
    return out, state(s.stream.advance(), history, sum_bound)

  return optax.GradientTransformation(init_fn, update_fn)


def bandmf_step_event(opt_state: Any, sampler: Any, *, rtol: float = 1e-6
                      ) -> tuple[dp_accounting.DpEvent, tuple[jax.Array, int]]:
  """The DpEvent of the step that produced ``opt_state`` (amplified BandMF).

  Under cyclic Poisson sampling with b partitions and a strategy of at most
  b bands, a run of T steps is as private as T' = ceil(T / b) Poisson-
  subsampled Gaussian steps with noise multiplier sigma = stddev / (clip x
  column norm) (Choquette-Choo et al. 2023, Thm. 4). The first step of each
  cycle (count - 1 divisible by b) returns that step's event,
  ``sampler.dp_event(sigma)``; the others ``NoOpDpEvent``; a ledger then
  composes T' of them, as ``dpjax.correlated_noise.bandmf_event``.

  Args:
    opt_state: the state after the step (or a part holding its
      ``CorrelatedNoiseState`` and ``NormalizeState``).
    sampler: a ``dpjax.sampling.CyclicPoissonSampler``.
    rtol: tolerance of the ``normalize`` divisor check.

  Returns:
    ``(event, (key, step))`` for ``ledger.record(event, noise=...)``.

  Raises:
    ValueError: no or several correlated-noise states, a chain without
      ``l2_norm_clip``, a sum clipped to more than it, a sampler without
      ``num_partitions`` or with fewer partitions than the strategy's bands
      (a schedule whose participations the banded sensitivity does not
      cover), a step past a non-Toeplitz strategy's n, or a ``normalize``
      divisor other than the sampler's expected batch size.

  Example:
    >>> s = dpjax.correlated_noise.banded_toeplitz([1.0, 0.5], 8)
    >>> tx = dpjax.bandmf(0.1, 1.0, 1.0, 10.0, s, key=jax.random.key(0))
    >>> _, st = tx.update(jnp.ones((2, 3)), tx.init(jnp.zeros(3)),
    ...                   jnp.zeros(3), mask=jnp.ones(2, bool))
    >>> sampler = dpjax.sampling.CyclicPoissonSampler(40, 0.5, 2)
    >>> event, (_, step) = bandmf_step_event(st, sampler)
    >>> type(event).__name__, step
    ('PoissonSampledDpEvent', 0)
  """
  found = _states(opt_state, CorrelatedNoiseState)
  if len(found) != 1:
    raise ValueError('Expected one add_correlated_noise state in the '
                     f'optimizer state, found {len(found)}.')
  s, = found
  count = int(_scalar(s.stream.count, 'count'))
  if count < 1:
    raise ValueError('The state is from before any step: pass the state the '
                     'step returned.')
  clip = _scalar(s.l2_sensitivity, 'l2_sensitivity')
  if not np.isfinite(clip):
    raise ValueError('The chain adds correlated noise without l2_norm_clip: '
                     'it has no privacy guarantee to record.')
  sum_bound = _scalar(s.sum_bound, 'sum_bound')
  if _clipped_sum.exceeds(sum_bound, clip):
    raise ValueError(f'The step noised a sum clipped to {sum_bound} with '
                     f'noise calibrated to l2_norm_clip={clip}.')
  partitions = getattr(sampler, 'num_partitions', None)
  bands = int(_scalar(s.bands, 'bands'))
  if partitions is None:
    raise ValueError('Expected sampler= a cyclic sampler with num_partitions '
                     '(e.g. dpjax.sampling.CyclicPoissonSampler): amplified '
                     'BandMF assumes its participation schedule.')
  if bands > partitions:
    raise ValueError(f'Expected strategy bands={bands} <= the sampler\'s '
                     f'num_partitions={partitions}: the sampler\'s '
                     'participations are closer than the bands.')
  num_steps = int(_scalar(s.num_steps, 'num_steps'))
  if 0 <= num_steps < count:
    raise ValueError(f'The run took step {count - 1} of a strategy with '
                     f'n={num_steps} steps.')
  expected = float(sampler.expected_batch_size)
  for n in _states(opt_state, NormalizeState):
    divisor = _scalar(n.expected_batch_size, 'expected_batch_size')
    if not np.isclose(divisor, expected, rtol=rtol, atol=0):
      raise ValueError(f'normalize divides by {divisor}, but the sampler\'s '
                       f'expected batch size is {expected}.')
  sigma = _scalar(s.stddev, 'stddev') / (clip * _scalar(s.column_norm,
                                                        'column_norm'))
  event = (sampler.dp_event(sigma) if (count - 1) % partitions == 0
           else dp_accounting.NoOpDpEvent())
  return event, (s.stream.key, count - 1)
