"""A registry of distinguishing-audit cases: one per dpjax mechanism.

Each ``AuditCase`` holds a mechanism as ``(key, data) -> output`` (jittable
and vmappable over keys), two neighbouring inputs under the relation its
event states, the strongest score we know for them (worst-case canaries; the
log-likelihood ratio where the output distribution is known) and the stated
epsilon, computed from the mechanism's own event. Most cases carry a broken
twin (noise halved, clipping skipped, a paper's miscalibrated constant) whose
stated epsilon an audit must refute, so every audit can fail. The central
mechanisms are here, the distributed protocols in ``_cases_distributed``.

The registry (``audit_case``, ``audit_cases``) is in ``_registry``.

Example:
  >>> gaussian_case().relation
  'add/remove'
"""

import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from dpjax import _clipped_sum
from dpjax import accounting
from dpjax import clipping
from dpjax import nonparametric
from dpjax import recovery
from dpjax import sampling
from dpjax import transforms

DELTA = 1e-5
ADD_REMOVE = 'add/remove'
REPLACE_ONE = 'replace-one'


class AuditCase(NamedTuple):
  """One mechanism, its neighbours, its attack and its stated epsilon.

  Attributes:
    name: a short id, e.g. ``'dpsgd_ghost'``.
    mechanism: ``(key, data) -> output``, jittable and vmappable over keys.
    d: one input.
    d_prime: its neighbour under ``relation`` (same structure and shapes).
    score: ``output -> scalar float32``, the attack's test statistic.
    epsilon: the stated epsilon, from the mechanism's event.
    delta: the delta of that statement.
    relation: ``'add/remove'`` or ``'replace-one'``.
    attack: one line: canary and score, and whether the audit can be tight.
    broken: a deliberately broken twin whose ``epsilon`` an audit must
      refute, or None.
  """
  name: str
  mechanism: Callable[[jax.Array, Any], Any]
  d: Any
  d_prime: Any
  score: Callable[[Any], jax.Array]
  epsilon: float
  delta: float
  relation: str
  attack: str
  broken: 'AuditCase | None' = None


@functools.lru_cache(maxsize=None)
def _epsilon(event, delta: float, accountant: str = 'rdp') -> float:
  """``accounting.epsilon``, once per event (cases share their events)."""
  return float(accounting.epsilon(event, delta, accountant))


def _pure(event) -> float:
  return float(accounting.basic_composition(event)[0])


def _released_pure(release, data) -> float:
  """The pure epsilon of the event a ``(release, event)`` function returns
  on ``data`` (the event depends on the hyperparameters only)."""
  _, event = release(jax.random.key(0), data)
  return _pure(event)


def _twin(case: AuditCase, name: str, mechanism, attack: str,
          epsilon: float | None = None) -> AuditCase:
  return case._replace(name=name, mechanism=mechanism, attack=attack,
                       epsilon=case.epsilon if epsilon is None else epsilon,
                       broken=None)


def _transform_output(tx, x, **extra):
  out, _ = tx.update(x, tx.init(x), **extra)
  return out


# --- Noise on a scalar query --------------------------------------------------


def gaussian_case() -> AuditCase:
  stddev = accounting.calibrate(accounting.gaussian_event, 1.0, DELTA)  # Delta 1
  eps = accounting.gaussian_epsilon(stddev, 1.0, DELTA)
  mech = lambda s: lambda key, x: _transform_output(
      transforms.add_gaussian_noise(s, key=key), x)
  case = AuditCase(
      'gaussian', mech(stddev), jnp.float32(0.0), jnp.float32(1.0),
      lambda y: y, float(eps), DELTA, ADD_REMOVE,
      'query 0 vs 1 (sensitivity 1); score = the output, the LLR up to a '
      'monotone map: tight against the exact analytic epsilon')
  return case._replace(broken=_twin(case, 'gaussian_half_noise',
                                    mech(stddev / 2), 'stddev halved'))


def laplace_case() -> AuditCase:
  scale = 1.0
  eps = _pure(accounting.laplace_event(1.0 / scale))  # L1 sensitivity 1
  mech = lambda s: lambda key, x: _transform_output(
      transforms.add_laplace_noise(s, key=key), x)
  case = AuditCase(
      'laplace', mech(scale), jnp.float32(0.0), jnp.float32(1.0),
      lambda y: y, eps, 0.0, ADD_REMOVE,
      'query 0 vs 1 (L1 sensitivity 1), exact grid Laplace; score = the '
      'output (the LLR is clip(2y - 1)): tight')
  return case._replace(broken=_twin(case, 'laplace_half_scale',
                                    mech(scale / 2), 'scale halved'))


def discrete_gaussian_case() -> AuditCase:
  sigma = 1.5
  eps = accounting.epsilon(
      accounting.discrete_gaussian_event(sigma, 1.0), DELTA)
  mech = lambda s: lambda key, x: _transform_output(
      transforms.add_discrete_gaussian_noise(s, key=key), x).astype(
          jnp.float32)
  case = AuditCase(
      'discrete_gaussian', mech(sigma), jnp.zeros((), jnp.int32),
      jnp.ones((), jnp.int32), lambda y: y, float(eps), DELTA, ADD_REMOVE,
      'integer query 0 vs 1 (L2 sensitivity 1); score = the output (the '
      'LLR is monotone in it); the claim converts zCDP to (eps, delta), '
      'which is loose: the bound reaches about half of it')
  return case._replace(broken=_twin(case, 'discrete_gaussian_quarter_sigma',
                                    mech(sigma / 4), 'sigma quartered'))


def exponential_case() -> AuditCase:
  event = accounting.EpsilonDeltaDpEvent(
      1.0, nonparametric.exponential_mechanism_delta(1.0, 50))
  eps, delta = accounting.basic_composition(event)
  mech = lambda e: lambda key, u: nonparametric.exponential_mechanism(
      key, u, epsilon=e, sensitivity=1.0).astype(jnp.float32)
  u = jnp.zeros(50, jnp.float32)
  case = AuditCase(
      'exponential', mech(1.0), u, jnp.full(50, -1.0).at[0].set(1.0),
      lambda i: (i == 0).astype(jnp.float32), float(eps), float(delta),
      REPLACE_ONE,
      'candidate 0 gains the sensitivity, the 49 others lose it (the worst '
      'case); score = [index == 0]: near tight')
  return case._replace(broken=_twin(
      case, 'exponential_no_half', mech(2.0),
      'exp(eps u / Delta) without the factor 1/2 (eps doubled)'))


# --- Nonparametric ------------------------------------------------------------


def dp_knn_case() -> AuditCase:
  def knn(eps):
    return lambda key, data: nonparametric.dp_knn(
        key, *data, jnp.array([[0.5]]), epsilon=eps, bounds=(0.0, 1.0),
        num_classes=2, k=3)

  def mech(eps):
    def mechanism(key, data):
      release, _ = knn(eps)(key, data)
      return release.counts[0].astype(jnp.float32)
    return mechanism

  # A far class-0 point becomes a class-1 point at the query, which swaps
  # one of the 3 neighbours: counts (3, 0) -> (2, 1).
  x = jnp.array([[0.49], [0.52], [0.47], [0.9], [0.1], [0.95]])
  y = jnp.array([0, 0, 0, 0, 1, 1])
  base = jnp.array([3.0, 0.0])
  # Both coordinates moved towards D': where the loss reaches its maximum.
  score = lambda c: jnp.minimum(base[0] - c[0], c[1] - base[1])
  eps = _released_pure(knn(1.0), (x, y))
  case = AuditCase(
      'dp_knn', mech(1.0), (x, y), (x.at[3].set(0.5), y.at[3].set(1)),
      score, eps, 0.0, REPLACE_ONE,
      'a far class-0 point replaced by a class-1 point at the query; score '
      '= min of the two count moves: near tight')
  return case._replace(broken=_twin(
      case, 'dp_knn_thesis_scale', mech(2.0),
      "the thesis's Lap(N / eps), i.e. dp_knn at twice the epsilon"))


def noisy_reg_case() -> AuditCase:
  def noisy_reg(key, data):
    return nonparametric.noisy_reg(key, *data, epsilon=1.0, bounds=(0.0, 1.0),
                                   num_classes=2, bins=2)

  def mechanism(key, data):
    release, _ = noisy_reg(key, data)
    return release.scores[:, 1]

  x = jnp.array([[0.1], [0.2], [0.9]])
  y = jnp.array([1, 1, 0])
  eps = _released_pure(noisy_reg, (x, y))
  case = AuditCase(
      'noisy_reg', mechanism, (x, y), (x, y.at[0].set(0)),
      lambda s: -s[0], eps, 0.0, REPLACE_ONE + ' label',
      'label-DP: one label of a 2-point cell flips (the cell fraction moves '
      'by 1 / n_j); score = that cell\'s noisy fraction: tight')
  # Full DP (features private, as Thm 5.5 claims): moving one point from a
  # 2-point cell to another changes n_j, hence the noise scale; the far
  # tails of the wider Laplace have unbounded likelihood ratio.
  x_moved = x.at[0].set(0.95)
  broken = case._replace(
      name='noisy_reg_full_dp', d=(x, y), d_prime=(x_moved, y),
      score=lambda s: jnp.abs(s[0] - 1.0), relation=REPLACE_ONE,
      attack='features private (the thesis\'s Thm 5.5 claim): a point '
      'leaves a cell, whose noise scale doubles; score = |fraction - 1|',
      broken=None)
  return case._replace(broken=broken)


def random_trees_case() -> AuditCase:
  trees, eps_run = 2, 1.0

  def rdt(scale_eps):
    return lambda key, data: nonparametric.random_decision_trees(
        key, *data, epsilon=scale_eps, bounds=(0.0, 1.0), num_classes=2,
        num_trees=trees, depth=1)

  def mech(scale_eps):
    def mechanism(key, data):
      release, _ = rdt(scale_eps)(key, data)
      # the leaf of x = 0, every tree
      return release.leaf_counts[:, 0, :].astype(jnp.float32)
    return mechanism

  x = jnp.zeros((1, 1), jnp.float32)
  # Replace-one is 2 eps-DP (two counts of one leaf per tree move by 1);
  # the event the release returns states eps for add/remove.
  eps = 2 * _released_pure(rdt(eps_run), (x, jnp.array([0])))
  # One record at the low corner: it lands in leaf 0 of every depth-1 tree
  # and its label flips. LLR of Laplace(T / eps) with counts (1, 0) vs (0, 1).
  score = lambda c: jnp.sum(jnp.clip(2 * c[:, 1] - 1, -1, 1)
                            + jnp.clip(1 - 2 * c[:, 0], -1, 1))
  case = AuditCase(
      'random_trees', mech(eps_run), (x, jnp.array([0])),
      (x, jnp.array([1])), score, eps, 0.0, REPLACE_ONE,
      'one record (the whole dataset) flips its label: 2 counts per tree '
      'move; score = the Laplace LLR over both counts of its leaf in the 2 '
      'trees (all 4 saturate with probability 1/16): tight')
  return case._replace(broken=_twin(
      case, 'random_trees_per_tree_scale', mech(eps_run * trees),
      'Laplace(1 / eps) per tree, ignoring that a record is in every tree'))


# --- Gradient steps -----------------------------------------------------------


def _poisson_full(n: int):
  return sampling.PoissonSampler(n, 1.0)


def _dpsgd_epsilon(tx, grads, mask, n, accountant='pld') -> float:
  params = jnp.zeros(grads.shape[1])
  _, state = tx.update(grads, tx.init(params), params, mask=mask)
  return _epsilon(accounting.step_event(state, _poisson_full(n)), DELTA,
                  accountant)


def _canary_grads(n=8, dim=5):
  grads = 0.3 * jax.random.normal(jax.random.key(0), (n, dim), jnp.float32)
  return grads.at[0].set(jnp.zeros(dim).at[0].set(100.0))


def dpsgd_vmap_case() -> AuditCase:
  clip, sigma, n = 1.0, 2.0, 8
  grads = _canary_grads(n)

  def mech(noise_multiplier, skip_clipping=False):
    def mechanism(key, data):
      g, mask = data
      if skip_clipping:  # deliberately broken: noise for C, no clipping
        total = jnp.sum(jnp.where(mask[:, None], g, 0.0), axis=0)
        return total + noise_multiplier * clip * jax.random.normal(
            key, total.shape)
      tx = transforms.dpsgd(1.0, clip, noise_multiplier, _poisson_full(n),
                            key=key)
      params = jnp.zeros(g.shape[1])
      updates, _ = tx.update(g, tx.init(params), params, mask=mask)
      return -updates * n
    return mechanism

  tx = transforms.dpsgd(1.0, clip, sigma, _poisson_full(n),
                        key=jax.random.key(0))
  eps = _dpsgd_epsilon(tx, grads, jnp.ones(n, bool), n)
  case = AuditCase(
      'dpsgd_vmap', mech(sigma), (grads, jnp.arange(n) > 0),
      (grads, jnp.ones(n, bool)), lambda u: u[0], eps, DELTA, ADD_REMOVE,
      'a canary gradient of norm 100 C along e_0, masked out in D; score = '
      'the update\'s e_0 part (Gaussian LLR): tight')
  return case._replace(broken=_twin(
      case, 'dpsgd_vmap_no_clipping', mech(sigma, skip_clipping=True),
      'per-example clipping skipped (noise still for C)'))


def _ghost_loss(params, example):
  return jnp.sum(jnp.dot(example['x'], params['w']) * example['t'])


def dpsgd_ghost_case() -> AuditCase:
  clip, sigma, n, d_in, d_out = 1.0, 2.0, 4, 3, 2
  k_x, k_t = jax.random.split(jax.random.key(1))
  xs = 0.3 * jax.random.normal(k_x, (n, d_in), jnp.float32)
  ts = 0.3 * jax.random.normal(k_t, (n, d_out), jnp.float32)
  # Canary: x = 10 e_0, t = 10 e_0, so its gradient is 100 C on w[0, 0].
  xs = xs.at[0].set(jnp.zeros(d_in).at[0].set(10.0))
  ts = ts.at[0].set(jnp.zeros(d_out).at[0].set(10.0))
  batch = {'x': xs, 't': ts}
  params = {'w': jnp.zeros((d_in, d_out), jnp.float32)}

  def mech(noise_multiplier, bound):
    grad_sum = clipping.clipped_grad_sum(_ghost_loss, bound, 'ghost')

    def mechanism(key, data):
      b, mask = data
      total = grad_sum(params, b, mask).grad_sum
      if bound > clip:
        # Broken: the noise follows the bound a sum carries, so the twin's
        # sum (clipped to bound) is rewrapped as if clipped to C.
        total = _clipped_sum.make(total.value, clip)
      tx = transforms.dpsgd(1.0, None, noise_multiplier, _poisson_full(n),
                            key=key, per_example=False)
      updates, _ = tx.update(total, tx.init(params), params)
      return -updates['w'] * n
    return mechanism

  tx = transforms.dpsgd(1.0, None, sigma, _poisson_full(n),
                        key=jax.random.key(0), per_example=False)
  _, state = tx.update(clipping.clipped_grad_sum(_ghost_loss, clip, 'ghost')(
      params, batch, jnp.ones(n, bool)).grad_sum, tx.init(params), params)
  eps = _epsilon(accounting.step_event(state, _poisson_full(n)), DELTA, 'pld')
  case = AuditCase(
      'dpsgd_ghost', mech(sigma, clip), (batch, jnp.arange(n) > 0),
      (batch, jnp.ones(n, bool)), lambda u: u[0, 0], eps, DELTA, ADD_REMOVE,
      'ghost clipping on a linear layer; canary x = 10 e_0, target 10 e_0 '
      '(gradient 100 C on w[0, 0]), masked out in D; score = the update of '
      'w[0, 0]: tight')
  broken = _twin(case, 'dpsgd_ghost_no_clipping', mech(sigma, 1e6),
                 'ghost clip bound 10^6 while the noise is for C')
  return case._replace(broken=broken)


def rs_dpsgd_case() -> AuditCase:
  clip, sigma, n, dim, rate = 1.0, 2.0, 8, 5, 0.4
  grads = _canary_grads(n, dim)
  schedule = transforms.SparsityMaskSchedule.cooling(rate, 1, 10,
                                                     jnp.zeros(dim))

  def mech(clip_rows):
    def mechanism(key, data):
      g, mask = data
      k_noise, k_mask = jax.random.split(key)
      tx = transforms.rs_dpsgd(1.0, clip, sigma, _poisson_full(n), schedule,
                               key=k_noise, mask_key=k_mask, clip=clip_rows)
      params = jnp.zeros(dim)
      updates, _ = tx.update(g, tx.init(params), params, mask=mask)
      return -updates * n
    return mechanism

  tx = transforms.rs_dpsgd(1.0, clip, sigma, _poisson_full(n), schedule,
                           key=jax.random.key(0), mask_key=jax.random.key(1))
  eps = _dpsgd_epsilon(tx, grads, jnp.ones(n, bool), n)
  case = AuditCase(
      'rs_dpsgd', mech(True), (grads, jnp.arange(n) > 0),
      (grads, jnp.ones(n, bool)), lambda u: u[0], eps, DELTA, ADD_REMOVE,
      f'as dpsgd_vmap; the canary coordinate is zeroed (no signal, no noise) '
      f'with probability {rate}, a data-independent mask the claim (the '
      'DP-SGD step) does not credit; it only thins both tails alike: tight')
  return case._replace(broken=_twin(
      case, 'rs_dpsgd_noisy_sgd', mech(False),
      'clip=False (Alg. 2, noisy SGD with RS; documented as not private)'))


def dp_compgd_case() -> AuditCase:
  clip, sigma, n, dim, rows = 1.0, 2.0, 4, 6, 3
  # The other examples' gradients are 0: nonzero ones would add the
  # Phi-dependent term sum_i Phi g_i to the score in every trial.
  grads = jnp.zeros((n, dim), jnp.float32)
  canary = jnp.zeros(dim).at[0].set(100.0)

  def mech(noise_multiplier):
    def mechanism(key, g):
      # dp_compgd's step draws Phi_t and the noise from split(key, 3).
      phi_key, noise_key, _ = jax.random.split(key, 3)
      phi = transforms.gaussian_projection(phi_key, rows, dim)
      h = transforms.dp_gradient_estimate(g, phi, clip, noise_multiplier,
                                          noise_key, sensitivity_factor=2.0,
                                          divisor=n)
      direction = phi.matvec(canary[None])[0]
      return h, direction / jnp.linalg.norm(direction)
    return mechanism

  eps = _epsilon(accounting.gaussian_event(sigma), DELTA, 'pld')
  case = AuditCase(
      'dp_compgd', mech(sigma), grads.at[0].set(canary),
      grads.at[0].set(-canary), lambda o: jnp.dot(o[0], o[1]), eps, DELTA,
      REPLACE_ONE,
      'one step\'s released h_t; the canary gradient 100 e_0 becomes -100 e_0 '
      '(projected norms far above L); score = h_t on Phi e_0 (public Phi): '
      'tight')
  return case._replace(broken=_twin(case, 'dp_compgd_half_noise',
                                    mech(sigma / 2), 'sigma halved'))


# --- Farokhi: Laplace baseline and the compressive mechanism ---------------


def laplace_privatizer_case() -> AuditCase:
  eps, xi = 1.0, 1.0

  def mech(e):
    return lambda key, v: _transform_output(
        transforms.laplace_privatizer(e, xi, key=key), v)

  stated = _pure(accounting.laplace_event(eps))
  case = AuditCase(
      'laplace_privatizer', mech(eps), jnp.full((1,), xi, jnp.float32),
      jnp.full((1,), -xi, jnp.float32), lambda y: -y[0], stated, 0.0,
      'any two inputs',
      'one coordinate at +xi vs -xi (L1 change 2 xi n, the bound); score = '
      'the output (the Laplace LLR up to a monotone map): tight')
  return case._replace(broken=_twin(
      case, 'laplace_privatizer_xi_n', mech(2 * eps),
      'scale xi n / eps (sensitivity taken as xi n, not 2 xi n)'))


def _compressive_llr(release_y, psi_x, psi_x_prime, scale):
  return jnp.sum(jnp.abs(release_y - psi_x) - jnp.abs(release_y - psi_x_prime)
                 ) / scale


def compressive_case() -> AuditCase:
  eps, xi, p = 1.0, 1.0, 3

  def mechanism(key, v):
    r = transforms.compressive_mechanism(key, v, kappa=1, num_measurements=p,
                                         epsilon=eps, linf_clip=xi)
    return r.measurements, r.sensing_matrix[:, 0], r.noise_scale

  # n = 1, kappa = 1: x = +-1/2, so Psi x - Psi x' = Psi[:, 0], whose L1
  # norm is Delta(Psi) exactly: the certified calibration is tight.
  score = lambda o: _compressive_llr(o[0], -0.5 * o[1], 0.5 * o[1], o[2])
  stated = _pure(transforms.compressive_privatizer_event(
      1, p, eps, key=jax.random.key(0), dimension=1, steps=1))
  case = AuditCase(
      'compressive', mechanism, jnp.full((1,), xi, jnp.float32),
      jnp.full((1,), -xi, jnp.float32), score, stated, 0.0, 'any two inputs',
      f'n = 1, kappa = 1, p = {p}: +xi vs -xi; score = the Laplace LLR of the '
      'measurements y given the public Psi (the recovery is '
      'post-processing; all p terms saturate with probability 2^-p): tight')
  return case._replace(broken=_paper_compressive_twin(case, eps, xi, p))


def _paper_compressive_twin(case, eps, xi, p) -> AuditCase:
  """The paper's scale sqrt(p) / eps on a fixed Psi whose largest column L1
  norm is well above sqrt(p) (Farokhi's claim: eps-DP for every Psi)."""
  n = 64
  psi = recovery.gaussian_sensing_matrix(jax.random.key(3), p, n)
  column = int(jnp.argmax(jnp.abs(psi).sum(axis=0)))
  scale = math.sqrt(p) / float(eps)  # the paper's Laplace scale

  def mechanism(key, v):
    # Alg. 2 with a fixed Psi: top-1 of a 1-sparse v, clip, measure, noise.
    x = jnp.clip(v, -xi, xi) / (2 * xi)
    y, _, _ = transforms.compressive_measurements(
        key, psi, x, kappa=1, epsilon=eps, noise_calibration='paper')
    return y

  v = jnp.zeros(n, jnp.float32).at[column].set(xi)
  half = 0.5 * psi[:, column]
  ratio = float(jnp.abs(psi[:, column]).sum()) / math.sqrt(p)
  score = lambda y: _compressive_llr(y, -half, half, scale)
  return case._replace(
      name='compressive_paper_scale', mechanism=mechanism, d=v,
      d_prime=-v, score=score, epsilon=eps, broken=None,
      attack='the paper\'s Laplace scale sqrt(p) / eps, claimed eps-DP, on a '
      f'fixed Psi (p = {p}, n = {n}) whose largest column L1 norm is '
      f'{ratio:.2f} sqrt(p) (realized epsilon {ratio * eps:.2f}); score = '
      'the Laplace LLR of y')
