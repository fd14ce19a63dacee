"""Random sparsification before clipping (Zhu & Blaschko, Alg. 1).

A mask m in {0, 1}^d over the whole flattened parameter vector has exactly
``int(r d)`` zeros at uniformly random coordinates. One mask serves every
example of a step and is redrawn ``refresh_per_epoch`` times per epoch (once,
the paper's per-epoch randomization); the rate cools in gradually,
r(e) = final_rate * e / (E - 1) for epoch e = 0..E-1 (Sec. 4.1).

The mask is a pure function of (key, step): ``_sparsity_mask``. The transform
``sparsify_random`` applies it, to per-example gradients (before clipping) or to
an aggregate (after noising). Two instances built with the SAME key and
schedule, one before ``clip_per_example`` and one after the noise, apply the
same mask at every step, so the noise is masked too:
m * (sum_i clip(m * g_i) + N(0, sigma^2 C^2 I)), the paper's Alg. 1. That is
the whole coupling: the shared key is an explicit argument, not hidden state.
``rs_dpsgd`` builds that chain. Its state holds the mask the next step
applies, so a caller that masks the per-example gradients itself (the
``coordinate_mask`` of ``dpjax.clipped_grad_sum``) reads it there,
``next_sparsity_mask(opt_state)``, instead of computing it a second time.

Privacy: m depends only on the key and the step, never on the data. Masking
before clipping keeps every clipped example inside the C-ball and masking after
the noise is post-processing, so a step is the same subsampled Gaussian
mechanism as DP-SGD: account it exactly like plain DP-SGD (Zhu & Blaschko,
Thm 3.1).
"""

from typing import Any, NamedTuple

import jax
from jax import flatten_util
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _keys
from dpjax import _validate
from dpjax import clipping
from dpjax import compression
from dpjax import noise as noise_lib

_MASK = _keys.register('sparsity_mask', __name__)
_RANKED_NOISE = _keys.register('ranked_sparsified_noise', __name__)


def sparsity_schedule(final_rate: float, epochs: int,
                      dimension: int) -> np.ndarray:
  """Number of zeroed coordinates per epoch under gradual cooling.

  ``k[e] = int(final_rate * e / (E - 1) * d)`` computed in float64 (for E = 1,
  k = int(final_rate * d) from the start).

  Example:
    >>> sparsity_schedule(0.9, 4, 10).tolist()
    [0, 3, 6, 9]
  """
  _validate_rate(final_rate)
  _validate.positive_int(epochs=epochs, dimension=dimension)
  if epochs == 1:
    return np.array([int(final_rate * dimension)], np.int32)
  rates = final_rate * np.arange(epochs, dtype=np.float64) / (epochs - 1)
  # A tiny guard so that e.g. 0.3 * 10 = 2.9999999999999996 floors to 3.
  return np.floor(rates * dimension + 1e-9).astype(np.int32)


def _validate_rate(final_rate: float) -> None:
  if not 0 <= float(final_rate) < 1:
    raise ValueError(f'Expected final_rate={final_rate} in [0, 1).')


def _num_coordinates(tree: Any) -> int:
  return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


class SparsityMaskSchedule(NamedTuple):
  """When the mask changes and how many coordinates it zeroes.

  Attributes:
    num_zeros: int32 [E], zeroed coordinates in epoch e (gradual cooling).
    steps_per_epoch: steps in one epoch.
    refresh_per_epoch: mask draws per epoch.
  """
  num_zeros: np.ndarray
  steps_per_epoch: int
  refresh_per_epoch: int

  @classmethod
  def cooling(cls, final_rate: float, epochs: int, steps_per_epoch: int,
              like: Any, refresh_per_epoch: int = 1
              ) -> 'SparsityMaskSchedule':
    """Gradual cooling to ``final_rate`` over ``epochs`` for params ``like``."""
    _validate.positive_int(steps_per_epoch=steps_per_epoch,
                           refresh_per_epoch=refresh_per_epoch)
    if refresh_per_epoch > steps_per_epoch:
      raise ValueError(f'Expected refresh_per_epoch={refresh_per_epoch} <= '
                       f'steps_per_epoch={steps_per_epoch}.')
    return cls(sparsity_schedule(final_rate, epochs, _num_coordinates(like)),
               steps_per_epoch, refresh_per_epoch)

  def period(self, step: jax.Array) -> jax.Array:
    """Index of the mask in use at ``step`` (a new one every refresh)."""
    return step * self.refresh_per_epoch // self.steps_per_epoch

  def zeros_at(self, step: jax.Array) -> jax.Array:
    epoch = jnp.minimum(step // self.steps_per_epoch, len(self.num_zeros) - 1)
    return jnp.asarray(self.num_zeros)[epoch]


def _sparsity_mask(key: jax.Array, step: jax.typing.ArrayLike, like: Any,
                   schedule: SparsityMaskSchedule):
  """The mask of ``step``: ``random_mask(fold_in(stream(key, 'sparsity_mask'),
  period), like, k(e))``, the key separated from every other consumer's."""
  step = jnp.asarray(step, jnp.int32)
  return compression.random_mask(
      jax.random.fold_in(_keys.stream(_validate.key(key), _MASK),
                         schedule.period(step)),
      like, schedule.zeros_at(step))


class SparsifyRandomState(NamedTuple):
  """Step counter, base key and the mask the NEXT update applies (the mask
  of step ``count``, shaped like params; ``next_sparsity_mask`` reads it)."""
  count: jax.Array  # int32 scalar
  key: jax.Array
  mask: Any


def sparsify_random(schedule: SparsityMaskSchedule, *, key: jax.Array,
                    per_example: bool = True) -> optax.GradientTransformation:
  """Zeroes a random coordinate subset, the same for every example of a step.

  Args:
    schedule: when masks are redrawn and how many coordinates they zero,
      e.g. ``SparsityMaskSchedule.cooling(final_rate, epochs,
      steps_per_epoch, params)``. Its ``num_zeros`` may be traced (a sweep
      over rates vmaps over schedules); its step counts are static.
    key: PRNG key of the masks (required). Use the same key for the instance
      before clipping and the one after the noise.
    per_example: True if the updates carry a leading batch axis (place it
      before the clipping aggregator); False for an aggregate.

  Returns:
    An optax transformation with ``SparsifyRandomState``; ``init`` needs the
    params (the mask's shape). The state holds the mask the next update
    applies: ``next_sparsity_mask(opt_state)``.

  Privacy:
    The mask is independent of the data (a function of ``key`` and the step),
    so it changes neither the sensitivity of the clipped sum nor the DpEvent
    of the step: the ledger of an RS run equals plain DP-SGD's.

  References:
    Zhu & Blaschko, "Improving Differentially Private SGD via Randomly
    Sparsified Gradients", Alg. 1 and Sec. 4.1-4.2.

  Example:
    >>> sched = SparsityMaskSchedule.cooling(0.5, 1, 10, jnp.zeros(4))
    >>> tx = sparsify_random(sched, key=jax.random.key(0), per_example=False)
    >>> out, _ = tx.update(jnp.ones(4), tx.init(jnp.zeros(4)))
    >>> int(out.sum())
    2
  """
  if not isinstance(schedule, SparsityMaskSchedule):
    raise ValueError('Expected schedule to be a SparsityMaskSchedule, got '
                     f'{type(schedule).__name__}.')
  key = _validate.key(key)

  def init_fn(params):
    count = jnp.zeros([], jnp.int32)
    return SparsifyRandomState(count, key,
                               _sparsity_mask(key, count, params, schedule))

  def update_fn(updates, state, params=None):
    del params
    mask = state.mask  # the mask of step state.count
    updates = jax.tree.map(
        lambda g, m: g * (m[None] if per_example else m).astype(g.dtype),
        updates, mask)
    count = optax.safe_increment(state.count)
    # The next step's mask: drawn when its period starts, else this one.
    fresh = schedule.period(count) != schedule.period(state.count)
    mask = jax.lax.cond(
        fresh, lambda: _sparsity_mask(state.key, count, mask, schedule),
        lambda: mask)
    return updates, SparsifyRandomState(count, state.key, mask)

  return optax.GradientTransformation(init_fn, update_fn)


def next_sparsity_mask(opt_state: Any) -> Any:
  """The mask the next update of ``opt_state``'s random sparsifier applies.

  With ``rs_dpsgd(..., per_example=False)`` pass it to
  ``dpjax.clipped_grad_sum(..., coordinate_mask=next_sparsity_mask(
  opt_state))``: the per-example gradients are masked by the mask the chain
  then applies to the noisy sum, computed once (by the chain).

  Args:
    opt_state: an optax state holding a ``sparsify_random`` state (a chain's,
      nested, under ``optax.inject_hyperparams``, or vmapped: the mask then
      has the same leading axes).

  Returns:
    The mask, shaped like the params (0 on zeroed coordinates).

  Raises:
    ValueError: no ``sparsify_random`` state, or several whose (concrete)
      masks differ. The two of ``rs_dpsgd(per_example=True)`` share their
      key and hold the same mask.

  Example:
    >>> sched = SparsityMaskSchedule.cooling(0.5, 1, 10, jnp.zeros(4))
    >>> tx = sparsify_random(sched, key=jax.random.key(0), per_example=False)
    >>> state = tx.init(jnp.zeros(4))
    >>> out, _ = tx.update(jnp.ones(4), state)
    >>> bool(jnp.all(out == next_sparsity_mask(state)))
    True
  """
  is_state = lambda x: isinstance(x, SparsifyRandomState)
  masks = [s.mask for s in jax.tree.leaves(opt_state, is_leaf=is_state)
           if is_state(s)]
  if not masks:
    raise ValueError('Expected a sparsify_random state (e.g. of rs_dpsgd) in '
                     'the optimizer state, found none.')
  first = masks[0]
  for other in masks[1:]:
    leaves = jax.tree.leaves((first, other))
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
      continue
    if (jax.tree.structure(other) != jax.tree.structure(first) or not all(
        np.array_equal(a, b) for a, b in zip(jax.tree.leaves(first),
                                             jax.tree.leaves(other)))):
      raise ValueError(f'Expected one sparsity mask in the optimizer state, '
                       f'found {len(masks)} sparsify_random states with '
                       'different masks.')
  return first


class RankedSparsifiedPrivatizerState(NamedTuple):
  """Step counter, noise key, the mask in use and this epoch's scores z."""
  count: jax.Array  # int32 scalar
  key: jax.Array
  mask: Any
  scores: Any


def ranked_sparsified_privatizer(
    l2_norm_clip: Any, noise_multiplier: float,
    schedule: SparsityMaskSchedule, *,
    key: jax.Array) -> optax.GradientTransformationExtraArgs:
  """DP-SGD with ranked sparsification (Zhu & Blaschko, Alg. 4): an aggregator.

  ``update(per_example_grads, state, params=None, *, mask=None)`` returns
  m * (sum_i clip(m * g_i) + N(0, sigma^2 C^2 I)), not yet divided by the
  batch size (chain ``normalize`` and the optimizer after it). Epoch 0 uses
  no mask; at the start of epoch e the mask zeroes the d r(e) coordinates of
  smallest |z^{e-1}|, where z^{e-1} sums last epoch's noisy sums with the
  noise left unsparsified on masked coordinates (Alg. 4, line 10).

  Args:
    l2_norm_clip: C (scalar or per-layer bounds).
    noise_multiplier: sigma; noise stddev sigma * ``clipped_norm_bound(C)``.
    schedule: how many coordinates each epoch zeroes, e.g.
      ``SparsityMaskSchedule.cooling(final_rate, epochs, steps_per_epoch,
      params)``; the mask changes at each epoch start (``refresh_per_epoch``
      is not used).
    key: PRNG key of the noise (required); step t uses ``fold_in(key, t)``.

  Returns:
    An optax aggregator (chain it first).

  Privacy:
    The released sum is the Gaussian mechanism on a clipped sum of L2
    sensitivity ``clipped_norm_bound(C)``, as in DP-SGD. The mask is a
    function of earlier released noisy sums and of noise independent of the
    data (post-processing), so the DpEvent of a step is plain DP-SGD's:
    ``dpjax.accounting.gaussian_event(noise_multiplier,
    sampling_rate=q, steps=T)``.

  References:
    Zhu & Blaschko, Alg. 4 and Appendix I.
  """
  _validate.l2_norm_clip(l2_norm_clip)
  _validate.non_negative(noise_multiplier=noise_multiplier)
  _validate.finite(noise_multiplier=noise_multiplier)
  if not isinstance(schedule, SparsityMaskSchedule):
    raise ValueError('Expected schedule to be a SparsityMaskSchedule, got '
                     f'{type(schedule).__name__}.')
  steps_per_epoch = schedule.steps_per_epoch
  key = _keys.stream(_validate.key(key), _RANKED_NOISE)
  stddev = noise_multiplier * clipping.clipped_norm_bound(l2_norm_clip)

  def init_fn(params):
    ones = jax.tree.map(jnp.ones_like, params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    return RankedSparsifiedPrivatizerState(jnp.zeros([], jnp.int32), key,
                                           ones, zeros)

  def update_fn(updates, state, params=None, *, mask=None, **extra_args):
    del params, extra_args
    count = state.count
    new_epoch = (count > 0) & (count % steps_per_epoch == 0)
    m = jax.lax.cond(new_epoch,
                     lambda: compression.ranked_mask(state.scores,
                                         schedule.zeros_at(count)),
                     lambda: state.mask)
    scores = jax.tree.map(lambda z: jnp.where(new_epoch, 0.0, z).astype(
        z.dtype), state.scores)
    masked = jax.tree.map(lambda g, mm: g * mm[None].astype(g.dtype),
                          updates, m)
    grad_sum = clipping.clip_and_sum(masked, l2_norm_clip,
                                      mask).grad_sum.value
    noise = noise_lib.tree_noise(noise_lib.gaussian,
                                 jax.random.fold_in(state.key, count),
                                 grad_sum, stddev=stddev)
    noisy = jax.tree.map(jnp.add, grad_sum, noise)
    released = _apply(noisy, m)
    scores = jax.tree.map(jnp.add, scores, noisy)  # noise kept where masked
    return released, RankedSparsifiedPrivatizerState(
        optax.safe_increment(count), state.key, m, scores)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _apply(tree: Any, mask: Any) -> Any:
  return jax.tree.map(lambda g, m: g * m.astype(g.dtype), tree, mask)


def sparsify_top_k(k: int) -> optax.GradientTransformation:
  """Keeps the ``k`` largest-magnitude coordinates of the update (eq. 2).

  The ranking is over the whole flattened update pytree; the rest is zeroed.
  Deterministic (ties go to the lower flat index), stateless, not private.

  Args:
    k: number of coordinates kept, 1 <= k <= the update's size (checked when
      the update's shape is known).

  Returns:
    An optax transformation with ``optax.EmptyState``.

  References:
    Farokhi, eq. (2); Khirirat, Johansson, Alistarh 2018 (greedy
    sparsification).

  Example:
    >>> tx = sparsify_top_k(2)
    >>> tx.update({'a': jnp.array([1., -4.]), 'b': jnp.array([3.])},
    ...           tx.init(None))[0]
    {'a': Array([ 0., -4.], dtype=float32), 'b': Array([3.], dtype=float32)}
  """
  _validate.positive_int(k=k)

  def update_fn(updates, state, params=None):
    del params
    flat, unflatten = flatten_util.ravel_pytree(updates)
    _validate.sparsity(k, flat.shape[0], 'k')
    return unflatten(compression.keep_top_k(flat, k)), state

  return optax.GradientTransformation(lambda _: optax.EmptyState(), update_fn)
