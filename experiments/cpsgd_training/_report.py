"""cpsgd_training's report: tables, claims and plots from its record."""

from matplotlib import ticker
import matplotlib.pyplot as plt

from experiments.common import claims as claims_lib
from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.cpsgd_training._claims import CLOSE
from experiments.cpsgd_training._claims import EPS_RATIO
from experiments.cpsgd_training._config import Config
from experiments.cpsgd_training._config import GAUSSIAN_BITS
from experiments.cpsgd_training._privacy import label
from experiments.cpsgd_training._results import Results


COLUMNS = [('setting', 'setting'), ('bits_per_coordinate', 'bits/coord'),
           ('bits_fixed', 'fixed'), ('bits_per_client', 'bits/client/round'),
           ('epsilon_round', 'eps/round'), ('epsilon_total', 'eps total'),
           ('noise_multiplier', 'z (Gauss)'),
           ('test_accuracy_mean', 'test acc'), ('test_accuracy_sem', 'SEM'),
           ('train_loss_mean', 'train loss'),
           ('clipped_fraction_mean', 'clipped'), ('seeds', 'seeds')]
MATCHED_COLUMNS = [('setting', 'cpSGD'), ('bits', 'bits/coord'),
                   ('epsilon_round', 'eps/round'),
                   ('sensitivity_ratio', 'Delta_2 / 2D'),
                   ('acc_cpsgd', 'acc cpSGD'), ('acc_gauss', 'acc Gauss'),
                   ('gap', 'gap'),
                   ('bit_saving', '32 / bits'),
                   ('gauss_noise_cost', 'Gauss noise cost'),
                   ('epsilon_total', 'eps total cpSGD'),
                   ('gauss_epsilon_total', 'eps total Gauss')]


def _bits_panel(ax, summary, colors):
  """Test accuracy vs bits per coordinate: cpSGD per (k, m), its Gaussian
  twin at 32 bits, the references; fills ``colors`` (k -> color)."""
  by = {r['setting']: r for r in summary}
  for r in summary:
    if r['method'] != 'cpsgd':
      continue
    c = colors.setdefault(r['levels'], f'C{len(colors)}')
    ax.errorbar(r['bits_per_coordinate'], r['test_accuracy_mean'],
                yerr=r['test_accuracy_sem'], fmt='o' if r['rotate'] else 's',
                mfc=c if r['rotate'] else 'none', color=c, capsize=2)
    ax.annotate(f"({r['levels']},{r['trials']})" + (
        '' if r['rotate'] else ' no rot'),
                (r['bits_per_coordinate'], r['test_accuracy_mean']),
                fontsize=6, xytext=(3, 3), textcoords='offset points')
    g = by.get(f"Gaussian @ {r['setting']}")
    if g is not None:
      ax.errorbar(GAUSSIAN_BITS, g['test_accuracy_mean'],
                  yerr=g['test_accuracy_sem'], fmt='x', color=c, capsize=2)
  for k, c in colors.items():
    ax.plot([], [], 'o', color=c, label=f'cpSGD k={k}')
  ax.plot([], [], 'x', color='gray', label='Gaussian @ matched eps (32 bits)')
  for name, style in (('non-private', '-'), ('clipped, no noise', ':')):
    if name in by:
      ax.axhline(by[name]['test_accuracy_mean'], color='k', ls=style, lw=1,
                 label=f'{name} (32 bits)')
  ax.set_xscale('log', base=2)
  ax.xaxis.set_major_locator(ticker.FixedLocator([4, 6, 8, 12, 16, 24, 32]))
  ax.xaxis.set_major_formatter(ticker.ScalarFormatter())
  ax.xaxis.set_minor_formatter(ticker.NullFormatter())
  ax.set_xlabel('bits per coordinate (log2(k + m); Gaussian 32)')
  ax.set_ylabel('test accuracy')
  ax.set_title('accuracy vs communication')
  ax.legend(fontsize=6)


def _epsilon_panel(ax, summary, colors, delta_round):
  """Test accuracy vs per-round epsilon: cpSGD per k (rotated, m varies)
  and the Gaussian (the Fig. 2 analogue)."""
  for k, c in colors.items():
    rows = sorted((r for r in summary if r['method'] == 'cpsgd'
                   and r['levels'] == k and r['rotate']
                   and r['epsilon_round'] is not None),
                  key=lambda r: r['epsilon_round'])
    ax.errorbar([r['epsilon_round'] for r in rows],
                [r['test_accuracy_mean'] for r in rows],
                yerr=[r['test_accuracy_sem'] for r in rows], marker='o',
                color=c, capsize=2, label=f'cpSGD k={k} (m varies)')
  rows = sorted((r for r in summary if r['method'] == 'gaussian'
                 and r['matched_epsilon_round'] is not None),
                key=lambda r: r['epsilon_round'])
  ax.errorbar([r['epsilon_round'] for r in rows],
              [r['test_accuracy_mean'] for r in rows],
              yerr=[r['test_accuracy_sem'] for r in rows], marker='x',
              color='k', ls='--', capsize=2, label='Gaussian (32 bits)')
  by = {r['setting']: r for r in summary}
  if 'non-private' in by:
    ax.axhline(by['non-private']['test_accuracy_mean'], color='k', lw=1,
               label='non-private')
  ax.set_xscale('log')
  ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
  ax.xaxis.set_major_formatter(ticker.FormatStrFormatter('%g'))
  ax.xaxis.set_minor_formatter(ticker.NullFormatter())
  ax.set_xlabel(f'per-round epsilon (delta {delta_round:.2g})')
  ax.set_ylabel('test accuracy')
  ax.set_title('accuracy vs per-round epsilon (Fig. 2 analogue)')
  ax.legend(fontsize=6)


def _curves_plot(results: Results, colors, out_dir) -> str:
  """Mean test accuracy per round of every setting but the Gaussians."""
  summary = results.summary
  by = {r['setting']: r for r in summary}
  fig, ax = plt.subplots(figsize=(6, 4))
  for c in results.curves:
    if c['setting'].startswith('Gaussian'):
      continue
    row = by[c['setting']]
    style = dict(color=colors.get(row['levels'], 'k'),
                 ls='-' if row['method'] != 'cpsgd' or row['rotate'] else ':')
    if row['method'] == 'cpsgd':
      style['alpha'] = 0.4 + 0.6 * (row['trials'] == min(
          r['trials'] for r in summary if r['levels'] == row['levels']))
    else:
      style.update(color='k', ls='-' if c['setting'] == 'non-private'
                   else '--')
    ax.plot(c['rounds'], c['test_accuracy'], label=c['setting'], lw=1,
            **style)
  ax.set_xlabel('round')
  ax.set_ylabel('test accuracy (mean over seeds)')
  ax.set_title('training curves (faint: larger m)')
  ax.legend(fontsize=5, ncol=2)
  return report_lib.save_figure(fig, out_dir, 'accuracy_vs_round.png')


def plot(results: Results, out_dir: str) -> list[str]:
  """Accuracy vs bits and vs per-round epsilon; the training curves."""
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
  colors = {}
  _bits_panel(axes[0], results.summary, colors)
  _epsilon_panel(axes[1], results.summary, colors, results.delta_round)
  return [report_lib.save_figure(fig, out_dir, 'accuracy_vs_bits.png'),
          _curves_plot(results, colors, out_dir)]


def _trend(rows, key, along):
  """Mean accuracy as ``along`` grows, for each fixed ``key`` (descriptive)."""
  groups = {}
  for r in rows:
    groups.setdefault(r[key], []).append(r)
  return [(value, ', '.join(f"{r[along]}: {r['acc_cpsgd']:.3f}"
                            for r in sorted(group, key=lambda r: r[along])))
          for value, group in sorted(groups.items()) if len(group) > 1]


_MODEL_NAMES = {'logistic': 'multinomial logistic regression',
                'mlp': 'MLP (one hidden layer of 64 tanh units)'}


def _setting_paragraph(results: Results, cfg: Config) -> str:
  """The model, the clients, the rounds and the server step."""
  n, seeds = results.clients_per_round, cfg.seeds
  subset = n < cfg.num_clients
  return (
      f'Model {_MODEL_NAMES.get(results.model, results.model)} '
      f'(d = {results.dimension} '
      f"parameters, rotated messages padded to d' = "
      f'{results.padded_dimension}); {cfg.num_clients} clients, each '
      f'holding a random shard of the training set; {n} '
      + ('randomly selected' if subset else '(all)') +
      f' clients per round, {cfg.rounds} rounds; each client sends the '
      f"gradient of its shard's mean loss, clipped to D = "
      f'{cfg.l2_norm_clip}; server step SGD with momentum {cfg.momentum}, '
      f'lr {cfg.learning_rate}; Bin(m, {cfg.p}); seeds '
      f'{seeds[0]}..{seeds[-1]}.')


def _privacy_paragraph(results: Results, cfg: Config) -> str:
  """The privacy unit, the per-round delta, the totals, the sensitivities."""
  subset = results.clients_per_round < cfg.num_clients
  return (
      f'Privacy: one client (its shard) replace-one, the server sees only the '
      f'sum. Each round is Theorem 1 at delta_round = {cfg.delta:g} / (2 x '
      f'{cfg.rounds}) = {results.delta_round:.3g}; the total epsilon '
      f'composes the {cfg.rounds} per-round (eps, delta_round) events of '
      f'the ledger with the PLD accountant at delta = {cfg.delta:g}. The '
      f"Gaussian baseline's noise is calibrated so that one round's tight "
      f'epsilon (L2 sensitivity 2 D) equals the cpSGD epsilon of the same '
      f'row; its total is the exact {cfg.rounds}-fold Gaussian '
      f"composition. Theorem 1 uses dpjax's derived worst-case "
      f"sensitivities (docs/deviations/cpsgd.md; the paper's eq. (10) was not "
      f"recovered): Delta_2 = min(2 X_max sqrt(d'), 2 D + 2 s sqrt(d')) "
      f'for the quantized sum, against 2 D for the Gaussian, so at the same '
      f'epsilon a small k needs much more noise (column Delta_2 / 2D below). '
      + ('Clients are subsampled, but NO amplification by subsampling is '
         'claimed: every round is charged in full. ' if subset else '') +
      'Unlike the paper (one epoch, each client used once), every client '
      'takes part in every round, so the rounds compose. D, lr and momentum '
      'were fixed on a validation split of the training set (Gaussian run, '
      'noise multiplier 4), not on the test set. Test accuracy after the '
      'last round, mean and SEM over seeds.')


def _rotation_lines(comparisons) -> list[str]:
  """Each unrotated configuration beside its rotated twin, if it ran."""
  lines = []
  for v in comparisons:
    if v['rotate']:
      continue
    twin = next((w for w in comparisons
                 if w['rotate'] and w['levels'] == v['levels']
                 and w['trials'] == v['trials']), None)
    if twin is not None:
      lines.append(
          f"- Rotation (k = {v['levels']}, m = {v['trials']}): with "
          f"{twin['acc_cpsgd']:.3f} (eps/round {_f(twin['epsilon_round'])}),"
          f" without {v['acc_cpsgd']:.3f} (eps/round "
          f"{_f(v['epsilon_round'])}); not a matched-epsilon comparison: "
          f"rotation shrinks X_max and hence the grid step s, which raises "
          f"epsilon at fixed (k, m).")
  return lines


def _descriptive_lines(results: Results, cfg: Config) -> list[str]:
  """Means over seeds, no verdict: trends in m and k, rotation, totals."""
  ver = results.comparisons
  rotated = [v for v in ver if v['rotate']]
  lines = []
  for k, detail in _trend(rotated, 'levels', 'trials'):
    lines.append(f'- k = {k}, mean test accuracy as m grows (more noise in '
                 f'real units, smaller epsilon, more bits): {detail}.')
  for m, detail in _trend(rotated, 'trials', 'levels'):
    lines.append(f'- m = {m}, mean test accuracy as k grows (finer grid, '
                 f'larger epsilon): {detail}.')
  lines += _rotation_lines(ver)
  totals = [v['epsilon_total'] for v in ver if v['epsilon_total'] is not None]
  if totals:
    lines.append(
        f'- Total epsilon over {cfg.rounds} rounds at delta '
        f'{cfg.delta:g}: cpSGD {min(totals):.3g} to {max(totals):.3g} (PLD '
        f"composition of Theorem 1's per-round (eps, delta), the optimal "
        f'composition for a mechanism known only to be (eps, delta)-DP); the '
        f'matched Gaussian runs use the exact Gaussian composition, because '
        f'their privacy loss is known exactly.')
  by = {r['setting']: r for r in results.summary}
  if 'non-private' in by:
    lines.append(f"- References: non-private "
                 f"{by['non-private']['test_accuracy_mean']:.3f}, "
                 f"clipped without noise "
                 f"{by['clipped, no noise']['test_accuracy_mean']:.3f}.")
  lines.append(f'- {len(cfg.seeds)} seeds: each protocol trains all '
               f'seeds at once (one jitted vmap; one compilation for every '
               f'cpSGD configuration).')
  return lines


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  pngs = plot(results, out_dir)
  skipped = [r for r in results.privacy if r['epsilon_round'] is None]
  lines = [
      report_lib.dataset_line(results.dataset), '',
      _setting_paragraph(results, cfg), '',
      _privacy_paragraph(results, cfg), '',
      report_lib.markdown_table(results.summary, COLUMNS), '',
  ]
  if skipped:
    lines += ['No privacy guarantee (Theorem 1 condition n m p (1-p) >= '
              '23 ln(10 d\'/delta) fails; trained, but left out of the '
              'privacy columns and without a Gaussian match): ' + ', '.join(
                  label(r) for r in skipped) + '.', '']
  lines += ['Per configuration, means over seeds (gap = cpSGD - Gaussian '
            'test accuracy, its paired interval is in the claims below; '
            'Gauss noise cost = clipped without noise - Gaussian):', '',
            report_lib.markdown_table(results.comparisons, MATCHED_COLUMNS),
            '']
  lines += _claim_lines(results, claims) + ['', 'Descriptive (means over seeds, '
                                         'no verdict):', '']
  lines += _descriptive_lines(results, cfg)
  lines += [''] + [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines) + '\n'


def _claims_paragraph(claims) -> str:
  """What the three claim families check, and how they were fixed."""
  fams = {f: sum(c['family'] == f for c in claims) for f in ('close', 'bits')}
  return (
      f"**Claims** (verdicts per the rule at the top; per seed: final test "
      f"accuracy, treatment and control on the same seed's init, shards "
      f"and keys). Fixed before training from the per-round epsilons "
      f"alone: (1) cpSGD at the smallest per-round epsilon is within "
      f"{CLOSE:g} of its matched Gaussian (non-inferiority, threshold "
      f"-{CLOSE:g} on cpSGD - Gaussian; one pre-specified claim); (2) the "
      f"same for each other configuration with a Gaussian twin "
      f"(Bonferroni over {fams['close']}); (3) each pair of rotated "
      f"configurations whose per-round epsilons are within {EPS_RATIO:g}x "
      f"and whose bits differ: more bits, higher accuracy (threshold 0; "
      f"Bonferroni over {fams['bits']} pairs; the pair's epsilons differ "
      f"by up to {EPS_RATIO:g}x, so this is not a matched-epsilon "
      f"comparison). The table is below.")


def _claim_lines(results: Results, claims: Rows) -> list[str]:
  """The claims' plan and outcome counts and the exact checks."""
  lines = []
  if claims:
    lines += [_claims_paragraph(claims), '']
    for family, what in (('primary', 'smallest eps/round'),
                         ('close', 'other configurations within '
                          f'{CLOSE:g} of the Gaussian'),
                         ('bits', 'more bits better')):
      fam = [c for c in claims if c['family'] == family]
      if fam:
        counts = ', '.join(
            f"{sum(claims_lib.counted(c['outcome']) == v for c in fam)} {v}"
            for v in claims_lib.OUTCOMES)
        lines.append(f'- {what}: {counts} (of {len(fam)}).')
  elif results.plan['primary'] is None:
    lines.append('- No configuration satisfies Theorem 1, so cpSGD cannot be '
                 'compared with the Gaussian baseline at matched epsilon: no '
                 'claim is checked.')
  for c in results.exact_checks:
    lines.append(f"- Exact check ({c['check']}): "
                 f"{'pass' if c['passed'] else 'FAIL'} ({c['detail']}).")
  return lines


def _f(x):
  return '-' if x is None else f'{x:.3g}'
