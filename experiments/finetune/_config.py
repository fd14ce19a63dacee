"""finetune's settings: field defaults are the quick preset."""

import dataclasses

from experiments.common import config

NAME = 'finetune'
DESCRIPTION = ('private fine-tuning of a public digits-pretrained MLP on '
               'MNIST-5k: scratch vs full vs LoRA')
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: 10 seeds, 3 epochs; full: 10 seeds, 15 epochs and a wider
  learning-rate grid. The data is always public digits (pretraining) and
  MNIST-5k (private fine-tuning, validation split for the learning rate)."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      num_seeds=10, epochs=15, hidden=128, pretrain_epochs=40,
      learning_rates=(0.01, 0.03, 0.1, 0.3, 1.0))}

  num_seeds: int = setting(10, 'seeds, trained as one vmapped program', ge=2)
  epsilons: tuple[float, ...] = setting(
      (1.0, 4.0), 'target epsilons of every private run (the claims compare '
      'at the smallest and the largest)', gt=0, min_len=2)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  epochs: int = setting(3, 'fine-tuning (and from-scratch) epochs', ge=1)
  expected_batch_size: int = setting(128, 'expected Poisson batch size',
                                     ge=1)
  learning_rates: tuple[float, ...] = setting(
      (0.1, 0.3), 'SGD learning rates; every method and epsilon picks '
      'its own per seed on the validation split', gt=0)
  momentum: float = setting(0.9, 'SGD momentum', ge=0, lt=1)
  l2_norm_clip: float = setting(1.0, 'per-example L2 clip C', gt=0)
  hidden: int = setting(64, 'MLP hidden width (784-h-10, tanh)', ge=1)
  rank: int = setting(8, 'LoRA rank r of both layers\' adapters', ge=1)
  alpha: float = setting(16.0, 'LoRA scale numerator (scale alpha / r)',
                         gt=0)
  pretrain_epochs: int = setting(20, 'non-private pretraining epochs on the '
                                 'public digits', ge=1)
  pretrain_learning_rate: float = setting(3e-3, 'AdamW step of '
                                          'pretraining', gt=0)
  pretrain_weight_decay: float = setting(1e-4, 'AdamW weight decay of '
                                         'pretraining', ge=0)
  pretrain_shift: int = setting(2, 'largest random shift (pixels) of a '
                                'public image in pretraining', ge=0)
  lora_margin: float = setting(
      0.03, 'claimed largest test-accuracy loss of LoRA against full '
      'fine-tuning at the same epsilon', ge=0)

  def normalize(self):
    return dict(epsilons=tuple(sorted(self.epsilons)),
                learning_rates=tuple(sorted(self.learning_rates)))
