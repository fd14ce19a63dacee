"""The compressive mechanism on a top-k sparsified gradient (Farokhi, Alg. 2-3).

A step keeps the kappa largest-magnitude coordinates of the update v (eq. 2),
clips them to [-xi, xi] (Assumption 1), measures x = v / (2 xi kappa) with a
fresh Gaussian sensing matrix Psi in R^{p x n} (sqrt(p) Psi i.i.d. N(0, 1)),
adds i.i.d. Laplace noise to the p measurements, recovers x by CoSaMP and
returns 2 xi kappa x*.

Sensitivity. Any two such inputs give x, x' with at most kappa nonzeros each
and |x_i|, |x'_i| <= 1 / (2 kappa), so d = x - x' has |d_j| <= 1 / kappa and
||d||_1 <= 1 (Farokhi, proof of Prop. 1). Then

  ||Psi d||_1 <= sum_j |d_j| ||Psi_j||_1 <= (1 / kappa) sum of the kappa
  largest column norms ||Psi_j||_1 =: Delta(Psi),

the maximum of the middle sum over that polytope. The bound holds for ANY two
inputs, not only neighbouring datasets, so it needs no assumption on how the
update was computed. Psi is drawn from the key, independently of the data.

Two noise calibrations:

* ``"certified"`` (default): Laplace scale Delta(Psi) / epsilon. Given Psi the
  release is the Laplace mechanism on Psi x with L1 sensitivity Delta(Psi):
  epsilon-DP, whether or not Psi is published.
* ``"paper"``: scale sqrt(p) / epsilon, as in Alg. 2. The paper claims
  epsilon-DP (Prop. 1, via Li et al. 2011, Lemma 3). Given Psi the release is
  only (epsilon Delta(Psi) / sqrt(p))-DP, and Delta(Psi) exceeds sqrt(p)
  whenever the kappa largest column norms do on average (for p = 20 a column
  norm has mean sqrt(2p/pi) ~ 0.80 sqrt(p) and standard deviation ~ 0.60,
  so among many columns some exceed sqrt(p)). The transform records that
  realized epsilon in its state, so a ledger can hold the guarantee that
  actually ran.

Noise without floating-point leaks (``exact=True``, default; Mironov
2012). Delta(Psi) is traced (Psi is drawn under jit), but the certified query
q = Psi x / Delta(Psi) has L1 sensitivity 1 for any two inputs, so its
Laplace scale 1 / epsilon is static (the paper's sqrt(p) / epsilon on Psi x
is static too). q goes through ``dpjax.add_laplace_noise``'s mechanism
(exact randomized rounding to a grid, exact discrete Laplace noise widened
so that its epsilon per unit of L1 distance is exactly 1 / scale) and is
multiplied back by Delta(Psi): the certified mechanism, with a noise scale
larger by a factor below 1 + 2^-11 for epsilon <= 2^20, and Delta(Psi)
enlarged by ``compressive_sensitivity_margin`` for float32 rounding.
``exact=False`` keeps the paper's float Laplace (and a traced epsilon).
"""

import math
from typing import Any, NamedTuple

import dp_accounting
import jax
from jax import flatten_util
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _keys
from dpjax import _numerics
from dpjax import _validate
from dpjax import accounting
from dpjax import compression
from dpjax import noise as noise_lib
from dpjax import recovery
from dpjax.transforms import _adding_noise


CALIBRATIONS = ('certified', 'paper')
_STREAM = _keys.register('compressive_privatizer', __name__)


class CompressiveRelease(NamedTuple):
  """One output of ``compressive_mechanism``.

  Attributes:
    value: the private estimate 2 xi kappa x* of the sparsified update.
    epsilon: the pure-DP epsilon of this release given its sensing matrix,
      Delta(Psi) / (noise scale): the requested epsilon under ``"certified"``,
      the realized one under ``"paper"``.
    noise_scale: the Laplace scale used on the measurements.
    sensing_matrix: Psi, data-independent (it may be published; unused
      fields cost nothing under jit).
    measurements: the noisy measurements y (the private message; ``value``
      is recovered from y and Psi). With ``exact``, y is an integer times
      the grid spacing (times Delta(Psi), computed, under ``"certified"``).
  """
  value: jax.Array
  epsilon: jax.Array
  noise_scale: jax.Array
  sensing_matrix: jax.Array
  measurements: jax.Array


def _validate_mechanism(kappa, num_measurements, epsilon, linf_clip,
                        calibration, exact=False):
  _validate.positive_int(kappa=kappa, num_measurements=num_measurements)
  if num_measurements < 3:
    raise ValueError(
        f'Expected num_measurements={num_measurements} >= 3 (Alg. 2, line 1).')
  _validate.positive(epsilon=epsilon, linf_clip=linf_clip)
  if calibration not in CALIBRATIONS:
    raise ValueError(
        f'Expected noise_calibration={calibration!r} in {CALIBRATIONS}.')
  if exact:
    if not _validate.concrete(epsilon):
      raise ValueError('The exact compressive mechanism needs a concrete '
                       'epsilon (the exact sampler takes a rational scale); '
                       'pass exact=False to trace it.')
    _validate.finite(epsilon=epsilon)
    if num_measurements + 2 * kappa > 2**20:
      raise ValueError(f'Expected num_measurements + 2 kappa = '
                       f'{num_measurements + 2 * kappa} <= 2^20 (exact=True).')
    try:
      _grid(num_measurements, epsilon, calibration)
    except ValueError:
      raise ValueError(f'epsilon={epsilon} is too large for the exact '
                       'sampler; pass exact=False.') from None


def _grid(num_measurements, epsilon, calibration):
  """(unit-free Laplace scale, grid spacing eta) of the exact mechanism.

  Certified: scale 1 / epsilon on q = Psi x / Delta(Psi), |q_i| < 1.
  Paper: sqrt(p) / epsilon on Psi x, |(Psi x)_i| <= max_j |Psi_ij| / 2,
  which exceeds 16 only if a N(0, 1) entry of sqrt(p) Psi exceeds 32
  sqrt(p); the grid covers 16 (larger values would be clipped, a contraction
  that leaves the privacy as stated).
  """
  if calibration == 'certified':
    scale, bound = 1 / float(epsilon), 1.0
  else:
    scale, bound = math.sqrt(num_measurements) / float(epsilon), 16.0
  eta = _adding_noise.laplace_grid_spacing(scale, bound)
  return scale, _adding_noise.grid_spacing(scale, eta)


def compressive_sensitivity_margin(num_measurements: int,
                                   kappa: int) -> float:
  """1 + (p + 2 kappa + 8) 2^-23: Delta(Psi) as computed, times this, bounds
  the L1 sensitivity of Psi x as computed in float32.

  x's entries are at most (1 + 3u) / (2 kappa) (u = 2^-24, rounding of
  x / (2 xi kappa)); Psi x sums at most kappa nonzero products (error
  gamma_kappa = kappa u / (1 - kappa u) relative to sum |Psi_ij x_j|);
  the computed Delta(Psi) is at least (1 - gamma_p)(1 - gamma_kappa)(1 - u)
  Delta(Psi), and dividing by it (and rounding this factor) costs 2u more:
  to first order (p + 2 kappa + 7) u, doubled here, which covers the
  second-order terms for p + 2 kappa <= 2^20.

  Example:
    >>> compressive_sensitivity_margin(20, 2) - 1 == 32 * 2.0**-23
    True
  """
  return 1 + (num_measurements + 2 * kappa + 8) * 2.0**-23


def _exact_measurements(noise_key, psi, x, kappa, epsilon, calibration):
  """(y, epsilon, noise scale) of the exact mechanism (module docstring)."""
  p = psi.shape[0]
  measured = jnp.dot(psi, x, precision=jax.lax.Precision.HIGHEST)
  # bound >= the L1 sensitivity of ``measured`` as computed
  bound = recovery.sensing_l1_sensitivity(
      psi, kappa) * compressive_sensitivity_margin(p, kappa)
  scale, eta = _grid(p, epsilon, calibration)
  if calibration == 'certified':
    unit = bound  # q = measured / bound has L1 sensitivity <= 1
    realized = jnp.asarray(float(epsilon), jnp.float32)
  else:
    unit, realized = jnp.ones([], jnp.float32), bound / scale
  grid = _adding_noise.laplace_grid_scale(scale, eta)
  y = unit * _adding_noise.grid_laplace(noise_key, measured / unit, grid, eta)
  noise_scale = unit * (eta * float(noise_lib.discrete_laplace_scale(grid)))
  return y, realized, noise_scale


def compressive_measurements(key: jax.Array,
                             sensing_matrix: jax.typing.ArrayLike,
                             x: jax.typing.ArrayLike, *, kappa: int,
                             epsilon: float,
                             noise_calibration: str = 'certified'):
  """Alg. 2's noisy measurements y = Psi x + Laplace on a given Psi.

  The measuring and noising step of ``compressive_mechanism`` (exact grid
  Laplace, the module docstring) for a fixed sensing matrix, e.g. to audit
  one Psi; ``x`` is the clipped, scaled kappa-sparse vector.

  Returns:
    ``(y, realized epsilon, noise scale)``.

  Example:
    >>> psi = dpjax.recovery.gaussian_sensing_matrix(jax.random.key(0), 3, 4)
    >>> y, eps, _ = compressive_measurements(
    ...     jax.random.key(1), psi, jnp.zeros(4).at[0].set(0.5), kappa=1,
    ...     epsilon=1.0)
    >>> y.shape, float(eps)
    ((3,), 1.0)
  """
  if noise_calibration not in ('certified', 'paper'):
    raise ValueError(f'Expected noise_calibration={noise_calibration!r} in '
                     "('certified', 'paper').")
  _validate.positive(epsilon=epsilon)
  return _exact_measurements(_validate.key(key), jnp.asarray(sensing_matrix),
                             jnp.asarray(x), kappa, epsilon,
                             noise_calibration)


def compressive_mechanism(key: jax.Array, v: jax.typing.ArrayLike, *,
                          kappa: int, num_measurements: int, epsilon: float,
                          linf_clip: float,
                          noise_calibration: str = 'certified',
                          exact: bool = True,
                          **cosamp_options: Any) -> CompressiveRelease:
  """Alg. 2 on a flat vector: top-kappa, clip, measure, add Laplace, recover.

  Args:
    key: PRNG key; split into the sensing matrix's and the noise's.
    v: the update, ``[n]``. It need not be sparse or bounded: the kappa
      largest magnitudes are kept (eq. 2) and clipped to [-xi, xi],
      xi = ``linf_clip``.
    kappa: sparsity, 1 <= kappa <= n.
    num_measurements: p >= 3 (the paper takes p = O(kappa log(n / kappa))).
    epsilon: per-release privacy budget (> 0); concrete when ``exact``,
      else it may be traced.
    linf_clip: xi, the coordinate bound of Assumption 1 (> 0); may be traced.
    noise_calibration: ``"certified"`` or ``"paper"`` (module docstring).
    exact: grid-valued exact noise in float32 (default; module docstring) or
      the paper's float Laplace in v's dtype.
    **cosamp_options: passed to ``cosamp``.

  Returns:
    A ``CompressiveRelease``.

  Privacy:
    ``"certified"``: epsilon-DP for any two inputs (so for any neighbouring
    relation), conditional on Psi, which is data-independent and may be
    public. ``"paper"``: ``release.epsilon``-DP given Psi, which may exceed
    the requested epsilon; the paper's epsilon-DP claim holds only when
    Delta(Psi) <= sqrt(p). ``exact``: these hold for the float32 computation
    as run, up to the exact sampler's int32 range (probability below
    e^-1000, as ``add_laplace_noise``): Delta(Psi) is enlarged by
    ``compressive_sensitivity_margin`` to cover float32 rounding, so the paper
    calibration's ``release.epsilon`` is larger by that factor. Without
    ``exact``: the guarantee of ideal real-valued Laplace noise.

  References:
    Farokhi, Alg. 2 and Prop. 1-2; Li, Zhang, Winslett, Yang, "Compressive
    mechanism", WPES 2011; Mironov 2012 (float leaks).

  Example:
    >>> out = compressive_mechanism(jax.random.key(0), jnp.arange(50.), kappa=3,
    ...                             num_measurements=24, epsilon=1e6,
    ...                             linf_clip=100.)
    >>> [int(i) for i in jnp.flatnonzero(jnp.round(out.value))]
    [47, 48, 49]
  """
  v = _numerics.zero_nonfinite(jnp.asarray(v))  # NaN/inf: released as 0
  if v.ndim != 1:
    raise ValueError(f'Expected a flat vector v, got shape {v.shape}.')
  _validate_mechanism(kappa, num_measurements, epsilon, linf_clip,
                      noise_calibration, exact)
  _validate.sparsity(kappa, v.shape[0], 'kappa')
  psi_key, noise_key = jax.random.split(_validate.key(key))
  psi = recovery.gaussian_sensing_matrix(psi_key, num_measurements, v.shape[0])
  xi = linf_clip
  if exact:
    x = jnp.clip(compression.keep_top_k(v.astype(jnp.float32), kappa), -xi,
                 xi) / (2 * xi * kappa)
    y, realized, scale = _exact_measurements(noise_key, psi, x, kappa,
                                             epsilon, noise_calibration)
    x_star = recovery.cosamp(psi, y, kappa, **cosamp_options)
    return CompressiveRelease((2 * xi * kappa * x_star).astype(v.dtype),
                              realized, scale, psi, y)
  psi = psi.astype(v.dtype)
  sensitivity = recovery.sensing_l1_sensitivity(psi, kappa)
  if noise_calibration == 'certified':
    scale = sensitivity / epsilon
  else:
    scale = jnp.asarray(math.sqrt(num_measurements) / epsilon, v.dtype)
  x = jnp.clip(compression.keep_top_k(v, kappa), -xi, xi) / (2 * xi * kappa)
  y = psi @ x + noise_lib.laplace(noise_key, (num_measurements,), scale=1.0,
                                  dtype=v.dtype) * scale
  x_star = recovery.cosamp(psi, y, kappa, **cosamp_options)
  return CompressiveRelease(2 * xi * kappa * x_star, sensitivity / scale,
                            scale, psi, y)


class CompressivePrivatizerState(NamedTuple):
  """Step counter, stream key and the last step's realized epsilon.

  Step t draws its sensing matrix and noise from ``fold_in(key, t)``, with
  ``key`` the privatizer's stream of the factory's key.
  ``epsilon`` is data-independent (a function of the sensing matrix only).
  """
  count: jax.Array  # int32 scalar
  key: jax.Array
  epsilon: jax.Array  # float32 scalar; 0 before the first step


def compressive_privatizer(kappa: int, num_measurements: int, epsilon: float,
                           linf_clip: float, *, key: jax.Array,
                           noise_calibration: str = 'certified',
                           exact: bool = True, **cosamp_options: Any
                           ) -> optax.GradientTransformation:
  """Farokhi's Alg. 2 as a transform on the aggregated update.

  The update pytree is flattened to one vector of n coordinates, privatized
  by ``compressive_mechanism`` with the key ``fold_in(key, t)`` at step t and
  unflattened. Chained before ``optax.sgd`` on the full-batch gradient it is
  Alg. 3.

  Args:
    kappa: sparsity (1 <= kappa <= n); static.
    num_measurements: p >= 3; static.
    epsilon: per-step budget (> 0); concrete when ``exact``, else it may be
      traced.
    linf_clip: xi (> 0), the kept coordinates are clipped to [-xi, xi]; may
      be traced.
    key: PRNG key (required).
    noise_calibration: ``"certified"`` (default) or ``"paper"``; static.
    exact: exact grid-valued noise (default) or the paper's float Laplace
      (``compressive_mechanism``).
    **cosamp_options: passed to ``cosamp``.

  Returns:
    An optax transformation with ``CompressivePrivatizerState``.

  Privacy:
    Per step, as ``compressive_mechanism``: ``"certified"`` is epsilon-DP
    given the public sensing matrix, for any two inputs; ``"paper"`` is
    ``state.epsilon``-DP given it, not the requested epsilon; ``exact``
    holds them for the float32 computation as run (without it, for ideal
    real-valued noise). ``compressive_privatizer_event`` builds the event
    of a run from the same hyperparameters and key (recomputing each step's
    sensing matrix).

  References:
    Farokhi, Alg. 2-3.

  Example:
    >>> tx = compressive_privatizer(2, 8, epsilon=1.0, linf_clip=1.0,
    ...                             key=jax.random.key(0))
    >>> out, state = tx.update(jnp.ones(16), tx.init(None))
    >>> int((out != 0).sum()) <= 2, float(state.epsilon)
    (True, 1.0)
  """
  _validate_mechanism(kappa, num_measurements, epsilon, linf_clip,
                      noise_calibration, exact)
  key = _keys.stream(_validate.key(key), _STREAM)

  def init_fn(params):
    del params
    return CompressivePrivatizerState(jnp.zeros([], jnp.int32), key,
                                      jnp.zeros([], jnp.float32))

  def update_fn(updates, state, params=None):
    del params
    flat, unflatten = flatten_util.ravel_pytree(updates)
    release = compressive_mechanism(
        jax.random.fold_in(state.key, state.count), flat, kappa=kappa,
        num_measurements=num_measurements, epsilon=epsilon,
        linf_clip=linf_clip, noise_calibration=noise_calibration,
        exact=exact, **cosamp_options)
    return unflatten(release.value), CompressivePrivatizerState(
        optax.safe_increment(state.count), state.key,
        release.epsilon.astype(jnp.float32))

  return optax.GradientTransformation(init_fn, update_fn)


def compressive_privatizer_epsilons(kappa: int, num_measurements: int,
                                    epsilon: float, *, key: jax.Array,
                                    dimension: int, steps: int,
                                    first_step: int = 0,
                                    noise_calibration: str = 'certified',
                                    exact: bool = True) -> np.ndarray:
  """The pure-DP epsilon of each step of ``compressive_privatizer``.

  Recomputes the sensing matrix of steps ``first_step .. first_step + steps
  - 1`` from the key (it never depends on the data) and returns
  Delta(Psi_t) / (noise scale_t): ``epsilon`` at every step under
  ``"certified"``, the realized epsilon under ``"paper"`` (with ``exact``,
  Delta(Psi_t) enlarged by ``compressive_sensitivity_margin``, as the
  mechanism states).

  Example:
    >>> compressive_privatizer_epsilons(2, 8, 1.0, key=jax.random.key(0),
    ...                                 dimension=16, steps=3).tolist()
    [1.0, 1.0, 1.0]
  """
  _validate_mechanism(kappa, num_measurements, epsilon, 1.0,
                      noise_calibration, exact)
  _validate.positive_int(dimension=dimension, steps=steps)
  _validate.sparsity(kappa, dimension, 'kappa')
  if noise_calibration == 'certified':
    return np.full(steps, float(epsilon))
  key = _keys.stream(_validate.key(key), _STREAM)

  def one(t):
    psi_key, _ = jax.random.split(jax.random.fold_in(key, t))
    psi = recovery.gaussian_sensing_matrix(psi_key, num_measurements,
                                           dimension)
    return recovery.sensing_l1_sensitivity(psi, kappa)

  sens = jax.jit(jax.vmap(one))(jnp.arange(first_step, first_step + steps))
  sens = np.asarray(sens, np.float64)
  if exact:
    sens = sens * compressive_sensitivity_margin(num_measurements, kappa)
  return sens * float(epsilon) / math.sqrt(num_measurements)


def compressive_privatizer_event(kappa: int, num_measurements: int,
                                 epsilon: float, *, key: jax.Array,
                                 dimension: int, steps: int = 1,
                                 first_step: int = 0,
                                 noise_calibration: str = 'certified',
                                 exact: bool = True) -> dp_accounting.DpEvent:
  """DpEvent of ``steps`` steps of ``compressive_privatizer`` (same arguments).

  ``"certified"``: ``steps`` self-composed ``laplace_event(epsilon)``.
  ``"paper"``: the composition of ``laplace_event(eps_t)`` with the realized
  eps_t of each step (``compressive_privatizer_epsilons``).

  Example:
    >>> ev = compressive_privatizer_event(2, 8, 0.5, key=jax.random.key(0),
    ...                                   dimension=16, steps=4)
    >>> dpjax.accounting.basic_composition(ev)
    (2.0, 0.0)
  """
  eps = compressive_privatizer_epsilons(
      kappa, num_measurements, epsilon, key=key, dimension=dimension,
      steps=steps, first_step=first_step, noise_calibration=noise_calibration,
      exact=exact)
  if noise_calibration == 'certified':
    return dp_accounting.SelfComposedDpEvent(
        accounting.laplace_event(float(epsilon)), steps)
  return dp_accounting.ComposedDpEvent(
      [accounting.laplace_event(float(e)) for e in eps])


def compressive_privatizer_bits(num_measurements: int,
                                value_bits: int = 32) -> int:
  """Bits of one step's message: the p noisy measurements y = Psi x + noise.

  The recovery by CoSaMP is post-processing, so a client may send y alone
  (Psi is regenerated from the shared key).

  Example:
    >>> compressive_privatizer_bits(20)
    640
  """
  _validate.positive_int(num_measurements=num_measurements,
                         value_bits=value_bits)
  return num_measurements * value_bits
