"""rs_privacy's settings: field defaults are the quick preset."""

import dataclasses

from experiments.common import config
from experiments.common import sgd_config

NAME = 'rs_privacy'
DESCRIPTION = 'test accuracy of DP-SGD vs DP-SGD + RS at eps 1/3 (Table 2)'
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(sgd_config.SgdConfig):
  """Quick: digits, 3 seeds; full: digits, 10 seeds (25 epochs both)."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(num_seeds=10)}

  num_seeds: int = setting(3, 'seeds of the test runs, trained as one '
                           'vmapped program per method', ge=1)
  epsilons: tuple[float, ...] = setting((1.0, 3.0), 'target epsilons', gt=0)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  rates: tuple[float, ...] = setting(
      (0.5, 0.7, 0.9), 'final sparsification rates r* tuned over', ge=0, lt=1)
  validation_fraction: float = setting(
      0.2, 'fraction of the training data held out to tune r*', gt=0, lt=1)
  l2_norm_clip: float = setting(1.0, 'per-example clip norm C', gt=0)
