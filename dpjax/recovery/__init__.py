"""Sparse recovery (CoSaMP) and the Gaussian sensing matrices it inverts.

Example:
  >>> psi = dpjax.recovery.gaussian_sensing_matrix(jax.random.key(0), 12, 20)
  >>> x = jnp.zeros(20).at[3].set(1.0)
  >>> bool(jnp.allclose(dpjax.recovery.cosamp(psi, psi @ x, 1), x, atol=1e-4))
  True
"""

from dpjax.recovery._cosamp import cosamp
from dpjax.recovery._cosamp import keep_top_k
from dpjax.recovery._sensing import gaussian_sensing_matrix
from dpjax.recovery._sensing import sensing_l1_sensitivity

__all__ = [
    'cosamp',
    'gaussian_sensing_matrix',
    'keep_top_k',
    'sensing_l1_sensitivity',
]
