"""qdpsgd's report body: scenario, privacy and result tables, plots."""

from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.qdpsgd._config import Config
from experiments.qdpsgd._config import NAME
from experiments.qdpsgd._results import Results
from experiments.qdpsgd._results import ScenarioRuns

SCENARIO_COLUMNS = [('agents', 'agents n'), ('batch', 'B'), ('m', 'm per agent'),
                    ('dimension', 'p'), ('edges', 'edges'),
                    ('spectral_gap', '1 - beta'), ('deadline', 'T_d (s)'),
                    ('max_batch', 'batch cap')]
PRIVACY_COLUMNS = [('setting', 'setting'), ('noise_multiplier', 'sigma run'),
                   ('noise_stddev', 'noise stddev sigma K'),
                   ('epsilon_mean', 'eps spent (sound)'),
                   ('paper_epsilon_mean', 'eps by the paper at this sigma'),
                   ('paper_noise_multiplier', 'sigma the paper would use'),
                   ('within_target', 'every seed within target (sound)')]
RESULT_COLUMNS = [('setting', 'setting'), ('final_loss_mean', 'final loss'),
                  ('final_loss_sem', 'SEM'),
                  ('final_test_accuracy_mean', 'test acc'),
                  ('final_test_accuracy_sem', 'SEM'),
                  ('final_consensus_mean', 'consensus'),
                  ('total_time_mean', 'simulated time (s)'),
                  ('bits_per_agent_mean', 'bits per agent'),
                  ('mean_batch_mean', 'mean |S|'), ('seeds', 'seeds')]
METRICS = ('final_loss', 'final_test_accuracy', 'final_consensus',
           'total_time', 'bits_per_agent', 'mean_batch', 'epsilon',
           'paper_epsilon')


def summary(scenario: ScenarioRuns) -> list[dict[str, Any]]:
  rows = []
  for r in scenario.rows:
    r = dict(r)
    for k in ('epsilon', 'paper_epsilon'):
      if r[k] is None:
        r[k] = float('nan')
    rows.append(r)
  out = report_lib.summarize_over_seeds(rows, ('setting',), METRICS)
  privacy = {p['setting']: p for p in scenario.privacy}
  for row in out:
    row.update(privacy[row['setting']])
    row['within_target'] = {True: 'yes', False: 'no'}.get(
        row['within_target'])
  return out


def _mean_curve(runs, key):
  return np.nanmean(np.asarray([r[key] for r in runs], np.float64), axis=0)


def plot_curves(scenario: ScenarioRuns, eps: float, out_dir, name):
  """Loss vs rounds and vs simulated time: sanity rows and eps's sound rows."""
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
  rounds = scenario.eval_rounds
  shown = [r for r in summary(scenario)
           if r['calibration'] in ('none', 'zero')
           or (r['calibration'] == 'sound' and r['target_epsilon'] == eps)]
  for i, row in enumerate(shown):
    runs = scenario.curves[row['setting']]
    loss = _mean_curve(runs, 'loss')
    style = dict(color=f'C{i}', lw=1.2,
                 ls=':' if row['calibration'] != 'sound' else '-')
    axes[0].plot(rounds, loss, label=row['setting'], **style)
    axes[1].plot(_mean_curve(runs, 'time'), loss, label=row['setting'],
                 **style)
  axes[0].set_xlabel('iteration')
  axes[1].set_xlabel('simulated time (s)')
  for ax in axes:
    ax.set_ylabel('training loss (average model)')
    ax.set_yscale('log')
  axes[0].set_title(f'n={scenario.agents} agents, B={scenario.batch:g},'
                    f' eps={eps:g} (sound)')
  axes[1].set_title('loss vs simulated wall-clock')
  axes[1].legend(fontsize=6)
  return report_lib.save_figure(
      fig, out_dir, f'{name}_n{scenario.agents}_B{scenario.batch:g}.png')


def plot_sweep(scenario: ScenarioRuns, chance: float, out_dir, name):
  """Final test accuracy vs target epsilon per algorithm (sound rows), the
  noise-free rows and the paper's calibration as markers."""
  fig, ax = plt.subplots(figsize=(6.5, 4.2))
  rows = summary(scenario)
  sound = [r for r in rows if r['calibration'] == 'sound']
  algos = list(dict.fromkeys(r['setting'].split(' eps=')[0] for r in sound))
  for i, algo in enumerate(algos):
    mine = [r for r in sound if r['setting'].split(' eps=')[0] == algo]
    ax.errorbar([r['target_epsilon'] for r in mine],
                [r['final_test_accuracy_mean'] for r in mine],
                yerr=[r['final_test_accuracy_sem'] for r in mine],
                color=f'C{i}', marker='o', ms=3, lw=1.2, label=algo)
  for r in rows:
    if r['calibration'] == 'paper':
      ax.plot(r['target_epsilon'], r['final_test_accuracy_mean'], 'kx')
  for i, r in enumerate(x for x in rows
                        if x['calibration'] in ('none', 'zero')):
    ax.axhline(r['final_test_accuracy_mean'], color=f'C{len(algos) + i}',
               ls='--', lw=1, label=r['setting'])
  ax.axhline(chance, color='gray', ls=':', lw=1, label='chance')
  ax.set_xscale('log')
  ax.set_xlabel('target epsilon (sound accounting); x: paper calibration')
  ax.set_ylabel('final test accuracy (average model)')
  ax.legend(fontsize=6)
  return report_lib.save_figure(
      fig, out_dir,
      f'{name}_sweep_n{scenario.agents}_B{scenario.batch:g}.png')


def _setting(cfg: Config, num_evals: int) -> str:
  """The paragraph: the paper's setup, the rows, the accounting."""
  return (
      'Ding et al. (AAAI 2021) Sec. 5: decentralized training on an '
      f'Erdos-Renyi graph G(n, {cfg.edge_probability}), one sigmoid '
      f'hidden layer of {cfg.hidden}, K = {cfg.l2_norm_clip}, '
      f's = {cfg.bits} bits at eta = {cfg.eta} (Q-DPSGD-2 also at '
      f'{list(cfg.more_bits)} bits, eta scaled to keep the range), SDM c = '
      f'{cfg.sdm_rate}, theta = {cfg.theta}, T_c = '
      f'{cfg.comm_time}, delta = {cfg.delta}, T = {cfg.rounds} '
      "iterations with the paper's step sizes alpha = "
      f'{cfg.learning_rate_scale} / T^(1/6), mixing rate '
      f'{cfg.mixing_rate_scale} / sqrt(T) (<= 1 at this T). '
      'Q-DPSGD uses deadline batches (V ~ U(10, 90), T_d = '
      'B / E[V]); DSGD and SDM wait for the slowest agent\'s batch of B. '
      'DSGD and Q-DPSGD-1 with sigma = 0 are the noise-free sanity rows. '
      'Sound rows are calibrated to each epsilon with the per-agent '
      'accounting (Q-DPSGD-1 and SDM: rounds sampled without replacement'
      ' from the agent\'s m records' + (
          '' if cfg.amplified else ' -- disabled in this run') +
      '; Q-DPSGD-2: the broadcast\'s drift-and-rounding sensitivity). '
      'Rows "paper Thm. 1 / 5" run the sigma the paper\'s theorem gives '
      'for the target; "eps spent (sound)" is what they really spend, '
      'and they are labelled *unsound* where a seed spends more than the '
      'target, *sound here* where none does (Thm. 1 charges 8 rho / '
      '(m^2 sigma^2) per round, which is not a bound in general but can '
      'exceed the subsampled Gaussian\'s cost). Loss is the training '
      'loss of the average model; '
      f'loss and test accuracy are measured {num_evals} '
      'times per run, the last after round T.')


def _scenario(sc: ScenarioRuns, eps: float, chance: float,
              out_dir: str) -> list[str]:
  """One scenario's section: privacy and result tables, its two plots."""
  rows = summary(sc)
  curves = plot_curves(sc, eps, out_dir, NAME)
  sweep = plot_sweep(sc, chance, out_dir, NAME)
  return [f'### n={sc.agents}, B={sc.batch:g}', '',
          report_lib.markdown_table(
              [r for r in rows if r['noise_multiplier']], PRIVACY_COLUMNS),
          '', report_lib.markdown_table(rows, RESULT_COLUMNS), '',
          f'![loss curves]({curves})', '',
          f'![accuracy vs epsilon]({sweep})', '']


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims  # the runner's claims table shows them
  first = results.scenarios[0]
  lines = [report_lib.dataset_line(results.dataset), '',
           _setting(cfg, len(first.eval_rounds)), '',
           report_lib.markdown_table(
               [sc.to_dict() for sc in results.scenarios], SCENARIO_COLUMNS),
           '']
  for sc in results.scenarios:
    lines += _scenario(sc, max(cfg.epsilons), results.chance, out_dir)
  lines += ['The claims are checked on the main scenario: '
            f'n={first.agents}, B={first.batch:g}.', '']
  return '\n'.join(lines)
