"""Settings shared by the experiments that train a classifier.

``ClassificationConfig``: a ``config.Config`` with the dataset and its
fallback, whose ``validate`` refuses a dataset that is not a classification
task (an experiment that overrides ``validate`` calls ``super().validate()``).
``SgdConfig`` adds the (DP-)SGD optimizer's settings. An experiment's
``Config`` derives from one of them and adds its own (a field declared
again takes the experiment's default).
"""

import dataclasses

from experiments.common import config
from experiments.common import data as data_lib

setting = config.setting


@dataclasses.dataclass(frozen=True)
class ClassificationConfig(config.Config):
  """A classification dataset, and whether digits may stand in for it."""
  dataset: str = setting('digits', 'a classification dataset (see list)')
  allow_fallback: bool = setting(
      False, 'run digits when a tfds set is not prepared (the report says '
      'so)')

  def validate(self) -> None:
    data_lib.require_classification(self.NAME, self.dataset)


@dataclasses.dataclass(frozen=True)
class SgdConfig(ClassificationConfig):
  """Data, epochs, Poisson batch and momentum SGD."""
  epochs: int = setting(25, 'training epochs', ge=1)
  expected_batch_size: int = setting(64, 'expected Poisson batch size', ge=1)
  learning_rate: float = setting(0.05, 'SGD learning rate', gt=0)
  momentum: float = setting(0.9, 'SGD momentum', ge=0, lt=1)
  num_evals: int = setting(5, 'evaluations per run', ge=1)
