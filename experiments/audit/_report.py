"""audit's report body: the audit table and the plot of lower / stated."""

import matplotlib.pyplot as plt
import numpy as np

from experiments.audit._claims import ratios
from experiments.audit._config import Config
from experiments.audit._results import Case
from experiments.audit._results import OneRun
from experiments.audit._results import Results
from experiments.common import report as report_lib
from experiments.common.results import Rows


def _delta(delta: float) -> str:
  return '0' if delta == 0 else f'{delta:.0e}'


def _bounds(audits) -> np.ndarray:
  return np.array([a.lower_bound for a in audits])


def _row(row: Case, trials: int) -> str:
  lb = _bounds(row.honest)
  est = np.median([a.estimate for a in row.honest])
  above = int(np.sum(lb > row.epsilon))
  broken = '-'
  if row.broken:
    r = ratios(row, 'broken')
    broken = (f'{np.median(r):.2f} (stated {row.broken_epsilon:.3g}; '
              f'caught on {int(np.sum(r > 1))}/{len(r)})')
  return (f'| {row.name} | {row.relation} | {row.epsilon:.4g} '
          f'({_delta(row.delta)}) | {np.median(lb):.3f} [{lb.min():.3f}, '
          f'{lb.max():.3f}] | {est:.3f} | {trials:,} | '
          f'{np.median(ratios(row, "honest")):.2f} | {above}/{len(lb)} | '
          f'{broken} | {row.attack} |')


def _plot(results: Results, out_dir: str) -> str:
  rows = results.cases
  fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.5))
  y = np.arange(len(rows))
  for offset, which, color, label in ((-0.15, 'honest', 'C0', 'as stated'),
                                      (0.15, 'broken', 'C3', 'broken twin')):
    pts = [(i, ratios(r, which)) for i, r in enumerate(rows)
           if getattr(r, which)]
    if not pts:
      continue
    med = np.array([np.median(v) for _, v in pts])
    err = np.array([[m - v.min(), v.max() - m] for m, (_, v) in
                    zip(med, pts)]).T
    ax.errorbar(med, y[[i for i, _ in pts]] + offset, xerr=err, fmt='o',
                color=color, capsize=2, label=label)
  ax.axvline(1.0, color='k', lw=0.8, ls='--')
  ax.set_yticks(y, [r.name for r in rows])
  ax.invert_yaxis()
  ax.set_xlabel('empirical lower bound / stated epsilon (median, min-max '
                'over seeds)')
  ax.legend(fontsize=7, loc='lower right')
  return report_lib.save_figure(fig, out_dir, 'audit_ratios.png')


def _one_run_paragraph(grad: OneRun, inp: OneRun) -> str:
  return (f'**One-run audits of DP-SGD training** (Steinke, Nasr & '
          f'Jagielski 2023; `dpjax.audit.one_run_audit`), {grad.steps} '
          'full-batch steps, each canary present with probability 1/2, one '
          f'run per seed. Gradient canaries (white box, every update seen): '
          f'm = {grad.canaries:,} of norm 10 C, r = {grad.guesses:,} '
          'guesses (`dpsgd_gradient_canaries`). Input-space canaries (black '
          f'box, final model only): m = {inp.canaries} far-out inputs with '
          f'random labels among 512 generated examples (4 Gaussian clusters, '
          f'32 dimensions), softmax regression, r = {inp.guesses} guesses '
          'by the log-probability of the canary\'s label '
          '(`dpsgd_input_canaries`). r perfect guesses prove at most about '
          'ln(r / ln 20), so both are loose by construction at these sizes; '
          'the broken twin skips clipping.')


def _one_run_row(row: OneRun) -> str:
  lb, bb = _bounds(row.honest), _bounds(row.broken)
  correct = np.median([a.correct for a in row.honest])
  bcorrect = np.median([a.correct for a in row.broken])
  return (f'| {row.kind} | {row.epsilon:.3g} ({_delta(row.delta)})'
          f' | {row.noise_multiplier:.3f} | {np.median(lb):.3f} '
          f'[{lb.min():.3f}, {lb.max():.3f}] | {correct:.0f} of '
          f'{row.guesses} | {np.median(bb):.3f}, {bcorrect:.0f} | '
          f'{np.median(lb) / row.epsilon:.2f} |')


def _one_run_table(results: Results) -> list[str]:
  rows = results.one_run
  if not rows:
    return []
  grad = next(r for r in rows if r.kind == 'gradient')
  inp = next(r for r in rows if r.kind == 'input')
  return ['', _one_run_paragraph(grad, inp), '',
          '| Canaries | Stated eps (delta) | Noise multiplier | Lower bound: '
          'median [min, max] | Correct of r | Broken (unclipped): lower '
          'bound, correct | Lower / stated |', '|---|---|---|---|---|---|---|'
          ] + [_one_run_row(row) for row in rows]


def _coverage(results: Results) -> str:
  ran = {r.name for r in results.cases}
  rest = [n for n in results.registered if n not in ran]
  text = (f'Audited here: {len(ran)} of the {len(results.registered)} '
          'cases of `dpjax.audit.audit_cases()`.')
  if rest:
    text += (f' Not in this mode: {", ".join(rest)} (they compile for '
             '5-12 s each; full mode and the slow test stage, '
             '`tests/test_audit_cases.py`, audit them).')
  return text


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims  # the runner's claims table shows them
  trials = cfg.trials
  out = [f'Each mechanism is run {trials:,} times on each of two worst-case '
         f'neighbouring inputs per seed ({cfg.num_seeds} seeds); half the '
         'runs choose the score threshold, half measure the error rates, '
         f'and their {cfg.confidence:.0%} Clopper-Pearson bounds give the '
         'lower bound on epsilon (`dpjax.audit.distinguishing_audit`). A '
         'lower bound above the stated epsilon refutes the statement; the '
         'broken twins (noise halved, clipping skipped, a paper\'s '
         'miscalibrated constant) must be caught. The point estimate uses '
         'the raw held-out rates. No data: canaries built per mechanism. '
         f'Devices: {results.devices}.', '', _coverage(results), '',
         '| Mechanism | Neighbours | Stated eps (delta) | Lower bound: median '
         '[min, max] | Point estimate | Trials per input | Lower / stated | '
         'Above the claim | Broken twin: lower / stated | Attack |',
         '|' + '---|' * 10]
  out += [_row(r, trials) for r in results.cases]
  out += _one_run_table(results)
  out += ['', f'![lower bound / stated]({_plot(results, out_dir)})']
  return '\n'.join(out)
