"""The DP-SGD benchmark's table and plot (no JAX import)."""

from experiments.bench import timing

TORCH_METHODS = ('torch', 'opacus', 'opacus-ghost')
BASE = {'ghost': 'non-private', 'vmap': 'non-private', 'optax': 'non-private',
        'jax_privacy': 'non-private', 'opacus': 'torch',
        'opacus-ghost': 'torch'}
DP_JAX = ('ghost', 'vmap', 'optax', 'jax_privacy')
PLOT_METHODS = ('non-private', 'ghost', 'vmap')
LABELS = {'non-private': 'non-private', 'ghost': 'dpjax ghost',
          'vmap': 'dpjax vmap', 'optax': 'optax DP',
          'jax_privacy': 'jax_privacy', 'opacus': 'Opacus',
          'opacus-ghost': 'Opacus ghost'}
# A plain PyTorch step below this fraction of the JAX non-private step's
# FLOP rate (same FLOP count: the compiled non-private step's) is flagged.
FLOP_RATE_FLAG = 0.25


def _cell(row: dict, method: str) -> str:
  stats = row['time']
  if method not in stats:
    return 'skipped'
  out = timing.cell(stats[method])
  if method in row['ratio']:
    out += f" ({row['ratio'][method]:.2f}x)"
  n = stats[method]['calls']
  if n != row['calls']:
    out += f" [{n} call{'s' if n > 1 else ''}]"
  return out


def _mib(memory: dict, method: str) -> str:
  value = memory.get(method, {}).get('temp')
  return '-' if value is None else f'{value / 2**20:.1f}'


def _gflops(row: dict) -> str:
  rate = row.get('gflops', {})
  if not rate:
    return '-'
  out = ' / '.join(f'{rate[m]:.1f}' if rate.get(m) else '-'
                   for m in ('non-private', 'torch'))
  return out + (' !' if row.get('torch_flop_flag') else '')


HEADER = ('| model | params | B | XLA setting | calls | non-private ms '
          '| noise only ms | dpjax ghost ms (/np) | dpjax vmap ms (/np) '
          '| optax DP ms (/np) | jax_privacy ms (/np) | torch ms '
          '| Opacus ms (/torch) | Opacus ghost ms (/torch) '
          '| GFLOP/s np / torch | temp MiB np / ghost / vmap / optax / '
          'jax_privacy | extra temp / param bytes: ghost / vmap / optax / '
          'jax_privacy |')


def format_row(row: dict) -> str:
  mem, extra = row['memory'], row['extra_temp_param_units']
  temp = ' / '.join(_mib(mem, m) for m in ('non-private',) + DP_JAX)
  units = ' / '.join(f'{extra[m]:.1f}' if m in extra else '-' for m in DP_JAX)
  cells = [row['model'], f"{row['params']:,}", str(row['batch_size']),
           row['setting'], str(row['calls'])]
  cells += [_cell(row, m) for m in ('non-private', 'noise') + DP_JAX
            + TORCH_METHODS]
  return '| ' + ' | '.join(cells + [_gflops(row), temp, units]) + ' |'


def table(rows: list[dict]) -> str:
  lines = [HEADER, '|' + '---|' * (HEADER.count(' | ') + 1)]
  return '\n'.join(lines + [format_row(r) for r in rows])


NOTES = ('Cells: median ms over all timed calls [range of the pass medians]; '
         f'"!" marks passes that disagree by more than {timing.DISAGREE:.0%} '
         '(re-run on a quieter machine); (/np) = ratio to the non-private '
         'step of the same framework and XLA setting. GFLOP/s = the compiled '
         'non-private step\'s FLOPs (XLA cost analysis) / median time, for '
         'JAX and the plain PyTorch step of the same model; "!" there: torch '
         f'below {FLOP_RATE_FLAG:.0%} of JAX\'s rate (a suspect baseline). '
         'PyTorch columns run once, in the default setting (XLA flags do '
         'not touch them).')


def plot(points: list[dict], path: str) -> None:
  """Time per step and compiled temp memory against B, a panel per model."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  models = list(dict.fromkeys(p['model'] for p in points))
  fig, axes = plt.subplots(2, len(models),
                           figsize=(max(5.5, 4.5 * len(models)), 7.5),
                           squeeze=False)
  for j, name in enumerate(models):
    for i, (key, scale, label) in enumerate(
        (('ms', 1.0, 'ms per step (noisy: shared CPU)'),
         ('temp_bytes', 2**-20, 'compiled temp MiB (deterministic)'))):
      ax = axes[i][j]
      for m in PLOT_METHODS:
        pts = [(p['batch_size'], p[key] * scale) for p in points
               if p['model'] == name and p['method'] == m
               and p[key] is not None]
        if pts:
          ax.plot(*zip(*pts), marker='o', label=LABELS[m])
      ax.set_xscale('log', base=2)
      ax.set_yscale('log')
      ax.set_xlabel('batch size B')
      ax.set_ylabel(label)
      ax.set_title(name, fontsize=9)
      ax.grid(True, which='both', alpha=0.3)
      ax.legend(fontsize=8)
  fig.suptitle('DP-SGD step vs batch size\n(time is noisy; points over '
               '--max-run-gib are compiled, not timed)', fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)

