"""Ghost clipping benchmark (not a test): compiled memory and time of a DP step.

For each model and batch size B, three jitted training steps on random data,
compiled and (optionally) timed in the same run:

* non-private: ``jax.grad`` of the mean batch loss + ``optax.sgd``;
* noise only: ``dpjax.add_gaussian_noise`` on a params-shaped zero update +
  ``optax.apply_updates`` (the floor every DP step pays);
* ghost DP: ``dpjax.clipped_grad_sum(..., method='ghost')`` ->
  ``add_gaussian_noise`` -> ``normalize`` -> ``optax.sgd``, as
  ``experiments.bench.models`` builds it, with ``ghost_mode='auto'`` (the
  row says which mode it chose) and with each of ``'bookkeeping'`` and
  ``'two_pass'`` forced.

Memory is the compiled executable's ``memory_analysis().temp_size_in_bytes``
(deterministic on CPU). The table gives, per row, the ghost step's extra temp
bytes over the non-private step in units of the parameter bytes, and per
model the growth ratio: ghost temp bytes per extra example between the
smallest and largest B over the non-private step's. Times (``--time``) are
medians over interleaved calls (the methods take turns, so machine load hits
them alike), as ratios to the non-private step.

Models: the 784-512-512-10 MLP, the Tramer & Boneh CNN and the transformer
block of ``experiments.bench.models`` (token + position embedding,
4-head self-attention, LayerNorm, a 4x MLP, mean pooling, a Dense head;
T = 32 tokens, width 128).

Run: ``python -m experiments bench ghost_memory [--batch-sizes 64 256 1024]
[--models mlp cnn transformer] [--time] [--rounds 20]``.
"""

import argparse

import flax.linen as nn
import jax
import jax.numpy as jnp

from experiments.bench import dpsgd_steps
from experiments.bench import models
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--batch-sizes 8 --models mlp'

MODELS = {'mlp': models.MLP, 'cnn': models.CNN,
          'transformer': models.Transformer}


def make_data(name: str, batch_size: int):
  return models.random_batch(name, batch_size, jax.random.key(1))


GHOST_MODES = ('bookkeeping', 'two_pass')


def make_steps(model: nn.Module, batch_size: int) -> dict:
  """name -> (optax transformation, step(params, state, batch, mask)): the
  non-private, noise-only and ghost steps of ``dpsgd_steps`` (ghost in its
  ``'auto'`` mode and in each of ``GHOST_MODES``)."""
  steps = dpsgd_steps.make_jax_steps(model, batch_size,
                                     {'jax_privacy': 'not timed here'},
                                     ghost_modes=GHOST_MODES)
  names = ('non-private', 'noise', 'ghost') + tuple(
      f'ghost {m}' for m in GHOST_MODES)
  return {m: steps[m] for m in names}


def auto_mode(compiled: dict) -> str:
  """The mode ``ghost_mode='auto'`` picked: the forced mode whose compiled
  step has the same temp bytes and FLOPs as the auto step."""
  def key(c):
    return c.memory_analysis().temp_size_in_bytes, timing.flops(c)
  same = [m for m in GHOST_MODES if key(compiled[f'ghost {m}']) ==
          key(compiled['ghost'])]
  return same[0] if len(same) == 1 else '?'


def measure(name: str, batch_size: int, rounds: int) -> dict:
  """Temp bytes of every step and, when ``rounds``, median ms per call."""
  model = MODELS[name]()
  batch = make_data(name, batch_size)
  params = model.init(jax.random.key(2), batch[0][0])
  mask = jnp.ones((batch_size,), bool)
  temp, runners, carry, executables = {}, {}, {}, {}
  for method, (tx, step) in make_steps(model, batch_size).items():
    state = tx.init(params)
    compiled = jax.jit(step).lower(params, state, batch, mask).compile()
    executables[method] = compiled
    temp[method] = compiled.memory_analysis().temp_size_in_bytes
    carry[method] = (params, state)

    def run(method=method, compiled=compiled):
      carry[method] = jax.block_until_ready(
          compiled(*carry[method], batch, mask))

    runners[method] = run
  ms = {}
  if rounds:  # interleaved, 2 passes (experiments.bench.timing)
    times, _ = timing.interleaved(runners, passes=2, repeats=rounds,
                                  warmup=2, burst=3)
    ms = {m: timing.summarize(t) for m, t in times.items()}
  param_bytes = sum(p.size * p.dtype.itemsize
                    for p in jax.tree.leaves(params))
  return {'temp': temp, 'ms': ms, 'param_bytes': param_bytes,
          'auto': auto_mode(executables)}


def main(argv=None):
  parser = argparse.ArgumentParser(prog='python -m experiments bench '
                                   'ghost_memory',
                                   description=__doc__.splitlines()[0],
                                   allow_abbrev=False)
  parser.add_argument('--batch-sizes', type=int, nargs='+',
                      default=[64, 256, 1024])
  parser.add_argument('--models', nargs='+', default=list(MODELS),
                      choices=list(MODELS))
  parser.add_argument('--time', action='store_true',
                      help='also time the steps (interleaved medians)')
  parser.add_argument('--rounds', type=int, default=20,
                      help='timing rounds of 3 calls per method')
  args = parser.parse_args(argv)
  sizes = sorted(args.batch_sizes)
  print(f'jax {jax.__version__}; load {timing.load()}; temp = compiled temp '
        'bytes (MiB); extra = (step - non-private temp) / parameter bytes; '
        'ms = median over interleaved calls [range of 2 pass medians, ! when '
        "they differ by > 25%]; 'ghost' is ghost_mode='auto' (its choice in "
        'brackets)\n')
  print('| model | params | B | step | temp | extra (x param bytes) | ms | '
        '/ np |')
  print('|---|---|---|---|---|---|---|---|')
  for name in args.models:
    rows = {}
    for b in sizes:
      row = rows[b] = measure(name, b, args.rounds if args.time else 0)
      temp, ms, pb = row['temp'], row['ms'], row['param_bytes']
      for method in temp:
        label = (f"ghost [{row['auto']}]" if method == 'ghost' else method)
        times = (['-'] * 2 if not ms else
                 [timing.cell(ms[method]),
                  f"{ms[method]['median'] / ms['non-private']['median']:.2f}x"])
        cells = [name, f'{pb // 4:,}', str(b), label,
                 f'{temp[method] / 2**20:.2f}',
                 f"{(temp[method] - temp['non-private']) / pb:.2f}", *times]
        print('| ' + ' | '.join(cells) + ' |', flush=True)
    if len(sizes) > 1:
      lo, hi = rows[sizes[0]]['temp'], rows[sizes[-1]]['temp']
      per = lambda m: (hi[m] - lo[m]) / (sizes[-1] - sizes[0])  # noqa: E731
      for method in lo:
        print(f'growth {name} {method}: {per(method):,.0f} B/example, ratio '
              f'to non-private {per(method) / max(per("non-private"), 1):.2f}')
  if args.time:
    print(f'load at the end {timing.load()}')
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
