"""Two results.json compared field by field (``compare-results A B``).

Converting an experiment to the runner must not move its numbers: run its
quick mode before and after, then

  python -m experiments compare-results BEFORE/NAME AFTER/NAME

walks both files (a results.json or the directory holding it) leaf by leaf
and prints every leaf that differs (floats with their relative difference
and distance in units in the last place), every leaf only in A, and the
fields only in B (what the runner or the conversion added). Keys named in
``--ignore`` (default: timing and versions) are skipped at any depth. The
exit status is 0 when every leaf of A is equal in B, 1 otherwise.

Example:
  >>> rows = diff({'a': [1.0, 2.0], 'wall_seconds': 3},
  ...             {'a': [1.0, 2.0000000000000004], 'seeds': [0]})
  >>> [(r.path, r.kind) for r in rows]
  [('a[1]', 'differs'), ('seeds', 'only in B')]
  >>> rows[0].note
  'relative 2.2e-16, 1 ulp'
"""

import argparse
import json
import math
import os
import sys
from typing import Any, Iterator, NamedTuple

import numpy as np

IGNORED = ('wall_seconds', 'seconds', 'sample_seconds', 'versions')


class Row(NamedTuple):
  path: str
  kind: str  # 'differs', 'only in A', 'only in B'
  a: Any = None
  b: Any = None
  note: str = ''


def _ulps(a: float, b: float) -> int:
  """Distance in representable float64 values between a and b."""
  ia, ib = (int(np.float64(x).view(np.int64)) for x in (a, b))
  ia, ib = (i if i >= 0 else -(i & 0x7FFFFFFFFFFFFFFF) for i in (ia, ib))
  return abs(ia - ib)


def _float_note(a: float, b: float) -> str:
  if not (math.isfinite(a) and math.isfinite(b)):
    return ''
  rel = abs(a - b) / max(abs(a), abs(b))
  return f'relative {rel:.2g}, {_ulps(a, b)} ulp'


def _same(a: Any, b: Any) -> bool:
  if isinstance(a, float) and isinstance(b, float):
    return a == b or (math.isnan(a) and math.isnan(b))
  return type(a) is type(b) and a == b


def _walk(a: Any, b: Any, path: str, ignored) -> Iterator[Row]:
  if isinstance(a, dict) and isinstance(b, dict):
    for k in sorted(set(a) | set(b), key=str):
      if k in ignored:
        continue
      sub = f'{path}.{k}' if path else str(k)
      if k not in b:
        yield Row(sub, 'only in A', a[k])
      elif k not in a:
        yield Row(sub, 'only in B', None, b[k])
      else:
        yield from _walk(a[k], b[k], sub, ignored)
  elif isinstance(a, list) and isinstance(b, list):
    for i in range(max(len(a), len(b))):
      sub = f'{path}[{i}]'
      if i >= len(b):
        yield Row(sub, 'only in A', a[i])
      elif i >= len(a):
        yield Row(sub, 'only in B', None, b[i])
      else:
        yield from _walk(a[i], b[i], sub, ignored)
  elif not _same(a, b):
    floats = isinstance(a, float) and isinstance(b, float)
    yield Row(path, 'differs', a, b, _float_note(a, b) if floats else '')


def diff(a: Any, b: Any, ignored=IGNORED) -> list[Row]:
  """Every leaf where ``b`` is not ``a`` (see the module docstring)."""
  return list(_walk(a, b, '', set(ignored)))


def count_leaves(a: Any, ignored=IGNORED) -> int:
  if isinstance(a, dict):
    return sum(count_leaves(v, ignored) for k, v in a.items()
               if k not in ignored)
  if isinstance(a, list):
    return sum(count_leaves(v, ignored) for v in a)
  return 1


def load(path: str) -> dict[str, Any]:
  if os.path.isdir(path):
    path = os.path.join(path, 'results.json')
  if not os.path.isfile(path):
    raise ValueError(f'no results.json at {path!r}')
  with open(path) as f:
    return json.load(f)


def _short(value: Any, width: int = 60) -> str:
  text = json.dumps(value) if not isinstance(value, float) else repr(value)
  return text if len(text) <= width else text[:width - 3] + '...'


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog='python -m experiments compare-results',
                              description=__doc__.splitlines()[0])
  p.add_argument('a', help='results.json (or its directory) before')
  p.add_argument('b', help='results.json (or its directory) after')
  p.add_argument('--ignore', nargs='*', default=list(IGNORED),
                 help='keys skipped at any depth (default '
                 f"{' '.join(IGNORED)})")
  p.add_argument('--limit', type=int, default=50,
                 help='print at most this many differing leaves')
  args = p.parse_args(argv)
  a, b = load(args.a), load(args.b)
  rows = diff(a, b, args.ignore)
  differs = [r for r in rows if r.kind == 'differs']
  only_a = [r for r in rows if r.kind == 'only in A']
  only_b = [r for r in rows if r.kind == 'only in B']
  total = count_leaves(a, args.ignore)
  missing = sum(count_leaves(r.a, args.ignore) for r in only_a)
  for r in (differs + only_a)[:args.limit]:
    change = _short(r.a) + (f' -> {_short(r.b)}' if r.kind == 'differs'
                            else '')
    print(f'{r.kind:9s} {r.path}: {change}' +
          (f' ({r.note})' if r.note else ''))
  if only_b:
    print('only in B: ' + ', '.join(r.path for r in only_b))
  print(f'{total} leaves of A (ignoring {", ".join(args.ignore) or "none"}):'
        f' {total - len(differs) - missing} equal, {len(differs)} differ, '
        f'{missing} missing in B; {len(only_b)} fields only in B')
  return 0 if not differs and not only_a else 1


if __name__ == '__main__':
  sys.exit(main())
