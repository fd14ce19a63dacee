"""cpsgd_dme's run: client vectors per seed, measured and expected MSE.

Each seed generates its own client vectors and protocol keys. The rounds of
a point call the jitted ``distributed_mean`` (compiled once per protocol,
vectorized over the clients) in a loop: vmapping the rounds as well was
measured slower here, about twice the time per round and twice the compile
time, since one round already fills the machine.
"""

import functools
import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import dpjax
from dpjax import accounting
from dpjax import distributed
from experiments.common import runner
from experiments.cpsgd_dme._claims import exact_checks
from experiments.cpsgd_dme._claims import summary
from experiments.cpsgd_dme._config import CONDITION_FAILS
from experiments.cpsgd_dme._config import Config
from experiments.cpsgd_dme._privacy import make_protocol
from experiments.cpsgd_dme._privacy import round_epsilon
from experiments.cpsgd_dme._privacy import trials_for_epsilon
from experiments.cpsgd_dme._results import Results

_GAUSSIAN_POINTS = 1_000_000  # key offset of the Gaussian points
_COR3_POINTS = 2_000_000  # key offset of the Corollary 3 points


def make_inputs(cfg: Config, seed: int | None = None
                ) -> dict[str, np.ndarray]:
  """Client vectors [n, d] on the sphere of radius D (float32) of one seed
  (default ``cfg.seed``)."""
  n, d, radius = cfg.num_clients, cfg.dimension, cfg.l2_norm_clip
  rng = np.random.default_rng(cfg.seed if seed is None else seed)
  out = {}
  spread = rng.normal(size=(n, d))
  out['spread'] = radius * spread / np.linalg.norm(spread, axis=1,
                                                   keepdims=True)
  spiky = np.zeros((n, d))
  for i in range(n):
    idx = rng.choice(d, size=cfg.num_spikes, replace=False)
    spiky[i, idx] = rng.choice([-1.0, 1.0], size=cfg.num_spikes)
  out['spiky'] = radius * spiky / math.sqrt(cfg.num_spikes)
  return {k: out[k].astype(np.float32) for k in cfg.inputs}


def _clipped_mean(xs: np.ndarray, l2_norm_clip: float) -> np.ndarray:
  x = xs.astype(np.float64)
  norms = np.linalg.norm(x, axis=1, keepdims=True)
  return (x * np.minimum(1.0, l2_norm_clip / np.maximum(norms, 1e-300))
          ).mean(0)


def _data(cfg) -> tuple[np.ndarray, np.ndarray]:
  """Vectors [inputs * seeds, n, d] (input-major) and their clipped means."""
  per_seed = [make_inputs(cfg, s) for s in cfg.seeds]
  xs = np.stack([p[name] for name in cfg.inputs for p in per_seed])
  return xs, np.stack([_clipped_mean(x, cfg.l2_norm_clip) for x in xs])


def _round_keys(cfg, point: int) -> jax.Array:
  """Keys [inputs * seeds * repetitions] of one point: key(seed), folded
  with the point, the input and the round, so all of them are independent."""
  grid = np.meshgrid(np.arange(len(cfg.inputs)), cfg.seeds,
                     np.arange(cfg.num_repetitions), indexing='ij')

  def one(i, s, r):
    return jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(
        jax.random.key(s), point), i), r)
  return jax.vmap(one)(*(jnp.asarray(g.ravel()) for g in grid))


def _estimates(mean_fn, keys, xs) -> np.ndarray:
  """Estimates [rounds, d]: round b runs on vectors ``xs[b // reps]``."""
  reps = keys.shape[0] // len(xs)
  xs = [jnp.asarray(x) for x in xs]
  return np.asarray(jnp.stack([mean_fn(k, xs[b // reps])
                               for b, k in enumerate(keys)]), np.float64)


@functools.partial(jax.jit, static_argnames=('rotate', 'padded'))
def _clamping(keys, xs, index, l2_norm_clip, linf_clip, *, rotate, padded):
  """Per round: (fraction of quantizer inputs outside [-X_max, X_max],
  ||bias||^2). The quantizer's inputs are the clipped (padded, rotated)
  vectors; the bias is their mean clamping error, mapped back by R^-1 and
  cropped to d when rotating."""
  d = xs.shape[2]

  def one(key, x):
    norms = jnp.linalg.norm(x, axis=1, keepdims=True)
    x = x * jnp.minimum(1.0, l2_norm_clip / jnp.maximum(norms, 1e-30))
    if rotate:
      rkey = distributed.shared_key(key)
      x = jnp.pad(x, ((0, 0), (0, padded - d)))
      x = dpjax.compression.randomized_hadamard(x, key=rkey)
    clamped = jnp.clip(x, -linf_clip, linf_clip)
    bias = clamped.mean(0) - x.mean(0)
    if rotate:
      bias = dpjax.compression.inverse_randomized_hadamard(bias, key=rkey)[:d]
    return jnp.mean(clamped != x), jnp.sum(bias**2)
  return jax.vmap(one)(keys, xs[index])


def _expected(protocol, keys, xs) -> np.ndarray:
  """Exact expected MSE per round: per round's rotation when rotating."""
  reps = keys.shape[0] // xs.shape[0]
  if protocol.rotate:
    return np.array([distributed.cpsgd_expected_mse(
        protocol, xs[b // reps], rotation_key=distributed.shared_key(k))
                     for b, k in enumerate(keys)])
  return np.repeat([distributed.cpsgd_expected_mse(protocol, x) for x in xs],
                   reps)


def _errors(est, means, shape) -> np.ndarray:
  """Squared error per round, [inputs, seeds, repetitions], in float64."""
  est = np.asarray(est, np.float64).reshape(shape + (-1,))
  return np.sum((est - means.reshape(shape[:2] + (1, -1))) ** 2, axis=-1)


def _seed_stats(errs: np.ndarray) -> dict[str, Any]:
  """Mean over seeds of the per-seed MSE, its SEM over seeds, and the
  per-seed MSE of all rounds, of the validation half and of the test half."""
  half = errs.shape[1] // 2
  mse = errs.mean(1)
  return dict(mse=float(mse.mean()),
              sem=(float(mse.std(ddof=1) / math.sqrt(mse.size))
                   if mse.size > 1 else None),
              per_seed=dict(mse=mse.tolist(),
                            validation=errs[:, :half].mean(1).tolist(),
                            test=errs[:, half:].mean(1).tolist()))


def _point(cfg, index, protocol, xs, means) -> list[dict[str, Any]]:
  """Measured and expected MSE of one protocol on every input and seed."""
  n, d = cfg.num_clients, cfg.dimension
  shape = (len(cfg.inputs), cfg.num_seeds, cfg.num_repetitions)
  keys = _round_keys(cfg, index)
  start = time.time()
  errs = _errors(_estimates(functools.partial(distributed.distributed_mean,
                                              protocol), keys, xs),
                 means, shape)
  seconds = time.time() - start
  clamped, bias = (np.asarray(a, np.float64).reshape(shape) for a in
                   _clamping(keys, jnp.asarray(xs),
                             jnp.arange(keys.shape[0]) // cfg.num_repetitions,
                             protocol.l2_norm_clip, protocol.linf_clip,
                             rotate=protocol.rotate,
                             padded=protocol.message_length(d)))
  expected = _expected(protocol, keys, xs).reshape(shape)
  bound = distributed.cpsgd_mse_bound(d, n, protocol.levels, protocol.trials,
                                      protocol.binomial_p, protocol.linf_clip)
  out = []
  for i, name in enumerate(cfg.inputs):
    row = _seed_stats(errs[i])
    exp = expected[i].mean(1)
    row['per_seed'].update(expected=exp.tolist(),
                           expected_max=expected[i].max(1).tolist(),
                           clamped=clamped[i].max(1).tolist(),
                           bias_sq=bias[i].mean(1).tolist())
    out.append(dict(row, input=name, expected=float(exp.mean()),
                    mse_over_expected=row['mse'] / float(exp.mean()),
                    clamped_fraction=float(clamped[i].max()),
                    bias_sq=float(bias[i].mean()), bound=bound,
                    seconds=round(seconds, 3)))
  return out


def _gaussian_rows(cfg, xs, means) -> list[dict[str, Any]]:
  n, d = cfg.num_clients, cfg.dimension
  shape = (len(cfg.inputs), cfg.num_seeds, cfg.num_repetitions)
  rows = []
  l2 = 2 * cfg.l2_norm_clip  # replace-one sensitivity of the sum
  for j, target in enumerate(cfg.epsilons):
    tight = l2 * accounting.calibrate(accounting.gaussian_event, target,
                                      cfg.delta, cfg.accountant)
    classical = (accounting.classical_gaussian_stddev(target, cfg.delta, l2)
                 if target <= 1 else None)  # proved for eps <= 1 only
    eps_check = accounting.epsilon(accounting.gaussian_event(tight / l2),
                                   cfg.delta, cfg.accountant)
    per_client = tight / math.sqrt(n)
    errs = _errors(_estimates(
        lambda k, x, s=per_client: distributed.gaussian_distributed_mean(
            k, x, cfg.l2_norm_clip, s),
        _round_keys(cfg, _GAUSSIAN_POINTS + j), xs), means, shape)
    expected = d * tight**2 / n**2
    for i, name in enumerate(cfg.inputs):
      row = _seed_stats(errs[i])
      rows.append(dict(
          row, input=name, target_epsilon=target, epsilon=eps_check,
          client_stddev=per_client, sum_stddev=tight, expected=expected,
          mse_over_expected=row['mse'] / expected,
          expected_classical=None if classical is None else
          d * classical**2 / n**2,
          # float32 coordinates: one coordinate costs what a d = 1 client does
          bits_per_coordinate=distributed.gaussian_protocol_bits(1),
          bits_per_client=distributed.gaussian_protocol_bits(d)))
  return rows


def _protocols(cfg):
  """(variant, k, m, target epsilons) of every cpSGD point."""
  for variant in cfg.variants:
    for levels in cfg.levels:
      if (variant == 'clamp' and cfg.clamp_levels is not None
          and levels not in cfg.clamp_levels):
        continue
      trials: dict[int, list] = {}
      for target in cfg.epsilons:
        trials.setdefault(trials_for_epsilon(cfg, variant, levels, target),
                          []).append(target)
      for m in cfg.trials:
        trials.setdefault(m, [])
      for m, targets in sorted(trials.items()):
        yield variant, levels, m, targets


def corollary3(cfg: Config, ctx: runner.Context) -> dict[str, Any] | None:
  """Corollary 3's regime: rotated cpSGD on spread vectors at n =
  ``cor3_num_clients``, d = ``cor3_dimension`` (n eps^2 >> d), one k per
  ``cor3_levels`` with the smallest m meeting ``cor3_epsilon``: the exact
  expected MSE per seed (its vectors, one rotation), beside the exact MSE of
  the Gaussian mechanism at the same epsilon, calibrated as the paper's
  Theorem 2 (classical) and tightly (PLD). No protocol noise is sampled:
  the corollary is about the expected error, which ``cpsgd_expected_mse``
  gives exactly (the main run checks measured against expected MSE)."""
  if cfg.cor3_num_clients is None:
    return None
  sub = cfg.replace(num_clients=cfg.cor3_num_clients,
                    dimension=cfg.cor3_dimension, variants=('rotate',),
                    inputs=('spread',), levels=cfg.cor3_levels,
                    epsilons=(cfg.cor3_epsilon,), trials=(),
                    clamp_levels=None)
  xs, _ = _data(sub)
  n, d, eps = sub.num_clients, sub.dimension, sub.cor3_epsilon
  rotation_keys = [distributed.shared_key(jax.random.fold_in(
      jax.random.key(s), _COR3_POINTS)) for s in sub.seeds]
  rows = []
  for levels in sub.levels:
    m = trials_for_epsilon(sub, 'rotate', levels, eps)
    protocol = make_protocol(sub, 'rotate', levels, m)
    expected = [distributed.cpsgd_expected_mse(protocol, x, rotation_key=k)
                for x, k in zip(xs, rotation_keys)]
    rows.append(dict(levels=levels, num_trials=m,
                     epsilon=round_epsilon(sub, protocol),
                     x_max=protocol.linf_clip,
                     bits_per_coordinate=distributed.bits_per_coordinate(
                         levels, m),
                     expected=float(np.mean(expected)),
                     per_seed=dict(expected=[float(e) for e in expected])))
    ctx.say(f'Corollary 3: k={levels} m={m}')
  l2 = 2 * cfg.l2_norm_clip
  tight = l2 * accounting.calibrate(accounting.gaussian_event, eps,
                                    cfg.delta, cfg.accountant)
  classical = accounting.classical_gaussian_stddev(eps, cfg.delta, l2)
  return dict(num_clients=n, dimension=d, epsilon=eps,
              n_eps2_over_d=n * eps**2 / d, rows=rows,
              gaussian_classical=d * classical**2 / n**2,
              gaussian_tight=d * tight**2 / n**2)


def _protocol_info(cfg, variant, levels, m, targets, protocol
                   ) -> dict[str, Any]:
  """A point's settings, per-round epsilon and bits (as its rows hold)."""
  d = cfg.dimension
  eps = round_epsilon(cfg, protocol)
  return dict(
      variant=variant, levels=levels, num_trials=m,
      target_epsilon=min(targets) if targets else None,
      target_epsilons=targets, x_max=protocol.linf_clip, epsilon=eps,
      epsilon_note=CONDITION_FAILS if eps is None else None,
      bits_per_coordinate=distributed.bits_per_coordinate(levels, m),
      bits_fixed=distributed.bits_per_coordinate(levels, m,
                                                 fixed_width=True),
      bits_per_client=distributed.cpsgd_bits(protocol, d),
      bits_per_client_fixed=distributed.cpsgd_bits(protocol, d,
                                                   fixed_width=True))


def _dataset(cfg, means) -> dict[str, Any]:
  """The generated vectors, and the squared norm of their mean per input."""
  sq = np.sum(means**2, axis=1).reshape(len(cfg.inputs), -1).mean(1)
  return dict(name='generated unit vectors', inputs=cfg.inputs,
              num_clients=cfg.num_clients, dimension=cfg.dimension,
              spikes=cfg.num_spikes, clip_norm=cfg.l2_norm_clip,
              mean_norm_sq=dict(zip(cfg.inputs, sq.tolist())))


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Every cpSGD point and Gaussian baseline on every input and seed."""
  xs, means = _data(cfg)
  rows = []
  for index, (variant, levels, m, targets) in enumerate(_protocols(cfg)):
    protocol = make_protocol(cfg, variant, levels, m)
    info = _protocol_info(cfg, variant, levels, m, targets, protocol)
    rows += [dict(info, **p) for p in _point(cfg, index, protocol, xs,
                                             means)]
    ctx.say(f"{variant} k={levels} m={m} eps={info['epsilon']}")
  gaussian = _gaussian_rows(cfg, xs, means)
  for row in rows:  # compare with the Gaussian at the row's target epsilon
    g = next((g for g in gaussian if g['input'] == row['input']
              and g['target_epsilon'] == row['target_epsilon']), None)
    row['mse_vs_gaussian'] = None if g is None else row['mse'] / g['expected']
  return Results(dataset=_dataset(cfg, means),
                 rotated_x_max=distributed.rotated_linf_clip(
                     cfg.l2_norm_clip, cfg.dimension, cfg.num_clients,
                     cfg.delta),
                 rows=rows, gaussian=gaussian,
                 summary=summary(cfg, rows, gaussian),
                 exact_checks=exact_checks(rows),
                 corollary3=corollary3(cfg, ctx))
