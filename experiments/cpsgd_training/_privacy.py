"""cpsgd_training's privacy: per-round delta, cpSGD events, matched Gaussian.

Every number comes from dpjax: ``distributed.cpsgd_event`` (Theorem 1),
``accounting.gaussian_stddev`` and ``accounting.gaussian_epsilon`` (the exact
Gaussian mechanism) and the ledger of the federated loop.
"""

import math

import jax
import jax.numpy as jnp

from dpjax import accounting
from dpjax import distributed as dist
from experiments.common import federated


def round_delta(cfg) -> float:
  """Per-round delta: delta / (2 rounds) (the other half is PLD slack)."""
  return cfg.delta / (2 * cfg.rounds)


def privacy_rows(cfg, dimension, n):
  """Per cpSGD configuration: protocol, event, epsilon, matched sigma.

  ``protocol`` and ``event`` are for the run; the totals (``epsilon_total``,
  ``ledger``) are filled in from the ledger the federated loop returns.
  """
  delta_r = round_delta(cfg)
  rounds, clip = cfg.rounds, cfg.clip_norm
  combos = [(k, m, True) for k in cfg.levels for m in cfg.trials]
  combos += [(k, m, False) for k, m in cfg.unrotated_pairs]
  out = []
  for k, m, rotate in combos:
    linf_clip = (dist.rotated_linf_clip(clip, dimension, n, delta_r)
                 if rotate else clip)
    protocol = dist.CpsgdConfig(l2_norm_clip=clip, levels=k, trials=m,
                                p=cfg.p, linf_clip=linf_clip, rotate=rotate)
    row = dict(levels=k, trials=m, rotate=rotate, x_max=protocol.linf_clip,
               spacing=protocol.spacing,
               message_length=protocol.message_length(dimension),
               bits_per_coordinate=dist.bits_per_coordinate(k, m),
               bits_fixed=dist.bits_per_coordinate(k, m, fixed_width=True),
               bits_per_client=dist.cpsgd_bits(protocol, dimension),
               delta_round=delta_r, protocol=protocol)
    _, l2, _ = accounting.cpsgd_sensitivities(
        row['message_length'], k, protocol.linf_clip, clip)
    row['l2_sensitivity'] = l2  # Theorem 1's Delta_2 (Gaussian: 2 D)
    try:
      event = dist.cpsgd_event(protocol, dimension, n, delta_r)
    except ValueError as e:  # Theorem 1's condition fails: no guarantee
      row.update(epsilon_round=None, epsilon_total=None, ledger=None,
                 no_guarantee=str(e), event=None)
      out.append(row)
      continue
    sigma_sum = accounting.gaussian_stddev(event.epsilon, delta_r, 2 * clip)
    gauss_event = accounting.gaussian_event(sigma_sum / (2 * clip))
    row.update(
        epsilon_round=float(event.epsilon), event=event, no_guarantee=None,
        gauss_sum_stddev=sigma_sum,
        gauss_client_stddev=sigma_sum / math.sqrt(n),
        gauss_noise_multiplier=float(gauss_event.noise_multiplier),
        # check: dpjax's PLD epsilon of the matched Gaussian round
        gauss_epsilon_round=float(accounting.epsilon(gauss_event, delta_r,
                                                     'pld')),
        gauss_epsilon_total=accounting.gaussian_epsilon(
            sigma_sum, 2 * clip, cfg.delta, rounds))
    out.append(row)
  return out


def label(row):
  """The setting name of a cpSGD configuration."""
  return f"cpSGD k={row['levels']} m={row['trials']}" + (
      '' if row['rotate'] else ' no rot')


def cpsgd_switch_mean(configs) -> federated.Mean:
  """One mean for every cpSGD configuration: ``param`` is the index.

  ``lax.switch`` on the (unbatched) index runs only the chosen
  ``distributed_mean``, so each run does what ``federated.cpsgd_mean`` of its
  configuration does, but the federated loop compiles one trainer for all
  configurations instead of one each (compilation dominated the run time).
  """
  branches = [federated.cpsgd_mean(c) for c in configs]

  def mean(key, vectors, param):
    index = jnp.asarray(param).astype(jnp.int32)
    return jax.lax.switch(index, [lambda k, v, b=b: b(k, v, 0.0)
                                  for b in branches], key, vectors)

  return mean


def settings(cfg, privacy, dimension, n):
  """What runs: (setting, method, privacy row or None, protocol)."""
  clip = cfg.clip_norm
  gaussian = federated.gaussian_mean(clip)
  cpsgd = cpsgd_switch_mean([row['protocol'] for row in privacy])
  out = [('non-private', 'nonprivate', None,
          federated.Protocol(federated.plain_mean)),
         ('clipped, no noise', 'gaussian', None, federated.Protocol(gaussian))]
  for i, row in enumerate(privacy):
    out.append((label(row), 'cpsgd', row, federated.Protocol(
        cpsgd, param=float(i), event=row['event'],
        bits_per_client=row['bits_per_client'])))
    if row['epsilon_round'] is not None:
      stddev = row['gauss_client_stddev']
      out.append((f'Gaussian @ {label(row)}', 'gaussian', row,
                  federated.Protocol(
                      gaussian, param=stddev,
                      event=accounting.gaussian_event(
                          math.sqrt(n) * stddev / (2 * clip)),
                      bits_per_client=dist.gaussian_protocol_bits(dimension))))
  return out
