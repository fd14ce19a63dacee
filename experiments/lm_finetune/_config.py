"""lm_finetune's settings: field defaults are the quick preset."""

import dataclasses

from experiments.common import config

NAME = 'lm_finetune'
DESCRIPTION = ('private fine-tuning of a byte-level GPT decoder (tied '
               'embeddings) on Python test code: full vs LoRA vs non-private')
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: a 2-block width-32 decoder over 32-byte windows, 3 seeds, 100
  steps; full: width 64, 64-byte windows, 10 seeds, 400 steps."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      num_seeds=10, width=64, seq_len=64, steps=400, pretrain_steps=2000,
      num_public=100_000, num_train=50_000, expected_batch_size=256)}

  num_seeds: int = setting(3, 'seeds, trained as one vmapped program', ge=2)
  epsilons: tuple[float, ...] = setting(
      (1.0, 3.0, 8.0), 'target epsilons of every private run (the claims '
      'read the smallest and the largest)', gt=0, min_len=2)
  delta: float = setting(1e-5, 'target delta', gt=0, lt=1)
  steps: int = setting(100, 'DP-Adam fine-tuning steps', ge=1)
  expected_batch_size: int = setting(128, 'expected Poisson batch size',
                                     ge=1)
  l2_norm_clip: float = setting(1.0, 'per-example L2 clip C', gt=0)
  full_learning_rate: float = setting(1e-3, 'Adam step of full '
                                      'fine-tuning', gt=0)
  lora_learning_rate: float = setting(3e-3, 'Adam step of LoRA '
                                      'fine-tuning', gt=0)
  seq_len: int = setting(32, 'bytes per window (the model reads T, '
                         'predicts the next byte at each)', ge=2)
  width: int = setting(32, 'model width D (4 heads; the MLP 4 D)', ge=4)
  layers: int = setting(2, 'decoder blocks', ge=1)
  heads: int = setting(4, 'attention heads (dividing the width)', ge=1)
  rank: int = setting(4, 'LoRA rank r of every Dense adapter', ge=1)
  alpha: float = setting(8.0, 'LoRA scale numerator (scale alpha / r)',
                         gt=0)
  num_public: int = setting(40_000, 'public (library code) windows for '
                            'pretraining', ge=1)
  num_train: int = setting(20_000, 'private (test-suite) training windows',
                           ge=1)
  num_val: int = setting(512, 'private validation windows', ge=1)
  num_test: int = setting(1024, 'private test windows', ge=1)
  pretrain_steps: int = setting(400, 'non-private AdamW pretraining steps',
                                ge=1)
  pretrain_batch_size: int = setting(64, 'pretraining minibatch', ge=1)
  pretrain_learning_rate: float = setting(3e-3, 'AdamW step of '
                                          'pretraining', gt=0)
  pretrain_weight_decay: float = setting(1e-4, 'AdamW weight decay of '
                                         'pretraining', ge=0)
  private_margin: float = setting(
      0.10, 'claimed largest relative perplexity excess of private full '
      'fine-tuning at the largest epsilon over its non-private twin', gt=0)
  lora_margin: float = setting(
      0.05, 'claimed largest relative perplexity excess of LoRA over full '
      'fine-tuning at the same epsilon', gt=0)

  def normalize(self):
    return dict(epsilons=tuple(sorted(self.epsilons)))

  def validate(self) -> None:
    if self.width % self.heads:
      raise ValueError(f'Expected heads={self.heads} to divide '
                       f'width={self.width}.')
    if self.expected_batch_size > self.num_train:
      raise ValueError(f'Expected expected_batch_size='
                       f'{self.expected_batch_size} <= num_train='
                       f'{self.num_train}.')
