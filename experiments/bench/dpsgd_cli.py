"""Options of the DP-SGD step benchmark (``python -m experiments bench dpsgd``).

Kept apart from ``experiments.bench.dpsgd`` so that ``--help`` and bad input
are answered without importing JAX or PyTorch.
"""

import argparse

DEFAULT_OUT = 'results/bench'
LR, CLIP, SIGMA = 0.1, 1.0, 1.1
# A column's clipped sum must match the reference, dpjax's vmap path (exact
# per-example norms): max |diff| / max(1, max |reference|) <= TOL. On the
# benchmark models at B = 64 and 256, vmap and optax agree with a float64
# computation of the clipped sum to 4e-7. Ghost clipping's norms are
# certified upper bounds (dpjax/clipping/_ghost_norms.py: each carries a float32
# rounding margin of about gamma(T) relative), so its clip factors are slightly
# smaller by design: 2e-5 to 7e-5 from float64 on the CNN and the transformer
# at those batch sizes. Its tolerance is GHOST_TOL.
TOL = 1e-5
GHOST_TOL = 2e-4
# Compiler settings: name -> the XLA flag it adds ('' for none). jaxlib 0.10's
# CPU backend fuses reductions into YNNPACK by default; '-reduce' turns that
# off (experiments.bench.ynnpack_reduce).
YNN_FLAG = '--xla_cpu_experimental_ynn_fusion_type'
SETTINGS = {'default': '', 'no-ynn-reduce': f'{YNN_FLAG}=-reduce'}
# experiments.bench.models.MODELS has these keys (a test checks).
MODEL_NAMES = ('mlp-784-512-512-10', 'tb-mnist-cnn', 'transformer-128x4-seq32')
# dpsgd_steps.make_jax_steps's methods; non-private always runs.
METHODS = ('noise', 'ghost', 'vmap', 'optax', 'jax_privacy')
# Table rows per model when --batch-sizes is not given.
TABLE_SIZES = {'mlp-784-512-512-10': (64, 256, 1024),
               'tb-mnist-cnn': (64, 256),
               'transformer-128x4-seq32': (64, 256)}
PLOT_SIZES = tuple(2**k for k in range(6, 13))  # 64 .. 4096
QUICK_PLOT_SIZES = tuple(2**k for k in range(6, 11))  # 64 .. 1024


# Numeric options: flag -> (default, help); an int must be >= 1, a float > 0.
NUMBERS = {
    '--repeats': (10, 'timing rounds (each method makes --burst calls per '
                  'round; the median is over all of them)'),
    '--burst': (3, 'consecutive timed calls per method and round'),
    '--min-calls': (20, 'timed calls per method at least, whatever the '
                    'budget'),
    '--warmup': (2, 'untimed calls first'),
    '--passes': (2, 'independent timing passes; a cell gives the range of '
                 'the pass medians and is flagged when they disagree by more '
                 'than 25%%'),
    '--time-budget': (20.0, 'seconds of timed calls per row and framework; '
                      'rounds shrink to fit (down to --min-calls)'),
    '--slow': (5.0, 'a method whose warmup call takes longer than this many '
               'seconds is timed by that one call ([1 call] in the table)'),
    '--plot-calls': (5, 'timed calls per method and batch size in the plot'),
    '--max-run-gib': (4.0, 'plot points whose compiled memory exceeds this '
                      'many GiB are compiled (memory) but not run (no time)'),
}


class ArgumentError(ValueError):
  """A bad command-line value (reported in one line, exit status 2)."""


class _Parser(argparse.ArgumentParser):

  def error(self, message):  # one line, no usage dump
    raise ArgumentError(message)


def tolerance(method: str) -> float:
  """The largest clipped-sum disagreement with the reference ``method`` may
  have and still be timed."""
  return GHOST_TOL if method == 'ghost' else TOL


def xla_flags(setting: str, env: str) -> str:
  """``env`` (an XLA_FLAGS value) with its YNNPACK flag set as ``setting``'s."""
  kept = [f for f in env.split() if not f.startswith(YNN_FLAG)]
  return ' '.join(kept + ([SETTINGS[setting]] if SETTINGS[setting] else []))


def strip_settings(argv: list[str]) -> list[str]:
  """``argv`` without its --xla-settings values (a child gets one)."""
  out, skipping = [], False
  for a in argv:
    if a == '--xla-settings' or a.startswith('--xla-settings='):
      skipping = a == '--xla-settings'
      continue
    if skipping and not a.startswith('-'):
      continue
    skipping = False
    out.append(a)
  return out


def parser(prog: str = 'python -m experiments bench dpsgd'
           ) -> argparse.ArgumentParser:
  """The benchmark's options."""
  p = _Parser(prog=prog, description='DP-SGD training steps (dpjax ghost and '
              'vmap, optax.contrib, jax_privacy, Opacus) against the '
              'non-private step: time ratios, compiled temp memory, and a '
              'plot of time and memory against the batch size.',
              allow_abbrev=False)
  p.add_argument('--out', default=DEFAULT_OUT,
                 help='output directory for bench.json, bench.md and '
                 'bench.png (default %(default)s)')
  p.add_argument('--quick', action='store_true',
                 help='B in {64, 256} for every model, 3 rounds, 1 warmup, '
                 '10 s budget, at least 9 calls; plot up to B = 1024')
  p.add_argument('--models', nargs='+', default=list(MODEL_NAMES),
                 metavar='MODEL', help='models (default: all of '
                 f'{", ".join(MODEL_NAMES)})')
  p.add_argument('--batch-sizes', type=int, nargs='+',
                 help='table batch sizes for every model (default: MLP 64 256 '
                 '1024, CNN 64 256, transformer 64 256)')
  p.add_argument('--plot-batch-sizes', type=int, nargs='+',
                 help='batch sizes of the plot (default 64 128 ... 4096; '
                 '--quick: up to 1024)')
  p.add_argument('--no-plot', dest='plot', action='store_false',
                 help='table only')
  for flag, (default, text) in NUMBERS.items():
    p.add_argument(flag, type=type(default), default=default,
                   help=f'{text} (default %(default)s)')
  p.add_argument('--methods', nargs='+', default=list(METHODS),
                 metavar='METHOD', help='JAX methods besides non-private '
                 f'(default: all of {", ".join(METHODS)}); the plot draws '
                 'ghost and vmap when they are among them')
  p.add_argument('--xla-settings', nargs='+', default=list(SETTINGS),
                 metavar='SETTING', help='compiler settings, each run in '
                 'its own process when its XLA_FLAGS differ from this '
                 f'one\'s (default: all of {", ".join(SETTINGS)})')
  p.add_argument('--note', default='',
                 help='a line for the page header, e.g. what else ran on '
                 'the machine during the run')
  p.add_argument('--child-json', help=argparse.SUPPRESS)
  p.add_argument('--not-first', action='store_true', help=argparse.SUPPRESS)
  p.add_argument('--no-baselines', dest='baselines', action='store_false',
                 help='skip the jax_privacy and PyTorch/Opacus columns')
  return p


def _positive_ints(name, values):
  for v in values:
    if v <= 0:
      raise ArgumentError(f'{name} must be positive, got {v}')


def parse_args(argv, prog: str = 'python -m experiments bench dpsgd'
               ) -> argparse.Namespace:
  """Parsed and checked options; raises ArgumentError naming a bad value."""
  args = parser(prog).parse_args(argv)
  for model in args.models:
    if model not in MODEL_NAMES:
      raise ArgumentError(f'unknown model {model!r}; known: '
                          f'{", ".join(MODEL_NAMES)}')
  for method in args.methods:
    if method not in METHODS:
      raise ArgumentError(f'unknown method {method!r}; known: '
                          f'{", ".join(METHODS)}')
  for setting in args.xla_settings:
    if setting not in SETTINGS:
      raise ArgumentError(f'unknown XLA setting {setting!r}; known: '
                          f'{", ".join(SETTINGS)}')
  if len(set(args.xla_settings)) != len(args.xla_settings):
    raise ArgumentError('--xla-settings repeats a setting')
  if args.quick:
    args.repeats, args.warmup = 3, 1
    args.min_calls = min(args.min_calls, 9)
    args.time_budget = min(args.time_budget, 10.0)
  if args.batch_sizes is not None:
    _positive_ints('--batch-sizes', args.batch_sizes)
  if args.plot_batch_sizes is None:
    args.plot_batch_sizes = list(QUICK_PLOT_SIZES if args.quick
                                 else PLOT_SIZES)
  _positive_ints('--plot-batch-sizes', args.plot_batch_sizes)
  for flag, (default, _) in NUMBERS.items():
    value = getattr(args, flag[2:].replace('-', '_'))
    if isinstance(default, int) and value < 1:
      raise ArgumentError(f'{flag} must be at least 1, got {value}')
    if not value > 0:
      raise ArgumentError(f'{flag} must be > 0, got {value}')
  return args


def table_sizes(args, model: str) -> list[int]:
  """The table's batch sizes for ``model``."""
  if args.batch_sizes is not None:
    return list(args.batch_sizes)
  return [64, 256] if args.quick else list(TABLE_SIZES[model])
