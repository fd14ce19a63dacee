"""rs_tradeoff's report body: the setting, the table, accuracy vs rate."""

import matplotlib.pyplot as plt

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.rs_tradeoff._config import Config
from experiments.rs_tradeoff._results import Results

COLUMNS = [('setting', 'setting'), ('sigma', 'sigma'), ('clip', 'C'),
           ('rate', 'final rate r*'), ('train_accuracy_mean', 'train acc'),
           ('train_accuracy_sem', 'SEM'), ('val_accuracy_mean', 'val acc'),
           ('test_accuracy_mean', 'test acc'), ('test_accuracy_sem', 'SEM'),
           ('epsilon_rdp', 'eps (RDP)'), ('bits_vs_dense', 'bits vs dense'),
           ('seeds', 'seeds')]


def _label(setting, sigma, clip):
  if setting == 'dpsgd':
    return f'DP-SGD sigma={sigma:g} C={clip:g}'
  return f'{setting} ' + (f'sigma={sigma:g}' if sigma else f'C={clip:g}')


def plot(results: Results, out_dir: str) -> list[str]:
  fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
  curves: dict[tuple, list] = {}
  for row in results.summary:
    if row['setting'] != 'non_private':
      curves.setdefault((row['setting'], row['sigma'], row['clip']),
                        []).append(row)
  for (setting, sigma, clip), rows in curves.items():
    ax = axes[0] if setting == 'dpsgd' else axes[1]
    ax.errorbar([r['rate'] for r in rows],
                [r['train_accuracy_mean'] for r in rows],
                yerr=[r['train_accuracy_sem'] for r in rows], marker='o',
                capsize=2, label=_label(setting, sigma, clip))
  for row in results.summary:
    if row['setting'] == 'non_private':
      for ax in axes:
        ax.axhline(row['train_accuracy_mean'], ls='--', color='gray',
                   label='non-private')
  for ax, title in zip(axes, ('DP-SGD + RS (Fig. 2)',
                              'ablations + RS (Fig. 3)')):
    ax.set_xlabel('final sparsification rate r*')
    ax.set_title(title)
    ax.legend(fontsize=6)
  axes[0].set_ylabel('train accuracy (± SEM)')
  return [report_lib.save_figure(fig, out_dir, 'accuracy_vs_rate.png')]


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims  # the runner's claims table shows them
  pngs = plot(results, out_dir)
  lines = [
      report_lib.dataset_line(results.dataset), '',
      f'Model {results.model} ({results.num_params} parameters), '
      f'{results.steps} steps ({cfg.epochs} epochs, expected batch '
      f'{cfg.expected_batch_size}), lr {cfg.learning_rate}, momentum '
      f'{cfg.momentum}, gradual cooling, one mask per epoch; seeds '
      f'{cfg.seed}..{cfg.seed + cfg.num_seeds - 1}. Epsilon (delta '
      f'{cfg.delta:g}) is the same for every r* at a given sigma. r* is '
      'chosen per seed on the validation split and judged on the test split; '
      'the non-private row (same batches and steps) is the ceiling.', '',
      report_lib.markdown_table(results.summary, COLUMNS), '']
  lines += [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines)
