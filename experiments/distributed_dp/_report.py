"""distributed_dp's report: the MSE-vs-bits table, claims and plot."""

from typing import Any

import matplotlib.pyplot as plt

from experiments.common import report as report_lib
from experiments.common import verdict as verdict_lib
from experiments.distributed_dp._config import NAME

LABELS = {'ddg': 'DDG', 'skellam': 'Skellam', 'cpsgd': 'cpSGD (Binomial)',
          'gaussian': 'central Gaussian'}
TABLE = [('bits', 'b'), ('ddg', 'DDG MSE'), ('skellam', 'Skellam MSE'),
         ('cpsgd', 'cpSGD MSE'), ('gaussian', 'Gaussian MSE (32 bits)'),
         ('ddg_ratio', 'DDG / Gaussian'),
         ('skellam_ratio', 'Skellam / Gaussian'),
         ('cpsgd_ratio', 'cpSGD / Gaussian')]
DETAIL = [('mechanism', 'mechanism'), ('bits', 'b'),
          ('target_epsilon', 'target eps'), ('epsilon', 'eps (accountant)'),
          ('gamma', 'gamma'), ('stddev', 'sum stddev'),
          ('levels', 'k'), ('trials', 'm'), ('sum_bits', 'cpSGD sum bits'),
          ('mse', 'MSE'), ('sem', 'SEM over seeds'),
          ('wraparound_max', 'wrap-around (max)'),
          ('flagged_rounds', 'flagged rounds'),
          ('rounding_failures', 'rounding failures'),
          ('bits_per_client', 'bits/client/round'),
          ('seconds', 's (compile + rounds)'), ('note', 'note')]


def table(results) -> list[dict[str, Any]]:
  out = []
  for g in results['gaussian']:
    eps = g['target_epsilon']
    for b in results['config']['bits']:
      row = dict(epsilon=eps, bits=b, gaussian=g['mse'])
      for r in results['rows']:
        if r['bits'] == b and r['target_epsilon'] == eps:
          row[r['mechanism']] = r['mse']
          row[r['mechanism'] + '_ratio'] = r['mse_vs_gaussian']
      out.append(row)
  return out


def plot(results, out_dir) -> list[str]:
  fig, ax = plt.subplots(figsize=(5.5, 4))
  for i, mech in enumerate(('ddg', 'skellam', 'cpsgd')):
    rs = sorted((r for r in results['rows'] if r['mechanism'] == mech
                 and r['mse'] is not None), key=lambda r: r['bits'])
    ax.errorbar([r['bits'] for r in rs], [r['mse'] for r in rs],
                yerr=[r['sem'] or 0 for r in rs], marker='os^'[i], ms=4,
                capsize=2, label=LABELS[mech], color=f'C{i}')
  for g in results['gaussian']:
    ax.axhline(g['mse'], color='k', ls='-.', lw=0.8,
               label=f"central Gaussian (eps={g['target_epsilon']:g})")
  ax.set_yscale('log')
  ax.set_xlabel('bits per coordinate b (modulus 2^b of the secure sum)')
  ax.set_ylabel('MSE of the mean')
  cfg = results['config']
  ax.set_title(f"n={cfg['num_clients']}, d={cfg['dimension']}", fontsize=9)
  ax.legend(fontsize=7)
  return [report_lib.save_figure(fig, out_dir, 'mse_vs_bits.png')]


def report(results: dict[str, Any], out_dir: str) -> str:
  cfg = results['config']
  pngs = plot(results, out_dir)
  seeds = results['seeds']
  lines = [
      f'## {NAME} ({cfg["mode"]})', '',
      f"Data: generated unit vectors in random directions, seeds "
      f"{seeds[0]}..{seeds[-1]} (each its own vectors and keys), "
      f"n = {cfg['num_clients']} clients, d = {cfg['dimension']}, clip "
      f"c = {cfg['clip_norm']:g}; {cfg['reps']} rounds per seed and point. "
      f"One release at each target epsilon, delta = {cfg['delta']:g}, "
      'replace-one client, the server sees only the sum. DDG and Skellam: '
      'gamma and the noise from `calibrate_distributed_dp` (RDP bounds of the '
      'papers, conditional rounding beta = exp(-1/2), k = '
      f"{cfg['k_stddevs']:g} stddevs of the aggregate in the modulus), b "
      'bits per coordinate of every message and of the modular sum. cpSGD: with rotation, the k in '
      f"{cfg['levels']} of smallest analytic MSE bound among those whose "
      'Theorem 1 m makes n (k - 1 + m) fit a b-bit secure sum. Gaussian: '
      '32-bit floats, noise calibrated by the PLD accountant. Rounds whose '
      'wrap-around rate exceeds '
      f"{cfg['max_wraparound_rate']:g} are counted as flagged (their error "
      'stays in the MSE). MSE: mean over seeds of each seed\'s mean squared '
      f"error. Wall time {results['wall_seconds']:g} s.", '',
      report_lib.markdown_table(table(results), TABLE), '',
      report_lib.markdown_table(results['rows'] + results['gaussian'],
                                DETAIL), '']
  lines += ['Measured claims (verdicts per the rule at the top; one '
            'Bonferroni family):', '',
            verdict_lib.claims_table(results['claims']), '']
  lines += [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines) + '\n'
