"""Sparse recovery (CoSaMP), the Gaussian sensing matrices it inverts, and
constraint-set projections (l1 / l2 balls, the compressed-GD lift).

Example:
  >>> psi = dpjax.recovery.gaussian_sensing_matrix(jax.random.key(0), 12, 20)
  >>> x = jnp.zeros(20).at[3].set(1.0)
  >>> bool(jnp.allclose(dpjax.recovery.cosamp(psi, psi @ x, 1), x, atol=1e-4))
  True
"""

from dpjax.recovery._balls import ball_projection
from dpjax.recovery._balls import l1_threshold
from dpjax.recovery._balls import project_l1_ball
from dpjax.recovery._balls import project_l2_ball
from dpjax.recovery._constrained import constrained_lift
from dpjax.recovery._constrained import ConstrainedSolve
from dpjax.recovery._constrained import operator_norm_squared
from dpjax.recovery._cosamp import cosamp
from dpjax.recovery._sensing import gaussian_sensing_matrix
from dpjax.recovery._sensing import sensing_l1_sensitivity

__all__ = [
    'ball_projection',
    'constrained_lift',
    'ConstrainedSolve',
    'cosamp',
    'gaussian_sensing_matrix',
    'l1_threshold',
    'operator_norm_squared',
    'project_l1_ball',
    'project_l2_ball',
    'sensing_l1_sensitivity',
]
