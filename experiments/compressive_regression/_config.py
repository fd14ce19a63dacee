"""compressive_regression's settings (field defaults are the quick preset)
and methods."""

import dataclasses
import numbers
from typing import Any

from experiments.common import config
from experiments.common import data as data_lib


NAME = 'compressive_regression'
DESCRIPTION = ('sparsified private GD with the compressive mechanism on '
               'regression (Farokhi, Figs. 1-2)')
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


setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: 8 seeds, n = 5,000, per-step eps in {1, 100, 1000, 10^4}, kappa
  in {1, 3, 5}; full: 20 seeds, n = 10,000, eps from 0.1 to 10^5, kappa in
  {1, 2, 3, 5, 8, 10, 15, 20}. Epsilons are per step (per release). The
  per-example clipping of n gradients at every step is the cost, so quick
  mode halves n for the main job's time budget
  (docs/deviations/compressive.md)."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      num_seeds=20, num_examples=10_000, kappas=(1, 2, 3, 5, 8, 10, 15, 20),
      epsilons=(0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1000.0, 10000.0,
                100000.0))}

  num_seeds: int = setting(8, 'seeds, run as one vmapped program', ge=1)
  dataset: str = setting('synthetic_regression', 'a regression dataset: '
                         f"{', '.join(REGRESSION_DATASETS)} or "
                         f'{data_lib.CSV_PREFIX}PATH')
  num_examples: int = setting(5_000, 'examples generated (synthetic or csv)',
                              ge=1)
  epsilons: tuple[float, ...] = setting(
      (1.0, 100.0, 1000.0, 10000.0), 'per-step epsilons of the sweep',
      gt=0)
  small_epsilon: float = setting(1.0, 'small per-step eps of the figures '
                                 'and claims (given --epsilons: their '
                                 'smallest)', gt=0)
  large_epsilon: float = setting(1000.0, 'large per-step eps of the figures '
                                 'and claims (given --epsilons: their '
                                 'largest)', gt=0)
  delta: float = setting(1e-5, 'delta of the PLD totals', gt=0, lt=1)
  steps: int = setting(1000, 'T: iterates theta_1..theta_T, T - 1 releases',
                       ge=2)
  learning_rate: float = setting(0.1, 'rho_k = learning_rate / sqrt(k)',
                                 gt=0)
  kappa: int = setting(5, 'top-k sparsity of the main runs', ge=1)
  num_measurements: int = setting(20, 'measurements p of the main runs',
                                  ge=1)
  kappas: tuple[int, ...] = setting((1, 3, 5), 'kappas of the kappa sweep',
                                    ge=1)
  measurements_per_kappa: int = setting(
      4, 'p = max(3, this x kappa) in the kappa sweep', ge=1)
  linf_clip: float = setting(2.0, 'per-example coordinatewise clip bound xi',
                             gt=0)
  pld_max_epsilon: float = setting(
      10.0, 'largest per-step eps whose total is also computed by PLD', ge=0)

  @classmethod
  def preset(cls, mode: str = 'quick', **overrides: Any) -> 'Config':
    """The preset; ``epsilons`` given without ``small_epsilon`` /
    ``large_epsilon`` makes the figures show its smallest and largest
    values."""
    eps = overrides.get('epsilons')
    if eps is not None and not isinstance(eps, (str, dict)):
      given = [e for e in eps if isinstance(e, numbers.Real)]
      for key, pick in (('small_epsilon', min), ('large_epsilon', max)):
        if given and overrides.get(key) is None:
          overrides[key] = pick(given)
    return super().preset(mode, **overrides)

  def normalize(self) -> dict[str, Any]:
    return dict(epsilons=tuple(sorted(set(self.epsilons))))

  def validate(self) -> None:
    if not (self.dataset in REGRESSION_DATASETS or
            self.dataset.startswith(data_lib.CSV_PREFIX)):
      raise ValueError(
          f"{NAME} needs a regression dataset: "
          f"{', '.join(REGRESSION_DATASETS)} or {data_lib.CSV_PREFIX}PATH, "
          f'not {self.dataset!r}')
    if self.small_epsilon not in self.epsilons or (
        self.large_epsilon not in self.epsilons):
      raise ValueError(f'{NAME}: small_epsilon={self.small_epsilon} and '
                       f'large_epsilon={self.large_epsilon} must be in the '
                       f'epsilon sweep {list(self.epsilons)}')
    if not self.small_epsilon < self.large_epsilon:
      raise ValueError(f'{NAME} compares a small and a large epsilon; got '
                       f'small_epsilon={self.small_epsilon} >= large_epsilon='
                       f'{self.large_epsilon} (give at least two --epsilons)')
