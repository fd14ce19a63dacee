"""Step-time benchmark (not a test): non-private SGD vs optax DP vs dpjax DP-SGD.

Each column is one full jitted training step on random data: gradients (per
example where DP needs them) + optimizer update + ``optax.apply_updates``.

* non-private: ``jax.grad`` of the mean loss + ``optax.sgd``.
* optax-DP: ``jax.vmap(jax.grad)`` + ``optax.contrib.differentially_private_aggregate``
  chained with ``optax.sgd``.
* dpjax: ``dpjax.per_example_grads`` + ``dpjax.dpsgd`` (mask all True).

Models: MLP 64-64-10 and MLP 784-512-512-10 (tanh, softmax cross-entropy).
Times are medians over timed repeats (after warmup calls), each call followed by
``jax.block_until_ready``; the three methods are timed round-robin so drift in
machine load hits them alike. Repeats are lowered automatically when a row would
exceed ``--time-budget`` seconds.

Run: ``python -m experiments.bench_step [--batch-sizes 64 256] [--repeats 20]``.
"""

import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import optax
import optax.contrib

import dpjax

MODELS = {'mlp-64': (64, 64, 10), 'mlp-784': (784, 512, 512, 10)}
LR, CLIP, SIGMA = 0.1, 1.0, 1.1


def init_mlp(key, sizes):
  keys = jax.random.split(key, len(sizes) - 1)
  return [{'w': jax.random.normal(k, (m, n)) / jnp.sqrt(m), 'b': jnp.zeros(n)}
          for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def loss_fn(params, example):
  """Softmax cross-entropy of ONE example ``(x [d], y [])``."""
  x, y = example
  for layer in params[:-1]:
    x = jnp.tanh(x @ layer['w'] + layer['b'])
  logits = x @ params[-1]['w'] + params[-1]['b']
  return optax.softmax_cross_entropy_with_integer_labels(logits, y)


def make_steps(batch_size):
  """name -> (optax transformation, jitted step(params, state, batch))."""
  def mean_loss(params, batch):
    return jnp.mean(jax.vmap(loss_fn, (None, 0))(params, batch))

  sgd = optax.sgd(LR)
  optax_dp = optax.chain(optax.contrib.differentially_private_aggregate(
      l2_norm_clip=CLIP, noise_multiplier=SIGMA, key=jax.random.key(0)), optax.sgd(LR))
  dpjax_dp = dpjax.dpsgd(LR, CLIP, SIGMA, batch_size, key=jax.random.key(0))
  vmap_grads = jax.vmap(jax.grad(loss_fn), (None, 0))
  dpjax_grads = dpjax.per_example_grads(loss_fn)
  mask = jnp.ones((batch_size,), bool)

  @jax.jit
  def non_private(params, state, batch):
    updates, state = sgd.update(jax.grad(mean_loss)(params, batch), state, params)
    return optax.apply_updates(params, updates), state

  @jax.jit
  def optax_step(params, state, batch):
    updates, state = optax_dp.update(vmap_grads(params, batch), state, params)
    return optax.apply_updates(params, updates), state

  @jax.jit
  def dpjax_step(params, state, batch):
    updates, state = dpjax_dp.update(dpjax_grads(params, batch), state, params, mask=mask)
    return optax.apply_updates(params, updates), state

  return {'non-private': (sgd, non_private), 'optax-DP': (optax_dp, optax_step),
          'dpjax': (dpjax_dp, dpjax_step)}


def bench_row(sizes, batch_size, repeats, warmup, budget):
  """Median ms per step for each method, timed round-robin; and repeats used."""
  kp, kx, ky = jax.random.split(jax.random.key(1), 3)
  params = init_mlp(kp, sizes)
  batch = (jax.random.normal(kx, (batch_size, sizes[0])),
           jax.random.randint(ky, (batch_size,), 0, sizes[-1]))
  steps, carry, last = make_steps(batch_size), {}, {}
  for name, (tx, step) in steps.items():
    carry[name] = (params, tx.init(params))
    for _ in range(warmup):
      start = time.perf_counter()
      carry[name] = jax.block_until_ready(step(*carry[name], batch))
      last[name] = time.perf_counter() - start
  repeats = max(3, min(repeats, int(budget / sum(last.values()))))
  times = {name: [] for name in carry}
  for _ in range(repeats):
    for name, (_, step) in steps.items():
      start = time.perf_counter()
      carry[name] = jax.block_until_ready(step(*carry[name], batch))
      times[name].append(time.perf_counter() - start)
  return {n: 1e3 * statistics.median(t) for n, t in times.items()}, repeats


class _Parser(argparse.ArgumentParser):
  def error(self, message):  # one line, no usage dump, exit status 2
    sys.stderr.write(f'{self.prog}: error: {message}\n')
    sys.exit(2)


def parse_args(argv):
  parser = _Parser(prog='python -m experiments.bench_step',
                   description=__doc__.splitlines()[0])
  parser.add_argument('--batch-sizes', type=int, nargs='+', default=[256])
  parser.add_argument('--repeats', type=int, default=20, help='timed calls (median)')
  parser.add_argument('--warmup', type=int, default=3, help='untimed calls first')
  parser.add_argument('--time-budget', type=float, default=30.0,
                      help='seconds of timed calls per row; repeats shrink to fit')
  args = parser.parse_args(argv)
  if any(b <= 0 for b in args.batch_sizes):
    parser.error(f'--batch-sizes must be positive, got {args.batch_sizes}')
  if args.repeats < 1 or args.warmup < 1:
    parser.error('--repeats and --warmup must be at least 1')
  if not args.time_budget > 0:
    parser.error(f'--time-budget must be > 0, got {args.time_budget}')
  return args


def main(argv=None):
  args = parse_args(argv)
  device = jax.devices()[0]
  print(f'jax {jax.__version__}, optax {optax.__version__}, device {device.platform}:'
        f' {device.device_kind}, {os.cpu_count()} CPU cores')
  print(f'clip {CLIP}, noise multiplier {SIGMA}, float32; median ms per jitted step '
        f'after {args.warmup} warmup calls\n')
  print('| model | params | B | repeats | non-private ms | optax-DP ms | dpjax ms '
        '| dpjax/non-private | dpjax/optax |')
  print('|---|---|---|---|---|---|---|---|---|')
  for name, sizes in MODELS.items():
    n_params = sum(m * n + n for m, n in zip(sizes[:-1], sizes[1:]))
    for b in args.batch_sizes:
      ms, reps = bench_row(sizes, b, args.repeats, args.warmup, args.time_budget)
      print(f"| {name} | {n_params:,} | {b} | {reps} | {ms['non-private']:.3f} | "
            f"{ms['optax-DP']:.3f} | {ms['dpjax']:.3f} | "
            f"{ms['dpjax'] / ms['non-private']:.2f} | {ms['dpjax'] / ms['optax-DP']:.2f} |",
            flush=True)


if __name__ == '__main__':
  main()
