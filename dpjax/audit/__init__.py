"""Attacks on released gradients: reconstruction under random sparsification.

Example:
  >>> float(dpjax.audit.reconstruction_error_bound(1.0, 0.0, 10.0)) > 0
  True
"""

from dpjax.audit._reconstruction import invert_gradients
from dpjax.audit._reconstruction import least_squares_reconstruction
from dpjax.audit._reconstruction import reconstruction_error_bound

__all__ = [
    'invert_gradients',
    'least_squares_reconstruction',
    'reconstruction_error_bound',
]
