"""rs_attack's settings: field defaults are the quick preset. It measures
attacks at fixed noise, so it has no epsilons or delta setting."""

import dataclasses

from experiments.common import config
from experiments.common import sgd_config

NAME = 'rs_attack'
DESCRIPTION = 'reconstruction attacks vs sparsification rate (Thm 5.1, Fig. 5)'
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(sgd_config.ClassificationConfig):
  """Quick: 10 seeds, 8 images, 20k trials, 1000 attack steps; full: 10
  seeds, 64 images, 200k trials, 3000 attack steps."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(num_seeds=10, num_images=64,
                                       num_trials=200_000,
                                       attack_steps=3000)}

  num_seeds: int = setting(10, 'seeds, run as one vmapped program', ge=1)
  rates: tuple[float, ...] = setting(
      (0.0, 0.3, 0.5, 0.7, 0.9, 0.99), 'sparsification rates r, increasing')
  num_images: int = setting(8, 'test images attacked per seed', ge=1)
  num_trials: int = setting(20_000, 'draws of mask and noise per rate and '
                            'seed (closed form)', ge=1)
  trial_chunk: int = setting(20_000, 'trials vmapped at once', ge=1)
  attack_steps: int = setting(1000, 'Adam steps of the inversion attack',
                              ge=1)
  attack_learning_rate: float = setting(
      0.05, 'learning rate of the inversion attack', gt=0)
  dimension: int = setting(100, 'width d of the closed-form linear layer',
                           ge=1)
  closed_form_stddev: float = setting(
      1.0, 'noise stddev of the closed-form release', gt=0)
  inversion_stddev: float = setting(
      0.01, 'noise stddev added to the gradient the inversion attacks', ge=0)
  hidden: tuple[int, ...] = setting((64,), 'hidden widths of the attacked '
                                    'sigmoid MLP', ge=1, min_len=0)

  def validate(self) -> None:
    super().validate()
    rates = list(self.rates)
    if len(rates) < 2 or rates != sorted(set(rates)) or not (
        0 <= rates[0] and rates[-1] < 1):
      raise ValueError(f'{NAME} needs at least two increasing rates in '
                       f'[0, 1), got {rates}')
