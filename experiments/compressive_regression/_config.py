"""compressive_regression's configuration: modes, methods and validation."""

from typing import Any

from experiments.common import data as data_lib


NAME = 'compressive_regression'
DESCRIPTION = ('sparsified private GD with the compressive mechanism on '
               'regression (Farokhi, Figs. 1-2)')
MODES = {
    'quick': dict(num_seeds=5, kappas=[1, 3, 5],
                  epsilons=[1.0, 10.0, 100.0, 1000.0, 10000.0]),
    'full': dict(num_seeds=20, kappas=[1, 2, 3, 5, 8, 10, 15, 20],
                 epsilons=[0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1000.0,
                           10000.0, 100000.0]),
}
DEFAULTS = dict(dataset='synthetic_regression', seed=0, n=10_000, steps=1000,
                learning_rate=0.1, kappa=5, num_measurements=20, xi=2.0,
                eps_small=1.0, eps_large=1000.0, delta=1e-5,
                measurements_per_kappa=4, pld_max_epsilon=10.0)
REGRESSION_DATASETS = ('synthetic_regression', 'diabetes')
METHODS = ('gd', 'top_k', 'compressive', 'compressive_paper', 'laplace',
           'laplace_mean')
PRIVATE = METHODS[2:]
COMPRESSIVE = ('compressive', 'compressive_paper')
BASELINES = ('laplace', 'laplace_mean')
LABELS = {
    'gd': 'GD (non-private)',
    'top_k': 'top-k GD (non-private)',
    'compressive': 'compressive, certified',
    'compressive_paper': "compressive, paper's sqrt(p)/eps",
    'laplace': 'Laplace 2 xi n_theta / eps',
    'laplace_mean': 'Laplace 2 xi n_theta / (n eps)',
}
COLORS = {'gd': 'k', 'top_k': 'C7', 'compressive': 'C0',
          'compressive_paper': 'C1', 'laplace': 'C2', 'laplace_mean': 'C3'}


def config(mode: str, epsilons=None, dataset=None, **overrides
           ) -> dict[str, Any]:
  """The exact configuration.

  ``epsilons`` (per step) replaces the sweep; unless ``eps_small`` /
  ``eps_large`` are given too, the figures then show its smallest and
  largest values.
  """
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  if epsilons is not None:
    cfg['epsilons'] = sorted(set(float(e) for e in epsilons))
    cfg['eps_small'] = overrides.pop('eps_small', None) or cfg['epsilons'][0]
    cfg['eps_large'] = overrides.pop('eps_large', None) or cfg['epsilons'][-1]
  if dataset is not None:
    cfg['dataset'] = dataset
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  if not (cfg['dataset'] in REGRESSION_DATASETS or
          cfg['dataset'].startswith(data_lib.CSV_PREFIX)):
    raise ValueError(
        f"{NAME} needs a regression dataset: {', '.join(REGRESSION_DATASETS)}"
        f" or {data_lib.CSV_PREFIX}PATH, not {cfg['dataset']!r}")
  if cfg['eps_small'] not in cfg['epsilons'] or (
      cfg['eps_large'] not in cfg['epsilons']):
    raise ValueError(f"{NAME}: eps_small={cfg['eps_small']} and eps_large="
                     f"{cfg['eps_large']} must be in the epsilon sweep "
                     f"{cfg['epsilons']}")
  if not cfg['eps_small'] < cfg['eps_large']:
    raise ValueError(f"{NAME} compares a small and a large epsilon; got "
                     f"eps_small={cfg['eps_small']} >= eps_large="
                     f"{cfg['eps_large']} (give at least two --epsilons)")
  if not (isinstance(cfg['steps'], int) and cfg['steps'] >= 2):
    raise ValueError(f"Expected steps={cfg['steps']} to be an integer >= 2.")
  for key in ('num_seeds', 'n', 'kappa', 'num_measurements'):
    _check_positive_int(key, cfg[key])
  for eps in cfg['epsilons']:
    if not eps > 0:
      raise ValueError(f'Expected epsilon={eps} > 0.')
  return cfg


def _check_positive_int(name, value):
  if not isinstance(value, int) or value <= 0:
    raise ValueError(f'Expected {name}={value} to be an integer > 0.')
