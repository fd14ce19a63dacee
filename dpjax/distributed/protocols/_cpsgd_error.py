"""cpSGD's estimation error: the derived MSE bound and the exact expected MSE.

``cpsgd_mse_bound`` is the closed-form bound of Agarwal et al. (2018, Thm. 3)
without rotation; ``cpsgd_expected_mse`` is the exact expected squared error
of ``distributed_mean`` for given client vectors (and rotation key), which
the tests and the distributed mean estimation experiment compare with
measured errors.
"""

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _validate
from dpjax.compression import inverse_randomized_hadamard
from dpjax.distributed.protocols import _inputs
from dpjax.distributed.protocols._cpsgd import check_config
from dpjax.distributed.protocols._cpsgd import checked_rotation_key
from dpjax.distributed.protocols._cpsgd import prepare
from dpjax.distributed.protocols._cpsgd_config import CpsgdConfig


def cpsgd_mse_bound(dimension: int, num_clients: int, levels: int,
                    trials: int, p: float, linf_clip: float) -> float:
  """The derived MSE bound without rotation (all |X_i(j)| <= X_max).

  Per coordinate, the quantization variance of each client is <= s^2 / 4 and
  its Binomial noise adds s^2 m p (1 - p), s = 2 X_max / (k - 1); averaging n
  independent clients divides by n, so
  E||X_hat - X_bar||^2 <= d s^2 (1/4 + m p (1 - p)) / n
  = d X_max^2 (1 + 4 m p (1 - p)) / (n (k - 1)^2).

  Args:
    dimension: d >= 1.
    num_clients: n >= 1.
    levels: k >= 2.
    trials: m >= 1.
    p: in (0, 1).
    linf_clip: X_max > 0, the quantizer's range [-X_max, X_max].

  Returns:
    The bound (a float).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 3 (with X_max = D); the constant is
    derived here, not taken from the paper.

  Example:
    >>> round(cpsgd_mse_bound(10, 100, 16, 64, 0.5, 1.0), 6)
    0.028889
  """
  dimension = _inputs.check_int('dimension', dimension, 1)
  num_clients = _inputs.check_int('num_clients', num_clients, 1)
  levels = _inputs.check_int('levels', levels, 2)
  trials = _inputs.check_int('trials', trials, 1)
  _validate.open_unit(p=p)
  linf_clip = _inputs.check_positive_finite('linf_clip', linf_clip)
  return (dimension * linf_clip**2 * (1 + 4 * trials * p * (1 - p))
          / (num_clients * (levels - 1)**2))


def cpsgd_expected_mse(config: CpsgdConfig, xs: jax.typing.ArrayLike, *,
                       rotation_key: jax.Array | None = None) -> float:
  """Exact E||X_hat - X_bar||^2 of ``distributed_mean`` for given inputs.

  X_bar is the mean of the clipped vectors. In the quantizer's coordinates
  (rotated ones if ``config.rotate``; x clamped to [-X_max, X_max], in bin
  [B(r), B(r+1)]), each client contributes the independent variance
  (x - B(r)) (B(r+1) - x) + s^2 m p' (1 - p') per coordinate, so the
  estimate's error has diagonal covariance sum_i v_ij / n^2 plus the clamping
  bias b = mean_i(clamp(x_i)) - mean_i(x_i). Without rotation the MSE is
  sum_j Var_j + ||b||^2. With rotation (given ``rotation_key``), the error is
  mapped by R^-1, whose entries are +-1/sqrt(d'), and cropped to d, so the
  variance part is scaled by d / d' and the bias part is ||crop(R^-1 b)||^2.
  Computed in float64 on the host from the float32 clipped (rotated) vectors
  the protocol quantizes; ignores the float32 rounding of the estimate.

  Args:
    config: a ``CpsgdConfig``.
    xs: client vectors [n, d].
    rotation_key: the shared rotation key, required iff ``config.rotate``
      (``shared_key(key)`` for ``distributed_mean(config, key, xs)``).

  Returns:
    The expected squared error (a float).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 3 proof (Appendix D).

  Example:
    >>> cfg = CpsgdConfig(l2_norm_clip=1.0, levels=3, trials=4)
    >>> # x = 0.5 sits between bins 0 and 1 (s = 1): variance 0.25, plus
    >>> # Binomial s^2 m p (1 - p) = 1, for one client and one coordinate
    >>> cpsgd_expected_mse(cfg, jnp.array([[0.5]]))
    1.25
  """
  check_config(config)
  rkey = checked_rotation_key(config, rotation_key)
  xs = _inputs.as_float_vector(xs, 'xs', 2)
  n, d = xs.shape
  prepared = jax.vmap(lambda x: prepare(config, x, rkey))(xs)
  x = np.asarray(prepared, np.float64)
  q = config.quantizer
  low, high, s = float(q.low), float(q.high), float(q.spacing)
  clamped = np.clip(x, low, high)
  r = np.clip(np.floor((clamped - low) / s), 0, config.levels - 2)
  below = low + r * s
  quant_var = np.maximum((clamped - below) * (below + s - clamped), 0.0)
  p = config.binomial_p
  var = (quant_var.sum(axis=0) / n**2
         + s**2 * config.trials * p * (1 - p) / n)
  bias = clamped.mean(axis=0) - x.mean(axis=0)
  if not config.rotate:
    return float(var.sum() + np.sum(bias**2))
  dp = x.shape[1]
  back = np.asarray(inverse_randomized_hadamard(
      jnp.asarray(bias, jnp.float32), key=rkey), np.float64)[:d]
  return float(var.sum() * d / dp + np.sum(back**2))
