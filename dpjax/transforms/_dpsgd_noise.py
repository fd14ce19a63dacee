"""DP-SGD's noise on the clipped sum, with the values it ran kept in its state.

The state of ``add_dpsgd_noise`` holds the noise multiplier and sensitivity
of the step that produced it (traced values included, e.g. under
``optax.inject_hyperparams``), and ``normalize`` keeps its divisor. The
companion ``dpsgd_step_event`` builds the step's DpEvent from that state, not
from a second copy of the hyperparameters, so a ledger cannot record a sigma
other than the one that ran (Abadi et al. 2016, Alg. 1). The noise takes a
``dpjax.clipping.ClippedSum``, whose bound must not exceed its C: refused
while tracing where both are concrete, else recorded in the state and
refused by ``dpsgd_step_event``.
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
from dpjax import clipping
from dpjax import noise as noise_lib
from dpjax.transforms import _exact_gaussian
from dpjax.transforms._normalizing import NormalizeState
from dpjax.transforms._state import AdaptiveClipState
from dpjax.transforms._state import KeyStepState

_STREAM = _keys.register('dpsgd_noise', __name__)


class DpsgdNoiseState(NamedTuple):
  """State of ``add_dpsgd_noise``.

  Attributes:
    stream: the noise stream (``KeyStepState``: key and steps taken).
    noise_multiplier: float32, sigma of the last step (at init: the
      factory's).
    l2_sensitivity: float32, the clipped-sum bound the noise is calibrated
      to, ``clipped_norm_bound(l2_norm_clip)``.
    clipped: bool, False for the unclipped noisy-SGD ablation (not private).
    sum_bound: float32, the bound carried by the last step's ``ClippedSum``
      (inf before a step and for a bare sum in the ablation).
  """
  stream: KeyStepState
  noise_multiplier: jax.Array
  l2_sensitivity: jax.Array
  clipped: jax.Array
  sum_bound: jax.Array


def add_dpsgd_noise(l2_norm_clip: Any, noise_multiplier: Any, *,
                    key: jax.Array, clipped: bool = True
                    ) -> optax.GradientTransformation:
  """Adds N(0, (sigma * C)^2) to a clipped gradient sum; records sigma and C.

  ``update(updates, state)``: ``updates`` is the ``ClippedSum`` of an
  aggregator (``clip_per_example``, ``dpjax.clipping.clipped_grad_sum``);
  the output is its noisy value (a plain pytree).

  Args:
    l2_norm_clip: the clip bound C of the sum (scalar or per-layer bounds;
      may be traced); the noise stddev is sigma * ``clipped_norm_bound(C)``.
      None: calibrate each step to the bound the ``ClippedSum`` carries
      (stddev sigma times it), e.g. adaptive clipping's moving bound.
    noise_multiplier: sigma >= 0 (may be traced).
    key: PRNG key (required). Step t draws from ``fold_in(key, t)``; a second
      ``init`` restarts the stream at step 0, which a ledger refuses to
      record twice (see ``dpsgd_step_event``).
    clipped: False marks the noisy-SGD ablation (sum not clipped): a bare
      pytree is then accepted.

  Returns:
    An optax transformation with ``DpsgdNoiseState``. Non-finite coordinates
    of the sum are replaced by 0 before the noise.

  Raises:
    ValueError: (at update, naming ``updates``) with ``clipped``, a bare
      pytree instead of a ``ClippedSum``, or one whose concrete bound is
      above ``clipped_norm_bound(l2_norm_clip)`` (compared in float32). A
      traced bound is checked by ``dpsgd_step_event``.

  Privacy:
    On a sum clipped to C, one step is the Gaussian mechanism with noise
    multiplier sigma; ``dpsgd_step_event(state, sampler)`` is its subsampled
    event, read from the state.

  Example:
    >>> tx = add_dpsgd_noise(1.0, 1.1, key=jax.random.key(0))
    >>> summed = dpjax.clipping.clip_and_sum(jnp.ones((2, 3)), 1.0,
    ...                                      jnp.ones(2, bool)).grad_sum
    >>> _, s = tx.update(summed, tx.init(None))
    >>> int(s.stream.count), float(s.noise_multiplier)
    (1, 1.100000023841858)
  """
  carried = l2_norm_clip is None
  if not carried:
    _validate.l2_norm_clip(l2_norm_clip)
  elif not clipped:
    raise ValueError('Expected an l2_norm_clip with clipped=False: an '
                     'unclipped sum carries no bound to calibrate to.')
  _validate.non_negative(noise_multiplier=noise_multiplier)
  _validate.finite(noise_multiplier=noise_multiplier)
  stream0 = KeyStepState.create(key, stream=_STREAM)

  def noise_bound(updates):
    if not carried:
      return clipping.clipped_norm_bound(l2_norm_clip)
    if not isinstance(updates, _clipped_sum.ClippedSum):
      _clipped_sum.unwrap(updates, 0.0)  # raises, naming updates
    return updates.l2_norm_clip

  def state(stream, sigma, bound, sum_bound):
    return DpsgdNoiseState(stream, jnp.asarray(sigma, jnp.float32),
                           jnp.asarray(bound, jnp.float32),
                           jnp.asarray(clipped),
                           jnp.asarray(sum_bound, jnp.float32))

  def init_fn(params):
    del params
    return state(stream0, noise_multiplier,
                 float('nan') if carried
                 else clipping.clipped_norm_bound(l2_norm_clip),
                 float('inf'))

  def update_fn(updates, s, params=None):
    del params
    bound = noise_bound(updates)
    updates, sum_bound = _clipped_sum.unwrap(updates, bound, clipped=clipped)
    updates = _numerics.zero_nonfinite(updates)
    noise = noise_lib.tree_noise(noise_lib.gaussian, s.stream.step_key(),
                                 updates, stddev=noise_multiplier * bound)
    return (jax.tree.map(jnp.add, updates, noise),
            state(s.stream.advance(), noise_multiplier, bound, sum_bound))

  return optax.GradientTransformation(init_fn, update_fn)


def effective_noise_multiplier(grad_noise_multiplier: float,
                               count_stddev: float) -> float:
  """(sigma_grad^-2 + (2 count_stddev)^-2)^(-1/2); 0 if either is 0."""
  if grad_noise_multiplier == 0 or count_stddev == 0:
    return 0.0
  return float((grad_noise_multiplier**-2 + (2 * count_stddev)**-2)**-0.5)


def _states(tree: Any, kind: type) -> list[Any]:
  return [s for s in jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, kind))
          if isinstance(s, kind)]


_NOISE_STATES = (DpsgdNoiseState, _exact_gaussian.ExactDpsgdNoiseState)


def privacy_states(opt_state: Any) -> tuple[Any, ...]:
  """The parts of an optimizer state ``dpsgd_step_event`` reads (small).

  Keep these per step instead of the whole state to record later without a
  device sync per step.
  """
  return tuple(_states(opt_state, _NOISE_STATES) +
               _states(opt_state, NormalizeState) +
               _states(opt_state, AdaptiveClipState))


def _scalar(x: Any, name: str) -> float:
  x = np.asarray(x)
  if x.shape:
    raise ValueError(f'Expected one run\'s state, got {name} of shape '
                     f'{x.shape}: index the run (e.g. the seed axis) first.')
  return float(x)


def dpsgd_step_event(opt_state: Any, sampler: Any, *,
                     noise_multiplier: float | None = None,
                     rtol: float = 1e-6
                     ) -> tuple[dp_accounting.DpEvent, tuple[jax.Array, int]]:
  """The DpEvent and noise stream of the step that produced ``opt_state``.

  Reads sigma from the chain's one ``DpsgdNoiseState`` (the value that ran;
  with an ``adaptive_clip_per_example`` state in the chain, the step's
  noise multiplier combines it with the count noise, Andrew et al. 2021,
  Thm 1;
  for ``ExactDpsgdNoiseState``, the exact path's event: the discrete
  Gaussian of the sigma the sampler drew from, with the rounding's
  sensitivity, Poisson samplers only)
  and checks every ``normalize`` divisor in the chain against the sampler's
  expected batch size. Record the result with ``ledger.record(event,
  noise=noise, batch=batch)`` (``batch`` the step's ``sampler.sample(key,
  step)``), which refuses a replayed noise step or batch.

  Args:
    opt_state: the state after the step (a ``dpsgd``/``rs_dpsgd`` state, or
      ``privacy_states`` of one).
    sampler: the batch sampler of the step (``dp_event``,
      ``expected_batch_size``), e.g. ``dpjax.sampling.PoissonSampler``.
    noise_multiplier: the sigma the caller believes ran; a mismatch raises.
    rtol: relative tolerance of both checks (the state holds float32).

  Returns:
    ``(sampler.dp_event(sigma), (key, step))``.

  Raises:
    ValueError: no or several noise states, no step taken, an unclipped
      chain, a sum clipped to a larger bound than the noise's C, a claimed
      sigma or a ``normalize`` divisor that differs from what ran, or a
      state with a batch (seed) axis.

  Example:
    >>> sampler = dpjax.sampling.PoissonSampler(1000, 0.032)
    >>> tx = dpjax.dpsgd(0.1, 1.0, 1.1, 32, key=jax.random.key(0))
    >>> _, s = tx.update(jnp.ones((2, 3)), tx.init(jnp.zeros(3)),
    ...                  jnp.zeros(3), mask=jnp.ones(2, bool))
    >>> event, (key, step) = dpsgd_step_event(s, sampler)
    >>> round(event.noise_multiplier, 6), step
    (1.1, 0)
  """
  noise_states = _states(opt_state, _NOISE_STATES)
  if len(noise_states) != 1:
    raise ValueError(f'Expected one DP-SGD noise state (add_dpsgd_noise or '
                     f'add_exact_dpsgd_noise) in '
                     f'the optimizer state, found {len(noise_states)}.')
  s, = noise_states
  count = int(_scalar(s.stream.count, 'count'))
  if count < 1:
    raise ValueError('The state is from before any step: pass the state the '
                     'step returned.')
  exact = isinstance(s, _exact_gaussian.ExactDpsgdNoiseState)
  if not exact and not bool(np.asarray(s.clipped)):
    raise ValueError('The chain adds noise to an unclipped sum (the noisy-SGD'
                     ' ablation): it has no privacy guarantee to record.')
  if not exact:  # the exact path refuses any other bound while tracing
    sum_bound = _scalar(s.sum_bound, 'sum_bound')
    noise_bound = _scalar(s.l2_sensitivity, 'l2_sensitivity')
    if _clipped_sum.exceeds(sum_bound, noise_bound):
      raise ValueError(f'The step noised a sum clipped to {sum_bound} with '
                       f'noise calibrated to l2_norm_clip={noise_bound}: the '
                       'step is not the mechanism of its noise multiplier.')
  sigma = _scalar(s.noise_multiplier, 'noise_multiplier')
  if not np.isfinite(sigma) or sigma < 0:
    raise ValueError(f'The step ran noise_multiplier={sigma}.')
  adaptive = _states(opt_state, AdaptiveClipState)
  if len(adaptive) > 1:
    raise ValueError(f'Expected at most one adaptive clipping state, found '
                     f'{len(adaptive)}.')
  if adaptive:  # the step also released a noisy count (Andrew et al. Thm 1)
    if exact:
      raise ValueError('Adaptive clipping with the exact noise path is not '
                       'supported: its count noise is float Gaussian.')
    count_stddev = _scalar(adaptive[0].count_stddev, 'count_stddev')
    sigma = effective_noise_multiplier(sigma, count_stddev)
  if noise_multiplier is not None and not np.isclose(
      noise_multiplier, sigma, rtol=rtol, atol=0):
    raise ValueError(f'Claimed noise_multiplier={noise_multiplier}, but the '
                     f'step ran noise_multiplier={sigma}: the ledger records '
                     'what ran.')
  expected = float(sampler.expected_batch_size)
  for n in _states(opt_state, NormalizeState):
    divisor = _scalar(n.expected_batch_size, 'expected_batch_size')
    if not np.isclose(divisor, expected, rtol=rtol, atol=0):
      raise ValueError(f'normalize divides by {divisor}, but the sampler\'s '
                       f'expected batch size is {expected}: the step is not '
                       'the mechanism the sampler accounts for.')
  event = (_exact_gaussian.exact_step_event(s, sampler, sigma) if exact
           else sampler.dp_event(sigma))
  return event, (s.stream.key, count - 1)
