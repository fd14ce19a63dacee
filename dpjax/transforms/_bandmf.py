"""BandMF / DP-FTRL: DP-SGD's chain with correlated instead of fresh noise.

``chain(clip_per_example, add_dpsgd_noise(strategy=C), normalize, sgd)``: the
clipped sum of step t gets the t-th row of C^{-1} Z (Choquette-Choo et al.
2023, "(Amplified) banded matrix factorization", Alg. 1; Kairouz et al.
2021 with the tree strategy). With C = I it is DP-SGD.
"""

from typing import Any

import jax
import optax

from dpjax import _validate
from dpjax.transforms import _alias
from dpjax.transforms import _normalizing


def bandmf(learning_rate: optax.ScalarOrSchedule, l2_norm_clip: Any,
           noise_multiplier: Any, sampler: Any, strategy: Any, *,
           key: jax.Array, momentum: float | None = None,
           per_example: bool = True) -> optax.GradientTransformation:
  """BandMF: clip per example, add C^{-1} Z, normalize, (momentum) SGD.

  Args:
    learning_rate: step size or schedule; may be traced.
    l2_norm_clip: C (scalar, may be traced, or per-layer bounds) with
      ``per_example=True``; None with ``per_example=False`` (the
      ``ClippedSum`` carries it).
    noise_multiplier: sigma (may be traced): Z has stddev sigma x the sum's
      bound x the strategy's largest column norm (its one-participation
      sensitivity).
    sampler: the sampler the batches come from, a
      ``dpjax.sampling.CyclicPoissonSampler``; the chain divides by its
      ``expected_batch_size`` (q N / b). A number is refused.
    strategy: a ``dpjax.correlated_noise.Strategy`` (e.g.
      ``banded_toeplitz(optimize_banded_toeplitz(n, bands), n)``) or a
      lower-triangular matrix.
    key: PRNG key of the noise (required).
    momentum: heavy-ball momentum or None.
    per_example: True: the updates are per-example gradients (``mask=``
      marks real rows). False: the updates are a ``ClippedSum``, e.g. the
      ``grad_sum`` of ``dpjax.clipped_grad_sum(..., method='ghost')`` or of
      ``dpjax.clipping.sharded_clipped_grad_sum``.

  Returns:
    An optax transformation.

  Privacy:
    Under ``dpjax.sampling.CyclicPoissonSampler`` (the participation
    pattern is the sampler's; any other sampler is refused),
    ``ledger.record_step(state, sampler, batch)`` records each step
    (``dpjax.accounting.step_event``) with the batch drawn at the run's own
    step. Rate q < 1 with at least ``bands`` partitions: amplified, a run of
    T steps is ``dpjax.correlated_noise.bandmf_event(sigma, strategy,
    steps=T, min_separation=b, sampling_rate=q)`` (add/remove-one; its plan).
    Rate 1 (fixed partitions, no amplification): the steps compose to the
    Gaussian mechanism of the strategy's multi-participation sensitivity.

  Example:
    >>> s = dpjax.correlated_noise.banded_toeplitz([1.0, 0.5], 8)
    >>> sampler = dpjax.sampling.CyclicPoissonSampler(16, 0.5, 2)
    >>> tx = bandmf(0.1, 1.0, 1.0, sampler, s, key=jax.random.key(0))
    >>> out, _ = tx.update(jnp.ones((2, 3)), tx.init(jnp.zeros(3)),
    ...                    jnp.zeros(3), mask=jnp.ones(2, bool))
    >>> out.shape
    (3,)
  """
  expected_batch_size = _validate.sampler(sampler)
  parts = _alias._privatized_sum(  # pylint: disable=protected-access
      l2_norm_clip, noise_multiplier, key, per_example, strategy=strategy)
  return optax.chain(
      *parts,
      _normalizing.normalize(expected_batch_size),
      _alias._sgd(learning_rate, momentum),  # pylint: disable=protected-access
  )
