"""Compressed gradient descent with random projections (Huang thesis ch. 6-7).

Each step of CompGD / DP-CompGD / DP-CompSGD draws a fresh Gaussian Phi_t
(``gaussian_projection``), forms a projected gradient h_t in R^m, and solves
``w_{t+1} = argmin_{w in C} ||Phi_t w - (Phi_t w_t - eta_t h_t)||``, i.e.
theta_t = Pi_{Phi_t C}(Phi_t w_t - eta_t h_t) and a lift w_{t+1} in C with
Phi_t w_{t+1} = theta_t (``dpjax.recovery.constrained_lift``). The baselines
(projected GD, DP-GD, DP-SGD) step in R^d and project onto C. C is an l1 or
l2 ball of radius r. Every optimizer (``compgd``, ``dp_compgd``, ...,
ready-made in ``_alias_compressed_gd``) is an optax transformation built by
``_factory`` here, whose update is ``w_{t+1} - w_t`` (``optax.apply_updates``)
and whose state accumulates the average iterate sum_t eta_t w_t / sum_t eta_t
(``average_iterate``).

Privacy: what is released, and its sensitivity (a deviation from the thesis).
Alg. 8 releases s_t Phi_t g_t + e, with g_t the mean gradient and s_t =
||g_t|| / ||Phi_t g_t||, and calibrates e to a replace-one sensitivity of
order L / n. That bound does not hold: ||s_t Phi_t g|| = ||g|| <= L, and the
direction Phi_t g / ||Phi_t g|| is not continuous in g. With m < d, Phi_t has
a null space; for v in it and any w with Phi_t w != 0, the mean gradients
g = a v + b w and g' = a v - b w of two neighbours (||g - g'|| = 2 b ||w||,
as small as we like) give releases of opposite directions and norm ||g||, so
||s Phi g - s' Phi g'|| = 2 ||g|| -> 2L. The replace-one sensitivity of the
thesis's release is therefore 2L (tight), n times what it is calibrated to.
We release instead the projected per-example clipped sum

  h_t = (1 / n) [ sum_i clip_L(Phi_t grad l(w_t, z_i)) + N(0, (k L sigma)^2 I_m) ]

with clip_L(u) = u min(1, L / ||u||). Phi_t comes from the key, independent
of the data, and may be conditioned on. Given Phi_t and w_t, replacing one
example changes one summand, each of norm <= L, so ||sum - sum'|| <= 2L
(k = 2, full batch, replace-one); adding or removing one changes the sum by
<= L (k = 1, Poisson sampling, add/remove-one). This holds for EVERY Phi_t,
so each step is the Gaussian mechanism with noise multiplier sigma, composed
over T steps (``accounting.gaussian_event(sigma, steps=T)``) or
Poisson-subsampled (``gaussian_event(sigma, sampling_rate=q, steps=T)``);
the state answers the event of the step that ran
(``CompressedGdState.step_event``, read by ``dpjax.accounting.step_event``
and ``PrivacyLedger.record_step``). No rescaling s_t is needed:
E ||Phi u||^2 = ||u||^2. A non-finite row is dropped (counted in the state), as
``clip_and_sum`` does: zero is inside the clipping ball.
"""

from typing import Any, NamedTuple

import dp_accounting
import jax
from jax import flatten_util
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _keys
from dpjax import _numerics
from dpjax import _validate
from dpjax import noise as noise_lib
from dpjax import recovery
from dpjax.transforms import _projecting
from dpjax.transforms._dpsgd_noise import _scalar
from dpjax.transforms._state import KeyStepState

_STREAM = _keys.register('compressed_gd', __name__)
LIPSCHITZ_MARGIN = 1.1  # power-iteration estimate of ||Phi||^2 times this
FULL_BATCH, POISSON = 2.0, 1.0  # CompressedGdState.sensitivity_factor


class CompressedGdState(NamedTuple):
  """State of the compressed-GD family and its projected baselines.

  Attributes:
    stream: ``KeyStepState`` (steps taken; Phi_t and noise of step t come
      from ``fold_in(key, t)``); the key is a dummy for non-random steps.
    weighted_sum: sum_t eta_t w_t (same tree as the params).
    weight_total: sum_t eta_t.
    noise_multiplier: float32, sigma of the last step (0 if non-private).
    residual: float32, the constrained solve's projected-gradient residual
      at the last step (0 for the baselines, whose projection is exact).
    sensitivity_factor: float32 k of the release (stddev k L sigma): 2 for
      the full-batch (replace-one) steps, 1 for the Poisson (add/remove-one)
      steps, 0 if non-private; ``step_event`` reads it with sigma.
    num_dropped: int32, real rows dropped so far for a non-finite gradient
      (data-dependent, not private: a diagnostic).
  """
  stream: KeyStepState
  weighted_sum: Any
  weight_total: jax.Array
  noise_multiplier: jax.Array
  residual: jax.Array
  sensitivity_factor: jax.Array
  num_dropped: jax.Array

  privacy_role = 'privatizer'

  def noise_handle(self) -> tuple[jax.Array, int]:
    """``(key, step)`` of the Phi and noise the last step drew (ledger)."""
    return self.stream.last_step()

  def step_event(self, sampler: Any, parts: list[Any]
                 ) -> dp_accounting.DpEvent:
    """The event of the step that produced this state (module doc).

    A full-batch step (``dp_compgd``, ``dp_projected_gd``; k = 2) is the
    Gaussian mechanism with noise multiplier sigma under replace-one, not
    amplified: ``sampler`` must be None. A Poisson step (``dp_compsgd``,
    ``dp_projected_sgd``; k = 1, stddev L sigma on a sum of add/remove-one
    sensitivity L) is ``sampler.dp_event(sigma)`` (Huang thesis, Algs.
    8-9, with the release of this module).

    Args:
      sampler: None for a full-batch step; else the step's batch sampler
        (per-example, e.g. ``dpjax.sampling.PoissonSampler``).
      parts: the other privacy states of the chain: none is allowed (the
        step divides and clips itself).

    Example:
      >>> tx = dpjax.transforms.dp_compgd(0.5, 2, 1.0, 1.0, 0.7, 3,
      ...                                 key=jax.random.key(0))
      >>> w = jnp.zeros(4)
      >>> _, s = tx.update(jnp.ones((3, 4)), tx.init(w), w)
      >>> dpjax.accounting.step_event(s, None)  # the full batch: no sampler
      GaussianDpEvent(noise_multiplier=0.699999988079071)
    """
    self.noise_handle()  # raises for a state from before any step
    factor = _scalar(self.sensitivity_factor, 'sensitivity_factor')
    if factor not in (FULL_BATCH, POISSON):
      raise ValueError('The state is from a non-private run (compgd, '
                       'projected_gd): it has no privacy guarantee to '
                       'record.')
    others = [type(p).__name__ for p in parts
              if getattr(p, 'privacy_role', '') != 'privatizer']
    if others:
      raise ValueError(f'Expected no other privacy state beside a '
                       f'compressed-GD step, found {others}: its release '
                       'clips, noises and divides by itself.')
    sigma = _scalar(self.noise_multiplier, 'noise_multiplier')
    if not np.isfinite(sigma) or sigma < 0:
      raise ValueError(f'The step ran noise_multiplier={sigma}.')
    if factor == FULL_BATCH:
      if sampler is not None:
        raise ValueError(
            'Expected sampler=None for a full-batch step (dp_compgd, '
            'dp_projected_gd): it uses every example, so no amplification '
            'by sampling holds. Use dp_compsgd / dp_projected_sgd for '
            'sampled batches.')
      return dp_accounting.GaussianDpEvent(sigma)
    if sampler is None:
      raise ValueError('Expected sampler= the batch sampler of a Poisson '
                       'step (dp_compsgd, dp_projected_sgd), e.g. '
                       'dpjax.sampling.PoissonSampler.')
    unit = getattr(sampler, 'unit', 'example')
    if unit != 'example':
      raise ValueError(f'The step clips per example, but the sampler '
                       f'accounts per {unit}.')
    return sampler.dp_event(sigma)


def average_iterate(state: CompressedGdState) -> Any:
  """w_bar_T = sum_t eta_t w_t / sum_t eta_t (thesis, ch. 6 output).

  Example:
    >>> tx = dpjax.transforms.compgd(1.0, 2, 1.0, key=jax.random.key(0))
    >>> w = jnp.zeros(4)
    >>> u, s = tx.update(jnp.ones(4), tx.init(w), w)
    >>> average_iterate(s).tolist()
    [0.0, 0.0, 0.0, 0.0]
  """
  total = state.weight_total
  return jax.tree.map(lambda s: s / jnp.maximum(total, 1e-30).astype(s.dtype),
                      state.weighted_sum)


def _rate(learning_rate, count):
  return learning_rate(count) if callable(learning_rate) else learning_rate


def _flat_rows(updates) -> jax.Array:
  """Per-example pytree with a leading batch axis -> [B, d]."""
  return jax.vmap(lambda u: flatten_util.ravel_pytree(u)[0])(updates)


def _clipped_sum(rows: jax.Array, l2_norm_clip, keep: jax.Array, finite):
  """(sum_i clip_L(row_i) over kept finite rows, kept rows dropped).

  Non-finite rows give exactly zero (as in ``dpjax.clipping.clip_and_sum``):
  one inf row cannot make the sum NaN and erase the others. Overflow-safe
  norms: finite rows of any size are clipped.
  """
  norms = _numerics.l2_norm(rows, axis=-1)
  valid = keep & finite & jnp.isfinite(norms)
  weight = jnp.where(valid, jnp.minimum(
      1.0, jnp.asarray(l2_norm_clip, jnp.float32) / norms), 0.0)
  rows = jnp.where(valid[:, None], rows, 0)
  total = (rows * weight.astype(rows.dtype)[:, None]).sum(axis=0)
  return total, jnp.sum(keep & ~valid, dtype=jnp.int32)


def _estimate(per_example, phi, l2_norm_clip, noise_multiplier, key, *,
              sensitivity_factor, divisor, mask, dtype):
  """``dp_gradient_estimate`` and the number of real rows it dropped."""
  rows = _flat_rows(per_example).astype(dtype)
  keep = (jnp.ones(rows.shape[:1], bool) if mask is None
          else jnp.asarray(mask, bool))
  finite = jnp.all(jnp.isfinite(rows), axis=1)
  rows = jnp.where((keep & finite)[:, None], rows, 0)
  if phi is not None:
    rows = phi.matvec(rows)  # [B, m]
  total, dropped = _clipped_sum(rows, l2_norm_clip, keep, finite)
  total = _numerics.zero_nonfinite(total)
  stddev = (jnp.asarray(noise_multiplier, dtype) * sensitivity_factor *
            jnp.asarray(l2_norm_clip, dtype))
  noise = noise_lib.gaussian(key, total.shape, stddev=stddev, dtype=dtype)
  if phi is not None:
    noise = noise * (jnp.arange(phi.num_rows) < phi.active_rows).astype(dtype)
  return (total + noise) / jnp.asarray(divisor, dtype), dropped


def dp_gradient_estimate(per_example: Any, phi, l2_norm_clip: Any,
                         noise_multiplier: Any, key: jax.Array, *,
                         sensitivity_factor: float, divisor: Any,
                         mask: jax.typing.ArrayLike | None = None,
                         dtype=jnp.float32) -> jax.Array:
  """The released gradient estimate of one private step.

  (sum_i clip_L(Phi g_i) + N(0, (k L sigma)^2 I)) / divisor over the rows of
  ``per_example`` (a pytree with a leading batch axis; ``mask`` zeroes padded
  rows), with Phi the identity when ``phi`` is None (DP-GD). Rows of Phi
  beyond its ``active_rows`` get no noise (they carry no signal either).
  A row that is not finite (NaN or inf in g_i or Phi g_i) is dropped: it
  contributes zero, like a padded row.

  Privacy:
    Changing one row changes the clipped sum by at most 2L (replace, k = 2)
    or L (add/remove, k = 1), for every Phi: one step is the Gaussian
    mechanism with noise multiplier sigma
    (``dpjax.accounting.gaussian_event(sigma)``; a run of T steps:
    ``gaussian_event(sigma, steps=T)``, with ``sampling_rate=q`` if
    Poisson). Zero is inside the clipping ball, so dropping a
    non-finite row keeps the bound.

  Example:
    >>> h = dp_gradient_estimate(jnp.ones((2, 3)), None, 1.0, 0.0,
    ...                          jax.random.key(0), sensitivity_factor=2.0,
    ...                          divisor=2)
    >>> [round(float(v), 4) for v in h]
    [0.5774, 0.5774, 0.5774]
  """
  return _estimate(per_example, phi, l2_norm_clip, noise_multiplier, key,
                   sensitivity_factor=sensitivity_factor, divisor=divisor,
                   mask=mask, dtype=dtype)[0]


def _check_batch(updates, params, mask, *, require_mask, num_examples):
  """Checks the batch axis and the mask (required for Poisson steps; else
  a batch without one must have ``num_examples`` rows); returns the mask."""
  batch = _validate.per_example_grads(updates, params)
  if mask is not None or require_mask:
    return _validate.row_mask(mask, batch)
  if num_examples is not None and batch != num_examples:
    raise ValueError(
        f'Expected the full batch of num_examples={num_examples} rows, got '
        f'{batch}: pass mask= (bool [B], False on padded rows) for a padded '
        'batch.')
  return None


def _factory(learning_rate, radius, ball, *, key, num_rows, private,
             l2_norm_clip=None, noise_multiplier=0.0, divisor=None,
             sensitivity_factor=1.0, block_size=None, rows_schedule=None,
             solver_iterations=50, require_mask=False, num_examples=None):
  """The shared step: compressed when ``num_rows``, else projected GD."""
  project_c = recovery.ball_projection(ball)
  _validate.radius(radius)
  if num_rows is not None:
    _projecting.validate_rows(num_rows)
    _validate.positive_int(solver_iterations=solver_iterations)
  if private:
    _validate.positive(l2_norm_clip=l2_norm_clip, divisor=divisor)
    _validate.finite(l2_norm_clip=l2_norm_clip)
    _validate.non_negative(noise_multiplier=noise_multiplier)
    _validate.finite(noise_multiplier=noise_multiplier)
  stream0 = KeyStepState.create(key, stream=_STREAM)
  factor = jnp.float32(sensitivity_factor if private else 0.0)

  def init_fn(params):
    flat, _ = flatten_util.ravel_pytree(params)
    if num_rows is not None:
      _projecting.validate_rows(num_rows, flat.size)
    return CompressedGdState(
        stream0, jax.tree.map(jnp.zeros_like, params),
        jnp.zeros([], flat.dtype),
        jnp.asarray(noise_multiplier if private else 0.0, jnp.float32),
        jnp.zeros([], jnp.float32), factor, jnp.zeros([], jnp.int32))

  def update_fn(updates, state, params=None, *, mask=None, **extra):
    del extra
    if params is None:
      raise ValueError('compressed / projected GD needs params (w_t).')
    if private:
      mask = _check_batch(updates, params, mask, require_mask=require_mask,
                          num_examples=num_examples)
    w, unravel = flatten_util.ravel_pytree(params)
    dim = w.size
    eta = jnp.asarray(_rate(learning_rate, state.stream.count), w.dtype)
    step_key = state.stream.step_key()
    phi_key, noise_key, power_key = jax.random.split(step_key, 3)
    proj = lambda v: project_c(v, radius)
    phi = None
    if num_rows is not None:
      rows = None
      if rows_schedule is not None:
        rows = jnp.minimum(rows_schedule(state.stream.count), num_rows)
      phi = _projecting.gaussian_projection(
          phi_key, num_rows, dim, block_size=block_size, active_rows=rows)
    dropped = jnp.zeros([], jnp.int32)
    if private:  # a sweep over sigma or C from one key: independent noise
      noise_key = _keys.fold_public(noise_key, noise_multiplier,
                                    l2_norm_clip)
      grad, dropped = _estimate(
          updates, phi, l2_norm_clip, noise_multiplier, noise_key,
          sensitivity_factor=sensitivity_factor, divisor=divisor, mask=mask,
          dtype=w.dtype)
    else:
      grad = flatten_util.ravel_pytree(updates)[0]
      if phi is not None:
        grad = phi.matvec(grad)
    residual = jnp.zeros([], jnp.float32)
    if phi is None:
      w_next = proj(w - eta * grad)
    else:
      lip = LIPSCHITZ_MARGIN * recovery.operator_norm_squared(
          phi.matvec, phi.rmatvec, dim, power_key)
      target = phi.matvec(w) - eta * grad
      solve = recovery.constrained_lift(
          phi.matvec, phi.rmatvec, target, w, proj, lip,
          num_iterations=solver_iterations)
      w_next, residual = solve.w, solve.residual.astype(jnp.float32)
    new_state = CompressedGdState(
        state.stream.advance(),
        jax.tree.map(lambda s, p: s + eta.astype(p.dtype) * p,
                     state.weighted_sum, params),
        state.weight_total + eta,
        jnp.asarray(noise_multiplier if private else 0.0, jnp.float32),
        residual, factor, state.num_dropped + dropped)
    return unravel(w_next - w), new_state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)
