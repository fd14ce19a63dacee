"""cpsgd_dme's protocols and their privacy: Theorem 1 per round, m per target.

Epsilons come from ``distributed.cpsgd_event``; the smallest m meeting a
target epsilon from ``accounting.calibrate`` (an integer search).
"""

import dp_accounting

from dpjax import accounting
from dpjax import distributed
from experiments.cpsgd_dme._config import NAME


def make_protocol(cfg, variant, levels,
                  num_trials) -> distributed.CpsgdConfig:
  """The cpSGD protocol of one point: variant, k levels, m trials."""
  n, d, delta = cfg.num_clients, cfg.dimension, cfg.delta
  small = distributed.rotated_linf_clip(cfg.l2_norm_clip, d, n, delta)
  return distributed.CpsgdConfig(
      l2_norm_clip=cfg.l2_norm_clip, levels=levels, trials=num_trials,
      p=cfg.p, linf_clip=cfg.l2_norm_clip if variant == 'none' else small,
      rotate=variant == 'rotate')


def round_epsilon(cfg, protocol) -> float | None:
  """Per-round epsilon (Theorem 1), or None where its condition fails."""
  try:
    return distributed.cpsgd_event(
        protocol, cfg.dimension, cfg.num_clients, cfg.delta).epsilon
  except ValueError as e:
    if 'Theorem 1 needs' not in str(e):
      raise
    return None


def trials_for_epsilon(cfg, variant, levels, target) -> int:
  """Smallest m with per-round epsilon <= target (``calibrate``, integers)."""
  limit = (2**31 - 1) // cfg.num_clients - levels  # int32 sum

  def event(m):
    e = round_epsilon(cfg, make_protocol(cfg, variant, levels, m))
    return (dp_accounting.NonPrivateDpEvent() if e is None else
            accounting.EpsilonDeltaDpEvent(e, cfg.delta))

  try:
    return accounting.calibrate(event, target, cfg.delta, start=1,
                                ceiling=limit)
  except ValueError as e:
    raise ValueError(f'{NAME}: k={levels} ({variant}), int32 sum: {e}') from e
