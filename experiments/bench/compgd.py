"""DP-CompGD vs projected DP-GD benchmark (not a test): step time and memory.

One step of ``dpjax.transforms.dp_compgd`` (m = d / 10) and of
``dpjax.transforms.dp_projected_gd`` on a batch of ``--batch`` per-example
gradients, both over the l1 ball, at each d of ``--dims``, all measured in
one run. DP-CompGD runs twice: with the dense Phi (one m x d draw per step)
and with the blocked Phi (``--block-size`` columns per block, regenerated
from the key at every product). Reported per row: the compiled program's
peak memory from XLA's memory analysis (arguments + outputs + temporaries,
known without running it), and the median step time over ``--repeats``
calls after a warmup (compilation excluded), with the ratio to DP-GD of the
same d. A row is compiled but not run when its estimated work exceeds
``--max-entries`` generated or multiplied matrix entries per step (the
blocked Phi at d = 10^6, m = 10^5 is 10^11 entries per product and about
2 (solver_iterations + 25) products per step); a dense Phi above
``--max-dense-gb`` is not even compiled (its size is printed).

Run: ``python -m experiments bench compgd [--dims 100 10000 1000000]
[--batch 32] [--block-size 4096] [--solver-iterations 50] [--repeats 3]``.
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

import dpjax


def _memory(compiled) -> int | None:
  stats = compiled.memory_analysis()
  if stats is None:
    return None
  return int(stats.argument_size_in_bytes + stats.output_size_in_bytes +
             stats.temp_size_in_bytes)


def _step(kind: str, d: int, batch: int, block: int, iterations: int):
  m = max(1, d // 10)
  key = jax.random.key(0)
  if kind == 'dp_gd':
    tx = dpjax.transforms.dp_projected_gd(0.1, 10.0, 1.0, 1.0, batch, key=key)
  else:
    tx = dpjax.transforms.dp_compgd(
        0.1, m, 10.0, 1.0, 1.0, batch, key=key,
        block_size=None if kind == 'dense' else min(block, d),
        solver_iterations=iterations)

  def step(grads, w, state):
    u, state = tx.update(grads, state, w)
    return w + u, state

  grads = jax.ShapeDtypeStruct((batch, d), jnp.float32)
  w = jax.ShapeDtypeStruct((d,), jnp.float32)
  state = jax.eval_shape(tx.init, w)
  start = time.perf_counter()
  compiled = jax.jit(step).lower(grads, w, state).compile()
  return compiled, tx, time.perf_counter() - start, m


def _fmt_bytes(b):
  return '-' if b is None else f'{b / 2**20:.1f} MiB'


def main(argv=None) -> None:
  p = argparse.ArgumentParser(prog='python -m experiments bench compgd')
  p.add_argument('--dims', type=int, nargs='+', default=[100, 10_000,
                                                         1_000_000])
  p.add_argument('--batch', type=int, default=32)
  p.add_argument('--block-size', type=int, default=4096)
  p.add_argument('--solver-iterations', type=int, default=50)
  p.add_argument('--repeats', type=int, default=3)
  p.add_argument('--max-entries', type=float, default=2e10)
  p.add_argument('--max-dense-gb', type=float, default=4.0)
  args = p.parse_args(argv)
  print('| d | m | method | peak compiled memory | compile s | step s | '
        'step / DP-GD | memory / DP-GD |')
  print('|---|---|---|---|---|---|---|---|')
  for d in args.dims:
    base_time = base_mem = None
    for kind in ('dp_gd', 'dense', 'blocked'):
      m = max(1, d // 10)
      if kind == 'dense' and m * d * 4 / 2**30 > args.max_dense_gb:
        print(f'| {d} | {m} | DP-CompGD dense | {m * d * 4 / 2**30:.0f} GiB '
              'for Phi alone: not compiled | - | - | - | - |')
        continue
      compiled, tx, compile_s, m = _step(kind, d, args.batch,
                                         args.block_size,
                                         args.solver_iterations)
      mem = _memory(compiled)
      work = (0 if kind == 'dp_gd' else
              m * d * (2 * args.solver_iterations + 25 + args.batch / m))
      step_s = None
      if work <= args.max_entries:
        key = jax.random.key(1)
        grads = jax.random.normal(key, (args.batch, d)) / jnp.sqrt(d)
        w = jnp.zeros(d)
        state = tx.init(w)
        jax.block_until_ready(compiled(grads, w, state))
        times = []
        for _ in range(args.repeats):
          t = time.perf_counter()
          jax.block_until_ready(compiled(grads, w, state))
          times.append(time.perf_counter() - t)
        step_s = statistics.median(times)
      if kind == 'dp_gd':
        base_time, base_mem = step_s, mem
      label = {'dp_gd': 'DP-GD', 'dense': 'DP-CompGD dense',
               'blocked': f'DP-CompGD blocked ({min(args.block_size, d)})'
               }[kind]
      ratio = (f'{step_s / base_time:.1f}x' if step_s and base_time else
               f'not run (~{work:.1e} entries/step)' if step_s is None
               else '-')
      mratio = (f'{mem / base_mem:.1f}x' if mem and base_mem else '-')
      print(f'| {d} | {m if kind != "dp_gd" else "-"} | {label} | '
            f'{_fmt_bytes(mem)} | {compile_s:.1f} | '
            f'{"-" if step_s is None else f"{step_s:.4g}"} | {ratio} | '
            f'{mratio} |', flush=True)


if __name__ == '__main__':
  main()
