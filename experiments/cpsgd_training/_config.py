"""cpsgd_training's settings (field defaults are the quick preset)."""

import dataclasses

from dpjax import distributed as dist
from experiments.common import config
from experiments.common import sgd_config

NAME = 'cpsgd_training'
DESCRIPTION = ('distributed DP SGD: cpSGD (k levels + Bin(m)) vs Gaussian at '
               'matched per-round epsilon, accuracy vs bits (Fig. 2)')
GAUSSIAN_BITS = dist.gaussian_protocol_bits(1)  # float32: bits per coordinate
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(sgd_config.ClassificationConfig):
  """Quick: 60 rounds, k in {2, 4, 16} x m in {32, 128, 512} rotated, (16,
  128) without rotation, 5 seeds; full: 200 rounds, m up to 2048, (2, 512)
  and (16, 512) without rotation, 10 seeds. Epsilon follows from (k, m)
  (Theorem 1); it is not a setting."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      rounds=200, trials=(32, 128, 512, 2048), unrotated=(2, 512, 16, 512),
      num_seeds=10)}

  num_seeds: int = setting(5, 'seeds, trained as one vmapped program', ge=1)
  rounds: int = setting(60, 'training rounds', ge=1)
  levels: tuple[int, ...] = setting((2, 4, 16), 'quantization levels k '
                                    '(rotated)', ge=2)
  trials: tuple[int, ...] = setting((32, 128, 512), 'Binomial trials m '
                                    '(rotated)', ge=1)
  unrotated: tuple[int, ...] = setting(
      (16, 128), '(k, m) pairs without rotation, flattened: k1 m1 k2 m2 ...',
      ge=1, min_len=0)
  delta: float = setting(1e-5, 'target delta of the whole run (per round: '
                         'delta / (2 rounds))', gt=0, lt=1)
  num_clients: int = setting(100, 'clients (one shard each)', ge=1)
  clients_per_round: int | None = setting(
      None, 'clients per round (none: all)', ge=1)
  l2_norm_clip: float = setting(0.25, 'client gradient L2 clip bound D',
                                gt=0)
  learning_rate: float = setting(0.5, 'server learning rate', gt=0)
  momentum: float = setting(0.9, 'server heavy-ball momentum', ge=0, lt=1)
  p: float = setting(0.5, 'Binomial success probability', gt=0, lt=1)
  model: str = setting('logistic', 'model', choices=('logistic', 'mlp'))
  num_evals: int = setting(20, 'points of the accuracy curves', ge=1)

  @property
  def unrotated_pairs(self) -> list[tuple[int, int]]:
    """``unrotated`` as (k, m) pairs."""
    return list(zip(self.unrotated[::2], self.unrotated[1::2]))

  def validate(self):
    super().validate()
    n = self.clients_per_round
    if n is not None and n > self.num_clients:
      raise ValueError(f'Expected clients_per_round={n} <= '
                       f'num_clients={self.num_clients}.')
    if len(self.unrotated) % 2:
      raise ValueError(f'Expected unrotated={list(self.unrotated)} to hold '
                       '(k, m) pairs: an even number of values.')
    for k, _ in self.unrotated_pairs:
      if k < 2:
        raise ValueError(f'Expected unrotated levels k={k} >= 2.')
    pairs = [(k, m) for k in self.levels for m in self.trials]
    biggest = max(k + m - 1 for k, m in pairs + self.unrotated_pairs)
    if (n or self.num_clients) * biggest >= 2**31:
      raise ValueError('clients_per_round * (k - 1 + m) must be < 2^31 '
                       '(int32 sum of the messages)')
