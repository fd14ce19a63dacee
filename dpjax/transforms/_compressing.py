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
"""

import math
from typing import Any, NamedTuple

import dp_accounting
import jax
from jax import flatten_util
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import _numerics
from dpjax import _validate
from dpjax import accounting
from dpjax import noise as noise_lib
from dpjax.recovery import _cosamp
from dpjax.recovery import _sensing
from dpjax.transforms._state import keyed_transformation


CALIBRATIONS = ('certified', 'paper')


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
  """
  value: jax.Array
  epsilon: jax.Array
  noise_scale: jax.Array
  sensing_matrix: jax.Array


def _validate_mechanism(kappa, num_measurements, epsilon, linf_clip,
                        calibration):
  _validate.positive_int(kappa=kappa, num_measurements=num_measurements)
  if num_measurements < 3:
    raise ValueError(
        f'Expected num_measurements={num_measurements} >= 3 (Alg. 2, line 1).')
  _validate.positive(epsilon=epsilon, linf_clip=linf_clip)
  if calibration not in CALIBRATIONS:
    raise ValueError(
        f'Expected noise_calibration={calibration!r} in {CALIBRATIONS}.')


def compressive_mechanism(key: jax.Array, v: jax.typing.ArrayLike, *,
                          kappa: int, num_measurements: int, epsilon: float,
                          linf_clip: float, noise_calibration: str = 'certified',
                          **cosamp_options: Any) -> CompressiveRelease:
  """Alg. 2 on a flat vector: top-kappa, clip, measure, add Laplace, recover.

  Args:
    key: PRNG key; split into the sensing matrix's and the noise's.
    v: the update, ``[n]``. It need not be sparse or bounded: the kappa
      largest magnitudes are kept (eq. 2) and clipped to [-xi, xi],
      xi = ``linf_clip``.
    kappa: sparsity, 1 <= kappa <= n.
    num_measurements: p >= 3 (the paper takes p = O(kappa log(n / kappa))).
    epsilon: per-release privacy budget (> 0); may be traced.
    linf_clip: xi, the coordinate bound of Assumption 1 (> 0); may be traced.
    noise_calibration: ``"certified"`` or ``"paper"`` (module docstring).
    **cosamp_options: passed to ``cosamp``.

  Returns:
    A ``CompressiveRelease``.

  Privacy:
    ``"certified"``: epsilon-DP for any two inputs (so for any neighbouring
    relation), conditional on Psi, which is data-independent and may be
    public. ``"paper"``: ``release.epsilon``-DP given Psi, which may exceed
    the requested epsilon; the paper's epsilon-DP claim holds only when
    Delta(Psi) <= sqrt(p).

  References:
    Farokhi, Alg. 2 and Prop. 1-2; Li, Zhang, Winslett, Yang, "Compressive
    mechanism", WPES 2011.

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
                      noise_calibration)
  _cosamp.validate_sparsity(kappa, v.shape[0], 'kappa')
  psi_key, noise_key = jax.random.split(_validate.key(key))
  psi = _sensing.gaussian_sensing_matrix(psi_key, num_measurements, v.shape[0])
  psi = psi.astype(v.dtype)
  sensitivity = _sensing.sensing_l1_sensitivity(psi, kappa)
  if noise_calibration == 'certified':
    scale = sensitivity / epsilon
  else:
    scale = jnp.asarray(math.sqrt(num_measurements) / epsilon, v.dtype)
  xi = linf_clip
  x = jnp.clip(_cosamp.keep_top_k(v, kappa), -xi, xi) / (2 * xi * kappa)
  y = psi @ x + noise_lib.laplace(noise_key, (num_measurements,), scale=1.0,
                                  dtype=v.dtype) * scale
  x_star = _cosamp.cosamp(psi, y, kappa, **cosamp_options)
  return CompressiveRelease(2 * xi * kappa * x_star, sensitivity / scale,
                            scale, psi)


class CompressivePrivatizerState(NamedTuple):
  """Step counter, base key and the last step's realized epsilon.

  Step t draws its sensing matrix and noise from ``fold_in(key, t)``.
  ``epsilon`` is data-independent (a function of the sensing matrix only).
  """
  count: jax.Array  # int32 scalar
  key: jax.Array
  epsilon: jax.Array  # float32 scalar; 0 before the first step


def compressive_privatizer(kappa: int, num_measurements: int, epsilon: float,
                           linf_clip: float, *, key: jax.Array,
                           noise_calibration: str = 'certified',
                           **cosamp_options: Any
                           ) -> optax.GradientTransformation:
  """Farokhi's Alg. 2 as a transform on the aggregated update.

  The update pytree is flattened to one vector of n coordinates, privatized
  by ``compressive_mechanism`` with the key ``fold_in(key, t)`` at step t and
  unflattened. Chained before ``optax.sgd`` on the full-batch gradient it is
  Alg. 3.

  Args:
    kappa: sparsity (1 <= kappa <= n); static.
    num_measurements: p >= 3; static.
    epsilon: per-step budget (> 0); may be traced.
    linf_clip: xi (> 0), the kept coordinates are clipped to [-xi, xi]; may
      be traced.
    key: PRNG key (required).
    noise_calibration: ``"certified"`` (default) or ``"paper"``; static.
    **cosamp_options: passed to ``cosamp``.

  Returns:
    An optax transformation with ``CompressivePrivatizerState``.

  Privacy:
    Per step, as ``compressive_mechanism``: ``"certified"`` is epsilon-DP
    given the public sensing matrix, for any two inputs; ``"paper"`` is
    ``state.epsilon``-DP given it, not the requested epsilon.
    ``compressive_privatizer_event`` builds the event of a run from the same
    hyperparameters and key (recomputing each step's sensing matrix).

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
                      noise_calibration)
  key = _validate.key(key)

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
        **cosamp_options)
    return unflatten(release.value), CompressivePrivatizerState(
        optax.safe_increment(state.count), state.key,
        release.epsilon.astype(jnp.float32))

  return optax.GradientTransformation(init_fn, update_fn)


def compressive_privatizer_epsilons(kappa: int, num_measurements: int,
                                    epsilon: float, *, key: jax.Array,
                                    dimension: int, steps: int,
                                    first_step: int = 0,
                                    noise_calibration: str = 'certified'
                                    ) -> np.ndarray:
  """The pure-DP epsilon of each step of ``compressive_privatizer``.

  Recomputes the sensing matrix of steps ``first_step .. first_step + steps
  - 1`` from the key (it never depends on the data) and returns
  Delta(Psi_t) / (noise scale_t): ``epsilon`` at every step under
  ``"certified"``, the realized epsilon under ``"paper"``.

  Example:
    >>> compressive_privatizer_epsilons(2, 8, 1.0, key=jax.random.key(0),
    ...                                 dimension=16, steps=3).tolist()
    [1.0, 1.0, 1.0]
  """
  _validate_mechanism(kappa, num_measurements, epsilon, 1.0,
                      noise_calibration)
  _validate.positive_int(dimension=dimension, steps=steps)
  _cosamp.validate_sparsity(kappa, dimension, 'kappa')
  if noise_calibration == 'certified':
    return np.full(steps, float(epsilon))
  key = _validate.key(key)

  def one(t):
    psi_key, _ = jax.random.split(jax.random.fold_in(key, t))
    psi = _sensing.gaussian_sensing_matrix(psi_key, num_measurements,
                                           dimension)
    return _sensing.sensing_l1_sensitivity(psi, kappa)

  sens = jax.jit(jax.vmap(one))(jnp.arange(first_step, first_step + steps))
  return np.asarray(sens, np.float64) * float(epsilon) / math.sqrt(
      num_measurements)


def compressive_privatizer_event(kappa: int, num_measurements: int,
                                 epsilon: float, *, key: jax.Array,
                                 dimension: int, steps: int,
                                 first_step: int = 0,
                                 noise_calibration: str = 'certified'
                                 ) -> dp_accounting.DpEvent:
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
      steps=steps, first_step=first_step, noise_calibration=noise_calibration)
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
    sampler), so a step is epsilon-DP: ``laplace_privatizer_event(epsilon)``,
    the same event as the certified compressive mechanism.

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
    return keyed_transformation(key, exact_step)

  def step(updates, step_key, params):
    del params
    flat, unflatten = flatten_util.ravel_pytree(updates)
    flat = _numerics.zero_nonfinite(flat)  # NaN/inf: released as 0
    scale = 2 * linf_clip * flat.shape[0] / epsilon
    noise = noise_lib.laplace(step_key, flat.shape, scale=scale,
                              dtype=flat.dtype)
    return unflatten(jnp.clip(flat, -linf_clip, linf_clip) + noise)

  return keyed_transformation(key, step)


def laplace_privatizer_event(epsilon: float,
                             steps: int = 1) -> dp_accounting.DpEvent:
  """DpEvent of ``steps`` steps of ``laplace_privatizer(epsilon, ...)``.

  Example:
    >>> dpjax.accounting.basic_composition(laplace_privatizer_event(0.5, 3))
    (1.5, 0.0)
  """
  _validate.positive(epsilon=epsilon)
  _validate.positive_int(steps=steps)
  return dp_accounting.SelfComposedDpEvent(
      accounting.laplace_event(float(epsilon)), steps)


def laplace_privatizer_bits(dimension: int, value_bits: int = 32) -> int:
  """Bits of one step's message: every coordinate, ``value_bits`` each.

  Example:
    >>> laplace_privatizer_bits(64)
    2048
  """
  _validate.positive_int(dimension=dimension, value_bits=value_bits)
  return dimension * value_bits
