"""nonparametric's configuration: modes, datasets and methods."""

from typing import Any

NAME = 'nonparametric'
DESCRIPTION = ('private histograms (NoisyReg), DP-kNN and random decision '
               'trees vs diffprivlib (Huang thesis Table 5.3, Fig. 5.1)')
DATASETS = ('synthetic10', 'synthetic20', 'breast_cancer', 'digits', 'iris',
            'wine')
MODES = {
    'quick': dict(num_seeds=3, datasets=['synthetic10', 'breast_cancer',
                                         'iris'], max_test=100,
                  sweep=[0.5, 2.0], sweep_datasets=['synthetic10'],
                  diffprivlib=True),
    'full': dict(num_seeds=20, datasets=list(DATASETS), max_test=None,
                 sweep=[0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0],
                 sweep_datasets=['synthetic10', 'synthetic20'],
                 diffprivlib=True),
}
DEFAULTS = dict(seed=0, epsilon=2.0, test_fraction=0.1, n_synthetic=3000,
                projection_dim=4, bins=4, num_trees=10, knn_k=5)
PRIVATE = ('noisy_reg', 'private_histogram', 'dp_knn', 'rdt', 'dpl_nb',
           'dpl_lr', 'dpl_rf')
METHODS = PRIVATE + ('histogram', 'knn', 'rf')
LABELS = {'noisy_reg': 'NoisyReg (label-DP)',
          'private_histogram': 'Private histogram (full DP)',
          'dp_knn': 'DP-kNN', 'rdt': 'RDT', 'dpl_nb': 'diffprivlib GaussianNB',
          'dpl_lr': 'diffprivlib LogisticRegression',
          'dpl_rf': 'diffprivlib RandomForest',
          'histogram': 'Histogram (non-private)', 'knn': 'kNN (sklearn)',
          'rf': 'Random forest (sklearn)'}
# Huang thesis Table 5.3 (eps = 2, 20 runs): NoisyReg, DP-kNN, RDT, in %.
THESIS = {
    'Adults': (79.37, 69.10, 76.16), 'Bank': (86.31, 79.55, 88.21),
    'Banknotes': (97.71, 80.00, 70.59), 'Transfusion': (79.86, 70.80, 78.05),
    'Claves': (79.07, 76.78, 73.02), 'Credit card': (72.00, 69.92, 78.28),
    'Mushroom': (97.88, 72.73, 93.89), 'Occupancy': (98.74, 79.27, 82.87),
}


def config(mode: str, epsilons=None, dataset=None, delta=None, **overrides
           ) -> dict[str, Any]:
  """The exact configuration; ``dataset`` may be a name or ``csv:PATH``."""
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  if delta is not None:
    raise ValueError(f'{NAME} releases are pure epsilon-DP; drop --delta')
  if epsilons is not None:
    if len(epsilons) != 1:
      raise ValueError(f'{NAME} runs Table 5.3 at one epsilon; got '
                       f'--epsilons {list(epsilons)}')
    cfg['epsilon'] = float(epsilons[0])
  if dataset is not None:
    cfg['datasets'] = ['synthetic10' if dataset == 'synthetic' else dataset]
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  if not cfg['epsilon'] > 0:
    raise ValueError(f"Expected epsilon={cfg['epsilon']} > 0.")
  for name in ('num_seeds', 'projection_dim', 'bins', 'num_trees', 'knn_k'):
    v = cfg[name]
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
      raise ValueError(f'Expected {name}={v} to be an integer >= 1.')
  for d in cfg['datasets'] + cfg['sweep_datasets']:
    if d not in DATASETS and not str(d).startswith('csv:'):
      raise ValueError(f'Unknown dataset {d!r}; known: {DATASETS} or '
                       'csv:PATH (classification target column "target" '
                       'or target=...)')
  for e in cfg['sweep']:
    if not e > 0:
      raise ValueError(f'Expected sweep epsilon={e} > 0.')
  return cfg
