"""DP-SGD step benchmark: DP steps of every framework against non-private.

The steps are those of ``experiments.bench.dpsgd_steps`` (JAX: non-private,
noise only, dpjax ghost and vmap, optax DP, jax_privacy) and
``experiments.bench.dpsgd_torch`` (plain PyTorch, Opacus hooks and ghost) on
the models of ``experiments.bench.models``. Per row, before any timing,
every framework's sum of clipped per-example gradients is checked against
dpjax's vmap sum (``dpsgd_cli.tolerance``); a column that disagrees is not
timed.

On a GPU (JAX's default backend) every framework runs there: PyTorch and
Opacus on CUDA, each timed call synchronized, and float32 matmuls and
convolutions in full float32 in both (JAX ``jax_default_matmul_precision=
'highest'``, PyTorch's TF32 off), so the clipped sums can be compared and no
column gains from TF32.

Timing (``timing.interleaved``): warmup calls, then ``--passes`` passes of
rounds that cycle through the methods, each method making ``--burst`` timed
calls per round after one untimed call; a cell is the median over all timed
calls with the range of the pass medians, flagged when they disagree by more
than 25%. PyTorch runs with JAX's compute threads and is timed after the JAX
methods, not interleaved (its OpenMP threads keep spinning after a call and
would slow the next JAX call).

Compiler settings (``--xla-settings``, default both): ``default`` and
``no-ynn-reduce`` (``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-reduce``:
jaxlib 0.10's CPU backend hands reductions such as ``sum(axis=0)`` to YNNPACK,
which can be 25-40x slower than XLA's own code; see
``experiments.bench.ynnpack_reduce``). XLA reads its flags once, when JAX
first initializes its backend, so each setting whose flags differ from this
process's runs in a child process (``python -m experiments.bench.dpsgd
--child-json PATH``) and the parent merges the rows; every JAX column of a
row ran under that row's setting. PyTorch columns and the plot run in the
first setting only.

Run: ``python -m experiments bench dpsgd [--quick] [--out DIR]``.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from experiments.bench import dpsgd_cli
from experiments.bench import dpsgd_table
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = ('--quick --no-plot --models mlp-784-512-512-10 --batch-sizes 64 '
         '--out results/bench-quick')

DP_JAX, TORCH_METHODS = dpsgd_table.DP_JAX, dpsgd_table.TORCH_METHODS
REFERENCE = 'vmap'  # exact per-example norms (dpsgd_cli.TOL)


def _check_clipped_sums(compiled, optional, methods):
  """column -> relative error of its clipped sum against dpjax vmap's."""
  from experiments.bench import dpsgd_steps  # pylint: disable=g-import-not-at-top
  sums = dpsgd_steps.clipped_sums(compiled['model'], compiled['params'],
                                  compiled['batch'], optional,
                                  set(methods) | {REFERENCE})
  ref = sums.pop(REFERENCE)
  errors = {REFERENCE: 0.0} if REFERENCE in methods else {}
  for method, value in sums.items():
    errors[method] = dpsgd_steps.agreement(dpsgd_steps.flat(ref),
                                           dpsgd_steps.flat(value))
  return errors, ref


def torch_device() -> str:
  """'cuda' when JAX runs on a GPU (PyTorch follows it there), else 'cpu'."""
  import jax  # pylint: disable=g-import-not-at-top
  return 'cuda' if jax.default_backend() == 'gpu' else 'cpu'


def _not_compiled(runners: dict, optional: dict) -> dict[str, str]:
  """Why each JAX DP column without a compiled step is not timed."""
  skipped = {}
  for method in set(DP_JAX) - set(runners):
    skipped[method] = (optional['jax_privacy']
                       if method == 'jax_privacy'
                       and isinstance(optional['jax_privacy'], str)
                       else 'not requested (--methods)')
  return skipped


def _torch_steps(name: str, batch_size: int, optional: dict, compiled: dict,
                 ref, errors: dict, skipped: dict, with_torch: bool):
  """The PyTorch columns' checked steps (None when they do not run) and
  torch's threads; adds their clipped-sum errors to ``errors`` and why a
  column is not timed to ``skipped``."""
  if not with_torch or isinstance(optional['torch'], str):
    reason = (optional['torch'] if with_torch
              else 'run in the first XLA setting only')
    for column in TORCH_METHODS:
      skipped[column] = reason
    return None, {}
  from experiments.bench import dpsgd_steps  # pylint: disable=g-import-not-at-top
  from experiments.bench import dpsgd_torch  # pylint: disable=g-import-not-at-top
  x, y = compiled['batch']
  ref_t = dpsgd_torch.torch_layout(name, ref)
  made = dpsgd_torch.make_steps(
      name, batch_size, optional['torch'], np.asarray(x), np.asarray(y),
      dpsgd_torch.torch_layout(name, compiled['params']),
      timing.jax_compute_threads(), torch_device())
  skipped.update(made['skipped'])
  steps = made['steps']
  for column, value in made['clipped'].items():
    errors[column] = dpsgd_steps.agreement(ref_t, value)
    if errors[column] > dpsgd_cli.TOL and column in steps:
      del steps[column]
      skipped[column] = (f'clipped sum differs from dpjax vmap by '
                         f'{errors[column]:.1e} > {dpsgd_cli.TOL:g}: '
                         'not timed')
  return steps, made['threads']


def _time_groups(groups: list[dict], args) -> tuple[dict, int]:
  """Each group's methods interleaved (``timing.interleaved``), the groups
  one after the other: method -> times, and the timed calls per method."""
  times, calls = {}, None
  for group in groups:
    group_times, rounds = timing.interleaved(
        group, passes=args.passes, repeats=args.repeats, warmup=args.warmup,
        burst=args.burst, budget=args.time_budget, slow=args.slow,
        min_calls=args.min_calls)
    times.update(group_times)
    calls = args.passes * rounds * args.burst if calls is None else calls
  return times, calls


def _rates(ms: dict, compiled: dict) -> dict[str, Any]:
  """Time ratios, extra temp memory per parameter byte and FLOP rates."""
  memory, n_params = compiled['memory'], compiled['n_params']
  ratio = {m: ms[m] / ms[dpsgd_table.BASE[m]] for m in ms
           if m in dpsgd_table.BASE and dpsgd_table.BASE[m] in ms}
  param_bytes = 4 * n_params  # float32
  np_temp = memory['non-private']['temp']
  extra = {m: (v['temp'] - np_temp) / param_bytes for m, v in memory.items()
           if v['temp'] is not None and np_temp is not None
           and m != 'non-private'}
  np_flops = compiled['flops'].get('non-private')
  gflops = {m: np_flops / ms[m] * 1e-6 for m in ('non-private', 'torch')
            if np_flops and m in ms}
  flag = ('torch' in gflops and gflops['torch']
          < dpsgd_table.FLOP_RATE_FLAG * gflops['non-private'])
  return {'ratio': ratio, 'param_bytes': param_bytes, 'extra': extra,
          'gflops': gflops, 'flag': flag}


def bench_row(name: str, batch_size: int, args, optional: dict,
              compiled: dict, setting: str, with_torch: bool
              ) -> dict[str, Any]:
  """Times, ratios, FLOP rates and compiled memory of every method."""
  runners = dict(compiled['runners'])
  skipped = _not_compiled(runners, optional)
  errors, ref = _check_clipped_sums(compiled, optional, runners)
  for method, err in errors.items():
    if err > dpsgd_cli.tolerance(method):
      runners.pop(method, None)
      skipped[method] = (f'clipped sum differs from dpjax vmap by {err:.1e} '
                         f'> {dpsgd_cli.tolerance(method):g}: not timed')
  torch_steps, threads = _torch_steps(name, batch_size, optional, compiled,
                                      ref, errors, skipped, with_torch)
  groups = [runners] + ([] if torch_steps is None else [torch_steps])
  times, calls = _time_groups(groups, args)
  stats = {m: timing.summarize(t) for m, t in times.items()}
  ms = {m: s['median'] for m, s in stats.items()}
  rates = _rates(ms, compiled)
  return {'model': name, 'batch_size': batch_size, 'setting': setting,
          'params': compiled['n_params'], 'param_bytes': rates['param_bytes'],
          'calls': calls, 'counts': {m: s['calls'] for m, s in stats.items()},
          'ms': ms, 'time': stats, 'ratio': rates['ratio'],
          'memory': compiled['memory'], 'flops': compiled['flops'],
          'gflops': rates['gflops'], 'torch_flop_flag': rates['flag'],
          'clip_error': errors, 'extra_temp_param_units': rates['extra'],
          'skipped': skipped, 'threads': threads}


def sweep(name: str, args, optional: dict, methods, cache: dict
          ) -> list[dict[str, Any]]:
  """Time and compiled memory of ``methods`` at each plot batch size.

  ``cache`` maps (model, B) to steps the table already compiled.
  """
  from experiments.bench import dpsgd_steps  # pylint: disable=g-import-not-at-top
  points = []
  limit = args.max_run_gib * 2**30
  for b in args.plot_batch_sizes:
    compiled = cache.get((name, b)) or dpsgd_steps.compile_steps(
        name, b, optional, methods)
    memory = compiled['memory']
    runners = {m: r for m, r in compiled['runners'].items() if m in methods}
    too_big = {m for m in runners if (memory[m]['peak'] or 0) > limit}
    times, _ = timing.interleaved(
        {m: r for m, r in runners.items() if m not in too_big},
        passes=1, repeats=args.plot_calls, budget=args.time_budget,
        slow=args.slow, min_calls=args.plot_calls)
    for m in methods:
      calls = [t for p in times.get(m, ()) for t in p]
      point = {'model': name, 'batch_size': b, 'method': m,
               'temp_bytes': memory[m]['temp'], 'peak_bytes': memory[m]['peak'],
               'ms': timing.summarize(times[m])['median'] if calls else None,
               'calls': len(calls)}
      if m in too_big:
        point['not_run'] = (f'compiled peak {memory[m]["peak"] / 2**30:.1f} '
                            f'GiB > --max-run-gib {args.max_run_gib:g}')
      points.append(point)
    print(f'  plot {name} B={b}: ' + ', '.join(
        f"{p['method']} {p['ms']:.1f} ms" if p['ms'] is not None
        else f"{p['method']} not run" for p in points[-len(methods):]),
          file=sys.stderr, flush=True)
  return points


def run_setting(args, setting: str, first: bool) -> dict[str, Any]:
  """The rows (and, when ``first``, the plot) under this process's flags."""
  import jax  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  from experiments.bench import dpsgd_steps  # pylint: disable=g-import-not-at-top
  if args.baselines:
    optional = dpsgd_steps.optional_imports()
  else:  # not even imported
    optional = dict.fromkeys(('jax_privacy', 'torch'),
                             'not requested (--no-baselines)')
  device = jax.devices()[0]
  if device.platform == 'gpu':  # full float32, as PyTorch's with TF32 off
    jax.config.update('jax_default_matmul_precision', 'highest')
  versions = {'jax': jax.__version__, 'jaxlib': jax.lib.__version__
              if hasattr(jax.lib, '__version__') else '?',
              'optax': optax.__version__, 'device': device.device_kind}
  if device.platform == 'gpu':
    versions['jax_matmul_precision'] = 'highest'
  if not isinstance(optional['jax_privacy'], str):
    import jax_privacy  # pylint: disable=g-import-not-at-top
    versions['jax_privacy'] = jax_privacy.__version__
  torch_threads = None
  if first and not isinstance(optional['torch'], str):
    from experiments.bench import dpsgd_torch  # pylint: disable=g-import-not-at-top
    versions.update(dpsgd_torch.version_info(optional['torch'],
                                             torch_device()))
    torch_threads = timing.set_torch_threads(optional['torch'][0],
                                             timing.jax_compute_threads())
  head = timing.header(versions, torch_threads)
  print(f'[{setting}] ' + timing.header_line(head), file=sys.stderr)
  rows, cache = [], {}
  methods = ('non-private',) + tuple(args.methods)
  for name in args.models:
    for b in dpsgd_cli.table_sizes(args, name):
      compiled = dpsgd_steps.compile_steps(name, b, optional, methods)
      if first and args.plot and b in args.plot_batch_sizes:
        cache[name, b] = compiled  # the plot times these steps again
      rows.append(bench_row(name, b, args, optional, compiled, setting,
                            with_torch=first))
      print(dpsgd_table.format_row(rows[-1]), file=sys.stderr, flush=True)
  points = []
  if first and args.plot:
    plot_methods = [m for m in dpsgd_table.PLOT_METHODS if m in methods]
    for name in args.models:
      points += sweep(name, args, optional, plot_methods, cache)
  skipped = sorted({v for v in optional.values() if isinstance(v, str)})
  return {'setting': setting, 'header': head, 'rows': rows,
          'plot_points': points, 'skipped_baselines': skipped}


def _in_process(setting: str) -> bool:
  """Whether this process's XLA_FLAGS are exactly ``setting``'s."""
  env = os.environ.get('XLA_FLAGS', '')
  return env == dpsgd_cli.xla_flags(setting, env)


def _child(argv: list[str], setting: str, first: bool, tmp: str
           ) -> dict[str, Any]:
  """``run_setting`` in a subprocess whose XLA_FLAGS are ``setting``'s."""
  path = os.path.join(tmp, f'{setting}.json')
  env = dict(os.environ,
             XLA_FLAGS=dpsgd_cli.xla_flags(setting,
                                           os.environ.get('XLA_FLAGS', '')))
  cmd = [sys.executable, '-m', 'experiments.bench.dpsgd', *argv,
         '--xla-settings', setting, '--child-json', path]
  if not first:
    cmd.append('--not-first')
  root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  env['PYTHONPATH'] = os.pathsep.join(
      [root] + [p for p in [os.environ.get('PYTHONPATH')] if p])
  subprocess.run(cmd, env=env, check=True)
  with open(path) as f:
    return json.load(f)


def _run_settings(args, argv: list[str]) -> list[dict[str, Any]]:
  """``run_setting`` of each XLA setting, in this process when its flags are
  this process's, else in a child process."""
  child_argv = dpsgd_cli.strip_settings(argv)
  results = []
  with tempfile.TemporaryDirectory() as tmp:
    for i, setting in enumerate(args.xla_settings):
      if _in_process(setting):
        results.append(run_setting(args, setting, i == 0))
      else:
        results.append(_child(child_argv, setting, i == 0, tmp))
  return results


def _sorted_rows(results: list[dict], args) -> list[dict[str, Any]]:
  """Every setting's rows, by model, batch size, then setting."""
  rows = [r for res in results for r in res['rows']]
  order = {s: i for i, s in enumerate(args.xla_settings)}
  rows.sort(key=lambda r: (args.models.index(r['model']), r['batch_size'],
                           order[r['setting']]))
  return rows


def _settings_text(args) -> str:
  """The run's settings and the table's columns, in words."""
  return (f'clip {dpsgd_cli.CLIP}, noise multiplier {dpsgd_cli.SIGMA}, '
          f'float32, random data; {args.passes} passes x rounds of '
          f'{args.burst} consecutive timed calls per method after one '
          f'untimed call (at least {args.min_calls} calls per pass), '
          f'methods interleaved, after {args.warmup} warmup call(s); '
          'temp MiB = compiled XLA memory_analysis temp bytes '
          '(deterministic on CPU); extra temp / param bytes = (temp - '
          'non-private temp) / (4 x params). ' + dpsgd_table.NOTES)


def _check_lines(rows: list[dict]) -> list[str]:
  """The columns a failed check or run left out, and each column's largest
  clipped-sum error."""
  lines = []
  for row in rows:
    for column, reason in sorted(row['skipped'].items()):
      if 'differs' in reason or 'failed' in reason:
        lines.append(f"{row['model']} B={row['batch_size']} "
                     f"[{row['setting']}]: {column} skipped: {reason}")
  worst = {}
  for row in rows:
    for column, err in row['clip_error'].items():
      worst[column] = max(worst.get(column, 0.0), err)
  if worst:
    lines.append('clipped sums checked before timing, largest relative error '
                 'against dpjax vmap (exact norms) over the rows: ' + ', '.join(
                     f'{c} {e:.1e}' for c, e in sorted(worst.items()))
                 + f' (tolerance {dpsgd_cli.TOL:g}; dpjax ghost, whose '
                 'certified norms carry a float32 rounding margin, '
                 f'{dpsgd_cli.GHOST_TOL:g})')
  return lines


def _markdown(args, results: list[dict], rows: list[dict], headers: dict,
              loads: tuple, settings: str, text: str) -> str:
  """bench.md: headers, skipped baselines, load, settings, table, notes."""
  head_text = '\n'.join(f'- {s} (XLA setting): {timing.header_line(h)}'
                        for s, h in headers.items())
  skipped = sorted({s for res in results for s in res['skipped_baselines']})
  lines = [head_text] + [f'skipped: {s}; install with pip install -e '
                         '".[bench]"' for s in skipped]
  lines += [f'load average (1, 5, 15 min): {loads[0]} at start, '
            f'{loads[1]} at end; {time.strftime("%Y-%m-%d")}.']
  lines += [f'Note: {args.note}'] if args.note else []
  lines += ['', settings, '', text]
  lines += _check_lines(rows)
  lines += _memory_slopes(rows, args)
  return '\n'.join(lines) + '\n'


def _write(args, out: dict[str, Any], markdown: str) -> None:
  """bench.json, bench.md and (with plot points) bench.png in --out."""
  paths = [os.path.join(args.out, f) for f in ('bench.json', 'bench.md')]
  with open(paths[0], 'w') as f:
    json.dump(out, f, indent=1)
  with open(paths[1], 'w') as f:
    f.write(markdown)
  if out['plot_points']:
    paths.append(os.path.join(args.out, 'bench.png'))
    dpsgd_table.plot(out['plot_points'], paths[-1])
  print('wrote ' + ', '.join(paths))


def main(argv=None, prog: str = 'python -m experiments bench dpsgd') -> dict:
  """Runs the benchmark; writes bench.json, bench.md and bench.png in --out."""
  argv = list(sys.argv[1:] if argv is None else argv)
  try:
    args = dpsgd_cli.parse_args(argv, prog)
  except dpsgd_cli.ArgumentError as e:
    sys.stderr.write(f'{prog}: error: {e}\n')
    sys.exit(2)
  if args.child_json:  # one setting, in this process, for a parent
    result = run_setting(args, args.xla_settings[0], not args.not_first)
    with open(args.child_json, 'w') as f:
      json.dump(result, f)
    return result
  os.makedirs(args.out, exist_ok=True)
  load_start = timing.load()
  print('load average at start (1, 5, 15 min): '
        + ', '.join(map(str, load_start)))
  results = _run_settings(args, argv)
  load_end = timing.load()
  rows = _sorted_rows(results, args)
  headers = {res['setting']: res['header'] for res in results}
  settings = _settings_text(args)
  text = dpsgd_table.table(rows)
  markdown = _markdown(args, results, rows, headers, (load_start, load_end),
                       settings, text)
  print(markdown)
  points = [p for res in results for p in res['plot_points']]
  out = {'date': time.strftime('%Y-%m-%d %H:%M:%S'), 'headers': headers,
         'load_start': load_start, 'load_end': load_end,
         'settings': settings, 'args': vars(args), 'rows': rows,
         'plot_points': points, 'table': text}
  _write(args, out, markdown)
  return out


def _memory_slopes(rows, args) -> list[str]:
  lines = []
  for name in args.models:
    by_b = {r['batch_size']: r['memory'] for r in rows if r['model'] == name
            and r['setting'] == args.xla_settings[0]}
    sizes = sorted(by_b)
    if len(sizes) > 1:
      lo, hi = by_b[sizes[0]], by_b[sizes[-1]]
      per_example = lambda m: (  # noqa: E731
          (hi[m]['peak'] - lo[m]['peak']) / (sizes[-1] - sizes[0]) / 1024)
      slopes = ', '.join(
          f'{m} {per_example(m):.1f}' for m in ('non-private',) + DP_JAX
          if m in hi and hi[m]['peak'] is not None)
      lines.append(f'{name}: peak-memory growth per example, KiB '
                   f'(B={sizes[0]}..{sizes[-1]}): {slopes}')
  return lines


if __name__ == '__main__':
  main()
