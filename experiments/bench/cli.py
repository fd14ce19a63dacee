"""The ``bench`` command: ``python -m experiments bench NAME|all|list``.

The benchmarks are those of ``experiments.registry.BENCHMARKS``. Importing
this module imports neither JAX nor PyTorch; running a benchmark does.
"""

from importlib import metadata

from experiments import registry

PROG = 'python -m experiments bench'


def usage() -> str:
  lines = [f'{PROG} NAME [ARGS ...]   one benchmark (NAME --help: its '
           'arguments)', f'{PROG} all [--quick]     every benchmark, '
           '--quick at its smallest setting', f'{PROG} list', '',
           'benchmarks:']
  lines += [f'  {n:16s} {registry.benchmark_info(n).description}'
            for n in registry.BENCHMARKS]
  return '\n'.join(lines)


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
  mod = registry.benchmark(name)
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
    for each in registry.BENCHMARKS:
      print(f'\n=== bench {each}', flush=True)
      run(each, list(registry.benchmark_info(each).quick) if rest else [])
    return 0
  run(name, rest)
  return 0
