"""Per-example gradients and clipped sums: the vmap path and the ghost path.

One device, or data-parallel over a mesh axis (``sharded_clipped_grad_sum``).

Example:
  >>> loss = lambda w, x: jnp.sum(w * x)
  >>> fn = dpjax.clipping.clipped_grad_sum(loss, 1.0)
  >>> out = fn(jnp.ones(2), jnp.ones((3, 2)), jnp.ones(3, bool))  # mask: real rows
  >>> out.grad_sum.value.shape
  (2,)
"""

from dpjax._clipped_sum import ClippedSum
from dpjax.clipping._data_parallel import sharded_clipped_grad_sum
from dpjax.clipping._ghost import ghost_grads
from dpjax.clipping._ghost import ghost_plan
from dpjax.clipping._ghost import GhostGrads
from dpjax.clipping._per_example import clip_and_sum
from dpjax.clipping._per_example import clipped_grad_sum
from dpjax.clipping._per_example import clipped_norm_bound
from dpjax.clipping._per_example import ClippedGradSum
from dpjax.clipping._per_example import count_nonfinite
from dpjax.clipping._per_example import METHODS
from dpjax.clipping._per_example import per_example_grads
from dpjax.clipping._per_example import unclipped_sum
from dpjax.clipping._user_level import clipped_user_grad_sum

__all__ = [
    'clip_and_sum',
    'clipped_grad_sum',
    'clipped_norm_bound',
    'clipped_user_grad_sum',
    'ClippedGradSum',
    'ClippedSum',
    'count_nonfinite',
    'ghost_grads',
    'ghost_plan',
    'GhostGrads',
    'METHODS',
    'per_example_grads',
    'sharded_clipped_grad_sum',
    'unclipped_sum',
]
