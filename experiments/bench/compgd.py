"""DP-CompGD vs projected DP-GD benchmark (not a test): step time and memory.

One step of ``dpjax.transforms.dp_compgd`` (m = d / 10) and of
``dpjax.transforms.dp_projected_gd`` on the per-example gradients of
``--num-examples`` examples (full batch: the optimizers' ``num_examples``),
both over the l1 ball, at each d of ``--dimensions``, all measured in one
run. DP-CompGD runs twice: with the dense Phi (one m x d draw per step) and
with the blocked Phi (``--block-size`` columns per block, regenerated from
the key at every product). Reported per row: the compiled program's peak
memory from XLA's memory analysis (arguments + outputs + temporaries, known
without running it, ``timing.memory_bytes``), and the step time, a median
over calls interleaved across the three methods in two passes with the range
of the pass medians (``timing.time_medians``, compilation excluded), with
the ratio to DP-GD of the same d. A row is compiled but not run when its
estimated work exceeds ``--max-entries`` generated or multiplied matrix
entries per step (the blocked Phi at d = 10^6, m = 10^5 is 10^11 entries per
product and about 2 (solver_iterations + 25) products per step); a dense Phi
above ``--max-dense-gb`` is not even compiled (its size is printed).

Run: ``python -m experiments bench compgd [--dimensions 100 10000 1000000]
[--num-examples 32] [--block-size 4096] [--solver-iterations 50]
[--repeats 3]``.
"""

import argparse

import jax
import jax.numpy as jnp

import dpjax
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--dimensions 100 --repeats 1 --solver-iterations 5'


def _step(kind: str, d: int, num_examples: int, block: int,
          iterations: int):
  m = max(1, d // 10)
  key = jax.random.key(0)
  if kind == 'dp_gd':
    tx = dpjax.transforms.dp_projected_gd(0.1, 10.0, 1.0, 1.0, num_examples,
                                          key=key)
  else:
    tx = dpjax.transforms.dp_compgd(
        0.1, m, 10.0, 1.0, 1.0, num_examples, key=key,
        block_size=None if kind == 'dense' else min(block, d),
        solver_iterations=iterations)

  def step(grads, w, state):
    u, state = tx.update(grads, state, w)
    return w + u, state

  grads = jax.ShapeDtypeStruct((num_examples, d), jnp.float32)
  w = jax.ShapeDtypeStruct((d,), jnp.float32)
  state = jax.eval_shape(tx.init, w)
  compile_s, compiled = timing.timed_call(
      lambda: jax.jit(step).lower(grads, w, state).compile())
  return compiled, tx, compile_s, m


def _fmt_bytes(b):
  return '-' if b is None else f'{b / 2**20:.1f} MiB'


def main(argv=None) -> None:
  p = argparse.ArgumentParser(prog='python -m experiments bench compgd',
                              allow_abbrev=False)
  p.add_argument('--dimensions', type=int, nargs='+',
                 default=[100, 10_000, 1_000_000])
  p.add_argument('--num-examples', type=int, default=32,
                 help='examples, all in every step (full batch)')
  p.add_argument('--block-size', type=int, default=4096)
  p.add_argument('--solver-iterations', type=int, default=50)
  p.add_argument('--repeats', type=int, default=3)
  p.add_argument('--max-entries', type=float, default=2e10)
  p.add_argument('--max-dense-gb', type=float, default=4.0)
  args = p.parse_args(argv)
  print(f'step s: {timing.legend()}, {args.repeats} calls per pass')
  print('| d | m | method | peak compiled memory | compile s | step s | '
        'step / DP-GD | memory / DP-GD |')
  print('|---|---|---|---|---|---|---|---|')
  for d in args.dimensions:
    rows, runners = [], {}
    for kind in ('dp_gd', 'dense', 'blocked'):
      m = max(1, d // 10)
      if kind == 'dense' and m * d * 4 / 2**30 > args.max_dense_gb:
        rows.append(f'| {d} | {m} | DP-CompGD dense | {m * d * 4 / 2**30:.0f} '
                    'GiB for Phi alone: not compiled | - | - | - | - |')
        continue
      compiled, tx, compile_s, m = _step(kind, d, args.num_examples,
                                         args.block_size,
                                         args.solver_iterations)
      work = (0 if kind == 'dp_gd' else
              m * d * (2 * args.solver_iterations + 25
                       + args.num_examples / m))
      if work <= args.max_entries:
        grads = jax.random.normal(jax.random.key(1),
                                  (args.num_examples, d)) / jnp.sqrt(d)
        w = jnp.zeros(d)
        runners[kind] = (lambda c=compiled, g=grads, w=w, st=tx.init(w):
                         c(g, w, st))
      rows.append((kind, m, timing.memory_bytes(compiled)['peak'], compile_s,
                   work))
    stats = timing.time_medians(runners, args.repeats,
                                block=jax.block_until_ready, scale=1.0)
    base = stats.get('dp_gd')
    base_mem = next((r[2] for r in rows if r[0] == 'dp_gd'), None)
    for row in rows:
      if isinstance(row, str):
        print(row)
        continue
      kind, m, mem, compile_s, work = row
      step = stats.get(kind)
      label = {'dp_gd': 'DP-GD', 'dense': 'DP-CompGD dense',
               'blocked': f'DP-CompGD blocked ({min(args.block_size, d)})'
               }[kind]
      ratio = (f"{step['median'] / base['median']:.1f}x" if step and base
               else f'not run (~{work:.1e} entries/step)' if step is None
               else '-')
      mratio = (f'{mem / base_mem:.1f}x' if mem and base_mem else '-')
      print(f'| {d} | {m if kind != "dp_gd" else "-"} | {label} | '
            f'{_fmt_bytes(mem)} | {compile_s:.1f} | '
            f'{"-" if step is None else timing.cell(step, 4)} | {ratio} | '
            f'{mratio} |', flush=True)


if __name__ == '__main__':
  main()
