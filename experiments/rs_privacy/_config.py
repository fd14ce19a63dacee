"""rs_privacy's settings: field defaults are the quick preset."""

import dataclasses

from experiments.common import config
from experiments.common import data as data_lib

NAME = 'rs_privacy'
DESCRIPTION = 'test accuracy of DP-SGD vs DP-SGD + RS at eps 1/3 (Table 2)'
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: digits, 3 seeds; full: digits, 10 seeds."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(num_seeds=10)}

  num_seeds: int = setting(3, 'seeds of the test runs, trained as one '
                           'vmapped program per method', ge=1)
  dataset: str = setting('digits', 'a classification dataset (see list)')
  allow_fallback: bool = setting(
      False, 'run digits when a tfds set is not prepared (the report says '
      'so)')
  epsilons: tuple[float, ...] = setting((1.0, 3.0), 'target epsilons', gt=0)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  rates: tuple[float, ...] = setting(
      (0.5, 0.7, 0.9), 'final sparsification rates r* tuned over', ge=0, lt=1)
  validation_fraction: float = setting(
      0.2, 'fraction of the training data held out to tune r*', gt=0, lt=1)
  epochs: int = setting(25, 'training epochs', ge=1)
  expected_batch_size: int = setting(64, 'expected Poisson batch size', ge=1)
  learning_rate: float = setting(0.05, 'SGD learning rate', gt=0)
  momentum: float = setting(0.9, 'SGD momentum', ge=0, lt=1)
  l2_norm_clip: float = setting(1.0, 'per-example clip norm C', gt=0)
  evals: int = setting(5, 'evaluations per run', ge=1)

  def validate(self) -> None:
    data_lib.require_classification(NAME, self.dataset)
