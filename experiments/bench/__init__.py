"""The benchmarks (not tests): ``python -m experiments bench NAME|all|list``.

Every benchmark is a module of this package with ``main(argv)``; ``QUICK``
holds each one's smallest setting (``bench all --quick`` and the harness
check run it). Shared timing (interleaved medians over passes, load average,
machine/versions/threads header, compiled memory) is ``timing``. Importing
this package imports neither JAX nor PyTorch.
"""

import importlib
from importlib import metadata
import sys

# name -> (module, one line, the arguments of its smallest setting)
BENCHMARKS = {
    'dpsgd': (
        'dpsgd', 'DP-SGD step of dpjax, optax, jax_privacy and Opacus against '
        'the non-private step, default and no-YNNPACK-reduce XLA settings; '
        'time, memory, plot',
        ['--quick', '--no-plot', '--models', 'mlp-784-512-512-10',
         '--batch-sizes', '64', '--out', 'results/bench-quick']),
    'ynnpack_reduce': (
        'ynnpack_reduce', 'minimal reproducer: sum(axis=0) under the default '
        'XLA CPU flags vs YNNPACK reduce fusion off',
        ['--shape', '64', '784', '512', '--repeats', '3']),
    'ghost_memory': (
        'ghost_memory', 'compiled temp memory of ghost clipping vs '
        'non-private on the benchmark models',
        ['--batch-sizes', '8', '--models', 'mlp']),
    'noise': (
        'noise', 'exact discrete Gaussian, FWHT and binomial noise samplers',
        ['--draws', '10000', '--oracle-draws', '1000', '--repeats', '2',
         '--warmup', '1', '--fwht-batch', '8']),
    'exact_gaussian': (
        'exact_gaussian', 'exact vs float Gaussian path of DP-SGD',
        ['--dims', '1000', '--repeats', '2', '--warmup', '1', '--steps',
         '10']),
    'audit': (
        'audit', 'audit throughput and trials',
        ['--max-trials', '10000', '--keys', '1', '--epsilons', '1.0']),
    'seeds': (
        'seeds', 'S seeds of a training run at once vs one by one',
        ['--model', 'mlp', '--seeds', '2', '--steps', '10', '--repeats',
         '1']),
    'distributed_dp': (
        'distributed_dp', 'distributed DP mechanisms, clients x dimension',
        ['--num-clients', '100', '--dimension', '64', '--repeats', '2']),
    'compgd': (
        'compgd', 'DP-CompGD step vs DP-GD',
        ['--dims', '100', '--repeats', '1', '--solver-iterations', '5']),
    'qdpsgd': (
        'qdpsgd', 'one jitted QDP-SGD round vs a Python loop',
        ['--agents', '10', '--repeats', '1', '--loop-max', '10']),
    'nonparametric': (
        'nonparametric', 'DP non-parametric classifiers vs sklearn',
        ['--n', '5000', '--n-test', '1000']),
    'trees': (
        'trees', 'DP random trees vs sklearn',
        ['--n', '2000', '--trees', '5', '--depth', '4', '--n-test', '500']),
    'bandmf': (
        'bandmf', 'BandMF step time and memory vs DP-SGD (ghost, sharded)',
        ['--batch', '8', '--bands', '1', '4', '--repeats', '1']),
}
PROG = 'python -m experiments bench'


def usage() -> str:
  lines = [f'{PROG} NAME [ARGS ...]   one benchmark (NAME --help: its '
           'arguments)', f'{PROG} all [--quick]     every benchmark, '
           '--quick at its smallest setting', f'{PROG} list', '',
           'benchmarks:']
  lines += [f'  {n:16s} {d}' for n, (_, d, _) in BENCHMARKS.items()]
  return '\n'.join(lines)


def module(name: str):
  """The benchmark's module (imported now: may import JAX)."""
  return importlib.import_module(f'experiments.bench.{BENCHMARKS[name][0]}')


def _versions() -> dict[str, str]:
  out = {}
  for package in ('jax', 'jaxlib', 'numpy'):
    try:
      out[package] = metadata.version(package)
    except metadata.PackageNotFoundError:
      out[package] = 'not installed'
  return out


def run(name: str, argv: list[str]):
  """Runs benchmark ``name`` with ``argv``, between header and load lines.

  The DP-SGD benchmark writes its own header (one per XLA setting).
  """
  mod = module(name)
  if name == 'dpsgd':
    return mod.main(argv, prog=f'{PROG} dpsgd')
  if '-h' in argv or '--help' in argv:
    return mod.main(argv)
  from experiments.bench import timing  # pylint: disable=g-import-not-at-top
  print(timing.header_line(timing.header(_versions())))
  print(f'load average at start (1, 5, 15 min): {timing.load()}', flush=True)
  out = mod.main(argv)
  print(f'load average at end (1, 5, 15 min): {timing.load()}')
  return out


def main(argv: list[str]) -> int:
  """``bench NAME|all|list``; ``bench --OPTION ...`` is ``bench dpsgd``."""
  if not argv or argv[0] in ('list', '-h', '--help'):
    print(usage())
    return 0
  if argv[0].startswith('-'):  # the DP-SGD benchmark's options, as before
    argv = ['dpsgd'] + argv
  name, rest = argv[0], argv[1:]
  if name == 'all':
    if rest not in ([], ['--quick']):
      raise ValueError(f'bench all takes only --quick, got {" ".join(rest)}')
    for each, (_, _, quick) in BENCHMARKS.items():
      print(f'\n=== bench {each}', flush=True)
      run(each, list(quick) if rest else [])
    return 0
  if name not in BENCHMARKS:
    raise ValueError(f'unknown benchmark {name!r}; known: '
                     f'{", ".join(BENCHMARKS)}, all, list')
  run(name, rest)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
