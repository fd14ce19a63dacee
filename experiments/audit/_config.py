"""audit's configuration: modes, defaults and their validation."""

from typing import Any

from experiments.common import config as config_lib

NAME = 'audit'
DESCRIPTION = ('empirical epsilon lower bounds of every mechanism against its '
               'stated (eps, delta), and of deliberately broken twins')
# Quick mode audits the cases that compile in a few seconds; the exact
# samplers (Laplace on a grid, discrete Gaussian, DDG, Skellam), the
# compressive mechanism, random trees and two-round Q-DPSGD-2 take 5-12 s
# each to compile (twice, with their twins), so they run in full mode and in
# the slow test stage (tests/test_audit_cases.py, 1e5 trials each).
QUICK_CASES = ['gaussian', 'exponential', 'dp_knn', 'noisy_reg', 'dpsgd_vmap',
               'dpsgd_ghost', 'rs_dpsgd', 'dp_compgd', 'laplace_privatizer',
               'cpsgd_binomial', 'qdpsgd1']
MODES = {
    # quick: 20k trials per input and seed, so each audit runs in about a
    # second after its compilation; the one-run audit at eps = 2, where
    # r = 100 perfect guesses (bound <= 3.47) can refute unclipped training.
    'quick': dict(num_seeds=3, trials=20_000, cases=QUICK_CASES,
                  one_run_epsilons=[2.0], one_run_canaries=1000,
                  one_run_guesses=100),
    'full': dict(num_seeds=10, trials=1_000_000, cases=None,
                 one_run_epsilons=[1.0, 2.0, 4.0, 8.0],
                 one_run_canaries=5000, one_run_guesses=1000),
}
# The one-run audit (Steinke, Nasr & Jagielski 2023) trains full-batch
# DP-SGD for one_run_steps steps with m gradient canaries, each present with
# probability 1/2, calibrated to each of one_run_epsilons at one_run_delta.
DEFAULTS = dict(seed=0, confidence=0.95, chunk=1 << 16,
                one_run_steps=10, one_run_delta=1e-5)
NO_DATA = ('audits each mechanism on canaries built for it and uses no data')


def config(mode: str, epsilons=None, delta=None, dataset=None, **overrides
           ) -> dict[str, Any]:
  """The exact configuration; ``cases`` (a list of case names, default all)
  restricts the audit. The stated (eps, delta) are each mechanism's own."""
  if epsilons is not None or delta is not None:
    raise ValueError(f'{NAME} audits each mechanism at the (eps, delta) its '
                     'case states; drop --epsilons/--delta')
  cfg = config_lib.from_mode(NAME, mode, MODES, DEFAULTS, dataset=dataset,
                             no_dataset=NO_DATA, **overrides)
  for name, minimum in (('seed', 0), ('num_seeds', 1), ('trials', 100),
                        ('chunk', 1), ('one_run_canaries', 1),
                        ('one_run_guesses', 1), ('one_run_steps', 1)):
    v = cfg[name]
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
      raise ValueError(f'Expected {name}={v} to be an integer >= {minimum}.')
  if not 0 < cfg['confidence'] < 1:
    raise ValueError(f"Expected confidence={cfg['confidence']} in (0, 1).")
  if cfg['one_run_guesses'] > cfg['one_run_canaries']:
    raise ValueError(f"Expected one_run_guesses={cfg['one_run_guesses']} <= "
                     f"one_run_canaries={cfg['one_run_canaries']}.")
  if not all(e > 0 for e in cfg['one_run_epsilons']):
    raise ValueError(f"Expected one_run_epsilons={cfg['one_run_epsilons']} "
                     '> 0.')
  if not 0 < cfg['one_run_delta'] < 1:
    raise ValueError(f"Expected one_run_delta={cfg['one_run_delta']} in "
                     '(0, 1).')
  if cfg['cases'] is not None and (not isinstance(cfg['cases'], list)
                                   or not cfg['cases']):
    raise ValueError(f"Expected cases={cfg['cases']} to be a non-empty list "
                     'of case names.')
  return cfg
