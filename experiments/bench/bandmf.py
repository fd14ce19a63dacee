"""BandMF step time and memory against DP-SGD (benchmark, not a test).

One jitted training step per row: the clipped sum (ghost clipping, or its
data-parallel ``sharded_clipped_grad_sum`` over every local device) and the
chain that noises and applies it: ``dpjax.dpsgd(per_example=False)`` (fresh
noise) or ``dpjax.bandmf(per_example=False)`` with an optimized banded
Toeplitz strategy of b bands (the t-th row of C^{-1} Z; its state keeps the
last b - 1 noise vectors). Columns: the median step time over interleaved
calls (``timing.interleaved``: every row of a model takes turns, two
passes, [range of the pass medians], ``!`` when they differ by more than
25%), its ratio to DP-SGD's, XLA's compiled peak memory (temp + arguments +
outputs of the step, deterministic) and the noise state's bytes, which grow
by one parameter vector (4 bytes a parameter) per band.

Run: ``python -m experiments bench bandmf [--model tb-mnist-cnn]
[--batch-size 64] [--bands 1 2 4 8 16 32 64] [--repeats 5]``.
"""

QUICK = '--batch-size 8 --bands 1 4 --repeats 1'

import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from experiments.bench import models
from experiments.bench import timing

CLIP, SIGMA, LR, STEPS = 1.0, 1.0, 0.1, 1024


def _loss(model):
  def example_loss(params, example):
    x, y = example
    return optax.softmax_cross_entropy_with_integer_labels(
        model.apply(params, x), y)
  return example_loss


def _state_bytes(state) -> int:
  """Bytes of the noise's correlation history (0 for fresh noise)."""
  found = [s.correlation for s in dpjax.accounting.privacy_states(state)
           if isinstance(s, dpjax.transforms.DpsgdNoiseState)
           and s.correlation is not None]
  return sum(x.size * x.dtype.itemsize for c in found
             for x in jax.tree.leaves(c.history))


def build_rows(model_name: str, batch: int, bands: list[int],
               sharded: bool) -> dict[str, tuple]:
  """label -> (compiled step, its arguments, noise state bytes)."""
  model = models.MODELS[model_name]()
  x, y = models.random_batch(model_name, batch, jax.random.key(1))
  params = model.init(jax.random.key(0), x[:1])
  mask = jnp.ones((batch,), bool)
  loss = _loss(model)
  paths = {'ghost': dpjax.clipped_grad_sum(loss, CLIP, method='ghost')}
  if sharded:
    mesh = jax.make_mesh((len(jax.devices()),), ('data',))
    paths['sharded ghost'] = dpjax.clipping.sharded_clipped_grad_sum(
        loss, CLIP, 'ghost', mesh=mesh)
  rows = {}
  for path, clipped in paths.items():
    # The chains take the ClippedSum and follow its bound CLIP.
    full = dpjax.sampling.CyclicPoissonSampler(batch, 1.0, 1)  # whole batch
    chains = {'DP-SGD': dpjax.dpsgd(LR, None, SIGMA, full,
                                    key=jax.random.key(2), per_example=False)}
    for b in bands:
      coefs = dpjax.correlated_noise.optimize_banded_toeplitz(
          STEPS, b, max_steps=100)
      strategy = dpjax.correlated_noise.banded_toeplitz(coefs, STEPS)
      chains[f'BandMF b={b}'] = dpjax.bandmf(
          LR, None, SIGMA, full, strategy, key=jax.random.key(2),
          per_example=False)
    for name, tx in chains.items():
      def step(params, state, x, y, tx=tx, clipped=clipped):
        grad_sum = clipped(params, (x, y), mask).grad_sum
        updates, state = tx.update(grad_sum, state, params)
        return optax.apply_updates(params, updates), state
      state = tx.init(params)
      compiled = jax.jit(step).lower(params, state, x, y).compile()
      rows[f'{path} | {name}'] = (compiled, (params, state, x, y),
                                  _state_bytes(state))
  return rows


def parse_args(argv):
  parser = timing.OneLineParser(prog='python -m experiments bench bandmf',
                                description=__doc__.splitlines()[0])
  parser.add_argument('--model', default='tb-mnist-cnn',
                      choices=sorted(models.MODELS))
  parser.add_argument('--batch-size', type=int, default=64,
                      help='examples per step (all of them: rate 1)')
  parser.add_argument('--bands', type=int, nargs='+',
                      default=[1, 2, 4, 8, 16, 32, 64])
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--warmup', type=int, default=1)
  parser.add_argument('--no-sharded', action='store_true',
                      help='skip the sharded_clipped_grad_sum rows')
  args = parser.parse_args(argv)
  if args.batch_size < 1 or any(not 1 <= b <= STEPS for b in args.bands):
    parser.error(f'--batch-size must be >= 1 and --bands in [1, {STEPS}]')
  if args.repeats < 1 or args.warmup < 0:
    parser.error('--repeats must be >= 1 and --warmup >= 0')
  return args


def main(argv=None):
  args = parse_args(argv)
  rows = build_rows(args.model, args.batch_size, args.bands,
                    not args.no_sharded)
  params = next(iter(rows.values()))[1][0]
  size = sum(x.size for x in jax.tree.leaves(params))
  runners = {label: (lambda c=c, a=a: jax.block_until_ready(c(*a)))
             for label, (c, a, _) in rows.items()}
  times, _ = timing.interleaved(runners, passes=timing.MIN_PASSES,
                                repeats=args.repeats, warmup=args.warmup)
  stats = {label: timing.summarize(t) for label, t in times.items()}
  print(f'device {jax.devices()[0].device_kind} x {len(jax.devices())}; '
        f'model {args.model} ({size:,} parameters), batch {args.batch_size}; '
        f'median ms over {timing.MIN_PASSES} passes x {args.repeats} '
        'interleaved calls\n')
  print('| clipped sum | noise | step ms | / DP-SGD | peak MB | noise state MB '
        '| state bytes / (bands - 1) / parameter |')
  print('|---|---|---|---|---|---|---|')
  for label, (compiled, _, state) in rows.items():
    path, name = label.split(' | ')
    base = stats[f'{path} | DP-SGD']['median']
    peak = timing.memory_bytes(compiled)['peak']
    b = int(name.split('=')[1]) if '=' in name else 1
    per_band = f'{state / (b - 1) / size:.1f}' if b > 1 else '-'
    print(f"| {path} | {name} | {timing.cell(stats[label])} | "
          f"{stats[label]['median'] / base:.2f}x | "
          f"{(peak or np.nan) / 2**20:.1f} | {state / 2**20:.2f} | "
          f'{per_band} |', flush=True)


if __name__ == '__main__':
  main()
