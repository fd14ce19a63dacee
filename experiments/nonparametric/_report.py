"""nonparametric's report body: Table 5.3 beside the thesis, Fig. 5.1."""

import matplotlib.pyplot as plt
import numpy as np

from experiments.common import power
from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.nonparametric._config import Config
from experiments.nonparametric._config import LABELS
from experiments.nonparametric._config import METHODS
from experiments.nonparametric._config import THESIS
from experiments.nonparametric._results import Results


def _cell(values):
  if not values:
    return '-'
  v = 100 * np.asarray(values)
  return f'{v.mean():.2f} (±{v.std():.2f})'


def _plot_sweep(results: Results, out_dir: str) -> str:
  sweep = results.sweep
  fig, axes = plt.subplots(1, len(sweep), figsize=(4.5 * len(sweep), 3.5),
                           squeeze=False)
  for ax, (name, by_eps) in zip(axes[0], sweep.items()):
    eps = sorted(by_eps, key=float)
    for method in ('noisy_reg', 'dp_knn'):
      m = [100 * np.mean(by_eps[e][method]) for e in eps]
      s = [100 * np.std(by_eps[e][method]) for e in eps]
      ax.errorbar([float(e) for e in eps], m, yerr=s, fmt='o-', capsize=2,
                  label=LABELS[method])
    ax.set_xscale('log')
    ax.set_xlabel('epsilon')
    ax.set_title(name)
  axes[0][0].set_ylabel('test accuracy (%)')
  axes[0][0].legend(fontsize=7)
  return report_lib.save_figure(fig, out_dir, 'accuracy_vs_epsilon.png')


def _setting(results: Results, cfg: Config) -> str:
  """What the table holds, the public bounds, bins and projection."""
  return (
      f'Test accuracy in % (mean ± std over {cfg.num_seeds} seeds; '
      'each seed averages independent train/test splits until it has '
      f'scored at least {cfg.min_test} test points), '
      f'eps = {cfg.epsilon:g}. Public bounds: each (standardized) '
      'feature\'s minimum and maximum over the whole dataset, train and '
      'test, treated as public as the thesis does; not a private '
      'computation. NoisyReg is label-DP only (features public); the '
      'private histogram, DP-kNN, RDT and diffprivlib are DP in '
      'features and labels (add/remove one record). Bins: '
      + ('the thesis\'s rule b = ceil(n^(1/(m+2))) (Thm. 4.12/5.7 with '
         'constant 1; m the histogram\'s dimension), fixed from the '
         'public n, never tuned on held-out data'
         if cfg.bins is None else f'b = {cfg.bins}')
      + '. NoisyReg and its ceiling run unprojected (occupied cells only, '
      'any d); the dense private histogram runs on a public JL '
      f'projection to m = min(d, {cfg.projection_dim}) with public '
      f'bounds ±{cfg.projected_linf_clip:g} ||phi_i|| per projected '
      'coordinate (points beyond are clipped). DP-kNN: k = 2N, '
      'Laplace(2N/eps) (the thesis\'s N/eps is 2 eps-DP). Rows marked '
      '"ceiling" are the method above them without noise, same '
      f'settings. {results.diffprivlib}.')


def _accuracy_table(results: Results) -> str:
  """Table 5.3: a row per method, a column per dataset."""
  names = list(results.table)
  rows = []
  for method in METHODS:
    row = dict(method=LABELS[method])
    for name in names:
      row[name] = _cell(results.table[name].get(method, []))
    rows.append(row)
  cols = (('method', 'Method'),) + tuple((n, n) for n in names)
  return report_lib.markdown_table(rows, cols)


def _thesis_table() -> str:
  """The thesis's Table 5.3 numbers, for reference."""
  return report_lib.markdown_table(
      [dict(ds=k, nr=f'{v[0]:.2f}', knn=f'{v[1]:.2f}', rdt=f'{v[2]:.2f}')
       for k, v in THESIS.items()],
      (('ds', 'Dataset'), ('nr', 'NoisyReg'), ('knn', 'DP-kNN'),
       ('rdt', 'RDT')))


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  lines = [_setting(results, cfg), '', _accuracy_table(results), '']
  lines += ['Data: ' + '; '.join(
      f'{n}: {v["n_train"]} train, {v["n_test"]} test x {v["repeats"]} '
      f'splits per seed, d = {v["d"]}, {v["num_classes"]} classes, '
      f'NoisyReg b = {v["bins"]}' for n, v in results.datasets.items())
            + '.', '']
  lines += ['The thesis\'s Table 5.3 (eps = 2, 20 runs) uses UCI sets that '
            'are not available offline, so no dataset matches; its numbers '
            'for reference (pass --datasets csv:PATH to run one):', '',
            _thesis_table(), '']
  if claims:
    lines += ['Power: each claim\'s interval beside its minimal detectable '
              'effect (80% power at the claim\'s Bonferroni level, '
              '`experiments.common.power`), in accuracy points:', '',
              power.mde_table(claims, 100), '']
  if results.sweep:
    path = _plot_sweep(results, out_dir)
    lines += [f'Fig. 5.1 analogue (accuracy vs eps): ![sweep]({path})', '']
  return '\n'.join(lines)
