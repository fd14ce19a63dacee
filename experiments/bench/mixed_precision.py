"""Mixed-precision benchmark (not a test): DP steps in bfloat16 against float32.

For each model of ``experiments.bench.models`` and batch size B, six jitted
training steps on random data, compiled and timed in the same run: the
non-private step, dpjax ghost and dpjax vmap DP-SGD, each with float32
compute and with bfloat16 compute (``--dtype``). Parameters, optimizer state,
norms, clip factors and noise stay float32 in every step: the loss casts the
float32 parameters and inputs to the compute dtype and its logits back to
float32 (the recipe of docs/nnx.md), and dpjax computes norms and clip
factors in float32 whatever the gradient dtype, so every record's
contribution stays within C (tests/test_nnx.py checks it adversarially).

A row gives each step's median ms over interleaved calls (2 passes, range of
the pass medians, ``!`` when they differ by more than 25%), its ratio to the
non-private step of the same dtype, and its compiled temp memory (XLA's
``memory_analysis``). On a CPU without bfloat16 arithmetic XLA emulates it,
so the bfloat16 rows measure what the recipe costs there, not what it saves
on an accelerator.

Run: ``python -m experiments bench mixed_precision [--batch-sizes 64 256]
[--models mlp cnn transformer] [--dtype bfloat16|float16] [--rounds 5]``.
"""

import argparse

import jax
import jax.numpy as jnp
import optax

import dpjax
from experiments.bench import models
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--batch-sizes 8 --models mlp --rounds 2'

MODELS = {'mlp': 'mlp-784-512-512-10', 'cnn': 'tb-mnist-cnn',
          'transformer': 'transformer-128x4-seq32'}
LR, CLIP, SIGMA = 0.1, 1.0, 1.1


def make_steps(model, batch_size: int, dtype) -> dict:
  """method -> step(params, state, batch, mask) and its optax state."""

  def example_loss(p, example, compute=dtype):
    x, y = example
    cast = lambda t: jax.tree.map(  # noqa: E731
        lambda a: a.astype(compute) if jnp.issubdtype(a.dtype, jnp.floating)
        else a, t)
    logits = model.apply(cast(p), cast(x)).astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y)

  sgd = optax.sgd(LR)

  def non_private(params, state, batch, mask):
    del mask
    grads = jax.grad(lambda p: jnp.mean(jax.vmap(
        example_loss, (None, 0))(p, batch)))(params)
    updates, state = sgd.update(grads, state, params)
    return optax.apply_updates(params, updates), state

  steps = {'non-private': (sgd, non_private)}
  for method in ('ghost', 'vmap'):
    # The chain's noise follows the ClippedSum's bound (CLIP).
    full = dpjax.PoissonSampler(batch_size, 1.0)  # every step's whole batch
    tx = dpjax.dpsgd(LR, None, SIGMA, full, key=jax.random.key(0),
                     per_example=False)
    clipped = dpjax.clipped_grad_sum(example_loss, CLIP, method=method)

    def dp_step(params, state, batch, mask, tx=tx, clipped=clipped):
      grad_sum = clipped(params, batch, mask).grad_sum
      updates, state = tx.update(grad_sum, state, params)
      return optax.apply_updates(params, updates), state

    steps[method] = (tx, dp_step)
  return steps


def measure(name: str, batch_size: int, dtype, rounds: int) -> dict:
  """Per '<method> <dtype>': compiled temp bytes and median ms."""
  model = models.MODELS[MODELS[name]]()
  batch = models.random_batch(MODELS[name], batch_size, jax.random.key(1))
  params = model.init(jax.random.key(2), batch[0][0])
  mask = jnp.ones((batch_size,), bool)
  temp, runners, carry = {}, {}, {}
  for label, compute in (('float32', jnp.float32), (dtype, jnp.dtype(dtype))):
    for method, (tx, step) in make_steps(model, batch_size, compute).items():
      key = f'{method} {label}'
      state = tx.init(params)
      compiled = jax.jit(step).lower(params, state, batch, mask).compile()
      temp[key] = compiled.memory_analysis().temp_size_in_bytes
      carry[key] = (params, state)

      def run(key=key, compiled=compiled):
        carry[key] = jax.block_until_ready(compiled(*carry[key], batch, mask))

      runners[key] = run
  times, _ = timing.interleaved(runners, passes=2, repeats=rounds, warmup=1,
                                burst=2)
  return {'temp': temp, 'ms': {m: timing.summarize(t)
                               for m, t in times.items()}}


def main(argv=None):
  parser = timing.OneLineParser(prog='python -m experiments bench '
                                'mixed_precision',
                                description=__doc__.splitlines()[0])
  parser.add_argument('--batch-sizes', type=int, nargs='+', default=[64, 256])
  parser.add_argument('--models', nargs='+', default=list(MODELS),
                      choices=list(MODELS))
  parser.add_argument('--dtype', default='bfloat16',
                      choices=('bfloat16', 'float16'))
  parser.add_argument('--rounds', type=int, default=5,
                      help='timing rounds of 2 calls per step and pass')
  args = parser.parse_args(argv)
  if args.rounds < 1 or min(args.batch_sizes) < 1:
    parser.error('--rounds and --batch-sizes must be at least 1')
  print(f'jax {jax.__version__}; load {timing.load()}; compute dtype '
        f'{args.dtype} vs float32 (parameters, norms, clip factors and noise '
        f'float32); ms = {timing.legend()}; / np = ratio to the non-private '
        'step of the same dtype; temp = compiled temp MiB\n')
  print('| model | B | step | ms | / np | temp MiB |')
  print('|---|---|---|---|---|---|')
  for name in args.models:
    for b in args.batch_sizes:
      row = measure(name, b, args.dtype, args.rounds)
      for key, stat in row['ms'].items():
        base = row['ms'][f"non-private {key.split()[1]}"]['median']
        print(f"| {name} | {b} | {key} | {timing.cell(stat)} | "
              f"{stat['median'] / base:.2f}x | "
              f"{row['temp'][key] / 2**20:.2f} |", flush=True)
  print(f'load at the end {timing.load()}')
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
