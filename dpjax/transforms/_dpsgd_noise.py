"""The one Gaussian privatizer: noise on a clipped sum, and the event of what ran.

``add_dpsgd_noise(noise_multiplier, key=..., strategy=..., noise=...)`` adds
Gaussian noise of stddev sigma times the bound the ``ClippedSum`` carries,
the only place the clip bound lives (Abadi et al. 2016, Alg. 1). Its
variants are options of the one transform, with one state type:

* the strategy: ``None`` (identity, DP-SGD) or a lower-triangular C, whose
  t-th row of C^{-1} Z is streamed with the last ``bands - 1`` noise
  outputs (BandMF / DP-FTRL: Choquette-Choo et al. 2023, Alg. 9; Kairouz et
  al. 2021; Denisov et al. 2022);
* the arithmetic: ``'float'`` (float32 noise, the ideal mechanism's
  accounting) or ``'exact'`` (randomized rounding to a power-of-two grid
  plus exact discrete Gaussian noise, ``_exact_gaussian``).

The state keeps the values that ran (sigma, the bound, its unit, whether
only linear maps touched the sum) and answers its own event:
``dpjax.accounting.step_event(opt_state, sampler)`` reads it, so a ledger
cannot record a sigma, a bound or a unit other than those of the step.
"""

from typing import Any, NamedTuple

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _clipped_sum
from dpjax import _keys
from dpjax import _numerics
from dpjax import _validate
from dpjax import correlated_noise as cn_lib
from dpjax import noise as noise_lib
from dpjax import sampling
from dpjax.transforms import _exact_gaussian
from dpjax.transforms._state import KeyStepState

_FLOAT_STREAM = _keys.register('dpsgd_noise', __name__)
_CORRELATED_STREAM = _keys.register('correlated_noise', __name__)
NOISE_PATHS = ('float', 'exact')


class Correlation(NamedTuple):
  """The strategy's streaming state and shape (BandMF).

  Attributes:
    history: the last ``bands - 1`` outputs of C^{-1} Z (newest first), a
      pytree like the updates.
    column_norm: float32, the largest column norm of C.
    bands: int32, the strategy's bands.
    num_steps: int32, the strategy's n (-1 for Toeplitz, which continues).
    strategy: ``StaticStrategy``, the strategy itself as static structure
      (no leaves: strategies are public and fixed): the sensitivity of a run
      without amplification is read from it.
  """
  history: Any
  column_norm: jax.Array
  bands: jax.Array
  num_steps: jax.Array
  strategy: 'StaticStrategy'


@jax.tree_util.register_pytree_node_class
class StaticStrategy:
  """A ``Strategy`` carried in a state as pytree structure, not leaves.

  It passes ``jit``, ``scan`` and ``vmap`` unchanged (compared by identity)
  and adds nothing to the state's size.

  Attributes:
    strategy: the ``dpjax.correlated_noise.Strategy`` the noise streams.
  """

  def __init__(self, strategy: cn_lib.Strategy):
    self.strategy = strategy

  def tree_flatten(self):
    return (), self.strategy

  @classmethod
  def tree_unflatten(cls, strategy, children):
    del children
    return cls(strategy)


class DpsgdNoiseState(NamedTuple):
  """State of ``add_dpsgd_noise``: the values the last step ran.

  Attributes:
    stream: the noise stream (``KeyStepState``: key and steps taken).
    noise_multiplier: float32, sigma of the last step (at init the
      factory's).
    l2_sensitivity: float32, the bound the last step's ``ClippedSum``
      carried (the noise stddev over sigma; nan before a step).
    unit: int32, index in ``('example', 'user', 'unclipped')`` of that sum's
      unit (-1 before a step).
    linear: bool, False if a non-linear map touched the sum (traced runs).
    grid: ``ExactGrid`` on the exact path, else None.
    correlation: ``Correlation`` under a strategy, else None.
  """
  stream: KeyStepState
  noise_multiplier: jax.Array
  l2_sensitivity: jax.Array
  unit: jax.Array
  linear: jax.Array
  grid: _exact_gaussian.ExactGrid | None
  correlation: Correlation | None

  privacy_role = 'privatizer'

  def noise_handle(self) -> tuple[jax.Array, int]:
    """``(key, step)`` of the noise the last step drew (for the ledger)."""
    return self.stream.last_step()

  def step_event(self, sampler: Any, parts: list[Any]
                 ) -> dp_accounting.DpEvent:
    """The event of the step that produced this state (see the module doc).

    Args:
      sampler: the step's batch sampler.
      parts: the other privacy states of the chain (``privacy_states``):
        ``NormalizeState`` divisors, at most one ``AdaptiveClipState``.
    """
    if sampler is None:
      raise ValueError('Expected sampler= the step\'s batch sampler (e.g. '
                       'dpjax.sampling.PoissonSampler): DP-SGD is accounted '
                       'by its sampling. sampler=None is for full-batch '
                       'steps (dp_compgd, dp_projected_gd) only.')
    count = self.noise_handle()[1] + 1
    unit = int(_scalar(self.unit, 'unit'))
    if _clipped_sum.UNITS[unit] == 'unclipped':
      raise ValueError('The chain adds noise to an unclipped sum (the '
                       'noisy-SGD ablation): it has no privacy guarantee to '
                       'record.')
    if not bool(np.asarray(self.linear)):
      raise ValueError('The step noised a ClippedSum that a map other than '
                       'scaling and adding by Python numbers had changed (a '
                       'non-linear map, or arithmetic by an array, which may '
                       'depend on the data): its bound no longer bounds it.')
    want = getattr(sampler, 'unit', 'example')
    if _clipped_sum.UNITS[unit] != want:
      raise ValueError(
          f'The step noised a sum clipped per {_clipped_sum.UNITS[unit]}, '
          f'but the sampler accounts per {want}: '
          + ('one user with k examples moves it by k x the bound. Clip per '
             'user (dpjax.clipping.clipped_user_grad_sum).'
             if want == 'user' else 'account with the user-level sampler.'))
    sigma = _scalar(self.noise_multiplier, 'noise_multiplier')
    if not np.isfinite(sigma) or sigma < 0:
      raise ValueError(f'The step ran noise_multiplier={sigma}.')
    bound = _scalar(self.l2_sensitivity, 'l2_sensitivity')
    if not (np.isfinite(bound) and bound >= 0):
      raise ValueError(f'The step noised a sum of bound {bound}.')
    sigma = _with_count_noise(sigma, parts, exact=self.grid is not None)
    _check_divisors(parts, sampler)
    if self.correlation is not None:
      return _bandmf_event(self.correlation, sampler, sigma, count)
    if self.grid is not None:
      return _exact_gaussian.exact_step_event(self.grid, sampler, sigma)
    return sampler.dp_event(sigma)


def _scalar(x: Any, name: str) -> float:
  x = np.asarray(x)
  if x.shape:
    raise ValueError(f'Expected one run\'s state, got {name} of shape '
                     f'{x.shape}: index the run (e.g. the seed axis) first.')
  return float(x)


def effective_noise_multiplier(grad_noise_multiplier: float,
                               count_stddev: float) -> float:
  """(sigma_grad^-2 + (2 count_stddev)^-2)^(-1/2); 0 if either is 0."""
  if grad_noise_multiplier == 0 or count_stddev == 0:
    return 0.0
  return float((grad_noise_multiplier**-2 + (2 * count_stddev)**-2)**-0.5)


def _with_count_noise(sigma: float, parts: list[Any], exact: bool) -> float:
  """sigma combined with adaptive clipping's count release (Andrew et al.
  2021, Thm 1), whatever the strategy."""
  counts = [p for p in parts if getattr(p, 'privacy_role', '') == 'count']
  if len(counts) > 1:
    raise ValueError(f'Expected at most one adaptive clipping state, found '
                     f'{len(counts)}.')
  if not counts:
    return sigma
  if exact:
    raise ValueError('Adaptive clipping with the exact noise path is not '
                     'supported: its count noise is float Gaussian.')
  return effective_noise_multiplier(
      sigma, _scalar(counts[0].count_stddev, 'count_stddev'))


def _check_divisors(parts: list[Any], sampler: Any, rtol: float = 1e-6):
  expected = float(sampler.expected_batch_size)
  for p in parts:
    if getattr(p, 'privacy_role', '') != 'divisor':
      continue
    divisor = _scalar(p.expected_batch_size, 'expected_batch_size')
    if not np.isclose(divisor, expected, rtol=rtol, atol=0):
      raise ValueError(f'normalize divides by {divisor}, but the sampler\'s '
                       f'expected batch size is {expected}: the step is not '
                       'the mechanism the sampler accounts for.')


def _bandmf_event(c: Correlation, sampler: Any, sigma: float,
                  count: int) -> dp_accounting.DpEvent:
  """The event of step ``count - 1`` of a strategy under the participation
  pattern of a ``CyclicPoissonSampler`` (example i in partition i mod b,
  step t on partition t mod b; Choquette-Choo et al. 2023, "(Amplified)
  banded matrix factorization", Alg. 2). The pattern is the sampler's own,
  never declared: any other sampler is refused.

  * Rate q < 1 and bands <= b: amplified (ibid., Thm. 4): the first step of
    each cycle is ``sampler.dp_event(sigma)``, the others are free.
  * Rate 1 (every step takes its whole partition, no amplification): the
    run of T steps is one Gaussian mechanism of sensitivity clip x
    Delta_T, Delta_T^2 = ``cyclic_squared_sensitivities(C)[T]`` (ibid.,
    Sec. 3), read from the strategy the state ran. Step t is the Gaussian
    of Delta_{t+1}^2 - Delta_t^2; Gaussians compose by adding their
    squared sensitivities, so the steps compose to that one mechanism.
  """
  if not isinstance(sampler, sampling.CyclicPoissonSampler):
    raise ValueError(
        f'Expected sampler= a dpjax.sampling.CyclicPoissonSampler for a '
        f'strategy, got {type(sampler).__name__}: correlated noise is '
        'accounted on the cyclic partition schedule, whose participation '
        'pattern the sampler fixes. (Epochs reshuffled each epoch, as '
        'ShuffleSampler draws them, give an example two participations in '
        'consecutive steps across an epoch boundary.)')
  partitions = sampler.num_partitions
  bands = int(_scalar(c.bands, 'bands'))
  num_steps = int(_scalar(c.num_steps, 'num_steps'))
  if 0 <= num_steps < count:
    raise ValueError(f'The run took step {count - 1} of a strategy with '
                     f'n={num_steps} steps.')
  if sampler.sampling_rate == 1:
    return _unamplified_event(c, sampler, sigma, count)
  if bands > partitions:
    raise ValueError(f'Expected strategy bands={bands} <= the sampler\'s '
                     f'num_partitions={partitions}: the sampler\'s '
                     'participations are closer than the bands (amplification '
                     'needs the bands within one cycle; a rate of 1 accounts '
                     'the schedule without amplification).')
  return (sampler.dp_event(sigma) if (count - 1) % partitions == 0
          else dp_accounting.NoOpDpEvent())


def _unamplified_event(c: Correlation, sampler: Any, sigma: float,
                       count: int) -> dp_accounting.DpEvent:
  """Step ``count - 1`` of the fixed-partition schedule (see above)."""
  # The diagonals as the noise used them (float32).
  band = np.asarray(c.strategy.strategy.band, np.float32).astype(np.float64)
  if count > band.shape[0]:
    raise ValueError(f'The run took step {count - 1} of a strategy with '
                     f'n={band.shape[0]} steps: without amplification its '
                     'sensitivity is that of the n x n strategy.')
  if sampler.max_batch_size <= sampler.partition_size:
    raise ValueError(f'Expected max_batch_size={sampler.max_batch_size} > the '
                     f'partition size {sampler.partition_size} at rate 1: a '
                     'truncated partition is not the fixed schedule.')
  sq = cn_lib.cyclic_squared_sensitivities(band, sampler.num_partitions)
  increment = max(float(sq[count] - sq[count - 1]), 0.0)
  if increment == 0:
    return dp_accounting.NoOpDpEvent()
  column_norm = _scalar(c.column_norm, 'column_norm')
  return dp_accounting.GaussianDpEvent(sigma * column_norm
                                       / float(np.sqrt(increment)))


def as_strategy(strategy: Any) -> cn_lib.Strategy:
  """A ``Strategy`` as it is, or a concrete matrix validated into one."""
  if isinstance(strategy, cn_lib.Strategy):
    return strategy
  return cn_lib.lower_triangular(strategy)


def _correlate(band: np.ndarray, count: jax.Array, z: Any,
               history: Any) -> tuple[Any, Any]:
  """x_t = (z_t - sum_{j>=1} C[t, t-j] x_{t-j}) / C[t, t], per leaf."""
  n, bands = band.shape
  row = jnp.asarray(band)[jnp.minimum(count, n - 1)]

  def step(zt, hist):
    acc = zt
    if bands > 1:
      acc = zt - jnp.tensordot(row[1:], hist, axes=1)
    x = acc / row[0]
    if bands > 1:
      hist = jnp.concatenate([x[None], hist[:-1]], axis=0)
    return x, hist

  pairs = jax.tree.map(step, z, history)
  outer = jax.tree.structure(z)
  return jax.tree.transpose(outer, jax.tree.structure((0, 0)), pairs)


def add_dpsgd_noise(noise_multiplier: Any, *, key: jax.Array,
                    strategy: Any = None, noise: str = 'float',
                    gamma: float | None = None
                    ) -> optax.GradientTransformation:
  """Adds Gaussian noise of stddev sigma x the sum's own bound.

  ``update(updates, state)``: ``updates`` is the ``ClippedSum`` of an
  aggregator (``clip_per_example``, ``dpjax.clipping.clipped_grad_sum``,
  ``clipped_user_grad_sum``, ``sharded_clipped_grad_sum``); the output is
  its noisy value (a plain pytree). The noise is calibrated to the bound the
  sum carries, after any scaling or adding applied to it (``ClippedSum``).

  Args:
    noise_multiplier: sigma >= 0 (may be traced on the float path).
    key: PRNG key (required). Step t draws from ``fold_in(stream, t)``
      with sigma folded into the stream and the sum's bound into the step's
      key (``dpjax._keys.fold_public``), so privatizers that differ in
      either draw independent noise from one key (a sweep over sigma or C,
      ``dpsgd`` beside ``adaptive_dpsgd``); runs that share both, and the
      key, draw one noise: give each run its own key. A second ``init``
      restarts at step 0, which a ledger refuses to record twice.
    strategy: None (DP-SGD, fresh noise each step) or a lower-triangular C
      (``dpjax.correlated_noise.Strategy`` or a concrete matrix): step t
      adds the t-th row of C^{-1} Z with Z of stddev sigma x bound x C's
      largest column norm (BandMF). Memory: (bands - 1) x the update.
    noise: ``'float'`` (float32 Gaussian) or ``'exact'`` (the sum rounded
      at random to a power-of-two grid plus exact discrete Gaussian noise;
      concrete sigma and bound; no strategy).
    gamma: the exact path's grid spacing (a power of two); default
      ``exact_gaussian_grid(sigma x bound, bound=bound)``.

  Returns:
    An optax transformation with ``DpsgdNoiseState``. Non-finite
    coordinates of the sum are replaced by 0 before the noise.

  Raises:
    ValueError: naming ``updates`` for a bare pytree or a sum changed by a
      non-linear map (concrete values; traced ones are refused at
      recording); naming an invalid argument.

  Privacy:
    On a sum of bound C per unit, one step is the Gaussian mechanism of
    noise multiplier sigma (under a strategy, on C G with sensitivity C x
    column norm); ``dpjax.accounting.step_event(state, sampler)`` is its
    (amplified) event, read from the state; ``noise='float'`` states the
    ideal real-valued mechanism's guarantee, whose low-order bits the
    float32 release can leak beyond it (Mironov 2012; Jin et al. 2022):
    ``noise='exact'`` closes that.

  Example:
    >>> tx = add_dpsgd_noise(1.1, key=jax.random.key(0))
    >>> summed = dpjax.clipping.clip_and_sum(jnp.ones((2, 3)), 1.0,
    ...                                      jnp.ones(2, bool)).grad_sum
    >>> _, s = tx.update(summed, tx.init(None))
    >>> int(s.stream.count), float(s.noise_multiplier)
    (1, 1.100000023841858)
  """
  if noise not in NOISE_PATHS:
    raise ValueError(f'Expected noise={noise!r} in {NOISE_PATHS}.')
  exact = noise == 'exact'
  _validate.non_negative(noise_multiplier=noise_multiplier)
  _validate.finite(noise_multiplier=noise_multiplier)
  if exact and not _validate.concrete(noise_multiplier):
    raise ValueError('Expected a concrete noise_multiplier with noise=\'exact\''
                     ' (the exact sampler takes rational constants); use the '
                     'float path to trace it.')
  if exact and strategy is not None:
    raise ValueError('Expected strategy=None with noise=\'exact\'.')
  if strategy is not None:
    strategy = as_strategy(strategy)
    band = np.asarray(strategy.band, np.float32)
    column_norm = float(strategy.column_norms().max())
    static = StaticStrategy(strategy)
    name = _CORRELATED_STREAM
  else:
    name = _exact_gaussian.DPSGD_STREAM if exact else _FLOAT_STREAM
  stream0 = KeyStepState.create(key, stream=name, public=(noise_multiplier,))

  def correlation(history):
    if strategy is None:
      return None
    n, bands = band.shape
    return Correlation(history, jnp.asarray(column_norm, jnp.float32),
                       jnp.asarray(bands, jnp.int32),
                       jnp.asarray(-1 if strategy.toeplitz else n, jnp.int32),
                       static)

  def state(stream, bound, unit, linear, grid, history):
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    return DpsgdNoiseState(stream, f32(noise_multiplier), f32(bound),
                           jnp.asarray(unit, jnp.int32), jnp.asarray(linear),
                           grid, correlation(history))

  def init_fn(params):
    grid = _exact_gaussian.ExactGrid.empty() if exact else None
    history = None
    if strategy is not None:
      history = jax.tree.map(lambda p: jnp.zeros(
          (band.shape[1] - 1,) + jnp.shape(p), jnp.float32), params)
    return state(stream0, float('nan'), -1, True, grid, history)

  def update_fn(updates, s, params=None):
    del params
    updates, bound, unit, linear = _clipped_sum.unwrap(updates)
    updates = _numerics.zero_nonfinite(updates)
    key_t = _keys.fold_public(s.stream.step_key(), bound)
    grid = history = None
    if exact:
      out, grid = _exact_gaussian.release_clipped(key_t, updates, bound,
                                                  noise_multiplier, gamma)
    elif strategy is None:
      out = jax.tree.map(jnp.add, updates, noise_lib.tree_noise(
          noise_lib.gaussian, key_t, updates,
          stddev=noise_multiplier * bound))
    else:
      like = jax.tree.map(lambda u: jnp.zeros(jnp.shape(u), jnp.float32),
                          updates)
      z = noise_lib.tree_noise(noise_lib.gaussian, key_t, like,
                               stddev=noise_multiplier * bound * column_norm)
      x, history = _correlate(band, s.stream.count, z,
                              s.correlation.history)
      out = jax.tree.map(lambda u, xi: u + xi.astype(jnp.result_type(u)),
                         updates, x)
    return out, state(s.stream.advance(), bound,
                      _clipped_sum.UNITS.index(unit), linear, grid, history)

  return optax.GradientTransformation(init_fn, update_fn)
