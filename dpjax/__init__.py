"""dpjax: differentially private and communication-efficient learning in JAX.

The core DP-SGD pieces are re-exported here; ``dpjax.accounting``,
``dpjax.noise`` and ``dpjax.sampling`` are namespaces of their own.
"""

from dpjax import accounting
from dpjax import attacks
from dpjax import distributed
from dpjax import noise
from dpjax import sampling
from dpjax._clipping import clip_and_sum
from dpjax._clipping import clipped_grad_sum
from dpjax._clipping import clipped_norm_bound
from dpjax._clipping import ClippedGradSum
from dpjax._clipping import count_nonfinite
from dpjax._clipping import per_example_grads
from dpjax._compressive import compressive_mechanism
from dpjax._compressive import compressive_privatizer
from dpjax._compressive import CompressivePrivatizerState
from dpjax._compressive import CompressiveRelease
from dpjax._compressive import gaussian_sensing_matrix
from dpjax._compressive import laplace_privatizer
from dpjax._compressive import LaplacePrivatizerState
from dpjax._compressive import sensing_l1_sensitivity
from dpjax._compressive import sparsify_top_k
from dpjax._cosamp import cosamp
from dpjax._cosamp import keep_top_k
from dpjax._ghost import ghost_plan
from dpjax._sparsify import ranked_mask
from dpjax._sparsify import ranked_sparsified_privatizer
from dpjax._sparsify import RankedSparsifiedPrivatizerState
from dpjax._sparsify import rs_bits_per_step
from dpjax._sparsify import sparse_message_bits
from dpjax._sparsify import decode_sparse
from dpjax._sparsify import encode_sparse
from dpjax._sparsify import SparseMessage
from dpjax._sparsify import rs_dpsgd
from dpjax._sparsify import sparsify_random
from dpjax._sparsify import sparsity_mask
from dpjax._sparsify import SparsityMaskSchedule
from dpjax._sparsify import SparsifyRandomState
from dpjax._transforms import add_gaussian_noise
from dpjax._transforms import add_laplace_noise
from dpjax._transforms import AddGaussianNoiseState
from dpjax._transforms import AddLaplaceNoiseState
from dpjax._transforms import clip_per_example
from dpjax._transforms import ClipPerExampleState
from dpjax._transforms import dpsgd
from dpjax._transforms import normalize
from dpjax._quantize import GridQuantizer
from dpjax._quantize import k_level_quantizer
from dpjax._quantize import low_precision_quantizer
from dpjax._quantize import stochastic_round
from dpjax._rotation import fwht
from dpjax._rotation import inverse_randomized_hadamard
from dpjax._rotation import randomized_hadamard
from dpjax._rotation import rotate_tree
from dpjax._rotation import rotated_size
from dpjax._rotation import unrotate_tree
from dpjax._transforms import add_discrete_gaussian_noise
from dpjax._transforms import AddDiscreteGaussianNoiseState
from dpjax._transforms import quantize_stochastic
from dpjax._transforms import QuantizeStochasticState
from dpjax._transforms import rotate_hadamard
from dpjax._transforms import RotateHadamardState
from dpjax._transforms import unrotate_hadamard
from dpjax._transforms import UnrotateHadamardState
from dpjax.sampling import FixedSizeSampler
from dpjax.sampling import PaddedBatch
from dpjax.sampling import PoissonSampler
from dpjax.sampling import ShuffleSampler

__version__ = '0.1.0'

__all__ = [
    'accounting',
    'attacks',
    'distributed',
    'add_gaussian_noise',
    'add_laplace_noise',
    'AddGaussianNoiseState',
    'AddLaplaceNoiseState',
    'clip_and_sum',
    'clip_per_example',
    'ClipPerExampleState',
    'clipped_grad_sum',
    'clipped_norm_bound',
    'ClippedGradSum',
    'count_nonfinite',
    'dpsgd',
    'FixedSizeSampler',
    'ghost_plan',
    'noise',
    'normalize',
    'PaddedBatch',
    'per_example_grads',
    'PoissonSampler',
    'ranked_mask',
    'ranked_sparsified_privatizer',
    'RankedSparsifiedPrivatizerState',
    'rs_bits_per_step',
    'sparse_message_bits',
    'decode_sparse',
    'encode_sparse',
    'SparseMessage',
    'rs_dpsgd',
    'sampling',
    'ShuffleSampler',
    'sparsify_random',
    'sparsity_mask',
    'SparsityMaskSchedule',
    'SparsifyRandomState',
    'add_discrete_gaussian_noise',
    'AddDiscreteGaussianNoiseState',
    'fwht',
    'GridQuantizer',
    'inverse_randomized_hadamard',
    'k_level_quantizer',
    'low_precision_quantizer',
    'quantize_stochastic',
    'QuantizeStochasticState',
    'randomized_hadamard',
    'rotate_hadamard',
    'rotate_tree',
    'rotated_size',
    'RotateHadamardState',
    'stochastic_round',
    'unrotate_hadamard',
    'unrotate_tree',
    'UnrotateHadamardState',
    'compressive_mechanism',
    'compressive_privatizer',
    'CompressivePrivatizerState',
    'CompressiveRelease',
    'cosamp',
    'gaussian_sensing_matrix',
    'keep_top_k',
    'laplace_privatizer',
    'LaplacePrivatizerState',
    'sensing_l1_sensitivity',
    'sparsify_top_k',
]
