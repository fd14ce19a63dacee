"""Random sparsification before clipping (Zhu & Blaschko, Alg. 1).

A mask m in {0, 1}^d over the whole flattened parameter vector has exactly
``int(r d)`` zeros at uniformly random coordinates. One mask serves every
example of a step and is redrawn ``refresh_per_epoch`` times per epoch (once,
the paper's per-epoch randomization); the rate cools in gradually,
r(e) = final_rate * e / (E - 1) for epoch e = 0..E-1 (Sec. 4.1).

The mask is a pure function of (key, step): ``sparsity_mask``. The transform
``sparsify_random`` applies it, to per-example gradients (before clipping) or to
an aggregate (after noising). Two instances built with the SAME key and
schedule, one before ``clip_per_example`` and one after the noise, apply the
same mask at every step, so the noise is masked too:
m * (sum_i clip(m * g_i) + N(0, sigma^2 C^2 I)), the paper's Alg. 1. That is
the whole coupling: the shared key is an explicit argument, not hidden state.
``rs_dpsgd`` builds that chain.

Privacy: m depends only on the key and the step, never on the data. Masking
before clipping keeps every clipped example inside the C-ball and masking after
the noise is post-processing, so a step is the same subsampled Gaussian
mechanism as DP-SGD: account it exactly like plain DP-SGD (Zhu & Blaschko,
Thm 3.1).
"""

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _clipping
from dpjax import _transforms
from dpjax import _validate
from dpjax import noise as noise_lib


def sparsity_schedule(final_rate: float, epochs: int,
                      num_coordinates: int) -> np.ndarray:
  """Number of zeroed coordinates per epoch under gradual cooling.

  ``k[e] = int(final_rate * e / (E - 1) * d)`` computed in float64 (for E = 1,
  k = int(final_rate * d) from the start).

  Example:
    >>> sparsity_schedule(0.9, 4, 10).tolist()
    [0, 3, 6, 9]
  """
  _validate_rate(final_rate)
  _validate.positive_int(epochs=epochs, num_coordinates=num_coordinates)
  if epochs == 1:
    return np.array([int(final_rate * num_coordinates)], np.int32)
  rates = final_rate * np.arange(epochs, dtype=np.float64) / (epochs - 1)
  # A tiny guard so that e.g. 0.3 * 10 = 2.9999999999999996 floors to 3.
  return np.floor(rates * num_coordinates + 1e-9).astype(np.int32)


def _validate_rate(final_rate: float) -> None:
  if not 0 <= float(final_rate) < 1:
    raise ValueError(f'Expected final_rate={final_rate} in [0, 1).')


def _num_coordinates(tree: Any) -> int:
  return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


def random_mask(key: jax.Array, like: Any, num_zeros: jax.typing.ArrayLike):
  """A 0/1 mask shaped like ``like`` with exactly ``num_zeros`` zeros.

  The zeroed set is uniform over all subsets of that size of the flattened
  coordinates: coordinate j is zeroed iff ``perm[j] < num_zeros`` for a
  uniformly random permutation ``perm``. ``num_zeros`` may be traced.

  Example:
    >>> m = random_mask(jax.random.key(0), {'w': jnp.zeros((2, 3))}, 4)
    >>> int(m['w'].sum())
    2
  """
  leaves, treedef = jax.tree.flatten(like)
  sizes = [int(np.prod(x.shape)) for x in leaves]
  keep = jax.random.permutation(_validate.key(key), sum(sizes)) >= num_zeros
  parts = jnp.split(keep, np.cumsum(sizes)[:-1])
  return treedef.unflatten([
      p.reshape(x.shape).astype(x.dtype) for p, x in zip(parts, leaves)])


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


def sparsity_mask(key: jax.Array, step: jax.typing.ArrayLike, like: Any,
                  schedule: SparsityMaskSchedule):
  """The mask of ``step``: ``random_mask(fold_in(key, period), like, k(e))``."""
  step = jnp.asarray(step, jnp.int32)
  return random_mask(jax.random.fold_in(_validate.key(key),
                                        schedule.period(step)),
                     like, schedule.zeros_at(step))


class SparsifyRandomState(NamedTuple):
  """Step counter, base key and the mask in use (shaped like params)."""
  count: jax.Array  # int32 scalar
  key: jax.Array
  mask: Any


def sparsify_random(final_rate: float, epochs: int, steps_per_epoch: int, *,
                    key: jax.Array, refresh_per_epoch: int = 1,
                    per_example: bool = True) -> optax.GradientTransformation:
  """Zeroes a random coordinate subset, the same for every example of a step.

  Args:
    final_rate: r*, the fraction of coordinates zeroed in the last epoch.
    epochs: E, for gradual cooling r(e) = r* e / (E - 1).
    steps_per_epoch: steps in one epoch (N / expected batch size).
    key: PRNG key of the masks (required). Use the same key for the instance
      before clipping and the one after the noise.
    refresh_per_epoch: mask draws per epoch (1: per-epoch randomization).
    per_example: True if the updates carry a leading batch axis (place it
      before the clipping aggregator); False for an aggregate.

  Returns:
    An optax transformation; ``init`` needs the params (the mask's shape).

  Privacy:
    The mask is independent of the data (a function of ``key`` and the step),
    so it changes neither the sensitivity of the clipped sum nor the DpEvent
    of the step: the ledger of an RS run equals plain DP-SGD's.

  References:
    Zhu & Blaschko, "Improving Differentially Private SGD via Randomly
    Sparsified Gradients", Alg. 1 and Sec. 4.1-4.2.

  Example:
    >>> tx = sparsify_random(0.5, 1, 10, key=jax.random.key(0),
    ...                      per_example=False)
    >>> out, _ = tx.update(jnp.ones(4), tx.init(jnp.zeros(4)))
    >>> int(out.sum())
    2
  """
  _validate_rate(final_rate)
  _validate.positive_int(epochs=epochs)
  key = _validate.key(key)
  schedule = lambda params: SparsityMaskSchedule.cooling(
      final_rate, epochs, steps_per_epoch, params, refresh_per_epoch)
  schedule(jnp.zeros(1))  # validates the schedule's arguments now

  def init_fn(params):
    count = jnp.zeros([], jnp.int32)
    return SparsifyRandomState(count, key,
                               sparsity_mask(key, count, params,
                                             schedule(params)))

  def update_fn(updates, state, params=None):
    del params
    sched = schedule(state.mask)
    count = state.count
    fresh = (count > 0) & (sched.period(count) != sched.period(count - 1))
    mask = jax.lax.cond(
        fresh, lambda: sparsity_mask(state.key, count, state.mask, sched),
        lambda: state.mask)
    updates = jax.tree.map(
        lambda g, m: g * (m[None] if per_example else m).astype(g.dtype),
        updates, mask)
    return updates, SparsifyRandomState(optax.safe_increment(count),
                                        state.key, mask)

  return optax.GradientTransformation(init_fn, update_fn)


def rs_dpsgd(learning_rate: optax.ScalarOrSchedule, l2_norm_clip: Any,
             noise_multiplier: float, expected_batch_size: float,
             final_rate: float, epochs: int, steps_per_epoch: int, *,
             key: jax.Array, momentum: float = 0.0, refresh_per_epoch: int = 1,
             clip: bool = True) -> optax.GradientTransformationExtraArgs:
  """DP-SGD with random sparsification (Alg. 1) and its ablations.

  ``chain(sparsify_random, clip_per_example, add_gaussian_noise,
  sparsify_random, normalize, sgd)``; both sparsifiers share one mask key, so
  masked coordinates get neither gradient nor noise. ``noise_multiplier=0``
  is clipped SGD with RS (Alg. 3); ``clip=False`` sums unclipped gradients and
  is noisy SGD with RS (Alg. 2, noise stddev still sigma * C; NOT private).
  ``final_rate=0`` is plain DP-SGD on the same keys.

  Args:
    learning_rate: step size or schedule.
    l2_norm_clip: C (scalar or per-layer bounds).
    noise_multiplier: sigma; noise stddev sigma * C.
    expected_batch_size: q N.
    final_rate, epochs, steps_per_epoch, refresh_per_epoch: see
      ``sparsify_random``.
    key: PRNG key; ``fold_in(key, 0)`` draws masks, ``fold_in(key, 1)`` noise.
    momentum: heavy-ball momentum (the paper uses 0.9).
    clip: False for the noisy-SGD ablation.

  Returns:
    An optax transformation taking per-example gradients (and ``mask=``).

  Privacy:
    With ``clip=True``, exactly the DP-SGD step of ``dpsgd`` with the same
    sigma, C and sampler (the mask is data-independent): record the
    sampler's ``dp_event(noise_multiplier)`` per step.

  References:
    Zhu & Blaschko, Alg. 1-3.
  """
  key = _validate.key(key)
  _validate.non_negative(noise_multiplier=noise_multiplier, momentum=momentum)
  _validate.positive(expected_batch_size=expected_batch_size)
  _clipping.validate_l2_norm_clip(l2_norm_clip)
  mask_key, noise_key = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)
  sparsify = lambda per_example: sparsify_random(
      final_rate, epochs, steps_per_epoch, key=mask_key,
      refresh_per_epoch=refresh_per_epoch, per_example=per_example)
  stddev = noise_multiplier * _clipping.clipped_norm_bound(l2_norm_clip)
  return optax.chain(
      sparsify(True),
      _transforms.clip_per_example(l2_norm_clip if clip else jnp.inf),
      _transforms.add_gaussian_noise(stddev, key=noise_key),
      sparsify(False),
      _transforms.normalize(expected_batch_size),
      optax.sgd(learning_rate, momentum=momentum or None),
  )


def sparse_message_bits(num_coordinates: int, num_kept: int,
                        value_bits: int = 32, send_indices: bool = True) -> int:
  """Bits of one sparse message: kept values, plus where they are.

  The positions cost the cheaper of a bitmask (d bits) and a list of indices
  (num_kept * ceil(log2 d) bits), nothing for a dense message; with per-epoch masks they are sent only at
  a refresh (``send_indices=False`` otherwise). A dense message is
  ``d * value_bits`` (Zhu & Blaschko, Sec. 5).

  Example:
    >>> sparse_message_bits(1000, 100)  # 100 * 32 + min(1000, 100 * 10)
    4200
  """
  _validate.positive_int(num_coordinates=num_coordinates,
                         value_bits=value_bits)
  _validate.non_negative_int(num_kept=num_kept)
  positions = 0 if num_kept == num_coordinates else min(
      num_coordinates,
      num_kept * max(1, math.ceil(math.log2(num_coordinates))))
  return num_kept * value_bits + (positions if send_indices else 0)


def rs_bits_per_step(final_rate: float, epochs: int, steps_per_epoch: int,
                     num_coordinates: int, refresh_per_epoch: int = 1,
                     value_bits: int = 32) -> np.ndarray:
  """Bits each step of an RS run sends (positions only at a mask refresh).

  Example:
    >>> rs_bits_per_step(0.5, 2, 2, 8).tolist()  # epoch 1 keeps 4 of 8
    [256, 256, 136, 128]
  """
  schedule = SparsityMaskSchedule(
      sparsity_schedule(final_rate, epochs, num_coordinates), steps_per_epoch,
      refresh_per_epoch)
  steps = np.arange(epochs * steps_per_epoch)
  bits = []
  for t in steps:
    kept = num_coordinates - int(schedule.num_zeros[t // steps_per_epoch])
    refresh = t == 0 or (t * refresh_per_epoch // steps_per_epoch !=
                         (t - 1) * refresh_per_epoch // steps_per_epoch)
    bits.append(sparse_message_bits(num_coordinates, kept, value_bits,
                                    send_indices=refresh))
  return np.asarray(bits, np.int64)


def ranked_mask(scores: Any, num_zeros: jax.typing.ArrayLike):
  """A 0/1 mask zeroing the ``num_zeros`` coordinates of smallest |score|.

  Ties are broken by position (a stable sort), so the mask is deterministic.

  Example:
    >>> ranked_mask({'w': jnp.array([3., -1., 0.5, 2.])}, 2)['w']
    Array([1., 0., 0., 1.], dtype=float32)
  """
  leaves, treedef = jax.tree.flatten(scores)
  flat = jnp.concatenate([jnp.abs(x).ravel() for x in leaves])
  rank = jnp.argsort(jnp.argsort(flat, stable=True), stable=True)
  keep = rank >= num_zeros
  sizes = [int(np.prod(x.shape)) for x in leaves]
  parts = jnp.split(keep, np.cumsum(sizes)[:-1])
  return treedef.unflatten([p.reshape(x.shape).astype(x.dtype)
                            for p, x in zip(parts, leaves)])


class RankedSparsifiedPrivatizerState(NamedTuple):
  """Step counter, noise key, the mask in use and this epoch's scores z."""
  count: jax.Array  # int32 scalar
  key: jax.Array
  mask: Any
  scores: Any


def ranked_sparsified_privatizer(
    l2_norm_clip: Any, noise_multiplier: float, final_rate: float,
    epochs: int, steps_per_epoch: int, *,
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
    final_rate, epochs, steps_per_epoch: gradual cooling as in
      ``sparsify_random``.
    key: PRNG key of the noise (required); step t uses ``fold_in(key, t)``.

  Returns:
    An optax aggregator (chain it first).

  Privacy:
    The released sum is the Gaussian mechanism on a clipped sum of L2
    sensitivity ``clipped_norm_bound(C)``, as in DP-SGD. The mask is a
    function of earlier released noisy sums and of noise independent of the
    data (post-processing), so the DpEvent of a step is plain DP-SGD's.

  References:
    Zhu & Blaschko, Alg. 4 and Appendix I.
  """
  _clipping.validate_l2_norm_clip(l2_norm_clip)
  _validate.non_negative(noise_multiplier=noise_multiplier)
  _validate_rate(final_rate)
  _validate.positive_int(epochs=epochs, steps_per_epoch=steps_per_epoch)
  key = _validate.key(key)
  stddev = noise_multiplier * _clipping.clipped_norm_bound(l2_norm_clip)

  def init_fn(params):
    ones = jax.tree.map(jnp.ones_like, params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    return RankedSparsifiedPrivatizerState(jnp.zeros([], jnp.int32), key,
                                           ones, zeros)

  def update_fn(updates, state, params=None, *, mask=None, **extra_args):
    del params, extra_args
    schedule = SparsityMaskSchedule.cooling(final_rate, epochs,
                                            steps_per_epoch, state.mask)
    count = state.count
    new_epoch = (count > 0) & (count % steps_per_epoch == 0)
    m = jax.lax.cond(new_epoch,
                     lambda: ranked_mask(state.scores,
                                         schedule.zeros_at(count)),
                     lambda: state.mask)
    scores = jax.tree.map(lambda z: jnp.where(new_epoch, 0.0, z).astype(
        z.dtype), state.scores)
    masked = jax.tree.map(lambda g, mm: g * mm[None].astype(g.dtype),
                          updates, m)
    grad_sum = _clipping.clip_and_sum(masked, l2_norm_clip, mask).grad_sum
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


class SparseMessage(NamedTuple):
  """A sparsified update as kept values plus their flat positions.

  Attributes:
    values: the kept coordinates, in flat order.
    indices: int32 flat positions of ``values`` (send once per mask refresh).
    num_coordinates: d, the length of the flattened update.
  """
  values: jax.Array
  indices: jax.Array
  num_coordinates: int

  def bits(self, value_bits: int = 32, send_indices: bool = True) -> int:
    """Size on the wire (``sparse_message_bits``)."""
    return sparse_message_bits(self.num_coordinates, int(self.values.size),
                               value_bits, send_indices)


def encode_sparse(update: Any, mask: Any) -> SparseMessage:
  """Packs the coordinates of ``update`` where ``mask`` is nonzero (not jittable:
  the message length is the number of kept coordinates).

  Example:
    >>> msg = encode_sparse(jnp.array([0., 2., 0., 5.]), jnp.array([0, 1, 0, 1]))
    >>> msg.values.tolist(), msg.indices.tolist(), msg.bits()
    ([2.0, 5.0], [1, 3], 68)
  """
  flat = jnp.concatenate([jnp.ravel(x) for x in jax.tree.leaves(update)])
  keep = np.flatnonzero(np.concatenate(
      [np.ravel(np.asarray(m)) for m in jax.tree.leaves(mask)]))
  return SparseMessage(flat[keep], jnp.asarray(keep, jnp.int32), flat.size)


def decode_sparse(message: SparseMessage, like: Any) -> Any:
  """The dense update (zeros where nothing was sent), shaped like ``like``."""
  flat = jnp.zeros(message.num_coordinates, message.values.dtype)
  flat = flat.at[message.indices].set(message.values)
  leaves, treedef = jax.tree.flatten(like)
  sizes = [int(np.prod(x.shape)) for x in leaves]
  parts = jnp.split(flat, np.cumsum(sizes)[:-1])
  return treedef.unflatten([p.reshape(x.shape) for p, x in zip(parts, leaves)])
