"""cpsgd_training's privacy: per-round delta, cpSGD events, matched Gaussian.

Every number comes from dpjax: ``distributed.cpsgd_event`` (Theorem 1),
``accounting.gaussian_stddev`` and ``accounting.gaussian_epsilon`` (the exact
Gaussian mechanism) and the ledger of the federated loop; every protocol is
built by ``dpjax.distributed`` (``cpsgd_protocol``,
``gaussian_distributed_mean_protocol``, ``plain_mean_protocol``).
"""

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from dpjax import accounting
from dpjax import distributed as dist
from experiments.common import federated


def round_delta(cfg) -> float:
  """Per-round delta: delta / (2 rounds) (the other half is PLD slack)."""
  return cfg.delta / (2 * cfg.rounds)


class Configuration(NamedTuple):
  """One cpSGD configuration: its privacy row and the library's protocol."""
  row: dict[str, Any]  # results.json's privacy row
  config: dist.CpsgdConfig
  protocol: dist.Protocol | None  # cpsgd_protocol; None: no guarantee


def _configuration(cfg, levels, trials, rotate, dimension, n):
  """The configuration (k, m, rotation): bits, Theorem 1's epsilon and the
  Gaussian stddev matched to it (``epsilon_total`` and ``ledger`` are filled
  in from the ledger the federated loop returns)."""
  delta_r, clip = round_delta(cfg), cfg.l2_norm_clip
  linf_clip = (dist.rotated_linf_clip(clip, dimension, n, delta_r)
               if rotate else clip)
  config = dist.CpsgdConfig(l2_norm_clip=clip, levels=levels, trials=trials,
                            p=cfg.p, linf_clip=linf_clip, rotate=rotate)
  row = dict(levels=levels, trials=trials, rotate=rotate,
             x_max=config.linf_clip, spacing=config.spacing,
             message_length=config.message_length(dimension),
             bits_per_coordinate=dist.bits_per_coordinate(levels, trials),
             bits_fixed=dist.bits_per_coordinate(levels, trials,
                                                 fixed_width=True),
             bits_per_client=dist.cpsgd_bits(config, dimension),
             delta_round=delta_r)
  _, l2, _ = accounting.cpsgd_sensitivities(
      row['message_length'], levels, config.linf_clip, clip)
  row['l2_sensitivity'] = l2  # Theorem 1's Delta_2 (Gaussian: 2 D)
  try:
    protocol = dist.cpsgd_protocol(config, dimension, n, delta_r)
  except ValueError as e:  # Theorem 1's condition fails: no guarantee
    row.update(epsilon_round=None, epsilon_total=None, ledger=None,
               no_guarantee=str(e))
    return Configuration(row, config, None)
  row.update(epsilon_round=float(protocol.event.epsilon), no_guarantee=None,
             **_matched_gaussian(cfg, protocol.event.epsilon, n))
  return Configuration(row, config, protocol)


def _matched_gaussian(cfg, epsilon_round, n) -> dict[str, float]:
  """The Gaussian whose one round has ``epsilon_round`` at delta_round."""
  delta_r, clip = round_delta(cfg), cfg.l2_norm_clip
  sigma_sum = accounting.gaussian_stddev(epsilon_round, delta_r, 2 * clip)
  gauss_event = accounting.gaussian_event(sigma_sum / (2 * clip))
  return dict(
      gauss_sum_stddev=sigma_sum,
      gauss_client_stddev=sigma_sum / math.sqrt(n),
      gauss_noise_multiplier=float(gauss_event.noise_multiplier),
      # check: dpjax's PLD epsilon of the matched Gaussian round
      gauss_epsilon_round=float(accounting.epsilon(gauss_event, delta_r,
                                                   'pld')),
      gauss_epsilon_total=accounting.gaussian_epsilon(
          sigma_sum, 2 * clip, cfg.delta, cfg.rounds))


def configurations(cfg, dimension, n) -> list[Configuration]:
  """Every cpSGD configuration: rotated (levels x trials), then unrotated."""
  combos = [(k, m, True) for k in cfg.levels for m in cfg.trials]
  combos += [(k, m, False) for k, m in cfg.unrotated_pairs]
  return [_configuration(cfg, k, m, rotate, dimension, n)
          for k, m, rotate in combos]


def label(row):
  """The setting name of a cpSGD configuration."""
  return f"cpSGD k={row['levels']} m={row['trials']}" + (
      '' if row['rotate'] else ' no rot')


def cpsgd_switch_mean(configs) -> federated.Mean:
  """One mean for every cpSGD configuration: ``param`` is the index.

  ``lax.switch`` on the (unbatched) index runs only the chosen
  ``distributed_mean`` (the mean of its ``cpsgd_protocol``), so each run
  does what its own protocol does, but the federated loop compiles one
  trainer for all configurations instead of one each (compilation dominated
  the run time).
  """
  branches = [functools.partial(dist.distributed_mean, c) for c in configs]

  def mean(key, vectors, param):
    index = jnp.asarray(param).astype(jnp.int32)
    return jax.lax.switch(index, branches, key, vectors)

  return mean


def settings(cfg, configs: list[Configuration], dimension, n):
  """What runs: (setting, method, privacy row or None, protocol), every
  protocol the library's (cpSGD's sharing one switched mean)."""
  clip = cfg.l2_norm_clip
  out = [('non-private', 'nonprivate', None,
          dist.plain_mean_protocol(n, dimension)),
         ('clipped, no noise', 'gaussian', None,
          dist.gaussian_distributed_mean_protocol(clip, 0.0, n, dimension))]
  switch = cpsgd_switch_mean([c.config for c in configs])
  for i, (row, _, protocol) in enumerate(configs):
    protocol = protocol or dist.Protocol(  # no guarantee: no event
        switch, bits_per_client=row['bits_per_client'])
    out.append((label(row), 'cpsgd', row,
                protocol._replace(mean=switch, param=float(i))))
    if row['epsilon_round'] is not None:
      out.append((f'Gaussian @ {label(row)}', 'gaussian', row,
                  dist.gaussian_distributed_mean_protocol(
                      clip, row['gauss_client_stddev'], n, dimension)))
  return out
