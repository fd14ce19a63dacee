"""nonparametric's settings (field defaults are the quick preset), datasets
and methods."""

import dataclasses
from experiments.common import config

NAME = 'nonparametric'
DESCRIPTION = ('private histograms (NoisyReg), DP-kNN and random decision '
               'trees vs diffprivlib (Huang thesis Table 5.3, Fig. 5.1)')
DATASETS = ('synthetic10', 'synthetic20', 'breast_cancer', 'digits', 'iris',
            'wine')
PRIVATE = ('noisy_reg', 'private_histogram', 'dp_knn', 'rdt', 'dpl_nb',
           'dpl_lr', 'dpl_rf')
# The non-private ceiling of each private method: the same estimator with
# the same settings and no noise.
CEILING = {'noisy_reg': 'histogram', 'private_histogram': 'histogram_proj',
           'dp_knn': 'knn_2n', 'rdt': 'rdt_exact', 'dpl_nb': 'nb',
           'dpl_lr': 'lr', 'dpl_rf': 'rf10'}
METHODS = PRIVATE + tuple(CEILING.values()) + ('knn',)
LABELS = {'noisy_reg': 'NoisyReg (label-DP)',
          'private_histogram': 'Private histogram (full DP)',
          'dp_knn': 'DP-kNN', 'rdt': 'RDT', 'dpl_nb': 'diffprivlib GaussianNB',
          'dpl_lr': 'diffprivlib LogisticRegression',
          'dpl_rf': 'diffprivlib RandomForest',
          'histogram': 'ceiling: histogram (NoisyReg without noise)',
          'histogram_proj': 'ceiling: projected histogram (private '
                            'histogram without noise)',
          'knn_2n': 'ceiling: kNN, k = 2N (DP-kNN without noise)',
          'rdt_exact': 'ceiling: RDT with exact counts',
          'nb': 'ceiling: GaussianNB (sklearn)',
          'lr': 'ceiling: LogisticRegression (sklearn)',
          'rf10': 'ceiling: random forest, 10 trees (sklearn)',
          'knn': 'reference: kNN, k = 5 (sklearn)'}
# Huang thesis Table 5.3 (eps = 2, 20 runs): NoisyReg, DP-kNN, RDT, in %.
THESIS = {
    'Adults': (79.37, 69.10, 76.16), 'Bank': (86.31, 79.55, 88.21),
    'Banknotes': (97.71, 80.00, 70.59), 'Transfusion': (79.86, 70.80, 78.05),
    'Claves': (79.07, 76.78, 73.02), 'Credit card': (72.00, 69.92, 78.28),
    'Mushroom': (97.88, 72.73, 93.89), 'Occupancy': (98.74, 79.27, 82.87),
}
setting = config.setting


def _known(name: str) -> None:
  if name not in DATASETS and not name.startswith('csv:'):
    raise ValueError(f'Unknown dataset {name!r}; known: {DATASETS} or '
                     'csv:PATH (classification target column "target" '
                     'or target=...)')


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: 10 seeds, synthetic10, breast_cancer and iris, every split's
  test points, at least ``min_test`` test points per seed (repeated
  splits), a two-epsilon sweep on synthetic10; full: 20 seeds, every
  dataset, an eight-epsilon sweep on synthetic10 and synthetic20. The
  releases are pure epsilon-DP, so there is no delta setting. Seeds by
  power: docs/huang.md."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      num_seeds=20, datasets=DATASETS, min_test=300,
      sweep_epsilons=(0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0),
      sweep_datasets=('synthetic10', 'synthetic20'))}

  num_seeds: int = setting(10, 'seeds (the same splits for every method)',
                           ge=1)
  datasets: tuple[str, ...] = setting(
      ('synthetic10', 'breast_cancer', 'iris'),
      f"datasets of Table 5.3 ({', '.join(DATASETS)} or csv:PATH)")
  max_test: int | None = setting(None, 'test points of a split at most '
                                 '(none: all)', ge=1)
  min_test: int = setting(150, 'test points per seed at least: a seed '
                          'averages ceil(min_test / split test size) '
                          'independent splits', ge=1)
  sweep_epsilons: tuple[float, ...] = setting(
      (0.5, 2.0), 'epsilons of the Fig. 5.1 sweep', gt=0, min_len=0)
  sweep_datasets: tuple[str, ...] = setting(
      ('synthetic10',), 'datasets of the sweep', min_len=0)
  diffprivlib: bool = setting(True, 'run diffprivlib\'s models too')
  epsilon: float = setting(2.0, 'epsilon of Table 5.3', gt=0)
  test_fraction: float = setting(0.1, 'test split', gt=0, lt=1)
  synthetic_num_examples: int = setting(3000, 'points of a synthetic set',
                                        ge=1)
  synthetic_data_seed: int = setting(0, 'generator seed of the synthetic '
                                     'sets: one fixed set, resplit by seed, '
                                     'as the thesis repeats runs on one set',
                                     ge=0)
  projection_dim: int = setting(4, 'JL dimension of the private (dense) '
                                'histogram (at most d); NoisyReg and its '
                                'ceiling run unprojected', ge=1)
  bins: int | None = setting(None, 'histogram bins per axis (none: the '
                             'thesis\'s rule b = ceil(n^(1/(m+2))), m the '
                             'histogram\'s dimension)', ge=1)
  projected_linf_clip: float = setting(
      3.0, 'public bound of a projected coordinate, in units of its JL row '
      'norm (standardized features)', gt=0)
  num_trees: int = setting(10, 'random decision trees', ge=1)
  knn_k: int = setting(5, 'neighbours of the non-private kNN', ge=1)

  def validate(self) -> None:
    for d in self.datasets + self.sweep_datasets:
      _known(d)


