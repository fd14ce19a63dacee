"""rs_attack's report body: the two attacks' tables and a plot."""

import matplotlib.pyplot as plt
import numpy as np

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.rs_attack._config import Config
from experiments.rs_attack._results import ClosedForm
from experiments.rs_attack._results import Inversion
from experiments.rs_attack._results import Results


def _over_seeds(values) -> tuple[np.ndarray, np.ndarray]:
  """Mean and SEM over axis 0 (SEM 0 for one seed)."""
  v = np.asarray(values, np.float64)
  sem = (v.std(0, ddof=1) / np.sqrt(len(v)) if len(v) > 1
         else np.zeros(v.shape[1:]))
  return v.mean(0), sem


def closed_form_rows(cf: ClosedForm) -> Rows:
  mse, mse_sem = _over_seeds(cf['mse'])
  bound, _ = _over_seeds(cf['bound'])
  ratio, ratio_sem = _over_seeds(np.asarray(cf['mse']) /
                                 np.asarray(cf['bound']))
  return [dict(rate=r, mse=mse[i], mse_sem=mse_sem[i], bound=bound[i],
               ratio=ratio[i], ratio_sem=ratio_sem[i])
          for i, r in enumerate(cf['rates'])]


def inversion_rows(inv: Inversion) -> Rows:
  per_seed = np.asarray(inv['mse']).mean(axis=1)  # [S, settings]
  mean, sem = _over_seeds(per_seed)
  return [dict(setting=s, rate=r, noise_std=n, mse=mean[i], sem=sem[i],
               images=len(inv['images'][0]))
          for i, (s, r, n) in enumerate(zip(inv['settings'], inv['rates'],
                                             inv['noise_std']))]


def plot(results: Results, out_dir: str) -> list[str]:
  fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
  cf = closed_form_rows(results.closed_form)
  axes[0].errorbar([r['rate'] for r in cf], [r['mse'] for r in cf],
                   yerr=[r['mse_sem'] for r in cf], marker='o',
                   label='measured (mean over seeds)')
  axes[0].plot([r['rate'] for r in cf], [r['bound'] for r in cf], 'k--',
               label='Thm 5.1 bound')
  axes[0].set_title('least squares, linear layer')
  rows = inversion_rows(results.inversion)
  inv = [r for r in rows if r['setting'] == 'noisy']
  axes[1].errorbar([r['rate'] for r in inv], [r['mse'] for r in inv],
                   yerr=[r['sem'] for r in inv], marker='o',
                   label=f"noise std {inv[0]['noise_std']:g}")
  ref = rows[0]
  axes[1].axhline(max(ref['mse'], 1e-12), color='r', ls='--',
                  label='no noise, dense')
  axes[1].set_title('inverting gradients, digits MLP')
  for ax in axes:
    ax.set_xlabel('sparsification rate r')
    ax.set_ylabel('reconstruction MSE')
    ax.set_yscale('log')
    ax.legend(fontsize=7)
  return [report_lib.save_figure(fig, out_dir, 'reconstruction_vs_rate.png')]


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims  # the runner's claims table shows them
  seeds = cfg.seeds
  pngs = plot(results, out_dir)
  cf = results.closed_form
  rows = closed_form_rows(cf)
  zero = next((r for r in rows if r['rate'] == 0), None)
  first = next(i for i, r in enumerate(cf['rates']) if r > 0)
  mc = float(np.mean(np.asarray(cf['sem'])[:, first] /
                     np.asarray(cf['bound'])[:, first]))
  lines = [
      report_lib.dataset_line(results.dataset), '',
      f"Seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}); ± is one SEM over "
      f"seeds; every rate of a seed reuses that seed's keys (paired).", '',
      f'(a) Least squares on a one-input linear layer, d = {cfg.dimension}, '
      f'sigma = {cfg.closed_form_stddev}, k ~ N(0, I) drawn per seed, '
      f"{cf['trials']} trials (mask and noise) per rate and seed:", '',
      report_lib.markdown_table(rows, [
          ('rate', 'r'), ('mse', 'E[(x - x_hat)^2]'), ('mse_sem', 'SEM'),
          ('bound', 'Thm 5.1 bound'), ('ratio', 'error / bound'),
          ('ratio_sem', 'SEM')]),
      '',
      f'(b) Inverting gradients on {cfg.num_images} test images per seed '
      f'(drawn per seed), MLP {list(cfg.hidden)} sigmoid at init (drawn '
      f'per seed), {cfg.attack_steps} Adam steps; MSE is the mean over the '
      'images of a seed, then over seeds:', '',
      report_lib.markdown_table(inversion_rows(results.inversion), [
          ('setting', 'setting'), ('rate', 'r'), ('noise_std', 'noise std'),
          ('mse', 'MSE'), ('sem', 'SEM'), ('images', 'images per seed')]),
      '',
      'The claims below are one Bonferroni family. The bound claim takes, '
      'per seed, the smallest relative margin over the rates r > 0. At '
      'r = 0 the mask keeps every coordinate and the bound is attained '
      'with equality (E err = sigma^2 / ||k||^2), so it is no claim there'
      + (f" (measured error / bound at r = 0: {report_lib.fmt(zero['ratio'])}"
         f" ± {report_lib.fmt(zero['ratio_sem'], 2)})" if zero else '')
      + f". At the smallest r > 0 (r = {cf['rates'][first]:g}) the margin "
      f"is {report_lib.fmt(rows[first]['ratio'] - 1, 2)} of the bound on "
      f"average, against a Monte Carlo SEM of {report_lib.fmt(mc, 2)} of the "
      f"bound per seed ({cf['trials']} trials). The rise claims compare the "
      'log of the mean inversion MSE of consecutive rates, paired by seed.',
      '']
  lines += [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines)
