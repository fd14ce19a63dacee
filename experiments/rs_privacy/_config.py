"""rs_privacy's settings: field defaults are the quick preset."""

import dataclasses

from experiments.common import config
from experiments.common import models
from experiments.common import sgd_config

NAME = 'rs_privacy'
DESCRIPTION = 'test accuracy of DP-SGD vs DP-SGD + RS at eps 1/3 (Table 2)'
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(sgd_config.SgdConfig):
  """Quick: mnist5k, the MLP, eps 1, C in {0.5, 1}, r* in {0.5, 0.9}, 6 seeds;
  full: the DP-CNN, the paper's grids C in {0.1, 0.5, 1} and r* in {0.5,
  0.7, 0.9}, 30 epochs."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      clip_method='vmap', model='', l2_norm_clips=(0.1, 0.5, 1.0),
      final_rates=(0.5, 0.7, 0.9), epochs=30, epsilons=(1.0, 3.0),
      num_seeds=10)}

  dataset: str = setting('mnist5k', 'a classification dataset (see list)')
  model: str = setting('mlp', "the network; '' is the dataset's default "
                       '(the 26K-parameter DP-CNN for MNIST)', choices=('',) +
                       models.MODELS)
  num_seeds: int = setting(6, 'seeds, every setting trained as one vmapped '
                           'program', ge=1)
  epochs: int = setting(5, 'training epochs', ge=1)
  expected_batch_size: int = setting(256, 'expected Poisson batch size',
                                     ge=1)
  learning_rate: float = setting(0.2, 'SGD learning rate', gt=0)
  momentum: float = setting(0.9, 'SGD momentum', ge=0, lt=1)
  epsilons: tuple[float, ...] = setting((1.0,), 'target epsilons', gt=0)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  final_rates: tuple[float, ...] = setting(
      (0.5, 0.9), 'final sparsification rates r* RS is tuned over', gt=0,
      lt=1)
  l2_norm_clips: tuple[float, ...] = setting(
      (0.5, 1.0), 'clip norms C both methods are tuned over', gt=0)
  clip_method: str = setting(
      'ghost', "per-example clipping: 'ghost' (no per-example gradients; the "
      "same clipped sum, several times faster for the MLP) or 'vmap'",
      choices=('ghost', 'vmap'))
  validation_fraction: float = setting(
      0.2, 'fraction of the training data held out to tune on, for a '
      'dataset without a validation split (mnist5k has one)', gt=0, lt=1)
