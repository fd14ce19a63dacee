"""correlated_noise's report body: the settings and two tables."""

from typing import Any

import numpy as np

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.correlated_noise._config import Config
from experiments.correlated_noise._results import Part
from experiments.correlated_noise._results import Results


def _fmt(setting) -> str:
  if isinstance(setting, (list, tuple)):
    return f'C {setting[0]:g}, lr {setting[1]:g}'
  return f'lr {setting:g}'


def _rows(name: str, part: Part, **extra) -> list[dict[str, Any]]:
  """One row per setting (mean over seeds) and one for the validation
  choice."""
  test = np.asarray(part.test)
  rows = [dict(run=f'{name}, {_fmt(s)}', test_mean=float(test[:, i].mean()),
               test_std=float(test[:, i].std(ddof=1)))
          for i, s in enumerate(part.settings)]
  chosen = np.asarray(part.selected_test)
  rows.append(dict(
      run=f'**{name}, chosen on validation**',
      test_mean=float(chosen.mean()), test_std=float(chosen.std(ddof=1)),
      epsilon=part.epsilon, sigma=part.noise_multiplier,
      note='per seed: ' + '; '.join(_fmt(s) for s in part.chosen),
      **extra))
  return rows


COLUMNS = [('run', 'run'), ('test_mean', 'test acc'), ('test_std', 'std'),
           ('epsilon', 'eps (RDP, read from the run)'),
           ('sigma', 'noise multiplier'), ('note', 'note')]


def _method_rows(results: Results, cfg: Config) -> list[dict[str, Any]]:
  """Fixed clips, adaptive clipping and BandMF: every setting and the
  validation choice of each."""
  adaptive, correlated = results.adaptive, results.bandmf
  rows = _rows('fixed', results.fixed) + _rows(
      f'adaptive (gamma {cfg.target_quantile:g}, eta '
      f'{cfg.clip_learning_rate:g}, from C = {min(cfg.l2_norm_clips):g})',
      adaptive)
  rows[-1]['note'] += '; final C: ' + ', '.join(
      f'{c:.2f}' for c in adaptive.chosen_final_clip)
  rows += _rows(f'BandMF ({correlated.bands} bands, partition rate '
                f'{correlated.partition_rate:.3f})', correlated)
  return rows


def _setting(results: Results, cfg: Config) -> str:
  return (
      f'784-{cfg.hidden}-10 tanh MLP, momentum SGD (momentum '
      f'{cfg.momentum}), Poisson sampling q = '
      f'{results.sampling_rate:.4f} (expected batch '
      f'{cfg.expected_batch_size}), {results.steps} steps, every run '
      f'at eps = {cfg.epsilon:g}, delta = {cfg.delta:g}. Adaptive '
      'clipping (Andrew et al. 2021) spends the same budget on the gradient '
      'and the count (count noise m / 20). Each method picks its learning '
      'rate (fixed and BandMF: and C) per seed on the validation split. '
      'BandMF: an optimized banded Toeplitz strategy, cyclic Poisson '
      'sampling over as many partitions as bands (the same expected batch), '
      'accounted by amplification (Choquette-Choo et al. 2023, Thm. 4).')


def _user_setting(results: Results, cfg: Config) -> str:
  user = results.user_level
  return (
      f'User level: the train split in {user.num_users} users of '
      f'{cfg.num_examples_per_user} examples; {cfg.expected_num_users} users '
      f'expected per step, {user.steps} steps; the example-level run '
      'samples the same expected number of examples per step. C = '
      f'{cfg.user_l2_norm_clip:g} per user or per example.')


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims, out_dir  # the runner's claims table shows them
  unit_rows = (_rows('user-level (unit: user)', results.user_level) +
               _rows('example-level (unit: example)', results.example_level))
  return '\n'.join([
      report_lib.dataset_line(results.dataset) + ' (validation: the '
      'fixed 500-image split)', '', _setting(results, cfg), '',
      report_lib.markdown_table(_method_rows(results, cfg), COLUMNS), '',
      _user_setting(results, cfg), '',
      report_lib.markdown_table(unit_rows, COLUMNS), ''])
