"""Array primitives of communication-efficient learning: rotate, quantize, mask.

Pure functions of arrays and explicit keys, shared by the optax
transformations (``dpjax.transforms``) and the client protocols
(``dpjax.distributed``):

* the randomized Hadamard rotation R = H D / sqrt(d) (cpSGD, Thm. 4):
  ``fwht``, ``randomized_hadamard``, ``rotate_tree`` and their inverses;
* unbiased stochastic quantizers onto a grid: ``GridQuantizer``,
  ``low_precision_quantizer`` (Q-DPSGD, eq. 5), ``k_level_quantizer``
  (cpSGD, Sec. 3), ``stochastic_round``;
* masks: ``random_mask``, ``ranked_mask`` (Zhu & Blaschko, Alg. 1 / 4),
  ``keep_top_k`` (Farokhi, eq. 2), ``smallest_k`` (a sort-free selection);
* the sparse codec: ``SparseMessage``, ``encode_sparse``, ``decode_sparse``,
  ``sparse_message_bits``.

None of them is private by itself; privacy comes from the mechanisms built on
them.

Example:
  >>> x = jnp.arange(8.0)
  >>> y = dpjax.compression.randomized_hadamard(x, key=jax.random.key(0))
  >>> q = dpjax.compression.k_level_quantizer(x_max=8.0, levels=17)
  >>> codes = q.quantize(y, key=jax.random.key(1))
  >>> codes.dtype, q.bits_per_coordinate
  (dtype('int32'), 5)
"""

from dpjax.compression._hadamard import fwht
from dpjax.compression._hadamard import inverse_randomized_hadamard
from dpjax.compression._hadamard import next_power_of_two
from dpjax.compression._hadamard import rademacher_signs
from dpjax.compression._hadamard import randomized_hadamard
from dpjax.compression._hadamard import rotate_tree
from dpjax.compression._hadamard import rotated_size
from dpjax.compression._hadamard import unrotate_tree
from dpjax.compression._masks import keep_top_k
from dpjax.compression._masks import random_mask
from dpjax.compression._masks import ranked_mask
from dpjax.compression._masks import smallest_k
from dpjax.compression._quantizers import GridQuantizer
from dpjax.compression._quantizers import k_level_quantizer
from dpjax.compression._quantizers import low_precision_quantizer
from dpjax.compression._quantizers import stochastic_round
from dpjax.compression._sparse_codec import decode_sparse
from dpjax.compression._sparse_codec import encode_sparse
from dpjax.compression._sparse_codec import sparse_message_bits
from dpjax.compression._sparse_codec import SparseMessage

__all__ = [
    'decode_sparse',
    'encode_sparse',
    'fwht',
    'GridQuantizer',
    'inverse_randomized_hadamard',
    'k_level_quantizer',
    'keep_top_k',
    'low_precision_quantizer',
    'next_power_of_two',
    'rademacher_signs',
    'random_mask',
    'randomized_hadamard',
    'ranked_mask',
    'rotate_tree',
    'rotated_size',
    'smallest_k',
    'sparse_message_bits',
    'SparseMessage',
    'stochastic_round',
    'unrotate_tree',
]
