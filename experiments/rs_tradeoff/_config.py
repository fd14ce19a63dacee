"""rs_tradeoff's settings: field defaults are the quick preset. It fixes
noise multipliers, not epsilons (so it has no epsilons setting)."""

import dataclasses

from experiments.common import config
from experiments.common import models
from experiments.common import sgd_config

NAME = 'rs_tradeoff'
DESCRIPTION = 'accuracy vs sparsification rate over sigma x C, with ablations'
setting = config.setting

# Fig. 2i (sigma = 4, C = 1): the panel the paper sets aside because "due to
# excessive noise the network degrades after a few epochs".
DEGRADED = ((4.0, 1.0),)


@dataclasses.dataclass(frozen=True)
class Config(sgd_config.SgdConfig):
  """Quick: the MLP, two panels of the grid (sigma C = 0.25 and 2) and one
  ablation each; full: the DP-CNN, the 3 x 3 grid of Figs. 2-3, five rates.
  Both: mnist5k; 6 seeds quick, 10 full (docs/rs_tradeoff.md gives the
  power)."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      clip_method='vmap', model='', noise_multipliers=(1.0, 2.0, 4.0),
      l2_norm_clips=(0.25, 0.5, 1.0), final_rates=(0.0, 0.3, 0.5, 0.7, 0.9),
      epochs=30, panels=(), num_seeds=10)}

  dataset: str = setting('mnist5k', 'a classification dataset (see list)')
  validation_fraction: float = setting(
      0.2, 'fraction of the training data held out to choose r* on, for a '
      'dataset without a validation split (mnist5k has one)', gt=0, lt=1)
  model: str = setting('mlp', "the network; '' is the dataset's default "
                       '(the 26K-parameter DP-CNN for MNIST)', choices=('',) +
                       models.MODELS)
  num_seeds: int = setting(6, 'seeds, trained as one vmapped program', ge=2)
  epochs: int = setting(5, 'training epochs', ge=1)
  expected_batch_size: int = setting(256, 'expected Poisson batch size',
                                     ge=1)
  learning_rate: float = setting(0.2, 'SGD learning rate', gt=0)
  momentum: float = setting(0.9, 'SGD momentum', ge=0, lt=1)
  noise_multipliers: tuple[float, ...] = setting(
      (1.0, 4.0), 'noise multipliers sigma', gt=0)
  l2_norm_clips: tuple[float, ...] = setting((0.25, 0.5), 'clip norms C',
                                             gt=0)
  panels: tuple[float, ...] = setting(
      (1.0, 0.25, 4.0, 0.5), 'the (sigma, C) pairs to run, flattened; '
      'empty: every pair of noise_multipliers x l2_norm_clips', gt=0,
      min_len=0)
  final_rates: tuple[float, ...] = setting(
      (0.0, 0.5, 0.9), 'final sparsification rates r* (0 is the reference '
      'of every claim)', ge=0, lt=1)
  flat_tolerance: float = setting(
      0.02, 'largest test-accuracy loss of tuned RS that still counts as '
      '"maintained" where sigma C <= 1', ge=0)
  clip_method: str = setting(
      'ghost', "per-example clipping: 'ghost' (no per-example gradients; the "
      "same clipped sum, several times faster for the MLP) or 'vmap'",
      choices=('ghost', 'vmap'))
  delta: float = setting(1e-5, 'delta of the reported epsilons', gt=0, lt=1)

  def validate(self) -> None:
    super().validate()
    if 0.0 not in self.final_rates or len(self.final_rates) < 2:
      raise ValueError(f'Expected final_rates={list(self.final_rates)} to '
                       'hold 0 (the reference every claim compares with) '
                       'and one rate > 0.')
    if len(self.panels) % 2:
      raise ValueError(f'Expected panels={list(self.panels)} to be (sigma, '
                       'C) pairs.')
    for sigma, clip in self.pairs():
      if (sigma not in self.noise_multipliers
          or clip not in self.l2_norm_clips):
        raise ValueError(f'Expected the panel sigma={sigma:g}, C={clip:g} '
                         'to be in noise_multipliers='
                         f'{list(self.noise_multipliers)} x l2_norm_clips='
                         f'{list(self.l2_norm_clips)}.')

  def pairs(self) -> list[tuple[float, float]]:
    """The (sigma, C) panels of DP-SGD that run."""
    if not self.panels:
      return [(s, c) for c in self.l2_norm_clips
              for s in self.noise_multipliers]
    return list(zip(self.panels[::2], self.panels[1::2]))
