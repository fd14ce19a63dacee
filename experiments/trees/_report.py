"""trees' report body: Tables 8.1-8.2 beside the thesis, Fig. 8.6."""

import matplotlib.pyplot as plt
import numpy as np

from experiments.common import power
from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.trees._config import Config
from experiments.trees._config import LABELS
from experiments.trees._config import SEMI
from experiments.trees._config import SUPERVISED
from experiments.trees._config import THESIS
from experiments.trees._results import Results

PRIVATE = ('spe', 'rdt', 'dp_rf', 'dp_dt')  # Table 8.1's private methods
DATASET_NAMES = {'iris': 'Iris', 'wine': 'Wine', 'syn5d': 'Syn5d',
                 'syn10d': 'Syn10d', 'syn15d': 'Syn15d',
                 'breast_cancer': 'Breast cancer', 'digits': 'Digits'}


def _cell(values, thesis=None, star=False) -> str:
  if not values:
    return '-'
  v = 100 * np.asarray(values)
  text = f'{v.mean():.2f} ± {v.std():.2f}' + (' *' if star else '')
  if thesis is not None:
    text += f' ({thesis:.2f})'
  return text


def _table(results: Results, table: str, methods, with_tests) -> str:
  """A markdown table of ``results.<table>`` ('per_seed' or 'small'): a row
  per dataset, a column per method."""
  head = '| Dataset | n / d / D | ' + ' | '.join(
      LABELS[m] for m in methods) + ' |'
  lines = [head, '|' + '---|' * (len(methods) + 2)]
  for name, acc in getattr(results, table).items():
    if not any(acc.get(m) for m in methods):
      continue
    info = results.info[name]
    tests = results.mann_whitney.get(name, {}) if with_tests else {}
    best_private = max((m for m in methods if m in PRIVATE and acc.get(m)),
                       key=lambda m: np.mean(acc[m]), default=None)
    cells = []
    for m in methods:
      star = (with_tests and m == 'spe' and best_private == 'spe' and tests
              and all(p < 0.05 for p in tests.values()))
      thesis = THESIS.get(name, {}).get(m) if table == 'per_seed' else None
      cells.append(_cell(acc.get(m), thesis, star))
    lines.append(f'| {DATASET_NAMES[name]} | {info["n_train"]} / '
                 f'{info["d"]} / {info["depth"]} | ' + ' | '.join(cells) +
                 ' |')
  return '\n'.join(lines)


def _plot_grid(results: Results, cfg: Config, out_dir: str) -> str | None:
  rows = results.grid
  if not rows:
    return None
  names = sorted({r['dataset'] for r in rows})
  fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4),
                           squeeze=False)
  for ax, name in zip(axes[0], names):
    for spec in cfg.grid_depths:
      sel = [r for r in rows if r['dataset'] == name and r['depth'] == spec]
      trees = sorted({r['trees'] for r in sel})
      acc = [[r['accuracy'] for r in sel if r['trees'] == t] for t in trees]
      ax.errorbar(trees, [np.mean(a) for a in acc],
                  yerr=[np.std(a) for a in acc], fmt='o-', capsize=2,
                  label=f'depth {spec}')
    ax.set_xscale('log')
    ax.set_xlabel('number of trees N')
    ax.set_title(DATASET_NAMES[name])
  axes[0][0].set_ylabel('test accuracy (SPE, eps = 2)')
  axes[0][0].legend(fontsize=7)
  return report_lib.save_figure(fig, out_dir, 'trees_depth_grid.png')


def _median_table(results: Results) -> str:
  rows = results.median
  lines = ['| Depth | eps | geometric | uniform |', '|---|---|---|---|']
  for depth in rows[0]:
    for eps in rows[0][depth]:
      g = [r[depth][eps]['geometric'] for r in rows]
      u = [r[depth][eps]['uniform'] for r in rows]
      lines.append(f'| {depth} | {eps} | {np.mean(g):.4f} ± {np.std(g):.4f} '
                   f'| {np.mean(u):.4f} ± {np.std(u):.4f} |')
  return '\n'.join(lines)


def _plot_median(results: Results, out_dir: str) -> str:
  rows = results.median
  depths = list(rows[0])
  fig, axes = plt.subplots(1, len(depths), figsize=(4.2 * len(depths), 3.4),
                           squeeze=False)
  for ax, depth in zip(axes[0], depths):
    eps = list(rows[0][depth])
    for kind in ('geometric', 'uniform'):
      v = np.array([[r[depth][e][kind] for e in eps] for r in rows])
      ax.errorbar([float(e) for e in eps], v.mean(0), yerr=v.std(0),
                  fmt='o-', capsize=2, label=kind)
    ax.set_xscale('log')
    ax.set_xlabel('split budget eps_s')
    ax.set_title(f'max depth {depth}')
  axes[0][0].set_ylabel('mean |private - true median|')
  axes[0][0].legend(fontsize=7)
  return report_lib.save_figure(fig, out_dir, 'trees_median_allocation.png')


def _data(results: Results, cfg: Config) -> list[str]:
  """The Syn generator, the splits, the ensembles and the public bounds."""
  splits = ', '.join(f'{DATASET_NAMES[n]} {v["n_test"]} x {v["repeats"]}'
                     for n, v in results.info.items())
  return [f'Data: SynKd is scikit-learn\'s make_classification, '
          f'{cfg.synthetic_num_examples} points, 2 classes, '
          f'{cfg.synthetic_num_informative} informative features, 2 '
          'redundant, the rest defaults (2 clusters per class, class_sep 1, '
          'flip_y 0.01). The thesis (8.4) says only "normally distributed '
          'clusters with random centers using '
          'sklearn.datasets.make_classification", 3000 points, 2 classes, '
          '5/10/15 attributes, so its defaults are the reading chosen here.',
          '',
          f'Accuracy (%) on the 10% test split, mean ± std over '
          f'{cfg.num_seeds} seeds (each seed averages independent splits '
          f'until it has scored at least {cfg.min_test} test points: '
          f'{splits}); the thesis\'s number in parentheses where the '
          f'dataset matches. {cfg.num_trees} trees of depth D = min(d, '
          f'{cfg.max_depth}) (the thesis uses D = d). Public bounds: '
          f'each feature\'s range over the whole (standardized) dataset, '
          f'train and test, treated as public as the thesis does.', '']


def _tables(results: Results, cfg: Config) -> list[str]:
  """Table 8.1, Table 8.2 at eps and at the small eps."""
  return [f'### Table 8.1: supervised, eps = {cfg.epsilon:g}', '',
          _table(results, 'per_seed', SUPERVISED, True), '',
          '`*`: SPE is the best private method and a two-sided Mann-Whitney '
          'U test (95%) separates it from every private competitor.', '',
          'Ceiling rows are the same ensemble without meaningful noise '
          f'(SPE at eps = {cfg.ceiling_epsilon:g}, RDT with exact counts).',
          '',
          f'### Table 8.2: {cfg.labelled_fraction:.0%} labelled, '
          f'eps = {cfg.epsilon:g}', '',
          _table(results, 'per_seed', SEMI, False), '',
          'The thesis\'s Table 8.2 (Syn5d/10d/15d): SSPE-1 86.82/86.30/76.40, '
          'SSPE-2 91.59/90.51/85.94, PTE 91.54/91.11/86.45.', '',
          f'### Table 8.2 at small eps = {cfg.small_epsilon:g}', '',
          _table(results, 'small', ('sspe1', 'spe_labelled'), False), '']


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  out_dir = '.' if out_dir is None else out_dir
  out = _data(results, cfg)
  if results.diffprivlib_error:
    out += [results.diffprivlib_error, '']
  out += _tables(results, cfg)
  if results.median:
    path = _plot_median(results, out_dir)
    out += ['### Fig. 8.2: geometric vs uniform split budgets', '',
            f'One tree on {cfg.median_num_examples} standard normal points, '
            f'd = {cfg.median_dimension}, bounds ±4; mean distance (unit-cube '
            'coordinates) between each node\'s private and true median, '
            'mean ± std over seeds:', '', _median_table(results), '',
            f'![allocation]({path})', '']
  if claims:
    out += ['Power: each claim\'s interval beside its minimal detectable '
            'effect (80% power at the claim\'s Bonferroni level, '
            '`experiments.common.power`); accuracy claims in points, Fig. '
            '8.2 claims in unit-cube distance x 100:', '',
            power.mde_table(claims, 100), '']
  fig = _plot_grid(results, cfg, out_dir)
  if fig:
    out += ['### Fig. 8.6: trees x depth (SPE)', '', f'![grid]({fig})', '']
  return '\n'.join(out)
