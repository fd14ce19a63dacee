"""audit's settings (field defaults are the quick preset)."""

import dataclasses

from experiments.common import config

NAME = 'audit'
DESCRIPTION = ('empirical epsilon lower bounds of every mechanism against its '
               'stated (eps, delta), and of deliberately broken twins')
# Quick mode audits the cases that compile in a few seconds; the exact
# samplers (Laplace on a grid, discrete Gaussian, DDG, Skellam), the
# compressive mechanism, random trees and two-round Q-DPSGD-2 take 5-12 s
# each to compile (twice, with their twins), so they run in full mode and in
# the slow test stage (tests/test_audit_cases.py, 1e5 trials each).
QUICK_CASES = ('gaussian', 'exponential', 'dp_knn', 'noisy_reg', 'dpsgd_vmap',
               'dpsgd_ghost', 'rs_dpsgd', 'dp_compgd', 'laplace_privatizer',
               'cpsgd_binomial', 'qdpsgd1')
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: 20k trials per input and seed, so each audit runs in about a
  second after its compilation, and the one-run audit at eps = 2, where
  r = 100 perfect guesses (bound <= 3.47) can refute unclipped training;
  full: every case, 1e6 trials, 10 seeds. The stated (eps, delta) are each
  mechanism's own, so there is no epsilons, delta or dataset setting."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      num_seeds=10, trials=1_000_000, cases=None,
      one_run_epsilons=(1.0, 2.0, 4.0, 8.0), one_run_num_canaries=5000,
      one_run_num_guesses=1000)}

  num_seeds: int = setting(3, 'seeds (one audit per seed)', ge=1)
  trials: int = setting(20_000, 'runs per neighbouring input and seed',
                        ge=100)
  cases: tuple[str, ...] | None = setting(
      QUICK_CASES, 'audit cases of dpjax.audit.audit_cases() (none: all)')
  confidence: float = setting(0.95, 'Clopper-Pearson confidence', gt=0, lt=1)
  chunk: int = setting(1 << 16, 'trials per compiled chunk', ge=1)
  # The one-run audit (Steinke, Nasr & Jagielski 2023) trains full-batch
  # DP-SGD for one_run_steps steps with m gradient canaries, each present
  # with probability 1/2, calibrated to each of one_run_epsilons at
  # one_run_delta.
  one_run_epsilons: tuple[float, ...] = setting(
      (2.0,), 'stated epsilons of the one-run audits', gt=0)
  one_run_num_canaries: int = setting(1000, 'gradient canaries m', ge=1)
  one_run_num_guesses: int = setting(100, 'guesses r of the one-run audit',
                                     ge=1)
  one_run_steps: int = setting(10, 'full-batch DP-SGD steps', ge=1)
  one_run_delta: float = setting(1e-5, 'delta of the one-run audits', gt=0,
                                 lt=1)

  def validate(self):
    if self.one_run_num_guesses > self.one_run_num_canaries:
      raise ValueError(
          f'Expected one_run_num_guesses={self.one_run_num_guesses} <= '
          f'one_run_num_canaries={self.one_run_num_canaries}.')
