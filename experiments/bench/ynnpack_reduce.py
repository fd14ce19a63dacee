"""Minimal reproducer: ``x.sum(0)`` under XLA CPU's YNNPACK reduce fusion.

jaxlib 0.10's CPU backend hands reductions to YNNPACK by default; for a sum
over the leading (batch) axis of a [B, ...] float32 array that can be far
slower than XLA's own loop.
``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-reduce`` turns the
reduce fusion off (the workaround of jax-ml/jax#37465). XLA reads its flags
once per process, so each setting runs in a child process; the
settings alternate over ``--passes`` (A B A B ...) so that load drift hits
them alike, and the children's results are checked to agree. A cell is the
median over all calls with the range of the per-process medians, flagged
when they differ by more than 25% (``timing.summarize``).

The ops (``--ops``): ``sum0`` is ``x.sum(0)`` (as jax_privacy sums clipped
per-example gradients); ``masked_weighted_sum0`` is ``jnp.sum(jnp.where(m,
x * w, 0), axis=0)`` (dpjax's ghost sum of a materialized leaf and DP-CompGD's
clipped sum); ``tensordot`` is ``jnp.tensordot(w, x, 1)``, the same weighted
sum as a dot (dpjax's vmap path), for comparison; ``row_sq_norms`` is
``jnp.sum(jnp.square(x), axis=(1, ...))``, the per-example squared norms of
dpjax's vmap path (a reduction over the other axes).

Standalone (needs only JAX): ``python experiments/bench/ynnpack_reduce.py
--shape 64 784 512``, or ``python -m experiments bench ynnpack_reduce``.
"""

import argparse
import json
import os
import platform
import subprocess
import sys

try:
  from experiments.bench import timing
except ImportError:  # run as a script: this folder is on sys.path
  import timing  # pylint: disable=g-import-not-at-top

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--shape 64 784 512 --repeats 3'

FLAG = '--xla_cpu_experimental_ynn_fusion_type=-reduce'
SETTINGS = {'default': '', 'no-ynn-reduce': FLAG}
OPS = ('sum0', 'masked_weighted_sum0', 'tensordot', 'row_sq_norms')


def child(shape, ops, repeats, warmup) -> dict:
  """Times the ops in this process (its XLA_FLAGS as set by the parent)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  x = jax.random.normal(jax.random.key(0), shape, jnp.float32)
  w = jax.random.uniform(jax.random.key(1), shape[:1], jnp.float32)
  m = jnp.arange(shape[0]) % 7 != 3
  lead = (slice(None),) + (None,) * (len(shape) - 1)
  fns = {'sum0': lambda x, w, m: x.sum(0),
         'masked_weighted_sum0': lambda x, w, m: jnp.sum(
             jnp.where(m[lead], x * w[lead], 0), axis=0),
         'tensordot': lambda x, w, m: jnp.tensordot(jnp.where(m, w, 0), x, 1),
         'row_sq_norms': lambda x, w, m: jnp.sum(
             jnp.square(x), axis=tuple(range(1, x.ndim)))}
  out = {'jax': jax.__version__, 'xla_flags': os.environ.get('XLA_FLAGS', ''),
         'device': jax.devices()[0].device_kind, 'ms': {}, 'checksum': {}}
  runners = {}
  for op in ops:
    f = jax.jit(fns[op]).lower(x, w, m).compile()
    y = f(x, w, m)
    out['checksum'][op] = np.asarray(y, np.float64).ravel()[:64].tolist()
    runners[op] = lambda f=f: jax.block_until_ready(f(x, w, m))
  # the ops take turns (one untimed call before each op's timed calls)
  times, _ = timing.interleaved(runners, passes=1, repeats=repeats,
                                warmup=warmup)
  out['ms'] = {op: [1e3 * t for t in times[op][0]] for op in ops}
  return out


def run(shape, ops, repeats, warmup, passes) -> dict:
  """Both settings, alternating over passes, each in its own process."""
  per = {s: [] for s in SETTINGS}
  base = [f for f in os.environ.get('XLA_FLAGS', '').split()
          if not f.startswith(FLAG.split('=', maxsplit=1)[0])]
  for _ in range(passes):
    for setting, flag in SETTINGS.items():
      env = dict(os.environ, XLA_FLAGS=' '.join(base + ([flag] if flag
                                                         else [])))
      proc = subprocess.run(
          [sys.executable, os.path.abspath(__file__), '--child', '--shape',
           *map(str, shape), '--ops', *ops, '--repeats', str(repeats),
           '--warmup', str(warmup)], env=env, capture_output=True, text=True,
          check=True)
      per[setting].append(json.loads(proc.stdout.strip().splitlines()[-1]))
  rows = {}
  for op in ops:
    ref = per['default'][0]['checksum'][op]
    agree = max(abs(a - b) for res in per.values() for r in res
                for a, b in zip(r['checksum'][op], ref))
    rows[op] = {'max_abs_diff': agree}
    for setting, res in per.items():  # already in ms
      rows[op][setting] = timing.summarize([r['ms'][op] for r in res], 1.0)
    rows[op]['speedup'] = (rows[op]['default']['median']
                           / rows[op]['no-ynn-reduce']['median'])
  return {'shape': list(shape), 'passes': passes, 'repeats': repeats,
          'jax': per['default'][0]['jax'],
          'device': per['default'][0]['device'],
          'xla_flags': {s: r[0]['xla_flags'] for s, r in per.items()},
          'rows': rows}


def report(result: dict) -> str:
  """Markdown ready for an upstream report."""
  lines = [f"jax/jaxlib {result['jax']}, {result['device']}, "
           f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
           f"{platform.python_version()}; float32 x of shape "
           f"{tuple(result['shape'])}; median of {result['repeats']} calls x "
           f"{result['passes']} processes per setting [range of the process "
           f"medians; ! when they differ by more than {timing.DISAGREE:.0%}]; "
           f"load average {timing.load()}", '',
           f'| op | default ms | {FLAG} ms | default / flag | max abs diff |',
           '|---|---|---|---|---|']
  for op, r in result['rows'].items():
    cells = [timing.cell(r[s], 3) for s in SETTINGS]
    lines.append(f"| {op} | {cells[0]} | {cells[1]} | {r['speedup']:.1f}x | "
                 f"{r['max_abs_diff']:.1e} |")
  lines += ['', 'Reproduce:', '```python', 'import time, jax, jax.numpy as '
            'jnp', f"x = jnp.ones({tuple(result['shape'])}, jnp.float32)",
            'f = jax.jit(lambda x: x.sum(0)); f(x).block_until_ready()',
            't = time.perf_counter(); f(x).block_until_ready(); '
            'print(time.perf_counter() - t)', '```',
            f'then the same with XLA_FLAGS={FLAG}.']
  return '\n'.join(lines)


def main(argv=None) -> dict | None:
  p = argparse.ArgumentParser(
      prog='python -m experiments bench ynnpack_reduce',
      description=__doc__.splitlines()[0], allow_abbrev=False)
  p.add_argument('--shape', type=int, nargs='+', default=[64, 784, 512])
  p.add_argument('--ops', nargs='+', default=list(OPS), choices=OPS)
  p.add_argument('--repeats', type=int, default=10)
  p.add_argument('--warmup', type=int, default=2)
  p.add_argument('--passes', type=int, default=2)
  p.add_argument('--json', help='also write the result here')
  p.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if min(args.shape) < 1 or min(args.repeats, args.warmup, args.passes) < 1:
    p.error('--shape, --repeats, --warmup and --passes must be positive')
  if args.child:
    print(json.dumps(child(tuple(args.shape), args.ops, args.repeats,
                           args.warmup)))
    return None
  result = run(tuple(args.shape), args.ops, args.repeats, args.warmup,
               args.passes)
  print(report(result))
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(result, f, indent=1)
  return result


if __name__ == '__main__':
  main()
