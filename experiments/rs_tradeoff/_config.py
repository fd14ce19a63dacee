"""rs_tradeoff's settings: field defaults are the quick preset. It fixes
noise multipliers, not epsilons (so it has no epsilons setting)."""

import dataclasses

from experiments.common import config
from experiments.common import sgd_config

NAME = 'rs_tradeoff'
DESCRIPTION = 'accuracy vs sparsification rate for sigma x C, with ablations'
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(sgd_config.SgdConfig):
  """Quick: sigma 4, C 1, three rates, 3 seeds, 10 epochs; full: a 3 x 3
  grid of sigma x C, five rates, 10 seeds, 30 epochs."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      sigmas=(1.0, 2.0, 4.0), clips=(0.25, 0.5, 1.0),
      rates=(0.0, 0.3, 0.5, 0.7, 0.9), num_seeds=10, epochs=30)}

  num_seeds: int = setting(3, 'seeds, trained as one vmapped program', ge=1)
  epochs: int = setting(10, 'training epochs', ge=1)
  sigmas: tuple[float, ...] = setting((4.0,), 'noise multipliers sigma',
                                      gt=0)
  clips: tuple[float, ...] = setting((1.0,), 'clip norms C', gt=0)
  rates: tuple[float, ...] = setting(
      (0.0, 0.5, 0.9), 'final sparsification rates r* (0 is the reference '
      'of every claim)', ge=0, lt=1)
  delta: float = setting(1e-5, 'delta of the reported epsilons', gt=0, lt=1)

  def validate(self) -> None:
    super().validate()
    if 0.0 not in self.rates or len(self.rates) < 2:
      raise ValueError(f'Expected rates={list(self.rates)} to hold 0 (the '
                       'reference every claim compares with) and one rate '
                       '> 0.')
