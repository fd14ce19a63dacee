"""Ready-made compressed gradient descent and its projected baselines.

The optimizers of Huang's thesis, ch. 6-7, beside ``dpsgd``: CompGD,
DP-CompGD (full batch), DP-CompSGD (Poisson batches) and the projected GD,
DP-GD and DP-SGD baselines. Each is one optax transformation whose update is
``w_{t+1} - w_t``; the shared step, its state and the privacy argument are in
``_compressed_gd``, the events in ``_compressed_gd_events``.
"""

from typing import Any

import jax
import optax

from dpjax import _validate
from dpjax.transforms import _compressed_gd

_factory = _compressed_gd._factory  # pylint: disable=protected-access


def compgd(learning_rate: optax.ScalarOrSchedule, num_rows: int,
           radius: Any, *, key: jax.Array, ball: str = 'l1',
           block_size: int | None = None, rows_schedule=None,
           solver_iterations: int = 50
           ) -> optax.GradientTransformationExtraArgs:
  """CompGD (non-private): the update is the mean gradient g_t in R^d.

  theta_t = Pi_{Phi_t C}(Phi_t w_t - eta_t Phi_t g_t), w_{t+1} in C with
  Phi_t w_{t+1} = theta_t (FISTA, ``solver_iterations`` iterations, warm
  start w_t; the residual is in the state).

  Args:
    learning_rate: eta_t, a scalar or a schedule of the step count (may be
      traced).
    num_rows: m (static), 1 <= m <= d (checked at ``init``).
    radius: r > 0 of the constraint set C (may be traced).
    key: PRNG key (required); Phi_t from ``fold_in(key, t)``.
    ball: 'l1' (default) or 'l2'.
    block_size: generate Phi_t in column blocks (see ``gaussian_projection``).
    rows_schedule: count -> m_t (``projection_dim_schedule``), optional.
    solver_iterations: FISTA iterations of the lift (static).

  Returns:
    An optax transformation (``CompressedGdState``) whose update is
    w_{t+1} - w_t; pass ``params=w_t``.

  References:
    Huang thesis, Alg. 6 (CompGD); Kasiviswanathan, UAI 2021.

  Example:
    >>> tx = compgd(0.5, 2, 1.0, key=jax.random.key(0))
    >>> w = jnp.zeros(4)
    >>> u, s = tx.update(jnp.array([1.0, 0, 0, 0]), tx.init(w), w)
    >>> float(jnp.abs(w + u).sum()) <= 1.0 + 1e-5
    True
  """
  return _factory(learning_rate, radius, ball, key=key, num_rows=num_rows,
                  private=False, block_size=block_size,
                  rows_schedule=rows_schedule,
                  solver_iterations=solver_iterations)


def dp_compgd(learning_rate: optax.ScalarOrSchedule, num_rows: int,
              radius: Any, l2_norm_clip: Any, noise_multiplier: Any,
              num_examples: int, *, key: jax.Array, ball: str = 'l1',
              block_size: int | None = None, rows_schedule=None,
              solver_iterations: int = 50
              ) -> optax.GradientTransformationExtraArgs:
  """DP-CompGD (full batch): the update is the n per-example gradients.

  h_t = (sum_i clip_L(Phi_t grad_i) + N(0, (2 L sigma)^2 I_m)) / n, then the
  step of ``compgd`` with h_t in place of Phi_t g_t.

  Args:
    learning_rate: eta_t, scalar or schedule (may be traced).
    num_rows: m (static).
    radius: r of C (may be traced).
    l2_norm_clip: L, the clip bound of each projected per-example gradient
      (may be traced).
    noise_multiplier: sigma >= 0 (may be traced); stddev 2 L sigma on the sum.
    num_examples: n, the (public) dataset size; divides the sum.
    key: PRNG key (required); Phi_t and the noise of step t come from
      ``fold_in(key, t)`` (split).
    ball, block_size, rows_schedule, solver_iterations: as ``compgd``.

  Returns:
    An optax transformation; ``update(per_example_grads, state, params)``
    with every gradient leaf ``(n,) + param.shape`` (checked: a gradient
    without its batch axis raises). A padded batch needs ``mask=`` (bool
    [B]); without it the batch must have exactly n rows.

  Privacy:
    Replace-one sensitivity of the clipped sum is 2L for every Phi_t (see
    the module docstring; the thesis's s_t-rescaled release has sensitivity
    2L, not 2L / n, and is not used). Each step is the Gaussian mechanism
    with noise multiplier sigma under replace-one, not amplified: T steps
    are ``dpjax.accounting.gaussian_event(sigma, steps=T)``;
    ``accounting.calibrate(accounting.gaussian_event, epsilon, delta,
    steps=T)`` picks sigma for a target (epsilon, delta). A step's event
    is read from the state that ran: ``dpjax.accounting.step_event(state, None)`` (no sampler: the
    full batch), ``PrivacyLedger.record_step(state, None, None)``.

  References:
    Huang thesis, Alg. 8 (with the release changed as above); Abadi et al.
    2016 (per-example clipping).

  Example:
    >>> tx = dp_compgd(0.5, 2, 1.0, 1.0, 1.0, 3, key=jax.random.key(0))
    >>> w = jnp.zeros(4)
    >>> u, s = tx.update(jnp.ones((3, 4)), tx.init(w), w)
    >>> u.shape, int(s.stream.count)
    ((4,), 1)
  """
  _validate.positive_int(num_examples=num_examples)
  return _factory(learning_rate, radius, ball, key=key, num_rows=num_rows,
                  private=True, l2_norm_clip=l2_norm_clip,
                  noise_multiplier=noise_multiplier, divisor=num_examples,
                  sensitivity_factor=2.0, block_size=block_size,
                  rows_schedule=rows_schedule,
                  solver_iterations=solver_iterations,
                  num_examples=num_examples)


def dp_compsgd(learning_rate: optax.ScalarOrSchedule, num_rows: int,
               radius: Any, l2_norm_clip: Any, noise_multiplier: Any,
               sampler: Any, *, key: jax.Array, ball: str = 'l1',
               block_size: int | None = None, rows_schedule=None,
               solver_iterations: int = 50
               ) -> optax.GradientTransformationExtraArgs:
  """DP-CompSGD: a Poisson minibatch (``dpjax.sampling.PoissonSampler``).

  h_t = (sum_{i in B_t} clip_L(Phi_t grad_i) + N(0, (L sigma)^2 I_m)) / (q n):
  the per-example gradients of the padded batch come first with
  ``mask=batch.mask`` (padded rows are masked), divided by the EXPECTED
  batch size.

  Args:
    learning_rate, num_rows, radius, l2_norm_clip, noise_multiplier: as
      ``dp_compgd`` (stddev L sigma on the sum).
    sampler: the sampler the batches come from (e.g.
      ``dpjax.sampling.PoissonSampler(n, q)``); the chain divides by its
      ``expected_batch_size`` q n. A number is refused.
    key, ball, block_size, rows_schedule, solver_iterations: as ``compgd``.

  Returns:
    An optax transformation; ``update(grads, state, params, mask=mask)``,
    ``mask`` (bool [B]) required: without it a padded row would count as
    an example (one example counted as often as it pads the batch).

  Privacy:
    Add/remove-one sensitivity of the clipped sum is L for every Phi_t, so a
    step is the Poisson-subsampled Gaussian mechanism;
    ``dpjax.accounting.gaussian_event(sigma, sampling_rate=q, steps=T)``
    plans T steps, and
    ``dpjax.accounting.step_event(state, sampler)`` (or
    ``PrivacyLedger.record_step(state, sampler, batch)``) reads a step's,
    ``sampler.dp_event(sigma)``, from the state that ran.

  References:
    Huang thesis, Alg. 9 (Poisson sampling instead of fixed-size batches).

  Example:
    >>> sampler = dpjax.sampling.PoissonSampler(20, 0.1)
    >>> tx = dp_compsgd(0.5, 2, 1.0, 1.0, 1.0, sampler, key=jax.random.key(0))
    >>> w = jnp.zeros(4)
    >>> u, _ = tx.update(jnp.ones((3, 4)), tx.init(w), w,
    ...                  mask=jnp.array([True, True, False]))
    >>> u.shape
    (4,)
  """
  return _factory(learning_rate, radius, ball, key=key, num_rows=num_rows,
                  private=True, l2_norm_clip=l2_norm_clip,
                  noise_multiplier=noise_multiplier,
                  divisor=_validate.sampler(sampler), sensitivity_factor=1.0,
                  block_size=block_size, rows_schedule=rows_schedule,
                  solver_iterations=solver_iterations, require_mask=True)


def projected_gd(learning_rate: optax.ScalarOrSchedule, radius: Any, *,
                 ball: str = 'l1') -> optax.GradientTransformationExtraArgs:
  """GD projected onto C (non-private baseline): w - eta g, then Pi_C.

  References:
    Huang thesis, ch. 6-7 (the GD baseline of Figs. 7.1-7.3).

  Example:
    >>> tx = projected_gd(1.0, 1.0)
    >>> w = jnp.zeros(2)
    >>> (w + tx.update(jnp.array([-3.0, 0.0]), tx.init(w), w)[0]).tolist()
    [1.0, 0.0]
  """
  return _factory(learning_rate, radius, ball, key=jax.random.key(0),
                  num_rows=None, private=False)


def dp_projected_gd(learning_rate: optax.ScalarOrSchedule, radius: Any,
                    l2_norm_clip: Any, noise_multiplier: Any,
                    num_examples: int, *, key: jax.Array, ball: str = 'l1'
                    ) -> optax.GradientTransformationExtraArgs:
  """Projected DP-GD (full batch): clip per example, N(0, (2 L sigma)^2 I_d).

  Privacy:
    Replace-one sensitivity 2L of the clipped sum: the same event as
    ``dp_compgd`` (``gaussian_event``; ``step_event(state, None)``), with
    the noise in d dimensions.
    Gradients and ``mask`` as ``dp_compgd``.

  References:
    Huang thesis, ch. 7 (the DP-GD baseline of Figs. 7.1-7.3); Bassily,
    Smith, Thakurta, FOCS 2014 (projected noisy gradient descent).

  Example:
    >>> tx = dp_projected_gd(0.5, 1.0, 1.0, 1.0, 3, key=jax.random.key(0))
    >>> w = jnp.zeros(4)
    >>> tx.update(jnp.ones((3, 4)), tx.init(w), w)[0].shape
    (4,)
  """
  _validate.positive_int(num_examples=num_examples)
  return _factory(learning_rate, radius, ball, key=key, num_rows=None,
                  private=True, l2_norm_clip=l2_norm_clip,
                  noise_multiplier=noise_multiplier, divisor=num_examples,
                  sensitivity_factor=2.0, num_examples=num_examples)


def dp_projected_sgd(learning_rate: optax.ScalarOrSchedule, radius: Any,
                     l2_norm_clip: Any, noise_multiplier: Any,
                     sampler: Any, *, key: jax.Array,
                     ball: str = 'l1') -> optax.GradientTransformationExtraArgs:
  """Projected DP-SGD on Poisson batches (stddev L sigma, masked rows).

  ``update(grads, state, params, mask=mask)``: ``mask`` (bool [B]) is
  required, as in ``dp_compsgd``; ``sampler`` is the sampler the batches
  come from, as there (the divisor is its ``expected_batch_size``).

  Privacy:
    The DP-SGD event: ``gaussian_event(sigma, sampling_rate=q, steps=T)``;
    a step's,
    ``dpjax.accounting.step_event(state, sampler)``.

  References:
    Abadi et al. 2016, Alg. 1 (with a projection onto C).

  Example:
    >>> sampler = dpjax.sampling.PoissonSampler(20, 0.1)
    >>> tx = dp_projected_sgd(0.5, 1.0, 1.0, 1.0, sampler,
    ...                       key=jax.random.key(0))
    >>> w = jnp.zeros(4)
    >>> tx.update(jnp.ones((3, 4)), tx.init(w), w,
    ...           mask=jnp.ones(3, bool))[0].shape
    (4,)
  """
  return _factory(learning_rate, radius, ball, key=key, num_rows=None,
                  private=True, l2_norm_clip=l2_norm_clip,
                  noise_multiplier=noise_multiplier,
                  divisor=_validate.sampler(sampler), sensitivity_factor=1.0,
                  require_mask=True)
