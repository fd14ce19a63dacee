"""rs_tradeoff's report body: the setting, the table, accuracy vs rate."""

from typing import Any

import matplotlib.pyplot as plt

from experiments.common import report as report_lib

COLUMNS = [('setting', 'setting'), ('sigma', 'sigma'), ('clip', 'C'),
           ('rate', 'final rate r*'), ('train_accuracy_mean', 'train acc'),
           ('train_accuracy_std', 'std'), ('test_accuracy_mean', 'test acc'),
           ('epsilon_rdp', 'eps (RDP)'), ('bits_vs_dense', 'bits vs dense'),
           ('seeds', 'seeds')]


def plot(results: dict[str, Any], out_dir: str) -> list[str]:
  fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
  curves: dict[tuple, list] = {}
  for row in results['summary']:
    curves.setdefault((row['setting'], row['sigma'], row['clip']), []).append(
        row)
  for (setting, sigma, clip), rows in curves.items():
    ax = axes[0] if setting == 'dpsgd' else axes[1]
    label = (f'DP-SGD sigma={sigma:g} C={clip:g}' if setting == 'dpsgd' else
             f'{setting} ' + (f'sigma={sigma:g}' if sigma else f'C={clip:g}'))
    ax.errorbar([r['rate'] for r in rows],
                [r['train_accuracy_mean'] for r in rows],
                yerr=[r['train_accuracy_std'] for r in rows], marker='o',
                capsize=2, label=label)
  for ax, title in zip(axes, ('DP-SGD + RS', 'ablations + RS')):
    ax.set_xlabel('final sparsification rate r*')
    ax.set_title(title)
    ax.legend(fontsize=6)
  axes[0].set_ylabel('train accuracy')
  return [report_lib.save_figure(fig, out_dir, 'accuracy_vs_rate.png')]


def report(results: dict[str, Any], out_dir: str) -> str:
  cfg = results['config']
  pngs = plot(results, out_dir)
  lines = [
      report_lib.dataset_line(results['dataset']), '',
      f"Model {results['model']}, {results['steps']} steps ({cfg['epochs']} "
      f"epochs, expected batch {cfg['expected_batch_size']}), lr "
      f"{cfg['learning_rate']}, momentum {cfg['momentum']}, gradual cooling, "
      f"one mask per epoch; seeds {cfg['seed']}.."
      f"{cfg['seed'] + cfg['num_seeds'] - 1}. Epsilon (delta "
      f"{cfg['delta']:g}) is the same for every r* at a given sigma.", '',
      report_lib.markdown_table(results['summary'], COLUMNS), '']
  lines += [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines)
