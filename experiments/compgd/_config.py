"""compgd's settings (field defaults are the quick preset) and methods."""

import dataclasses

from dpjax import accounting
from experiments.common import config

NAME = 'compgd'
DESCRIPTION = ('compressed private gradient descent with random projections '
               'vs DP-GD on sparse logistic regression (Huang thesis, '
               'Figs. 7.1-7.3)')
METHODS = ('gd', 'compgd', 'dp_gd', 'dp_compgd')
PRIVATE = ('dp_gd', 'dp_compgd')
COMPRESSED = ('compgd', 'dp_compgd')
LABELS = {'gd': 'GD', 'compgd': 'CompGD', 'dp_gd': 'DP-GD',
          'dp_compgd': 'DP-CompGD'}
COLORS = {'gd': 'k', 'compgd': 'C7', 'dp_gd': 'C3', 'dp_compgd': 'C0'}
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: 20 seeds, d = 1000, k = 1, epochs T in {2, 3, 5, 8} chosen per
  seed and method on validation; full: 20 seeds, d in {1000, 3000}, k in
  {1, 3}, T in 1..10 (the thesis's range). The data are generated (as in
  the thesis), so there is no dataset setting."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      dimensions=(1000, 3000), intrinsic_dimensions=(1, 3),
      epochs=tuple(range(1, 11)))}

  num_seeds: int = setting(20, 'seeds, run as one vmapped program', ge=2)
  dimensions: tuple[int, ...] = setting((1000,), 'dimensions d', ge=1)
  intrinsic_dimensions: tuple[int, ...] = setting(
      (1,), 'intrinsic dimensions k (nonzeros of w*)', ge=1)
  epochs: tuple[int, ...] = setting((2, 3, 5, 8), 'epochs T (full-batch '
                                    'steps) each seed chooses from on '
                                    'validation', ge=1)
  num_examples: int = setting(3000, 'training points', ge=1)
  num_val: int = setting(1000, 'validation points (choose T)', ge=1)
  num_test: int = setting(1000, 'test points', ge=1)
  epsilon: float = setting(2.0, 'total epsilon of a private run', gt=0)
  delta: float = setting(0.01, 'delta of a private run', gt=0, lt=1)
  compression: int = setting(10, 'd / m, the projection ratio', ge=1)
  signal: float = setting(4.0, 'stddev of <z, w*>', gt=0)
  l2_norm_clip: float = setting(1.0, 'per-example clip norm L', gt=0)
  learning_rate_scale: float = setting(3.0, 'step size scale', gt=0)
  solver_iterations: int = setting(50, 'FISTA iterations of the lift', ge=1)
  accountant: str = setting('rdp', 'accountant that calibrates sigma',
                            choices=accounting.ACCOUNTANTS)

  def normalize(self):
    return dict(dimensions=tuple(sorted(set(self.dimensions))),
                epochs=tuple(sorted(set(self.epochs))),
                intrinsic_dimensions=tuple(sorted(set(
                    self.intrinsic_dimensions))))

  def validate(self):
    for d in self.dimensions:
      if d < self.compression:
        raise ValueError(f'Expected d={d} >= compression={self.compression}.')
      for k in self.intrinsic_dimensions:
        if k > d:
          raise ValueError(f'Expected intrinsic dimension {k} <= d={d}.')
