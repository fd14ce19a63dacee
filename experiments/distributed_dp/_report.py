"""distributed_dp's report: the MSE-vs-bits table and plot, the training."""

from typing import Any

import matplotlib.pyplot as plt

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.distributed_dp._claims import TRAINING_PREFIX
from experiments.distributed_dp._config import Config
from experiments.distributed_dp._results import Results
from experiments.distributed_dp._results import Training

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


def table(results: Results, cfg: Config) -> list[dict[str, Any]]:
  """MSE per (target epsilon, bits): every mechanism, its ratio to the
  Gaussian."""
  out = []
  for g in results.gaussian:
    eps = g['target_epsilon']
    for b in cfg.bits:
      row = dict(epsilon=eps, bits=b, gaussian=g['mse'])
      for r in results.rows:
        if r['bits'] == b and r['target_epsilon'] == eps:
          row[r['mechanism']] = r['mse']
          row[r['mechanism'] + '_ratio'] = r['mse_vs_gaussian']
      out.append(row)
  return out


def plot(results: Results, cfg: Config, out_dir: str) -> list[str]:
  """MSE vs bits per mechanism, the Gaussian as a line."""
  fig, ax = plt.subplots(figsize=(5.5, 4))
  for i, mech in enumerate(('ddg', 'skellam', 'cpsgd')):
    rs = sorted((r for r in results.rows if r['mechanism'] == mech
                 and r['mse'] is not None), key=lambda r: r['bits'])
    ax.errorbar([r['bits'] for r in rs], [r['mse'] for r in rs],
                yerr=[r['sem'] or 0 for r in rs], marker='os^'[i], ms=4,
                capsize=2, label=LABELS[mech], color=f'C{i}')
  for g in results.gaussian:
    ax.axhline(g['mse'], color='k', ls='-.', lw=0.8,
               label=f"central Gaussian (eps={g['target_epsilon']:g})")
  ax.set_yscale('log')
  ax.set_xlabel('bits per coordinate b (modulus 2^b of the secure sum)')
  ax.set_ylabel('MSE of the mean')
  ax.set_title(f'n={cfg.num_clients}, d={cfg.dimension}', fontsize=9)
  ax.legend(fontsize=7)
  return [report_lib.save_figure(fig, out_dir, 'mse_vs_bits.png')]


def _setting_paragraph(cfg: Config) -> str:
  """The data, the release, every mechanism's calibration."""
  seeds = cfg.seeds
  return (
      f'Data: generated unit vectors in random directions, seeds '
      f'{seeds[0]}..{seeds[-1]} (each its own vectors and keys), '
      f'n = {cfg.num_clients} clients, d = {cfg.dimension}, clip '
      f'c = {cfg.l2_norm_clip:g}; {cfg.num_repetitions} rounds per seed and '
      f'point. One release at each target epsilon, delta = {cfg.delta:g}, '
      'replace-one client, the server sees only the sum. DDG and Skellam: '
      'gamma and the noise from `calibrate_distributed_dp` (RDP bounds of the '
      'papers, conditional rounding beta = exp(-1/2), k = '
      f'{cfg.k_stddevs:g} stddevs of the aggregate in the modulus), b '
      'bits per coordinate of every message and of the modular sum. cpSGD: '
      f'with rotation, the k in {list(cfg.levels)} of smallest analytic MSE '
      'bound among those whose '
      'Theorem 1 m makes n (k - 1 + m) fit a b-bit secure sum. Gaussian: '
      '32-bit floats, noise calibrated by the PLD accountant. Rounds whose '
      'wrap-around rate exceeds '
      f'{cfg.max_wraparound_rate:g} are counted as flagged (their error '
      'stays in the MSE). MSE: mean over seeds of each seed\'s mean squared '
      'error.')


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims  # the runner's claims table shows them
  pngs = plot(results, cfg, out_dir)
  lines = [
      _setting_paragraph(cfg), '',
      report_lib.markdown_table(table(results, cfg), TABLE), '',
      report_lib.markdown_table(results.rows + results.gaussian,
                                DETAIL), '']
  lines += [f'![{p}]({p})' for p in pngs]
  if results.training:
    lines += [''] + training_lines(results.training, cfg, out_dir)
  return '\n'.join(lines) + '\n'


TRAIN_TABLE = [('bits', 'b'), ('ddg', 'DDG'), ('skellam', 'Skellam'),
               ('cpsgd', 'cpSGD'), ('gaussian', 'Gaussian (32 bits)'),
               ('flagged', 'flagged rounds DDG / Skellam')]
TRAIN_DETAIL = [('setting', 'setting'), ('test_accuracy', 'test acc'),
                ('test_accuracy_sem', 'SEM'), ('epsilon_total', 'eps total'),
                ('noise_multiplier', 'sum stddev / 2D'), ('gamma', 'gamma'),
                ('levels', 'k'), ('trials', 'm'),
                ('epsilon_round', 'cpSGD eps/round'),
                ('bits_per_client', 'bits/client/round'),
                ('flagged', 'flagged rounds per seed'),
                ('wraparound_max', 'wrap-around max per seed'),
                ('rounding_failures', 'rounding failures'),
                ('clipped_fraction', 'clipped'), ('seconds', 's'),
                ('note', 'note')]


def _acc(row):
  if row.get('test_accuracy') is None:
    return '-'
  sem = row.get('test_accuracy_sem')
  return f"{row['test_accuracy']:.3f}" + (f' +- {sem:.3f}' if sem else '')


def training_table(tr: Training) -> list[dict[str, Any]]:
  """Test accuracy (mean +- SEM over seeds) per bits and protocol."""
  gauss = next(r for r in tr.rows if r['method'] == 'gaussian')
  out = []
  for b in sorted({r['bits'] for r in tr.rows if r['method'] != 'gaussian'}):
    row = dict(bits=b, gaussian=_acc(gauss))
    flagged = []
    for r in tr.rows:
      if r['bits'] != b or r['method'] == 'gaussian':
        continue
      cell = _acc(r)
      if r['method'] == 'cpsgd' and r.get('levels'):
        cell += f" (k={r['levels']}, m={r['trials']})"
      row[r['method']] = cell
      if r['method'] in ('ddg', 'skellam'):
        flagged.append('-' if r.get('flagged') is None
                       else str(sum(r['flagged'])))
    row['flagged'] = ' / '.join(flagged)
    out.append(row)
  return out


def training_plot(tr: Training, cfg: Config, out_dir: str) -> str:
  """Test accuracy vs bits per protocol, the Gaussian as a line."""
  fig, ax = plt.subplots(figsize=(5.5, 4))
  for i, mech in enumerate(('ddg', 'skellam', 'cpsgd')):
    rs = sorted((r for r in tr.rows if r['method'] == mech
                 and r.get('test_accuracy') is not None),
                key=lambda r: r['bits'])
    ax.errorbar([r['bits'] for r in rs], [r['test_accuracy'] for r in rs],
                yerr=[r['test_accuracy_sem'] or 0 for r in rs],
                marker='os^'[i], ms=4, capsize=2, label=LABELS[mech],
                color=f'C{i}')
  g = next(r for r in tr.rows if r['method'] == 'gaussian')
  ax.axhline(g['test_accuracy'], color='k', ls='-.', lw=0.8,
             label='Gaussian (32-bit floats)')
  ax.set_xlabel('bits per coordinate b (modulus 2^b of the secure sum)')
  ax.set_ylabel('test accuracy after the last round')
  ax.set_title(f"{tr.dataset['name']}, n={tr.clients_per_round} "
               f'clients/round, T={cfg.train_rounds}, '
               f'eps={cfg.train_epsilon:g}', fontsize=9)
  ax.legend(fontsize=7)
  return report_lib.save_figure(fig, out_dir, 'accuracy_vs_bits.png')


def _training_paragraph(tr: Training, cfg: Config) -> str:
  """The model, the clients, every protocol's calibration, the flags."""
  seeds = tr.seeds
  flagged = sum(sum(r['flagged']) for r in tr.rows if r.get('flagged'))
  ran = sum(len(r['flagged']) * cfg.train_rounds for r in tr.rows
            if r.get('flagged'))
  return (
      f"{cfg.train_model} model (d = {tr.dimension}, padded to d' = "
      f'{tr.padded_dimension}), {tr.num_clients} clients each holding '
      f'a random shard, {tr.clients_per_round} per round, '
      f'{cfg.train_rounds} rounds, client gradients clipped to D = '
      f'{cfg.train_l2_norm_clip:g}, server SGD with momentum '
      f'{cfg.train_momentum:g}, lr {cfg.train_learning_rate:g}; seeds '
      f'{seeds[0]}..{seeds[-1]} (each '
      'its own init, shards and round keys, shared by all protocols). Every '
      f'protocol meets eps = {cfg.train_epsilon:g} at delta = '
      f'{cfg.delta:g} over the whole run (replace-one client, the '
      'server sees only the sum, every round charged, no amplification): '
      'DDG and Skellam by `calibrate_distributed_dp` over the T rounds '
      f'(RDP, k = {cfg.k_stddevs:g} stddevs in the modulus); cpSGD '
      f'(rotated) at eps/round {tr.cpsgd_epsilon_round:.3g} and '
      f'delta_round = {tr.delta_round:.3g}, whose T-fold PLD '
      'composition meets the total, at the k of smallest MSE bound whose '
      'sum of n messages fits b bits; the Gaussian (32-bit floats) at the '
      f'exact stddev for T releases. A round whose wrap-around rate exceeds '
      f'{cfg.max_wraparound_rate:g} is flagged: it still updates the '
      'model (the server cannot see wrap-around) and is counted here: '
      f'{flagged} flagged of {ran} DDG / Skellam rounds. Test accuracy '
      'after the last round, mean +- SEM over seeds. Wall time '
      f'{tr.wall_seconds:g} s.')


def training_lines(tr: Training, cfg: Config, out_dir: str) -> list[str]:
  """The federated training section: setting, tables, candidates, plot."""
  png = training_plot(tr, cfg, out_dir)
  return [
      f"### Federated training ({tr.dataset['name']})", '',
      _training_paragraph(tr, cfg), '',
      report_lib.markdown_table(training_table(tr), TRAIN_TABLE), '',
      report_lib.markdown_table(tr.rows, TRAIN_DETAIL), '',
      'cpSGD candidates (per k: the smallest m meeting the per-round '
      'epsilon, and the bits its sum needs): ' + ', '.join(
          f"k={c['levels']} m={c['trials']} {c['sum_bits']} bits"
          for c in tr.cpsgd_candidates) + '.', '',
      'Its claims (family `training` in the table below, texts starting '
      f"'{TRAINING_PREFIX.strip()}') were planned from the calibrated "
      'settings before training.', '', f'![{png}]({png})']
