"""The exact Gaussian mechanism: randomized rounding to gamma Z plus exact
discrete Gaussian noise, for ``add_exact_gaussian_noise`` and DP-SGD.

Why: float32 Gaussian noise (``add_gaussian_noise``, ``dpsgd``'s default
path) is the ideal real-valued Gaussian mechanism only approximately. Its
sampler produces a finite, irregular set of floats and ``x + noise`` rounds
to float32, so the low-order bits of a released value depend on x: an
attacker who sees the bits can tell neighbours apart far beyond the stated
epsilon (Mironov 2012; Jin et al. 2022 measure it for Gaussian samplers).
The accounting of the float path is that of the ideal mechanism and says
nothing about those bits.

The exact path releases gamma * k with k an integer vector:

  k = R(x / gamma) + Z,  Z ~ N_Z(0, sigma_z'^2)^d,

R the unbiased randomized rounding of ``noise.randomized_round`` (up with
probability exactly the fractional part; |x / gamma| clipped at 2^30, a
contraction) and Z the exact discrete Gaussian of ``noise.discrete_gaussian``
with sigma_z' >= sigma_z = stddev / gamma (``discrete_gaussian_sigma_squared``).
gamma is a power of two, so x / gamma is exact in float32 and the release is
a function of k alone: its low bits carry nothing more. Every released float
is fl(k) * gamma (fl(k) = k for |k| <= 2^24).

Sensitivity. The sum is rounded once, centrally, so DDG's conditional
rounding does not apply (it bounds the norm of ONE rounded vector, the
sensitivity only when each contribution is rounded on its own). Couple the
roundings of two neighbouring inputs u, u' (grid units) through one uniform
U per coordinate, R(u) = floor(u + U): each coordinate of R(u) - R(u')
differs from u - u' by less than 1, so ||R(u) - R(u')||_2 <= ||u - u'||_2 +
sqrt(d) = S / gamma + sqrt(d) (DDG's deterministic bound,
``accounting.rounded_l2_norm_bound(S / gamma, d, beta=0)``). For every
coupled pair the discrete Gaussian has RDP a Delta^2 / (2 sigma_z'^2)
(Canonne, Kamath, Steinke 2020, Thm. 14), and Renyi divergence is jointly
quasi-convex (van Erven & Harremoes 2014, Thm. 13), so the mixture keeps
that bound. The default grid makes sqrt(d) small against S / gamma:
sigma_z in [2^18, 2^19), so the inflation is sqrt(d) gamma / S <= sqrt(d)
noise_multiplier / 2^18 (0.4 % at d = 10^6, noise multiplier 1).

What is not modelled: float32 summation error of the clipped sum itself (the
same for both paths) and int32 wrap-around of k, which needs |Z| > 2^30 - |x|
/ gamma, probability below exp(-2^20) at the default grid.
"""

import math
from typing import Any, NamedTuple

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _keys
from dpjax import _numerics
from dpjax import _validate
from dpjax._composition import repeated
from dpjax import accounting
from dpjax import noise as noise_lib
from dpjax.transforms._state import keyed_transformation
from dpjax.transforms._state import KeyStepState

_NOISE_STREAM = _keys.register('exact_gaussian_noise', __name__)
DPSGD_STREAM = _keys.register('exact_dpsgd_noise', __name__)

GRID_BITS = 18  # default grid: stddev / gamma in [2^18, 2^19)
CODE_BITS = 29  # default grid: bound / gamma <= 2^29 (codes fit int32)
_MIN_GAMMA, _MAX_GAMMA = 2.0**-100, 2.0**100


def _pow2_at_most(x: float) -> float:
  return math.ldexp(1.0, math.frexp(float(x))[1] - 1)


def exact_gaussian_grid(stddev: float, bound: float | None = None) -> float:
  """The default grid spacing gamma of the exact Gaussian path.

  The largest power of two with stddev / gamma >= 2^18 (``GRID_BITS``), or,
  if larger, the smallest power of two with bound / gamma <= 2^29 (inputs up
  to ``bound`` are not clipped). ``stddev`` 0 uses ``bound`` alone.

  Example:
    >>> exact_gaussian_grid(1.0) == 2.0**-18
    True
  """
  _validate.non_negative(stddev=stddev)
  _validate.finite(stddev=stddev)
  gamma = 0.0
  if stddev > 0:
    gamma = math.ldexp(_pow2_at_most(stddev), -GRID_BITS)
  if bound is not None:
    _validate.positive(bound=bound)
    b = math.ldexp(float(bound), -CODE_BITS)
    floor2 = _pow2_at_most(b)
    gamma = max(gamma, floor2 if floor2 == b else 2 * floor2)
  if gamma == 0:
    raise ValueError('Expected stddev > 0 or a bound to choose gamma from.')
  return gamma


def _f32_up(x: float) -> float:
  """The smallest float32 >= x (so the state holds it exactly)."""
  y = np.float32(x)
  if float(y) < x:
    y = np.nextafter(y, np.float32(np.inf))
  return float(y)


def grid_sigma(stddev: float, gamma: float | None = None) -> tuple[float,
                                                                    float]:
  """(gamma, sigma_z): the checked grid and the lattice sigma the sampler gets.

  sigma_z is stddev / gamma rounded up to a float32; the sampler then draws
  from sigma_z' >= sigma_z (``exact_sigma``).

  Example:
    >>> grid_sigma(1.0)[1] == 2.0**18
    True
  """
  for name, v in (('stddev', stddev), ('gamma', gamma)):
    if v is not None and not _validate.concrete(v):
      raise ValueError(f'Expected a concrete {name} (the exact sampler takes '
                       'rational constants); the float path traces it.')
  _validate.non_negative(stddev=stddev)
  _validate.finite(stddev=stddev)
  if gamma is None:
    gamma = exact_gaussian_grid(stddev)
  gamma = float(gamma)
  if not (_MIN_GAMMA <= gamma <= _MAX_GAMMA and math.frexp(gamma)[0] == 0.5):
    raise ValueError(f'Expected gamma={gamma} to be a power of two in '
                     '[2^-100, 2^100] (so that x / gamma is exact).')
  sigma = _f32_up(float(stddev) / gamma)
  if sigma and not 2.0**-10 <= sigma <= noise_lib.MAX_DISCRETE_SIGMA:
    raise ValueError(f'Expected stddev / gamma = {sigma:g} in [2^-10, 2^21] '
                     f'(stddev={stddev}, gamma={gamma}).')
  return gamma, sigma


def exact_sigma(sigma_z: float) -> float:
  """The sampler's sigma_z' (``discrete_gaussian_sigma_squared``), rounded
  down by 2^-50 relative so that a float never overstates it."""
  s2 = noise_lib.discrete_gaussian_sigma_squared(sigma_z)
  return math.sqrt(float(s2)) * (1 - 2.0**-50)


def grid_sensitivity(l2_sensitivity: float, gamma: float,
                     dimension: int) -> float:
  """S / gamma + sqrt(d), the L2 sensitivity of the rounded codes (module
  docstring), rounded up to a float32.

  Example:
    >>> grid_sensitivity(1.0, 0.5, 16)
    6.0
  """
  bound = accounting.rounded_l2_norm_bound(float(l2_sensitivity) / gamma,
                                           dimension, 0.0)
  return _f32_up(bound)


def release(key: jax.Array, updates: Any, gamma: float,
            sigma_z: float) -> Any:
  """gamma (R(x / gamma) + Z) for every coordinate of the pytree ``updates``.

  Non-finite coordinates become 0 first. The leaves are flattened into one
  float32 vector (one sampler run), released, and cast back to their dtypes.
  """
  leaves, treedef = jax.tree.flatten(_numerics.zero_nonfinite(updates))
  leaves = [jnp.asarray(x) for x in leaves]
  for x in leaves:
    if not jnp.issubdtype(x.dtype, jnp.floating):
      raise ValueError(f'Expected floating updates, got dtype {x.dtype} (the '
                       'exact Gaussian releases values on gamma Z).')
  if not leaves:
    return updates
  flat = jnp.concatenate([x.astype(jnp.float32).ravel() for x in leaves])
  round_key, noise_key = jax.random.split(key)
  k = noise_lib.randomized_round(round_key, flat * (1.0 / gamma))
  if sigma_z:
    k = k + noise_lib.discrete_gaussian(noise_key, flat.shape, sigma=sigma_z)
  out = k.astype(jnp.float32) * jnp.float32(gamma)
  parts, start = [], 0
  for x in leaves:
    parts.append(out[start:start + x.size].reshape(x.shape).astype(x.dtype))
    start += x.size
  return jax.tree.unflatten(treedef, parts)


def _size(tree: Any) -> int:
  return int(sum(np.size(x) for x in jax.tree.leaves(tree)))


def add_exact_gaussian_noise(stddev: float, *, key: jax.Array,
                             gamma: float | None = None
                             ) -> optax.GradientTransformation:
  """The exact Gaussian mechanism: releases gamma (R(x / gamma) + Z).

  The float-free counterpart of ``add_gaussian_noise`` (module docstring): x
  is rounded at random to the grid gamma Z and exact discrete Gaussian
  noise of scale stddev / gamma (grid units, rounded up) is added to the
  integers; the release is a function of the integers alone. Inputs beyond
  2^30 gamma (about 2^11 stddev on the default grid) are clipped there.

  Args:
    stddev: noise scale in the units of x (>= 0; 0 rounds only); concrete.
    key: PRNG key (required). Step t uses ``fold_in(key, t)`` of its
      stream, stddev and gamma folded in (others: independent noise).
    gamma: grid spacing, a power of two; default
      ``exact_gaussian_grid(stddev)`` (stddev / gamma in [2^18, 2^19)).

  Returns:
    An optax transformation with ``KeyStepState``.

  Privacy:
    On a query of L2 sensitivity S, one step is the discrete Gaussian
    mechanism with sensitivity S / gamma + sqrt(d) grid units (d the number
    of coordinates) and the sampler's sigma_z':
    ``add_exact_gaussian_noise_event(stddev, S, d, gamma=gamma)``.

  References:
    Canonne, Kamath, Steinke 2020, Thm. 14; Kairouz, Liu, Steinke 2021,
    Sec. 4.1 (rounding); Mironov 2012; Jin et al., "Are we there yet?
    Timing and floating-point attacks on differential privacy systems",
    IEEE S&P 2022.

  Example:
    >>> tx = add_exact_gaussian_noise(1.0, key=jax.random.key(0))
    >>> out = tx.update(jnp.array([0.3, 7.0]), tx.init(None))[0]
    >>> bool(jnp.all(out / 2.0**-18 == jnp.round(out / 2.0**-18)))
    True
  """
  if float(stddev) == 0 and gamma is None:
    raise ValueError('Expected stddev > 0, or a gamma for stddev=0.')
  gamma, sigma_z = grid_sigma(stddev, gamma)
  return keyed_transformation(
      key, lambda updates, k, p: release(k, updates, gamma, sigma_z),
      stream=_NOISE_STREAM, public=(stddev, gamma))


def add_exact_gaussian_noise_event(stddev: float, l2_sensitivity: float,
                                   dimension: int, *,
                                   gamma: float | None = None,
                                   steps: int = 1) -> dp_accounting.DpEvent:
  """DpEvent of ``steps`` ``add_exact_gaussian_noise(stddev, gamma=gamma)``
  steps (one event, self-composed when steps > 1).

  The discrete Gaussian with the sampler's sigma_z' and L2 sensitivity
  ``grid_sensitivity(l2_sensitivity, gamma, dimension)``, as
  ``accounting.ddg_event`` with one noise share (RDP a Delta^2 /
  (2 sigma_z'^2); compose with ``accountant="rdp"``).

  Example:
    >>> ev = add_exact_gaussian_noise_event(2.0, 1.0, 1, gamma=1.0)
    >>> ev.l2_sensitivity, round(ev.sigma, 6)
    (2.0, 2.0)
  """
  _validate.positive(l2_sensitivity=l2_sensitivity, stddev=stddev)
  _validate.positive_int(dimension=dimension)
  gamma, sigma_z = grid_sigma(stddev, gamma)
  delta2 = grid_sensitivity(l2_sensitivity, gamma, dimension)
  return repeated(accounting.ddg_event(
      exact_sigma(sigma_z), 1, delta2,
      accounting.rounded_l1_norm_bound(delta2, dimension), dimension), steps)


class ExactGrid(NamedTuple):
  """The lattice of the last exact DP-SGD step (``add_dpsgd_noise``).

  Attributes:
    grid_sigma: float32, the lattice sigma_z given to the sampler, exactly.
    grid_sensitivity: float32, bound / gamma + sqrt(d) rounded up.
    dimension: int32, d (0 before the first step).
    gamma: float32, the grid spacing (a power of two).
  """
  grid_sigma: jax.Array
  grid_sensitivity: jax.Array
  dimension: jax.Array
  gamma: jax.Array

  @classmethod
  def empty(cls) -> 'ExactGrid':
    """Before the first step."""
    return cls(jnp.zeros([], jnp.float32), jnp.zeros([], jnp.float32),
               jnp.zeros([], jnp.int32), jnp.zeros([], jnp.float32))


def release_clipped(key: jax.Array, updates: Any, bound: Any,
                    noise_multiplier: Any, gamma: float | None
                    ) -> tuple[Any, ExactGrid]:
  """gamma (R(sum / gamma) + Z), Z of lattice sigma noise_multiplier x bound
  / gamma, and the grid it ran on; ``bound`` and ``noise_multiplier``
  concrete (the grid is fixed while tracing).

  Raises:
    ValueError: naming ``updates`` for a traced bound, or ``gamma`` for a
      grid whose codes would not fit int32.
  """
  if not (_validate.concrete(bound) and _validate.concrete(noise_multiplier)):
    raise ValueError('Expected updates to be a ClippedSum with a concrete '
                     'bound and a concrete noise_multiplier: the exact path '
                     'fixes its grid while tracing.')
  bound = float(bound)
  stddev = float(noise_multiplier) * bound
  if gamma is None:
    gamma = exact_gaussian_grid(stddev, bound=bound)
  gamma, sigma_z = grid_sigma(stddev, gamma)
  if bound / gamma > 2.0**CODE_BITS:
    raise ValueError(f'Expected l2_norm_clip / gamma <= 2^29 so that the '
                     f'codes fit int32, got gamma={gamma}.')
  dimension = _size(updates)
  out = release(key, updates, gamma, sigma_z)
  delta2 = grid_sensitivity(bound, gamma, dimension) if dimension else 0.0
  return out, ExactGrid(
      jnp.asarray(sigma_z, jnp.float32), jnp.asarray(delta2, jnp.float32),
      jnp.asarray(dimension, jnp.int32), jnp.asarray(gamma, jnp.float32))


def exact_step_event(s: ExactGrid, sampler: Any,
                     sigma: float) -> dp_accounting.DpEvent:
  """One step's event from an ``ExactGrid`` (one run's values).

  Poisson samplers only (add/remove-one): ``ddg_event`` with one share,
  sigma_z' and the state's grid sensitivity, Poisson-subsampled, wrapped in
  ``accounting.TruncatedPoissonSampledDpEvent`` when the sampler's cap can
  truncate. ``sigma`` 0 gives the sampler's non-private Gaussian event.
  """
  if not all(hasattr(sampler, a) for a in
             ('sampling_rate', 'num_examples', 'max_batch_size')):
    raise ValueError(
        f'sampler: the exact path is accounted for Poisson sampling '
        f'(add/remove-one) only, got {type(sampler).__name__}.')
  if sigma == 0:
    return sampler.dp_event(0.0)
  sigma_z = float(np.asarray(s.grid_sigma))
  delta2 = float(np.asarray(s.grid_sensitivity))
  d = int(np.asarray(s.dimension))
  if not (sigma_z > 0 and delta2 > 0 and d > 0):
    raise ValueError('The state holds no exact step (sigma_z, sensitivity '
                     'or dimension is 0).')
  q = float(sampler.sampling_rate)
  inner = accounting.ddg_event(exact_sigma(sigma_z), 1, delta2,
                               accounting.rounded_l1_norm_bound(delta2, d), d)
  n, cap = int(sampler.num_examples), int(sampler.max_batch_size)
  if cap > n:  # never truncates, even on an add-one neighbour
    return inner if q == 1 else dp_accounting.PoissonSampledDpEvent(q, inner)
  return accounting.TruncatedPoissonSampledDpEvent(n, q, cap, inner)
