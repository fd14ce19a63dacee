"""qdpsgd's report body: scenario, privacy and result tables, plots."""

from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from experiments.common import report as report_lib
from experiments.qdpsgd._config import NAME

SCENARIO_COLUMNS = [('agents', 'agents n'), ('batch', 'B'), ('m', 'm per agent'),
                    ('dimension', 'p'), ('edges', 'edges'),
                    ('spectral_gap', '1 - beta'), ('deadline', 'T_d (s)'),
                    ('max_batch', 'batch cap')]
PRIVACY_COLUMNS = [('setting', 'setting'), ('noise_multiplier', 'sigma (sound)'),
                   ('noise_stddev', 'noise stddev sigma K'),
                   ('epsilon_mean', 'eps spent (sound)'),
                   ('paper_epsilon_mean', 'eps by the paper at this sigma'),
                   ('paper_noise_multiplier', 'sigma the paper would use')]
RESULT_COLUMNS = [('setting', 'setting'), ('final_loss_mean', 'final loss'),
                  ('final_loss_sem', 'SEM'),
                  ('final_test_accuracy_mean', 'test acc'),
                  ('final_consensus_mean', 'consensus'),
                  ('total_time_mean', 'simulated time (s)'),
                  ('bits_per_agent_mean', 'bits per agent'),
                  ('mean_batch_mean', 'mean |S|'), ('seeds', 'seeds')]
METRICS = ('final_loss', 'final_test_accuracy', 'final_consensus',
           'total_time', 'bits_per_agent', 'mean_batch', 'epsilon',
           'paper_epsilon')


def summary(scenario) -> list[dict[str, Any]]:
  rows = []
  for r in scenario['rows']:
    r = dict(r)
    for k in ('epsilon', 'paper_epsilon'):
      if r[k] is None:
        r[k] = float('nan')
    rows.append(r)
  out = report_lib.summarize_over_seeds(rows, ('setting',), METRICS)
  privacy = {p['setting']: p for p in scenario['privacy']}
  for row in out:
    row.update(privacy[row['setting']])
  return out


def _mean_curve(runs, key):
  return np.nanmean(np.asarray([r[key] for r in runs], np.float64), axis=0)


def plot(scenario, out_dir, name):
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
  for i, (label, runs) in enumerate(scenario['curves'].items()):
    loss = _mean_curve(runs, 'loss')
    time = _mean_curve(runs, 'time')
    style = dict(color=f'C{i}', lw=1.2,
                 ls='--' if 'eps=1.5' in label else '-')
    axes[0].plot(np.arange(1, len(loss) + 1), loss, label=label, **style)
    axes[1].plot(time, loss, label=label, **style)
  axes[0].set_xlabel('iteration')
  axes[1].set_xlabel('simulated time (s)')
  for ax in axes:
    ax.set_ylabel('training loss (average model)')
    ax.set_yscale('log')
  axes[0].set_title(f"n={scenario['agents']} agents, B={scenario['batch']:g}")
  axes[1].set_title('loss vs simulated wall-clock')
  axes[1].legend(fontsize=6)
  return report_lib.save_figure(
      fig, out_dir, f"{name}_n{scenario['agents']}_B{scenario['batch']:g}.png")


def report(results: dict[str, Any], out_dir: str) -> str:
  cfg = results['config']
  lines = [report_lib.dataset_line(results['dataset']), '',
           'Ding et al. (AAAI 2021) Sec. 5: decentralized training on an '
           f"Erdos-Renyi graph G(n, {cfg['edge_probability']}), one sigmoid "
           f"hidden layer of {cfg['hidden']}, K = {cfg['clip_norm']}, "
           f"s = {cfg['bits']} bits at eta = {cfg['eta']}, SDM c = "
           f"{cfg['sdm_rate']}, theta = {cfg['theta']}, T_c = "
           f"{cfg['comm_time']}, delta = {cfg['delta']}, {cfg['rounds']} "
           'iterations. Q-DPSGD uses deadline batches (V ~ U(10, 90), T_d = '
           'B / E[V]); DSGD and SDM wait for the slowest agent\'s batch of B. '
           'Noise is calibrated to each epsilon with the sound per-agent '
           'accounting (Q-DPSGD-1 and SDM: rounds sampled without replacement'
           ' from the agent\'s m records' + (
               '' if cfg['amplified'] else ' -- disabled in this run') +
           '; Q-DPSGD-2: the broadcast\'s drift-and-rounding sensitivity); '
           'the paper\'s Theorems 1 and 5 are shown beside it. Loss is the '
           'training loss of the average model.', '',
           report_lib.markdown_table(results['scenarios'], SCENARIO_COLUMNS),
           '']
  for sc in results['scenarios']:
    rows = summary(sc)
    lines += [f"### n={sc['agents']}, B={sc['batch']:g}", '',
              report_lib.markdown_table(
                  [r for r in rows if r['noise_multiplier']], PRIVACY_COLUMNS),
              '', report_lib.markdown_table(rows, RESULT_COLUMNS), '',
              f'![loss curves]({plot(sc, out_dir, NAME)})', '']
  lines += ['The claims are checked on the main scenario: '
            f"n={results['scenarios'][0]['agents']}, "
            f"B={results['scenarios'][0]['batch']:g}.", '']
  return '\n'.join(lines)
