"""Correlated noise: matrix-factorization strategies for BandMF and DP-FTRL.

A strategy is a lower-triangular invertible C; training adds the t-th row of
C^{-1} Z to the t-th clipped sum (``dpjax.transforms.add_dpsgd_noise(sigma,
key=..., strategy=C)``, ``dpjax.bandmf``). This package builds strategies (banded Toeplitz, its
optimizer on the prefix-sum objective, tree aggregation), their sensitivity
under b-min-separation participation, per-query errors, and the planned
DpEvent of an amplified run (a run's own event is read from its state by
``dpjax.accounting.step_event`` under its ``CyclicPoissonSampler``). Pure NumPy/SciPy in float64: strategies are public and static.

References: Kairouz et al. 2021 (DP-FTRL, tree aggregation); Choquette-Choo
et al. 2023, "(Amplified) banded matrix factorization"; McKenna 2024,
"Scaling up the banded matrix factorization mechanism".

Example:
  >>> coefs = dpjax.correlated_noise.optimize_banded_toeplitz(32, 4)
  >>> s = dpjax.correlated_noise.banded_toeplitz(coefs, 32)
  >>> round(dpjax.correlated_noise.sensitivity(s, min_separation=4,
  ...                                          max_participations=8), 4)
  2.8284
"""

from dpjax.correlated_noise._events import bandmf_event
from dpjax.correlated_noise._optimize import optimize_banded_toeplitz
from dpjax.correlated_noise._optimize import toeplitz_loss
from dpjax.correlated_noise._sensitivity import cyclic_squared_sensitivities
from dpjax.correlated_noise._sensitivity import fixed_epoch_sensitivity
from dpjax.correlated_noise._sensitivity import max_separated_sum
from dpjax.correlated_noise._sensitivity import sensitivity
from dpjax.correlated_noise._strategies import banded_toeplitz
from dpjax.correlated_noise._strategies import identity
from dpjax.correlated_noise._strategies import inverse_square_root_coefs
from dpjax.correlated_noise._strategies import lower_triangular
from dpjax.correlated_noise._strategies import per_query_error
from dpjax.correlated_noise._strategies import prefix_sum
from dpjax.correlated_noise._strategies import Strategy
from dpjax.correlated_noise._strategies import toeplitz_inverse_coefs
from dpjax.correlated_noise._strategies import tree_aggregation
from dpjax.correlated_noise._strategies import tree_matrix

__all__ = [
    'banded_toeplitz',
    'bandmf_event',
    'cyclic_squared_sensitivities',
    'fixed_epoch_sensitivity',
    'identity',
    'inverse_square_root_coefs',
    'lower_triangular',
    'max_separated_sum',
    'optimize_banded_toeplitz',
    'per_query_error',
    'prefix_sum',
    'sensitivity',
    'Strategy',
    'toeplitz_inverse_coefs',
    'toeplitz_loss',
    'tree_aggregation',
    'tree_matrix',
]
