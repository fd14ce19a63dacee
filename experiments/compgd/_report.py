"""compgd's report body: privacy and excess risk tables, plots."""

from typing import Any

import matplotlib.pyplot as plt

from experiments.common import report as report_lib
from experiments.compgd._claims import crossover
from experiments.compgd._claims import row_of
from experiments.compgd._config import COLORS
from experiments.compgd._config import LABELS
from experiments.compgd._config import METHODS


def _plot_vs_d(results, out_dir) -> str:
  cfg = results['config']
  ks = cfg['intrinsic']
  fig, axes = plt.subplots(1, len(ks), figsize=(4.5 * len(ks), 3.6),
                           squeeze=False)
  t = cfg['claim_epochs']
  for ax, k in zip(axes[0], ks):
    for method in METHODS:
      rs = [row_of(results['rows'], method, d, k, t) for d in cfg['dims']]
      ax.errorbar(cfg['dims'], [r['excess_mean'] for r in rs],
                  yerr=[r['excess_sem'] for r in rs], fmt='o-', capsize=2,
                  color=COLORS[method], label=LABELS[method])
    ax.set_xscale('log')
    ax.set_xlabel('d')
    ax.set_title(f'k = {k}, {t} epochs, eps = {cfg["epsilon"]:g}')
  axes[0][0].set_ylabel('excess test risk (nats)')
  axes[0][0].legend(fontsize=7)
  return report_lib.save_figure(fig, out_dir, 'excess_risk_vs_d.png')


def _plot_vs_epochs(results, out_dir) -> str:
  cfg = results['config']
  dims, ks = cfg['dims'], cfg['intrinsic']
  fig, axes = plt.subplots(len(ks), len(dims),
                           figsize=(3.2 * len(dims), 3.0 * len(ks)),
                           squeeze=False)
  for i, k in enumerate(ks):
    for j, d in enumerate(dims):
      ax = axes[i][j]
      for method in METHODS:
        rs = [row_of(results['rows'], method, d, k, e) for e in cfg['epochs']]
        ax.errorbar(cfg['epochs'], [r['excess_mean'] for r in rs],
                    yerr=[r['excess_sem'] for r in rs], fmt='o-', capsize=2,
                    color=COLORS[method], label=LABELS[method])
      ax.set_title(f'd = {d}, k = {k}', fontsize=8)
      ax.set_xlabel('epochs')
  axes[0][0].set_ylabel('excess test risk (nats)')
  axes[0][0].legend(fontsize=6)
  return report_lib.save_figure(fig, out_dir, 'excess_risk_vs_epochs.png')


def report(results: dict[str, Any], out_dir: str) -> str:
  cfg = results['config']
  t = cfg['claim_epochs']
  lines = ['Full-batch logistic regression over the l1 ball ||w||_1 <= '
           '||w*||_1 on n = {n} generated points uniform on the unit sphere '
           '(labels ~ Bernoulli(sigmoid(<z, w*>)), w* with k nonzeros of '
           'size {s} sqrt(d/k)); a test set of {nt} points, excess risk = '
           'expected logistic loss (over the label noise) of the '
           'step-size-weighted average iterate minus that of w*. m = d/{c}; '
           'eps = {eps:g}, delta = {delta:g} per run (one epoch = one '
           'full-batch step; sigma calibrated per number of epochs). Seeds: '
           '{seeds}. Private methods clip per-example gradients at L = {L:g} '
           '(DP-CompGD: the projected ones; see dpjax.transforms.dp_compgd '
           'for why the thesis\'s rescaled release is not used).'.format(
               n=cfg['n'], s=cfg['signal'], nt=cfg['n_test'],
               c=cfg['compression'], eps=cfg['epsilon'], delta=cfg['delta'],
               seeds=len(results['seeds']), L=cfg['l2_norm_clip']), '']
  lines += ['### Privacy', '', report_lib.markdown_table(
      results['privacy'], (('epochs', 'Epochs'), ('noise_multiplier', 'sigma'),
                           ('noise_stddev_per_coordinate', 'stddev / coord'),
                           ('epsilon_rdp', 'eps (RDP)'),
                           ('epsilon_pld', 'eps (PLD)'),
                           ('delta', 'delta'))), '']
  lines += [f'### Excess test risk at {t} epochs (mean ± SEM over seeds)', '']
  table = []
  for k in cfg['intrinsic']:
    for d in cfg['dims']:
      row = dict(k=k, d=d, m=d // cfg['compression'])
      for method in METHODS:
        r = row_of(results['rows'], method, d, k, t)
        row[method] = (f"{report_lib.fmt(r['excess_mean'])} ± "
                       f"{report_lib.fmt(r['excess_sem'], 2)}")
      dp = row_of(results['rows'], 'dp_gd', d, k, t)['excess_mean']
      comp = row_of(results['rows'], 'dp_compgd', d, k, t)['excess_mean']
      row['ratio'] = comp / dp if dp > 0 else None
      table.append(row)
  lines += [report_lib.markdown_table(
      table, (('k', 'k'), ('d', 'd'), ('m', 'm'), ('gd', 'GD'),
              ('compgd', 'CompGD'), ('dp_gd', 'DP-GD'),
              ('dp_compgd', 'DP-CompGD'),
              ('ratio', 'DP-CompGD / DP-GD'))), '']
  ratio_rows = []
  for k in cfg['intrinsic']:
    for e in cfg['epochs']:
      row = dict(k=k, epochs=e)
      for d in cfg['dims']:
        dp = row_of(results['rows'], 'dp_gd', d, k, e)['excess_mean']
        comp = row_of(results['rows'], 'dp_compgd', d, k, e)['excess_mean']
        row[d] = comp / dp if dp > 0 else None
      ratio_rows.append(row)
  lines += ['Mean excess risk of DP-CompGD over that of DP-GD by number of '
            'epochs (descriptive; the claims are checked at '
            f'{t} epochs only):', '', report_lib.markdown_table(
                ratio_rows, [('k', 'k'), ('epochs', 'Epochs')] +
                [(d, f'd = {d}') for d in cfg['dims']]), '']
  residuals = [r['max_solver_residual'] for r in results['rows']
               if r['max_solver_residual'] is not None]
  lines += [f'Largest projected-gradient residual of the lift (FISTA, '
            f'{cfg["solver_iterations"]} iterations) over all compressed '
            f'runs: {report_lib.fmt(max(residuals))}.', '']
  lines += ['From the claims below:', '']
  for k in cfg['intrinsic']:
    first = crossover(results['claims'], k)
    lines.append(
        f'- k = {k}: ' +
        (f'DP-CompGD beats DP-GD (held) from d = {first} on (every larger d '
         'held too).' if first is not None else
         f'the DP claim is not held at the largest d = {cfg["dims"][-1]}, '
         'so there is no d from which on DP-CompGD is shown to beat DP-GD.'))
  lines += ['', f'![excess risk vs d]({_plot_vs_d(results, out_dir)})',
            f'![excess risk vs epochs]({_plot_vs_epochs(results, out_dir)})']
  return '\n'.join(lines)
