"""Noise-adding transforms: Gaussian, Laplace and exact discrete Gaussian.

Each keeps a step counter and a base key; step t draws from
``fold_in(key, t)``. On a query of known sensitivity each is a standard
mechanism; the Privacy paragraphs name the matching DpEvent.

Laplace without floating-point leaks (Mironov 2012: the low-order bits of
``x + float Laplace`` reveal x). ``add_laplace_noise`` and
``laplace_privatizer`` (the unsparsified baseline of the compressive
mechanism, Farokhi) release by default ``eta (code + Z)``: the input as an
integer code on the grid eta Z plus exact discrete Laplace noise Z
(``dpjax.noise.discrete_laplace``), an integer whose float image is all that
is released. ``laplace_privatizer`` rounds to the nearest code, which its
clipping bound already covers; ``add_laplace_noise`` (unbounded input) rounds
at random on a power-of-two grid (``grid_laplace``) and widens the noise just
enough that the stated epsilon holds exactly. ``exact=False`` keeps the float
path.
"""

import fractions
import math
from typing import Any, Callable

import jax
from jax import flatten_util
import jax.numpy as jnp
import optax

from dpjax import _keys
from dpjax import _numerics
from dpjax import _validate
from dpjax import accounting
from dpjax import noise as noise_lib
from dpjax.transforms._state import keyed_transformation

GRID_STEPS = 10  # default Laplace grid: eta <= scale / 2^10
MAX_GRID_SCALE = 2**20  # scale / eta, so that |noise| < 2^30 grid units
_MIN_ETA, _MAX_ETA = 2.0**-100, 2.0**100
_GAUSSIAN = _keys.register('gaussian_noise', __name__)
_LAPLACE = _keys.register('laplace_noise', __name__)
_PRIVATIZER = _keys.register('laplace_privatizer', __name__)
_DISCRETE_GAUSSIAN = _keys.register('discrete_gaussian_noise', __name__)


def _add_noise(sampler: Callable[..., jax.Array], key: jax.Array,
               stream: str, **params: Any) -> optax.GradientTransformation:
  def step(updates, step_key, params_tree):
    del params_tree
    updates = _numerics.zero_nonfinite(updates)
    noise = noise_lib.tree_noise(sampler, step_key, updates, **params)
    return jax.tree.map(jnp.add, updates, noise)

  return keyed_transformation(key, step, stream=stream,
                              public=tuple(params.values()))


def add_gaussian_noise(stddev: float, *,
                       key: jax.Array) -> optax.GradientTransformation:
  """Adds i.i.d. N(0, stddev^2) noise to every coordinate of the update.

  Args:
    stddev: noise standard deviation (>= 0). For DP-SGD on a clipped sum use
      ``noise_multiplier * clipped_norm_bound(l2_norm_clip)``.
    key: PRNG key (required). Step t draws from ``fold_in(key, t)`` of
      its stream, the scale folded in (another scale: independent noise).

  Returns:
    An optax transformation with ``KeyStepState``.

  Non-finite coordinates of the update are replaced by 0 before the noise,
  so the output is always the mechanism on some finite input.

  Privacy:
    On a query with L2 sensitivity S, one step is the Gaussian mechanism with
    noise multiplier stddev / S: T steps are
    ``dpjax.accounting.gaussian_event(stddev / S, steps=T)``.

  Example:
    >>> tx = add_gaussian_noise(1.0, key=jax.random.key(0))
    >>> out, state = tx.update(jnp.zeros(3), tx.init(None))
    >>> out.shape, int(state.count)
    ((3,), 1)
  """
  _validate.non_negative(stddev=stddev)
  _validate.finite(stddev=stddev)
  return _add_noise(noise_lib.gaussian, key, _GAUSSIAN,
                    stddev=stddev)


def laplace_grid_spacing(scale: float, bound: float | None = None) -> float:
  """The default grid of the exact Laplace: the largest power of two eta <=
  scale / 2^10 (fine against the noise, see ``add_laplace_noise``), or, if
  larger, the smallest power of two above bound / 2^30 (so inputs up to
  ``bound`` are not clipped).

  Example:
    >>> laplace_grid_spacing(3.0) == 2.0**-9, laplace_grid_spacing(
    ...     1e-9, bound=1.0) == 2.0**-29
    (True, True)
  """
  _validate.positive(scale=scale)
  eta = math.ldexp(1.0, math.frexp(float(scale))[1] - 1 - GRID_STEPS)
  if bound is not None:
    eta = max(eta, math.ldexp(1.0, math.frexp(float(bound))[1] - 30))
  return eta


def grid_spacing(scale: float, eta: float | None) -> float:
  """eta (default ``laplace_grid_spacing``), checked against ``scale``."""
  if eta is None:
    eta = laplace_grid_spacing(scale)
  if not _validate.concrete(eta):
    raise ValueError(f'Expected a concrete eta, got {eta}.')
  eta = float(eta)
  if not (_MIN_ETA <= eta <= _MAX_ETA and math.frexp(eta)[0] == 0.5):
    raise ValueError(f'Expected eta={eta} to be a power of two in '
                     '[2^-100, 2^100] (so that x / eta is exact).')
  if not 2.0**-10 <= float(scale) / eta <= MAX_GRID_SCALE:
    raise ValueError(f'Expected scale / eta = {float(scale) / eta:g} in '
                     f'[2^-10, 2^20] (scale={scale}, eta={eta}).')
  return eta


def laplace_grid_scale(scale: float, eta: float) -> fractions.Fraction:
  """b* = 1 / log1p(eta / scale) in grid units, rounded up (exact Fraction).

  Randomized rounding to eta Z followed by discrete Laplace noise of scale b'
  (grid units) has epsilon (e^(1 / b') - 1) / eta per unit of L1 distance
  between inputs (``dpjax.noise.randomized_round``); b' >= b* makes that
  <= 1 / scale, the epsilon of continuous Laplace(scale). In the units of x,
  scale <= b* eta < scale (1 + eta / (2 scale)).

  Example:
    >>> round(float(laplace_grid_scale(1.0, 2.0**-10)), 3)
    1024.5
  """
  b = 1 / math.log1p(eta / float(scale))
  return fractions.Fraction(b) * (1 + fractions.Fraction(1, 2**40))


def grid_laplace(key: jax.Array, x: jax.Array, grid_scale,
                 eta: float) -> jax.Array:
  """eta (R(x / eta) + Z) in float32: R ``randomized_round`` (codes clipped
  to +-2^30), Z ~ discrete Laplace of ``grid_scale`` (exact)."""
  round_key, noise_key = jax.random.split(key)
  codes = noise_lib.randomized_round(round_key, x.astype(jnp.float32) / eta)
  noise = noise_lib.discrete_laplace(noise_key, x.shape, scale=grid_scale)
  return (codes + noise).astype(jnp.float32) * eta


def add_laplace_noise(scale: float, *, key: jax.Array, eta: float | None = None,
                      exact: bool = True) -> optax.GradientTransformation:
  """Adds Laplace noise of scale ``scale`` to every coordinate of the update.

  ``exact=True`` (default) releases each coordinate x as eta (R(x / eta) +
  Z), an integer times eta: R rounds x / eta to an integer at random, up with
  probability exactly its fractional part (``dpjax.noise.randomized_round``),
  and Z is exact discrete Laplace noise with scale b* = 1 / log1p(eta /
  scale) grid units (``laplace_grid_scale``; b* eta is scale up to a factor
  below 1 + eta / (2 scale), 1 + 2^-11 for the default grid). No float enters
  the noise, and the output is a function of the noisy integer alone (Mironov
  2012). Coordinates beyond 2^30 eta (>= 2^19 scale by default) are clipped
  there. ``exact=False`` adds float32 Laplace(scale) noise instead (scale may
  then be traced); its low-order bits can leak the input.

  Args:
    scale: Laplace scale b (>= 0), a concrete number when ``exact``.
    key: PRNG key (required). Step t draws from ``fold_in(key, t)`` of
      its stream, the scale folded in (another scale: independent noise).
    eta: grid spacing, a power of two with scale / eta in [2^-10, 2^20];
      default ``laplace_grid_spacing(scale)`` (scale / eta in [2^10, 2^11)).
      Only with ``exact``.
    exact: grid-valued exact noise (default) or float noise.

  Returns:
    An optax transformation with ``KeyStepState``.

  Non-finite coordinates are replaced by 0 first, so the output is always the
  mechanism on some finite input.

  Privacy:
    On a query with L1 sensitivity S, one step is (S / scale)-DP
    (``dpjax.accounting.laplace_event(S / scale, steps=T)``), on or off the
    grid. ``exact``: the pmf of
    R(u) + Z at each integer is, in u, the linear interpolation of Z's pmf,
    whose log moves by at most e^(1 / b*) - 1 <= eta / scale per unit of u =
    x / eta, so two inputs give a likelihood ratio of at most
    exp(||x - x'||_1 / scale); the clipping at 2^30 eta is a contraction. The
    one departure: the int32 range of the sampler and of the sum fails the
    ideal pmf only where |Z| > 2^30 grid units (b* <= 2^20 + 1), probability
    below e^-1000. ``exact=False``: the guarantee of ideal real-valued
    Laplace noise, which float32 only approximates.

  References:
    Dwork & Roth 2014, Thm 3.6; Mironov, "On significance of the least
    significant bits for differential privacy", CCS 2012; Canonne, Kamath,
    Steinke 2020 (discrete Laplace, Alg. 2).

  Example:
    >>> tx = add_laplace_noise(1.0, key=jax.random.key(0))
    >>> out = tx.update(jnp.array([0.3, 7.0]), tx.init(None))[0]
    >>> bool(jnp.all(out / 2.0**-10 == jnp.round(out / 2.0**-10)))
    True
  """
  _validate.non_negative(scale=scale)
  _validate.finite(scale=scale)
  if not exact:
    if eta is not None:
      raise ValueError(f'eta={eta} applies to exact=True only.')
    return _add_noise(noise_lib.laplace, key, _LAPLACE, scale=scale)
  if not _validate.concrete(scale):
    raise ValueError('add_laplace_noise(exact=True) needs a concrete scale '
                     '(the exact sampler takes a rational scale); pass '
                     'exact=False to trace it.')
  if float(scale) == 0:  # no noise: nothing to leak
    if eta is not None:
      raise ValueError(f'eta={eta} needs scale > 0.')
    return keyed_transformation(
        key, lambda updates, k, p: _numerics.zero_nonfinite(updates),
        stream=_LAPLACE, public=(scale,))
  eta = grid_spacing(scale, eta)
  grid_scale = laplace_grid_scale(scale, eta)

  def step(updates, step_key, params):
    del params
    leaves, treedef = jax.tree.flatten(_numerics.zero_nonfinite(updates))
    keys = jax.random.split(step_key, len(leaves))
    out = []
    for k, x in zip(keys, leaves):
      x = jnp.asarray(x)
      if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f'Expected floating updates, got dtype {x.dtype} '
                         '(the exact Laplace releases values on eta Z).')
      out.append(grid_laplace(k, x, grid_scale, eta).astype(x.dtype))
    return jax.tree.unflatten(treedef, out)

  return keyed_transformation(key, step, stream=_LAPLACE,
                              public=(scale, eta))


def _exact_grid_bits(n: int, epsilon: float) -> int:
  """k with grid eta = xi / 2^k: as fine as 2^-10 xi while the noise scale
  in grid units, 2^(k+1) n / epsilon, stays <= 2^20 (so |noise| < 2^30)."""
  k = min(10, math.floor(19 - math.log2(n / epsilon)))
  if k < 0:
    raise ValueError(
        f'n / epsilon = {n / epsilon:g} is too large for the exact discrete '
        'Laplace (scale above 2^20 grid units); pass exact=False.')
  return k


def laplace_privatizer(epsilon: float, linf_clip: float, *,
                       key: jax.Array, exact: bool = True
                       ) -> optax.GradientTransformation:
  """The unsparsified baseline: clip every coordinate to [-xi, xi], add Laplace.

  The O(n) mechanism Farokhi compares against: Laplace noise of scale
  2 xi n / epsilon on each of the n coordinates of the flattened update,
  xi = ``linf_clip``.

  ``exact=True`` (default) draws the noise without floating point: each
  clipped coordinate is rounded to the grid eta Z with eta = xi / 2^k (k <=
  10, so the rounding moves it by at most xi / 2^11), exact discrete Laplace
  noise of the same scale is added to the integer codes
  (``dpjax.noise.discrete_laplace``), and the integer sum times eta is
  released, a function of the noisy integer alone (no low-order-bit leak,
  Mironov 2012). ``exact=False`` adds float32 Laplace noise to the float
  value, as the paper does; it allows traced hyperparameters.

  Args:
    epsilon: per-step budget (> 0); concrete when ``exact``, else may be
      traced.
    linf_clip: coordinate bound xi (> 0); concrete when ``exact``, else may
      be traced.
    key: PRNG key (required); step t uses ``fold_in(key, t)``.
    exact: discrete noise on a grid (default) or float noise.

  Returns:
    An optax transformation with ``KeyStepState``.

  Privacy:
    Two clipped updates differ by at most 2 xi n in L1, for ANY two inputs
    (on the grid: codes in [-2^k, 2^k], so at most 2^(k+1) n grid units
    against a scale of 2^(k+1) n / epsilon units, rounded up by the exact
    sampler), so a step is epsilon-DP: ``dpjax.accounting.laplace_event(
    epsilon, steps=T)``, the same event as the certified compressive
    mechanism.

  References:
    Farokhi, Sec. 1 (the O(n_theta) baseline); Dwork & Roth 2014, Thm 3.6;
    Mironov, "On significance of the least significant bits for
    differential privacy", CCS 2012; Canonne, Kamath, Steinke 2020.

  Example:
    >>> tx = laplace_privatizer(1.0, 0.5, key=jax.random.key(0))
    >>> tx.update(jnp.zeros(3), tx.init(None))[0].shape
    (3,)
  """
  _validate.positive(epsilon=epsilon, linf_clip=linf_clip)
  _validate.finite(epsilon=epsilon, linf_clip=linf_clip)
  if exact and not all(_validate.concrete(v) for v in (epsilon, linf_clip)):
    raise ValueError('laplace_privatizer(exact=True) needs concrete Python '
                     'numbers for epsilon and linf_clip (the exact sampler '
                     'takes a rational scale); pass exact=False to trace them.')

  def exact_step(updates, step_key, params):
    del params
    flat, unflatten = flatten_util.ravel_pytree(updates)
    flat = _numerics.zero_nonfinite(flat)  # NaN/inf: released as 0
    n = flat.shape[0]
    k = _exact_grid_bits(n, float(epsilon))
    eta = float(linf_clip) / 2**k
    codes = jnp.round(jnp.clip(flat.astype(jnp.float32) / eta, -2**k, 2**k))
    noise = noise_lib.discrete_laplace(
        step_key, flat.shape, scale=2**(k + 1) * n / float(epsilon))
    total = codes.astype(jnp.int32) + noise
    return unflatten((total.astype(jnp.float32) * eta).astype(flat.dtype))

  if exact:
    return keyed_transformation(key, exact_step, stream=_PRIVATIZER,
                                public=(epsilon, linf_clip))

  def step(updates, step_key, params):
    del params
    flat, unflatten = flatten_util.ravel_pytree(updates)
    flat = _numerics.zero_nonfinite(flat)  # NaN/inf: released as 0
    scale = 2 * linf_clip * flat.shape[0] / epsilon
    noise = noise_lib.laplace(step_key, flat.shape, scale=scale,
                              dtype=flat.dtype)
    return unflatten(jnp.clip(flat, -linf_clip, linf_clip) + noise)

  return keyed_transformation(key, step, stream=_PRIVATIZER,
                              public=(epsilon, linf_clip))


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
    key: PRNG key (required). Step t draws from ``fold_in(key, t)`` of
      its stream, the scale folded in (another scale: independent noise).
    eta: grid spacing (> 0), e.g. ``quantizer.spacing``.

  Returns:
    An optax transformation with ``KeyStepState``.

  Privacy:
    On a query with values in eta Z and L2 sensitivity Delta (same units),
    one step is rho-zCDP with rho = Delta^2 / (2 sigma^2) (Canonne, Kamath,
    Steinke 2020, Thm. 14; Ding et al. Q-DPSGD-2, Thm. 4):
    ``dpjax.accounting.discrete_gaussian_event(sigma, Delta, steps=T)``.
    The sampler
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
  return _add_noise(noise_lib.discrete_gaussian_grid, key, _DISCRETE_GAUSSIAN,
                    sigma=sigma,
                    eta=eta)


def laplace_privatizer_bits(dimension: int, value_bits: int = 32) -> int:
  """Bits of one step's message: every coordinate, ``value_bits`` each.

  Example:
    >>> laplace_privatizer_bits(64)
    2048
  """
  _validate.positive_int(dimension=dimension, value_bits=value_bits)
  return dimension * value_bits
