"""dpsgd_baseline's report body: the setting, the accuracy table, a plot."""

import matplotlib.pyplot as plt

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.dpsgd_baseline._config import Config
from experiments.dpsgd_baseline._results import Results

COLUMNS = [('model', 'model'), ('target_epsilon', 'target eps'),
           ('clip', 'C'), ('noise_multiplier', 'sigma'),
           ('epsilon_rdp', 'eps (RDP)'), ('epsilon_pld', 'eps (PLD)'),
           ('val_accuracy_mean', 'val acc'),
           ('test_accuracy_mean', 'test acc (mean)'),
           ('test_accuracy_sem', 'SEM'), ('seeds', 'seeds')]
SELECTED_COLUMNS = [('model', 'model'), ('target_epsilon', 'target eps'),
                    ('noise_multiplier', 'sigma'),
                    ('test_accuracy_mean', 'test acc (C chosen per seed)'),
                    ('test_accuracy_sem', 'SEM'), ('seeds', 'seeds')]


def plot(results: Results, cfg: Config, out_dir: str) -> list[str]:
  """Test accuracy vs epsilon per model, non-private as a dashed line."""
  fig, ax = plt.subplots(figsize=(5, 3.5))
  summary = results.selected_summary
  for i, model in enumerate(dict.fromkeys(r['model'] for r in summary)):
    color = f'C{i}'
    dp = sorted((r for r in summary if r['model'] == model and
                 r['target_epsilon'] is not None),
                key=lambda r: r['target_epsilon'])
    ax.errorbar([r['epsilon_rdp'] for r in dp],
                [r['test_accuracy_mean'] for r in dp],
                yerr=[r['test_accuracy_sem'] for r in dp], marker='o',
                color=color, capsize=3, label=f'{model} DP-SGD (C tuned)')
    for r in summary:
      if r['model'] == model and r['target_epsilon'] is None:
        ax.axhline(r['test_accuracy_mean'], ls='--', color=color,
                   label=f'{model} non-private')
  ax.set_xscale('log')
  ticks = sorted(cfg.epsilons)
  ax.set_xticks(ticks, [f'{e:g}' for e in ticks], minor=False)
  ax.set_xticks([], minor=True)
  ax.set_xlabel(f'epsilon (RDP, delta={cfg.delta:g})')
  ax.set_ylabel('test accuracy (± SEM)')
  ax.set_title(f"DP-SGD on {results.dataset['name']}")
  ax.legend(fontsize=7)
  return [report_lib.save_figure(fig, out_dir, 'accuracy_vs_epsilon.png')]


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims  # the runner's claims table shows them
  lines = [
      report_lib.dataset_line(results.dataset), '',
      f'Poisson sampling q = {results.sampling_rate:.5f} (expected batch '
      f'{cfg.expected_batch_size}, cap {results.max_batch_size}), '
      f"{results.runs[0]['steps']} steps ({cfg.epochs} epochs), lr "
      f'{cfg.learning_rate}, momentum {cfg.momentum}; sigma calibrated '
      f'under RDP. Each seed chooses C from {list(cfg.l2_norm_clips)} on the '
      'validation split; the claims use the test accuracy at that C.', '',
      report_lib.markdown_table(results.selected_summary,
                                SELECTED_COLUMNS), '',
      'Every C (the tuning grid):', '',
      report_lib.markdown_table(results.summary, COLUMNS), '']
  lines += [f'![{p}]({p})' for p in plot(results, cfg, out_dir)]
  return '\n'.join(lines)
