"""correlated_noise's settings: field defaults are the quick preset."""

import dataclasses

from experiments.common import config

NAME = 'correlated_noise'
DESCRIPTION = ('BandMF and adaptive clipping vs tuned DP-SGD, user- vs '
               'example-level DP-SGD on MNIST-5k')
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: 5 seeds, 6 epochs; full: 10 seeds, 20 epochs. The data is
  always MNIST-5k (the model is a 784-input MLP and the tuning needs its
  validation split)."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(num_seeds=10, epochs=20)}

  num_seeds: int = setting(5, 'seeds, trained as one vmapped program', ge=2)
  epsilon: float = setting(2.0, 'target epsilon of every private run', gt=0)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  epochs: int = setting(6, 'training epochs', ge=1)
  expected_batch_size: int = setting(128, 'expected Poisson batch size',
                                     ge=1)
  learning_rates: tuple[float, ...] = setting(
      (0.03, 0.1, 0.3), 'SGD learning rates; every method picks its own per '
      'seed on the validation split', gt=0)
  momentum: float = setting(0.9, 'SGD momentum', ge=0, lt=1)
  hidden: int = setting(32, 'MLP hidden width (784-h-10, tanh)', ge=1)
  l2_norm_clips: tuple[float, ...] = setting(
      (0.1, 0.3, 1.0, 3.0), 'fixed clip grid (the adaptive run '
      'starts from the smallest)', gt=0, min_len=2)
  bands: int = setting(4, 'BandMF bands (= cyclic Poisson partitions)',
                       ge=1)
  target_quantile: float = setting(0.5, 'adaptive clipping target quantile',
                                   gt=0, lt=1)
  clip_learning_rate: float = setting(0.2, 'adaptive clipping step eta',
                                      ge=0)
  non_inferiority: float = setting(
      0.03, 'claimed largest accuracy loss of adaptive clipping against the '
      'best fixed clip chosen on validation', ge=0)
  num_examples_per_user: int = setting(10, 'examples of each user '
                                       '(user-level part)', ge=1)
  expected_num_users: int = setting(24, 'expected users per step '
                                    '(user-level)', ge=1)
  user_sanity_accuracy: float = setting(
      0.3, 'test accuracy the user-level run must exceed to count as '
      'learning (chance is 0.1)', gt=0, lt=1)
  user_l2_norm_clip: float = setting(
      1.0, 'clip of one user\'s (or example\'s) gradient in the user-level '
      'part', gt=0)

  def normalize(self):
    return dict(l2_norm_clips=tuple(sorted(self.l2_norm_clips)),
                learning_rates=tuple(sorted(self.learning_rates)))
