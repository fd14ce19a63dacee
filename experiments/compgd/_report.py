"""compgd's report body: privacy, test error by T and tuned, plots."""

import matplotlib.pyplot as plt
import numpy as np

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.compgd._claims import crossover
from experiments.compgd._claims import row_of
from experiments.compgd._config import COLORS
from experiments.compgd._config import Config
from experiments.compgd._config import LABELS
from experiments.compgd._config import METHODS
from experiments.compgd._results import Results


def _plot_vs_epochs(results: Results, cfg: Config, out_dir: str) -> str:
  dims, ks = cfg.dimensions, cfg.intrinsic_dimensions
  fig, axes = plt.subplots(len(ks), len(dims),
                           figsize=(3.6 * len(dims), 3.0 * len(ks)),
                           squeeze=False)
  for i, k in enumerate(ks):
    for j, d in enumerate(dims):
      ax = axes[i][j]
      for method in METHODS:
        rs = [row_of(results.rows, method, d, k, e) for e in cfg.epochs]
        ax.errorbar(cfg.epochs, [r['test_error_mean'] for r in rs],
                    yerr=[r['test_error_sem'] for r in rs], fmt='o-',
                    capsize=2, color=COLORS[method], label=LABELS[method])
      base = _baseline(results, d, k)
      ax.axhline(base['zero_error_mean'], color='C1', ls=':', label='w = 0')
      ax.axhline(base['bayes_error_mean'], color='k', ls='--', label='Bayes')
      ax.set_title(f'd = {d}, k = {k}', fontsize=8)
      ax.set_xlabel('epochs T')
  axes[0][0].set_ylabel('test error')
  axes[0][0].legend(fontsize=6)
  return report_lib.save_figure(fig, out_dir, 'test_error_vs_epochs.png')


def _baseline(results: Results, d, k):
  return next(b for b in results.baselines
              if b['d'] == d and b['intrinsic'] == k)


def _cell(mean, sem) -> str:
  return f'{report_lib.fmt(mean)} ± {report_lib.fmt(sem, 2)}'


def _setting(cfg: Config) -> str:
  """The data, the test error measured and the privacy of one run."""
  return (
      'Full-batch logistic regression over the l1 ball ||w||_1 <= ||w*||_1 '
      f'on n = {cfg.num_examples} generated points uniform on the unit '
      'sphere (labels ~ Bernoulli(sigmoid(<z, w*>)), w* with k nonzeros of '
      f'size {cfg.signal} sqrt(d/k)); {cfg.num_val} validation and '
      f'{cfg.num_test} test points from the same distribution. Test error '
      '= probability that sign(<z, w>) misclassifies the label, averaged '
      'over the label noise, of the step-size-weighted average iterate (the '
      f"thesis's measure). m = d/{cfg.compression}; eps = "
      f'{cfg.epsilon:g}, delta = {cfg.delta:g} per run (one epoch = '
      'one full-batch step; sigma calibrated per T). Each seed and method '
      'picks T from the grid by the lowest validation error; the claims '
      f'compare test errors at the chosen T. Seeds: {len(cfg.seeds)}.'
      f' Private methods clip per-example gradients at L = '
      f'{cfg.l2_norm_clip:g} (DP-CompGD: the projected ones; see '
      "dpjax.transforms.dp_compgd for why the thesis's rescaled release is "
      'not used).')


def _privacy(results: Results) -> list[str]:
  """sigma and epsilon per T, and the cost of choosing T."""
  sel = results.selection_privacy
  return [
      '### Privacy', '', report_lib.markdown_table(
          results.privacy, (('epochs', 'Epochs'), ('noise_multiplier', 'sigma'),
                            ('noise_stddev_per_coordinate', 'stddev / coord'),
                            ('epsilon_rdp', 'eps (RDP)'),
                            ('epsilon_pld', 'eps (PLD)'),
                            ('delta', 'delta'))), '',
      f"Choosing T on validation looks at all {sel['runs']} runs of a "
      'method; the model it returns is private at their composition, '
      f"eps = {report_lib.fmt(sel['epsilon_pld'])} (PLD; RDP "
      f"{report_lib.fmt(sel['epsilon_rdp'])}) at delta "
      f"{report_lib.fmt(sel['delta'])}, not at the per-run eps. Both "
      'private methods are tuned alike, so the comparison is fair; the '
      'tuning cost is stated, not hidden.', '']


def _error_table(results: Results, cfg: Config, d: int, k: int) -> list[str]:
  """Test error per T and method at (d, k), then at the T chosen."""
  base = _baseline(results, d, k)
  table = []
  for e in cfg.epochs:
    row = dict(epochs=e)
    for method in METHODS:
      r = row_of(results.rows, method, d, k, e)
      row[method] = _cell(r['test_error_mean'], r['test_error_sem'])
    table.append(row)
  tuned = dict(epochs='chosen on validation')
  picks = dict(epochs='T chosen (median [min, max])')
  for method in METHODS:
    t = row_of(results.tuned, method, d, k)
    chosen = np.asarray(t['chosen_epochs'])
    tuned[method] = _cell(t['test_error_mean'], t['test_error_sem'])
    picks[method] = f'{np.median(chosen):g} [{chosen.min()}, {chosen.max()}]'
  return [f'### Test error, d = {d} (m = {d // cfg.compression}), '
          f'k = {k} (mean ± SEM over seeds)', '',
          f"w = 0 errs {report_lib.fmt(base['zero_error_mean'])}, "
          'the Bayes error (w*) is '
          f"{report_lib.fmt(base['bayes_error_mean'])}.", '',
          report_lib.markdown_table(
              table + [tuned, picks],
              [('epochs', 'Epochs')] + [(m, LABELS[m]) for m in METHODS]), '']


def _crossovers(claims: Rows, cfg: Config) -> list[str]:
  """Per k, the smallest d from which on every DP claim held."""
  lines = ['From the claims below:', '']
  for k in cfg.intrinsic_dimensions:
    first = crossover(claims, k)
    lines.append(
        f'- k = {k}: ' +
        (f'DP-CompGD beats DP-GD by the margin (held) from d = {first} on.'
         if first is not None else
         f'the DP claim is not held at the largest d = {cfg.dimensions[-1]}, '
         'so there is no d from which on DP-CompGD is shown to beat DP-GD '
         'by the margin.'))
  return lines


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  lines = [_setting(cfg), '', *_privacy(results)]
  for k in cfg.intrinsic_dimensions:
    for d in cfg.dimensions:
      lines += _error_table(results, cfg, d, k)
  residuals = [r['max_solver_residual'] for r in results.rows
               if r['max_solver_residual'] is not None]
  lines += [f'Largest projected-gradient residual of the lift (FISTA, '
            f'{cfg.solver_iterations} iterations) over all compressed '
            f'runs: {report_lib.fmt(max(residuals))}.', '']
  lines += _crossovers(claims, cfg)
  path = _plot_vs_epochs(results, cfg, out_dir)
  lines += ['', f'![test error vs epochs]({path})']
  return '\n'.join(lines)
