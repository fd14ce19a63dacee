"""optax GradientTransformations, one effect per module, and ready-made chains.

Aggregators (``clip_per_example``, a ``per_example=True`` sparsifier) take
per-example gradients with a leading batch axis and come first in a chain;
everything else maps an update pytree to an update pytree. Every randomized
transform takes a required ``key`` and draws step t from ``fold_in(key, t)``.

Example:
  >>> sampler = dpjax.sampling.PoissonSampler(320, 0.1)
  >>> tx = dpjax.transforms.dpsgd(0.1, 1.0, 1.1, sampler, key=jax.random.key(0))
  >>> out, _ = tx.update(jnp.ones((4, 3)), tx.init(jnp.zeros(3)), jnp.zeros(3),
  ...                    mask=jnp.ones(4, bool))
  >>> out.shape
  (3,)
"""

from dpjax.transforms._adding_noise import add_discrete_gaussian_noise
from dpjax.transforms._adding_noise import add_gaussian_noise
from dpjax.transforms._adding_noise import add_laplace_noise
from dpjax.transforms._adding_noise import laplace_grid_scale
from dpjax.transforms._adding_noise import laplace_grid_spacing
from dpjax.transforms._adding_noise import laplace_privatizer
from dpjax.transforms._adding_noise import laplace_privatizer_bits
from dpjax.transforms._adaptive_clipping import adaptive_clip_noise_multiplier
from dpjax.transforms._adaptive_clipping import adaptive_clip_per_example
from dpjax.transforms._adaptive_clipping import adaptive_dpsgd
from dpjax.transforms._adaptive_clipping import adaptive_effective_noise_multiplier
from dpjax.transforms._alias import compressive_dpsgd
from dpjax.transforms._alias import dpsgd
from dpjax.transforms._alias import rs_dpsgd
from dpjax.transforms._alias_compressed_gd import compgd
from dpjax.transforms._alias_compressed_gd import dp_compgd
from dpjax.transforms._alias_compressed_gd import dp_compsgd
from dpjax.transforms._alias_compressed_gd import dp_projected_gd
from dpjax.transforms._alias_compressed_gd import dp_projected_sgd
from dpjax.transforms._alias_compressed_gd import projected_gd
from dpjax.transforms._bandmf import bandmf
from dpjax.transforms._clipping import clip_per_example
from dpjax.transforms._clipping import ClipPerExampleState
from dpjax.transforms._compressed_gd import average_iterate
from dpjax.transforms._compressed_gd import CompressedGdState
from dpjax.transforms._compressed_gd import dp_gradient_estimate
from dpjax.transforms._compressing import compressive_measurements
from dpjax.transforms._compressing import compressive_mechanism
from dpjax.transforms._compressing import compressive_privatizer
from dpjax.transforms._compressing import compressive_privatizer_bits
from dpjax.transforms._compressing import compressive_privatizer_epsilons
from dpjax.transforms._compressing import compressive_privatizer_event
from dpjax.transforms._compressing import compressive_sensitivity_margin
from dpjax.transforms._compressing import CompressiveRelease
from dpjax.transforms._exact_gaussian import add_exact_gaussian_noise
from dpjax.transforms._exact_gaussian import add_exact_gaussian_noise_event
from dpjax.transforms._exact_gaussian import exact_gaussian_grid
from dpjax.transforms._dpsgd_noise import add_dpsgd_noise
from dpjax.transforms._dpsgd_noise import DpsgdNoiseState
from dpjax.transforms._normalizing import normalize
from dpjax.transforms._normalizing import NormalizeState
from dpjax.transforms._projecting import gaussian_projection
from dpjax.transforms._projecting import l1_ball_gaussian_width
from dpjax.transforms._projecting import l2_ball_gaussian_width
from dpjax.transforms._projecting import project_gaussian
from dpjax.transforms._projecting import projection_dim_schedule
from dpjax.transforms._quantizing import quantize_stochastic
from dpjax.transforms._rotating import rotate_hadamard
from dpjax.transforms._rotating import unrotate_hadamard
from dpjax.transforms._sparse_coding import dpsgd_bits
from dpjax.transforms._sparse_coding import rs_dpsgd_bits
from dpjax.transforms._sparsifying import next_sparsity_mask
from dpjax.transforms._sparsifying import ranked_sparsified_privatizer
from dpjax.transforms._sparsifying import sparsify_random
from dpjax.transforms._sparsifying import sparsify_top_k
from dpjax.transforms._sparsifying import sparsity_schedule
from dpjax.transforms._sparsifying import SparsityMaskSchedule
from dpjax.transforms._state import KeyStepState
from dpjax.transforms._state import keyed_transformation

__all__ = [
    'adaptive_clip_noise_multiplier',
    'adaptive_clip_per_example',
    'adaptive_dpsgd',
    'adaptive_effective_noise_multiplier',
    'add_discrete_gaussian_noise',
    'add_dpsgd_noise',
    'add_exact_gaussian_noise',
    'add_exact_gaussian_noise_event',
    'add_gaussian_noise',
    'add_laplace_noise',
    'average_iterate',
    'bandmf',
    'clip_per_example',
    'ClipPerExampleState',
    'compgd',
    'CompressedGdState',
    'compressive_dpsgd',
    'compressive_measurements',
    'compressive_mechanism',
    'compressive_privatizer',
    'compressive_privatizer_bits',
    'compressive_privatizer_epsilons',
    'compressive_privatizer_event',
    'compressive_sensitivity_margin',
    'CompressiveRelease',
    'dp_compgd',
    'dp_compsgd',
    'dp_gradient_estimate',
    'dp_projected_gd',
    'dp_projected_sgd',
    'dpsgd',
    'dpsgd_bits',
    'DpsgdNoiseState',
    'exact_gaussian_grid',
    'gaussian_projection',
    'keyed_transformation',
    'KeyStepState',
    'l1_ball_gaussian_width',
    'l2_ball_gaussian_width',
    'laplace_grid_scale',
    'laplace_grid_spacing',
    'laplace_privatizer',
    'laplace_privatizer_bits',
    'next_sparsity_mask',
    'normalize',
    'NormalizeState',
    'project_gaussian',
    'projected_gd',
    'projection_dim_schedule',
    'quantize_stochastic',
    'ranked_sparsified_privatizer',
    'rotate_hadamard',
    'rs_dpsgd',
    'rs_dpsgd_bits',
    'sparsify_random',
    'sparsify_top_k',
    'sparsity_schedule',
    'SparsityMaskSchedule',
    'unrotate_hadamard',
]
