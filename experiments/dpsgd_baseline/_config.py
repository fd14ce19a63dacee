"""dpsgd_baseline's settings: field defaults are the quick preset."""

import dataclasses

from experiments.common import config
from experiments.common import data as data_lib
from experiments.common import models

NAME = 'dpsgd_baseline'
DESCRIPTION = ('DP-SGD vs non-private (MLP, CNN) at eps 1/3/8, C tuned on '
               'validation')
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: mnist5k, the MLP, C chosen from {0.5, 1} on validation, 6
  seeds; full (10 seeds): also the dataset's CNN, the clip grid {0.1, 0.5,
  1} of Zhu & Blaschko Sec. 6.2, 30 epochs. The MLP clips with ``clip_method``,
  the CNN with ``cnn_clip_method``: both give the same clipped sum."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(l2_norm_clips=(0.1, 0.5, 1.0),
                                       epochs=30, cnn=True, num_seeds=10)}

  num_seeds: int = setting(6, 'seeds, trained as one vmapped program', ge=1)
  dataset: str = setting('mnist5k', 'a classification dataset (see list)')
  allow_fallback: bool = setting(
      False, 'run digits when a tfds set is not prepared (the report says '
      'so)')
  epsilons: tuple[float, ...] = setting((1.0, 3.0, 8.0), 'target epsilons',
                                        gt=0)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  epochs: int = setting(5, 'training epochs', ge=1)
  expected_batch_size: int = setting(256, 'expected Poisson batch size', ge=1)
  learning_rate: float = setting(0.2, 'SGD learning rate', gt=0)
  momentum: float = setting(0.9, 'SGD momentum', ge=0, lt=1)
  l2_norm_clips: tuple[float, ...] = setting(
      (0.5, 1.0), 'per-example clip norms C; each seed uses the one with the '
      'best validation accuracy', gt=0)
  validation_fraction: float = setting(
      0.2, 'fraction of the training data held out to choose C on, for a '
      'dataset without a validation split (mnist5k has one)', gt=0, lt=1)
  clip_method: str = setting(
      'ghost', "per-example clipping: 'ghost' (no per-example gradients; the "
      "same clipped sum, several times faster for the MLP) or 'vmap'",
      choices=('ghost', 'vmap'))
  cnn_clip_method: str = setting(
      'vmap', "the CNN's per-example clipping (ghost is slower for its "
      'convolutions: 2.9 against 2.0 s a step for 10 seeds on 2 CPU cores)',
      choices=('ghost', 'vmap'))
  cnn: bool = setting(False, "also train the dataset's CNN (the 26K-"
                      'parameter DP-CNN on MNIST; about 20x the MLP on CPU)')
  mlp_hidden: tuple[int, ...] = setting((64,), 'MLP hidden widths', ge=1,
                                        min_len=0)
  activation: str = setting('tanh', 'MLP activation',
                            choices=models.ACTIVATIONS)
  num_evals: int = setting(5, 'evaluations per run', ge=1)
  within: float = setting(0.05, 'claimed largest accuracy loss at the '
                          'largest epsilon', ge=0)
  devices: int = setting(1, 'data-parallel DP-SGD over the first N devices '
                         '(CPU: XLA_FLAGS=--xla_force_host_platform_device_'
                         'count=N)', ge=1)

  def validate(self) -> None:
    data_lib.require_classification(NAME, self.dataset)
    if self.devices > 1:
      from experiments.common import train  # pylint: disable=g-import-not-at-top
      train.check_devices(self.devices)
