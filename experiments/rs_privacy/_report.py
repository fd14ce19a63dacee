"""rs_privacy's report body: the setting, the tuned and the grid tables."""

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.rs_privacy._config import Config
from experiments.rs_privacy._results import Results

COLUMNS = [('target_epsilon', 'target eps'), ('method', 'method'),
           ('noise_multiplier', 'sigma'), ('epsilon_rdp', 'eps (RDP)'),
           ('epsilon_pld', 'eps (PLD)'), ('delta', 'delta'),
           ('test_accuracy_mean', 'test acc (tuned per seed)'),
           ('test_accuracy_sem', 'SEM'), ('seeds', 'seeds')]
GRID_COLUMNS = [('target_epsilon', 'target eps'), ('clip', 'C'),
                ('rate', 'r*'), ('val_accuracy_mean', 'val acc'),
                ('test_accuracy_mean', 'test acc'),
                ('test_accuracy_sem', 'SEM'), ('seeds', 'seeds')]


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims  # the runner's claims table shows them
  del out_dir
  return '\n'.join([
      report_lib.dataset_line(results.dataset), '',
      f'Model {results.model}; {results.n_train} training examples, '
      f'{results.n_validation} validation, {results.steps} steps '
      f'({cfg.epochs} epochs, q = {results.sampling_rate:.4f}), lr '
      f'{cfg.learning_rate}, momentum {cfg.momentum}. Per seed, DP-SGD '
      f'chooses C from {list(cfg.l2_norm_clips)} and RS chooses C and r* '
      f'from {list(cfg.final_rates)} on the validation split; each is scored '
      'on the test split at its choice.', '',
      report_lib.markdown_table(results.summary, COLUMNS), '',
      'Every (C, r*) (r* = 0 is DP-SGD):', '',
      report_lib.markdown_table(results.grid, GRID_COLUMNS)])
