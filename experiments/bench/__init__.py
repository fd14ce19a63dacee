"""The benchmarks (not tests): ``python -m experiments bench NAME|all|list``.

Every benchmark is a module of this package with ``main(argv)`` and a
``QUICK`` string, its smallest setting (``bench all --quick`` and the harness
check run it). Shared timing (interleaved medians over passes, load average,
machine/versions/threads header, compiled memory) is ``timing``. Importing
this package imports neither JAX nor PyTorch.
"""

import ast
import importlib
from importlib import metadata
import os
import sys

# The benchmarks, in the order ``bench all`` runs them.
NAMES = ('dpsgd', 'ynnpack_reduce', 'ghost_memory', 'noise', 'exact_gaussian',
         'audit', 'seeds', 'distributed_dp', 'compgd', 'qdpsgd',
         'nonparametric', 'trees', 'bandmf', 'finetune', 'mixed_precision',
         'patch_conv')


def _describe(name: str) -> tuple[str, str, list[str]]:
  """(module, its docstring's first line, its ``QUICK`` arguments), read
  from the source without importing it (which may import JAX)."""
  with open(os.path.join(os.path.dirname(__file__), f'{name}.py')) as f:
    tree = ast.parse(f.read())
  quick = next(ast.literal_eval(node.value) for node in tree.body
               if isinstance(node, ast.Assign)
               and [getattr(t, 'id', None) for t in node.targets] == ['QUICK'])
  return name, ast.get_docstring(tree).splitlines()[0], quick.split()


# name -> (module, one line, the arguments of its smallest setting)
BENCHMARKS = {name: _describe(name) for name in NAMES}
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
