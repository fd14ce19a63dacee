"""cpsgd_mechanisms' report: tables, claim checks and the error plot."""

from matplotlib import ticker
import matplotlib.pyplot as plt

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.cpsgd_mechanisms._config import Config
from experiments.cpsgd_mechanisms._results import Results


def _gaussian_curves(ax, gauss) -> None:
  ax.plot([g['epsilon'] for g in gauss], [g['error_tight'] for g in gauss],
          'k-', lw=2, label='Gaussian (tight, PLD)')
  cls = [g for g in gauss if g['error_classical'] is not None]
  if cls:
    ax.plot([g['epsilon'] for g in cls], [g['error_classical'] for g in cls],
            'k--', label='Gaussian (classical)')


def _exact_panel(ax, results: Results, cfg: Config) -> None:
  """d = 1: Theorem 1's N at its exact epsilon, and the exactly calibrated
  N at the target."""
  for j in cfg.scale_denominators:
    es = [e for e in results.exact if e['scale_denominator'] == j]
    line, = ax.plot([e['exact_epsilon'] for e in es],
                    [e['error'] for e in es], marker='o', ms=3,
                    label=f'Bin s=1/{j}, Thm-1 N at exact eps')
    ax.plot([e['epsilon'] for e in es], [e['error_exact'] for e in es],
            ls=':', marker='x', ms=4, color=line.get_color(),
            label=f'Bin s=1/{j}, exact-calibrated N')
  ax.set_title('d = 1, exact (hockey-stick) epsilon')


def plot(results: Results, cfg: Config, out_dir: str) -> list[str]:
  """Error vs epsilon: a Theorem 1 panel per d, and the exact one."""
  dims = cfg.dimensions
  fig, axes = plt.subplots(1, len(dims) + 1, figsize=(4.2 * (len(dims) + 1),
                                                      3.6))
  for ax, d in zip(axes, dims):
    for j in cfg.scale_denominators:
      rs = [r for r in results.rows
            if r['dim'] == d and r['scale_denominator'] == j]
      ax.plot([r['epsilon'] for r in rs], [r['error'] for r in rs],
              marker='o', ms=3, label=f'Binomial s=1/{j}')
    ax.set_title(f'd = {d}, Theorem 1 (delta={cfg.delta:g})')
  for ax in axes:
    _gaussian_curves(ax, results.gaussian)
  _exact_panel(axes[-1], results, cfg)
  for ax in axes:
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter('%g'))
    ax.set_xlabel('epsilon')
    ax.set_ylabel('error per coordinate (variance)')
    if ax is not axes[-1]:
      ax.set_xticks([g['epsilon'] for g in results.gaussian])
    ax.legend(fontsize=6)
  return [report_lib.save_figure(fig, out_dir, 'error_vs_epsilon.png')]


ROW_COLUMNS = [('epsilon', 'eps'), ('scale', 's'), ('num_trials', 'N'),
               ('condition_bound', 'N set by Thm 1 condition'),
               ('error', 'Binomial s^2 N p(1-p)'),
               ('gaussian_error_tight', 'Gaussian sigma^2 (tight)'),
               ('gaussian_error_classical', 'Gaussian sigma^2 (classical)'),
               ('ratio_tight', 'Bin / Gauss tight'),
               ('ratio_classical', 'Bin / Gauss classical')]
EXACT_COLUMNS = [('epsilon', 'target eps'), ('scale', 's'),
                 ('num_trials', 'N (Thm 1)'),
                 ('exact_epsilon', 'exact eps at that N'),
                 ('conservatism', 'target / exact'),
                 ('num_trials_exact', 'N (exact)'),
                 ('error_exact', 'error (exact N)'),
                 ('ratio_exact_tight', 'exact-N error / Gauss tight')]
VALIDATION_COLUMNS = [('dim', 'd'), ('epsilon', 'eps'), ('scale', 's'),
                      ('num_trials', 'N'),
                      ('vectors', 'draws of d coords per seed'),
                      ('measured', 'measured total error (mean of seeds)'),
                      ('sem', 'SEM over seeds'),
                      ('formula', 'd s^2 N p(1-p)'),
                      ('ratio', 'measured / formula'),
                      ('sample_seconds', 'sampling s (all seeds)')]
CHECK_COLUMNS = [('check', 'Exact check'), ('result', 'Result'),
                 ('detail', 'Detail')]


def exact_checks_table(checks) -> str:
  return report_lib.markdown_table(
      [dict(c, result='pass' if c['passed'] else '**fail**')
       for c in checks], CHECK_COLUMNS)


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims  # the runner's claims table shows them
  pngs = plot(results, cfg, out_dir)
  seeds = cfg.seeds
  lines = [
      'No data: an abstract d-dimensional query whose neighbouring values '
      'differ by a lattice vector of L2 and L_inf norm <= 1 (L1 <= sqrt(d); '
      'd = 1: all three are 1, as in Theorem 1\'s test vector). '
      f'delta = {cfg.delta:g}, p = {cfg.p:g}, scales s = 1/j for j in '
      f"{list(cfg.scale_denominators)}. Binomial: smallest N with Theorem 1's "
      'epsilon <= target and its condition N p(1-p) >= max(23 ln(10d/delta), '
      '2 Delta_inf/s); error s^2 N p(1-p) per coordinate. Gaussian: sigma^2 '
      'with sigma from the classical bound (eps <= 1 only) and from the PLD '
      'accountant (tight). Errors are per coordinate (total = d times).', '']
  for d in cfg.dimensions:
    lines += [f'Error per coordinate, d = {d}:', '',
              report_lib.markdown_table(
                  [r for r in results.rows if r['dim'] == d], ROW_COLUMNS),
              '']
  lines += [
      'd = 1, exact privacy of the Binomial mechanism (hockey-stick '
      'divergence of Bin(N, p) against its shift by 1/s lattice steps, both '
      'directions):', '',
      report_lib.markdown_table(results.exact, EXACT_COLUMNS), '',
      f'Sampling check (dpjax.noise.binomial; seeds {seeds[0]}..'
      f'{seeds[-1]}, each {cfg.num_samples} coordinates per point from its '
      'own key):', '',
      report_lib.markdown_table(results.validation, VALIDATION_COLUMNS), '',
      'Exact checks (calibrated formulas compared with each other; no '
      'random draw enters them):', '',
      exact_checks_table(results.exact_checks), '',
      'Under Theorem 1 the limit as s shrinks is not the tight Gaussian: its '
      'leading term is the classical bound, which is loose at large eps.', '']
  lines += [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines) + '\n'
