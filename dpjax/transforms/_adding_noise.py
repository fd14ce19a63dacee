"""Noise-adding transforms: Gaussian, Laplace and exact discrete Gaussian.

Each keeps a step counter and a base key; step t draws from
``fold_in(key, t)``. On a query of known sensitivity each is a standard
mechanism; the Privacy paragraphs name the matching DpEvent."""

from typing import Any, Callable

import dp_accounting
import jax
import jax.numpy as jnp
import optax

from dpjax import _numerics
from dpjax import _validate
from dpjax import accounting
from dpjax import noise as noise_lib
from dpjax.transforms._state import keyed_transformation




def _add_noise(sampler: Callable[..., jax.Array], key: jax.Array,
               **params: Any) -> optax.GradientTransformation:
  def step(updates, step_key, params_tree):
    del params_tree
    updates = _numerics.zero_nonfinite(updates)
    noise = noise_lib.tree_noise(sampler, step_key, updates, **params)
    return jax.tree.map(jnp.add, updates, noise)

  return keyed_transformation(key, step)


def add_gaussian_noise(stddev: float, *,
                       key: jax.Array) -> optax.GradientTransformation:
  """Adds i.i.d. N(0, stddev^2) noise to every coordinate of the update.

  Args:
    stddev: noise standard deviation (>= 0). For DP-SGD on a clipped sum use
      ``noise_multiplier * clipped_norm_bound(l2_norm_clip)``.
    key: PRNG key (required). Step t draws from ``fold_in(key, t)``.

  Returns:
    An optax transformation with ``KeyStepState``.

  Non-finite coordinates of the update are replaced by 0 before the noise,
  so the output is always the mechanism on some finite input.

  Privacy:
    On a query with L2 sensitivity S, one step is the Gaussian mechanism with
    noise multiplier stddev / S (``dp_accounting.GaussianDpEvent``).

  Example:
    >>> tx = add_gaussian_noise(1.0, key=jax.random.key(0))
    >>> out, state = tx.update(jnp.zeros(3), tx.init(None))
    >>> out.shape, int(state.count)
    ((3,), 1)
  """
  _validate.non_negative(stddev=stddev)
  _validate.finite(stddev=stddev)
  return _add_noise(noise_lib.gaussian, key,
                    stddev=stddev)


def add_laplace_noise(scale: float, *,
                      key: jax.Array) -> optax.GradientTransformation:
  """Adds i.i.d. Laplace(0, scale) noise to every coordinate of the update.

  Args:
    scale: Laplace scale b (>= 0).
    key: PRNG key (required). Step t draws from ``fold_in(key, t)``.

  Returns:
    An optax transformation with ``KeyStepState``.

  Privacy:
    On a query with L1 sensitivity S, one step is (S / scale)-DP
    (``dp_accounting.LaplaceDpEvent(noise_multiplier=scale / S)``).

  Example:
    >>> tx = add_laplace_noise(1.0, key=jax.random.key(0))
    >>> tx.update(jnp.zeros(2), tx.init(None))[0].shape
    (2,)
  """
  _validate.non_negative(scale=scale)
  _validate.finite(scale=scale)
  return _add_noise(noise_lib.laplace, key, scale=scale)



def add_discrete_gaussian_noise(sigma: float, *, key: jax.Array,
                                eta: float = 1.0
                                ) -> optax.GradientTransformation:
  """Adds exact discrete Gaussian noise on the grid eta Z to every coordinate.

  Each coordinate gets eta * N_Z(0, (sigma / eta)^2), drawn exactly by
  ``dpjax.noise.discrete_gaussian`` (pmf proportional to
  exp(-x^2 / (2 sigma^2)) on eta Z). Integer-valued leaves (e.g. quantizer
  codes) need eta = 1 and receive integer noise of their dtype; floating
  leaves receive eta * k in their dtype, so values on eta Z stay on it.

  Args:
    sigma: scale in the units of the updates (0 or sigma / eta in
      [2^-10, 2^21]); a concrete number.
    key: PRNG key (required). Step t draws from ``fold_in(key, t)``.
    eta: grid spacing (> 0), e.g. ``quantizer.spacing``.

  Returns:
    An optax transformation with ``KeyStepState``.

  Privacy:
    On a query with values in eta Z and L2 sensitivity Delta (same units),
    one step is rho-zCDP with rho = Delta^2 / (2 sigma^2) (Canonne, Kamath,
    Steinke 2020, Thm. 14; Ding et al. Q-DPSGD-2, Thm. 4):
    ``dpjax.accounting.discrete_gaussian_event(sigma, Delta)``. The sampler
    uses a sigma' >= sigma (``discrete_gaussian_sigma_squared``), so the
    stated rho is conservative.

  References:
    Canonne, Kamath, Steinke, NeurIPS 2020; Ding et al. (Q-DPSGD-2, Alg. 2).

  Example:
    >>> tx = add_discrete_gaussian_noise(0.75, key=jax.random.key(0), eta=0.25)
    >>> out, state = tx.update(jnp.zeros(4), tx.init(None))
    >>> bool(jnp.all(out / 0.25 == jnp.round(out / 0.25))), int(state.count)
    (True, 1)
  """
  noise_lib.discrete_gaussian_sigma_squared(sigma, eta)  # validates
  return _add_noise(noise_lib.discrete_gaussian_grid, key, sigma=sigma,
                    eta=eta)


def add_gaussian_noise_event(stddev: float, l2_sensitivity: float = 1.0
                             ) -> dp_accounting.DpEvent:
  """DpEvent of one ``add_gaussian_noise(stddev)`` step on a query of
  ``l2_sensitivity``: ``GaussianDpEvent(stddev / l2_sensitivity)``.

  Example:
    >>> add_gaussian_noise_event(2.0, 0.5).noise_multiplier
    4.0
  """
  _validate.positive(l2_sensitivity=l2_sensitivity)
  _validate.non_negative(stddev=stddev)
  return dp_accounting.GaussianDpEvent(float(stddev) / float(l2_sensitivity))


def add_laplace_noise_event(scale: float, l1_sensitivity: float = 1.0
                            ) -> dp_accounting.DpEvent:
  """DpEvent of one ``add_laplace_noise(scale)`` step on a query of
  ``l1_sensitivity``: (l1_sensitivity / scale)-DP.

  Example:
    >>> dpjax.accounting.basic_composition(add_laplace_noise_event(4.0, 2.0))
    (0.5, 0.0)
  """
  _validate.positive(scale=scale, l1_sensitivity=l1_sensitivity)
  return accounting.laplace_event(float(l1_sensitivity) / float(scale))


def add_discrete_gaussian_noise_event(sigma: float, l2_sensitivity: float
                                      ) -> dp_accounting.DpEvent:
  """DpEvent of one ``add_discrete_gaussian_noise(sigma)`` step on a query on
  the grid with L2 sensitivity ``l2_sensitivity`` (same units as sigma):
  rho-zCDP with rho = l2_sensitivity^2 / (2 sigma^2).

  Example:
    >>> add_discrete_gaussian_noise_event(2.0, 1.0).rho
    0.125
  """
  return accounting.discrete_gaussian_event(sigma, l2_sensitivity)
