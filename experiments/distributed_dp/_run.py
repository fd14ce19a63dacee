"""distributed_dp's run: every mechanism at every bit width, per seed.

Each seed generates its own client vectors and keys. A point (mechanism,
bits, target epsilon) is calibrated once on the host (the privacy does not
depend on the data), then its rounds run the jitted protocol (one compile
per configuration).
"""

import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import accounting
from dpjax import distributed
from experiments.common import runner
from experiments.cpsgd_dme import _privacy as dme_privacy
from experiments.cpsgd_dme import _run as dme_run
from experiments.cpsgd_dme._config import Config as DmeConfig
from experiments.distributed_dp._config import Config
from experiments.distributed_dp._config import MECHANISMS
from experiments.distributed_dp._results import Results
from experiments.distributed_dp._training import run_training

_GAUSSIAN_POINT = 1_000_000


def _dme_cfg(cfg) -> DmeConfig:
  """The cpsgd_dme settings that its helpers read."""
  return DmeConfig(num_clients=cfg.num_clients, dimension=cfg.dimension,
                   delta=cfg.delta, l2_norm_clip=cfg.l2_norm_clip, p=cfg.p,
                   seed=cfg.seed, inputs=('spread',), num_spikes=1)


def _data(cfg):
  dme = _dme_cfg(cfg)
  xs = np.stack([dme_run.make_inputs(dme, s)['spread'] for s in cfg.seeds])
  return xs, xs.astype(np.float64).mean(1)  # unit vectors: already clipped


def _keys(cfg, point: int) -> list[list[jax.Array]]:
  return [[jax.random.fold_in(jax.random.fold_in(jax.random.key(s), point), r)
           for r in range(cfg.num_repetitions)] for s in cfg.seeds]


def _stats(errs: np.ndarray) -> dict[str, Any]:
  mse = errs.mean(1)
  return dict(mse=float(mse.mean()),
              sem=(float(mse.std(ddof=1) / math.sqrt(mse.size))
                   if mse.size > 1 else None),
              per_seed=mse.tolist())


def _measure(cfg, point, xs, means, fn) -> tuple[dict[str, Any], float]:
  """Runs ``fn(key, x) -> (estimate, extras)`` on every seed and round."""
  start = time.time()
  errs, extras = [], []
  for s, keys in enumerate(_keys(cfg, point)):
    x = jnp.asarray(xs[s])
    row = []
    for k in keys:
      est, extra = fn(k, x)
      row.append(float(np.sum((np.asarray(est, np.float64) - means[s])**2)))
      extras.append(extra)
    errs.append(row)
  return dict(_stats(np.asarray(errs)), extras=extras), time.time() - start


def _ddp_row(cfg, point, xs, means, mech, bits, eps):
  n, d = cfg.num_clients, cfg.dimension
  protocol = distributed.calibrate_distributed_dp(
      mech, epsilon=eps, delta=cfg.delta, num_clients=n, dimension=d,
      bits=bits, l2_norm_clip=cfg.l2_norm_clip, k_stddevs=cfg.k_stddevs,
      replace_one=True)
  event = distributed.distributed_dp_event(protocol, d, replace_one=True)
  base = dict(mechanism=mech, bits=bits, target_epsilon=eps,
              epsilon=accounting.epsilon(event, cfg.delta),
              gamma=protocol.gamma, stddev=protocol.stddev)
  if mech == 'skellam' and protocol.local_mu > distributed.MAX_SKELLAM_MU:
    return dict(base, mse=None, note=f'local mu = {protocol.local_mu:.3g} '
                'above the Skellam sampler range (2^22)')

  def fn(key, x):
    r = distributed.secure_sum_round(
        protocol, key, x, max_wraparound_rate=cfg.max_wraparound_rate)
    return r.estimate, (float(r.wraparound_rate), int(r.rounding_failures),
                        bool(r.accepted))
  m, seconds = _measure(cfg, point, xs, means, fn)
  extras = m.pop('extras')
  return dict(m, **base,
              noise_multiplier=protocol.stddev / (2 * cfg.l2_norm_clip),
              bits_per_client=distributed.distributed_dp_bits(protocol, d),
              wraparound_max=max(e[0] for e in extras),
              rounding_failures=sum(e[1] for e in extras),
              flagged_rounds=sum(not e[2] for e in extras),
              rounds=len(extras), seconds=round(seconds, 2))


def _modulus_bits(n: int, protocol) -> int:
  """Bits of a modular secure sum of n cpSGD messages in {0..k-1+m}."""
  return (n * protocol.max_message).bit_length()


def _cpsgd_choice(cfg, bits, eps):
  """The rotated cpSGD protocol that fits a b-bit secure sum, chosen by its
  analytic MSE bound (no measurement), or None."""
  dme, n, d = _dme_cfg(cfg), cfg.num_clients, cfg.dimension
  best = None
  for k in cfg.levels:
    try:
      m = dme_privacy.trials_for_epsilon(dme, 'rotate', k, eps)
    except ValueError:
      continue
    protocol = dme_privacy.make_protocol(dme, 'rotate', k, m)
    if _modulus_bits(n, protocol) > bits:
      continue
    bound = distributed.cpsgd_mse_bound(d, n, k, m, protocol.binomial_p,
                                        protocol.linf_clip)
    if best is None or bound < best[0]:
      best = (bound, protocol)
  return None if best is None else best[1]


def _cpsgd_row(cfg, point, xs, means, bits, eps):
  protocol = _cpsgd_choice(cfg, bits, eps)
  base = dict(mechanism='cpsgd', bits=bits, target_epsilon=eps)
  if protocol is None:
    return dict(base, mse=None, note='no k fits a b-bit secure sum at this '
                'epsilon')
  m, seconds = _measure(cfg, point, xs, means, lambda k, x: (
      distributed.distributed_mean(protocol, k, x), None))
  m.pop('extras')
  d = cfg.dimension
  return dict(m, **base, levels=protocol.levels, trials=protocol.trials,
              epsilon=dme_privacy.round_epsilon(_dme_cfg(cfg), protocol),
              message_bits=distributed.bits_per_coordinate(
                  protocol.levels, protocol.trials, fixed_width=True),
              sum_bits=_modulus_bits(cfg.num_clients, protocol),
              bits_per_client=bits * protocol.message_length(d),
              seconds=round(seconds, 2))


def _gaussian_row(cfg, point, xs, means, eps):
  n, c = cfg.num_clients, cfg.l2_norm_clip
  stddev = 2 * c * accounting.calibrate(accounting.gaussian_event, eps,
                                        cfg.delta, 'pld')
  per_client = stddev / math.sqrt(n)
  m, seconds = _measure(cfg, point, xs, means, lambda k, x: (
      distributed.gaussian_distributed_mean(k, x, c, per_client), None))
  m.pop('extras')
  return dict(m, mechanism='gaussian', bits=32, target_epsilon=eps,
              epsilon=accounting.epsilon(accounting.gaussian_event(
                  stddev / (2 * c)), cfg.delta, 'pld'),
              stddev=stddev, noise_multiplier=stddev / (2 * c),
              expected=cfg.dimension * stddev**2 / n**2,
              bits_per_client=distributed.gaussian_protocol_bits(
                  cfg.dimension), seconds=round(seconds, 2))


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Every mechanism at every bits and epsilon; training if asked."""
  xs, means = _data(cfg)
  rows, gaussian = [], []
  point = 0
  for eps in cfg.epsilons:
    gaussian.append(_gaussian_row(cfg, _GAUSSIAN_POINT + point, xs, means,
                                  eps))
    for bits in cfg.bits:
      for mech in MECHANISMS:
        point += 1
        rows.append(_ddp_row(cfg, point, xs, means, mech, bits, eps))
      point += 1
      rows.append(_cpsgd_row(cfg, point, xs, means, bits, eps))
      ctx.say(f'eps={eps:g} b={bits}')
  for row in rows:
    g = next(g for g in gaussian if g['target_epsilon'] ==
             row['target_epsilon'])
    row['mse_vs_gaussian'] = (None if row['mse'] is None
                              else row['mse'] / g['mse'])
  training = run_training(cfg, ctx.say) if cfg.training else None
  dataset = dict(name='generated unit vectors (random directions)',
                 num_clients=cfg.num_clients, dimension=cfg.dimension)
  return Results(dataset=dataset, rows=rows, gaussian=gaussian,
                 training=training)
