"""Private fine-tuning step time and memory: full vs LoRA (benchmark).

For each model and batch size B, one jitted training step per row on random
data: the non-private step (``jax.grad`` of the mean loss + SGD) of full
fine-tuning and of LoRA, and the DP-SGD step (``clipped_grad_sum`` with
ghost or vmap clipping -> ``dpjax.dpsgd(per_example=False)``) of each. Full
fine-tuning trains every parameter; LoRA trains rank-r adapters of every
Dense layer (``dpjax.finetune.LoRADense``, the pretrained weights frozen in
their own collection), so only the adapters are clipped and noised.
Columns: the median step time over interleaved calls (``timing.interleaved``,
two passes, [range of the pass medians], ``!`` when they differ by more
than 25%), its ratio to the non-private full step, XLA's compiled temp and
peak memory (deterministic on CPU) and the trainable (noised) dimension.

Models: the 784-512-512-10 MLP of ``experiments.bench.models`` (one
position per example), and a token MLP (32 positions of width 128 through
128-512-128 with gelu, mean pooling, Dense 10; the multi-position ghost
norms).

Run: ``python -m experiments bench finetune [--models mlp tokens]
[--batch-sizes 64 256] [--rank 8] [--repeats 5]``.
"""

QUICK = '--models mlp --batch-sizes 8 --repeats 1 --warmup 1'

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from dpjax.finetune import FROZEN
from dpjax.finetune import LoRADense
from experiments.bench import timing

CLIP, SIGMA, LR = 1.0, 1.0, 0.1
SEQ, WIDTH = 32, 128


class Net(nn.Module):
  """``kind`` 'mlp' (784-512-512-10, tanh) or 'tokens' (see module doc);
  with ``rank``, every Dense layer is a ``LoRADense``."""
  kind: str
  rank: int | None = None

  @nn.compact
  def __call__(self, x):
    names = iter(range(4))

    def dense(features):  # the same names with and without LoRA
      name = f'Dense_{next(names)}'
      if self.rank is None:
        return nn.Dense(features, name=name)
      return LoRADense(features, self.rank, 2.0 * self.rank, name=name)

    if self.kind == 'mlp':
      x = x.reshape(x.shape[:-3] + (-1,))
      for width in (512, 512):
        x = jnp.tanh(dense(width)(x))
      return dense(10)(x)
    x = x + dense(WIDTH)(nn.gelu(dense(4 * WIDTH)(x)))
    return dense(10)(x.mean(axis=-2))


MODELS = ('mlp', 'tokens')


def _batch(kind: str, batch: int):
  kx, ky = jax.random.split(jax.random.key(1))
  shape = (batch, 28, 28, 1) if kind == 'mlp' else (batch, SEQ, WIDTH)
  return (jax.random.normal(kx, shape),
          jax.random.randint(ky, (batch,), 0, 10))


def build_rows(kind: str, batch: int, rank: int) -> dict[str, tuple]:
  """label -> (compiled step, its arguments, trainable dimension).

  The frozen tree is an argument of the jitted step (its loss closes over
  the traced value), not a constant baked into the program.
  """
  x, y = _batch(kind, batch)
  pretrained = Net(kind).init(jax.random.key(0), x[:1])['params']
  lora_net = Net(kind, rank)
  adapters = lora_net.init(jax.random.key(3), x[:1])['params']
  setups = {
      'full': (pretrained, None,
               lambda p, frozen, x: Net(kind).apply({'params': p}, x)),
      'LoRA': (adapters, pretrained, lambda p, frozen, x: lora_net.apply(
          {'params': p, FROZEN: frozen}, x))}
  mask = jnp.ones((batch,), bool)
  rows = {}
  for name, (params, frozen, apply) in setups.items():
    def loss_of(frozen, apply=apply):
      return lambda p, ex: optax.softmax_cross_entropy_with_integer_labels(
          apply(p, frozen, ex[0]), ex[1])

    sgd = optax.sgd(LR)

    def plain(params, state, frozen, x, y, loss_of=loss_of, sgd=sgd):
      loss = loss_of(frozen)
      grads = jax.grad(lambda p: jnp.mean(jax.vmap(
          lambda ex: loss(p, ex))((x, y))))(params)
      updates, state = sgd.update(grads, state, params)
      return optax.apply_updates(params, updates), state

    steps = {'non-private': (plain, sgd)}
    for method in ('ghost', 'vmap'):
      # The chain's noise follows the ClippedSum's bound (CLIP).
      tx = dpjax.dpsgd(LR, None, SIGMA, dpjax.PoissonSampler(batch, 1.0),
                       key=jax.random.key(2), per_example=False)

      def private(params, state, frozen, x, y, tx=tx, method=method,
                  loss_of=loss_of):
        clipped = dpjax.clipped_grad_sum(loss_of(frozen), CLIP, method)
        updates, state = tx.update(clipped(params, (x, y), mask).grad_sum,
                                   state, params)
        return optax.apply_updates(params, updates), state

      steps[f'DP {method}'] = (private, tx)
    size = sum(a.size for a in jax.tree.leaves(params))
    for method, (step, tx) in steps.items():
      args = (params, tx.init(params), frozen, x, y)
      rows[f'{name} | {method}'] = (jax.jit(step).lower(*args).compile(),
                                    args, size)
  return rows


def parse_args(argv):
  parser = timing.OneLineParser(prog='python -m experiments bench finetune',
                                description=__doc__.splitlines()[0])
  parser.add_argument('--models', nargs='+', default=list(MODELS),
                      choices=MODELS)
  parser.add_argument('--batch-sizes', type=int, nargs='+', default=[64, 256])
  parser.add_argument('--rank', type=int, default=8)
  timing.add_call_options(parser, repeats=5, warmup=1)
  args = parser.parse_args(argv)
  timing.check_call_options(parser, args)
  if min(args.batch_sizes) < 1 or args.rank < 1:
    parser.error('--batch-sizes and --rank must be at least 1')
  return args


def main(argv=None):
  args = parse_args(argv)
  print(f'device {jax.devices()[0].device_kind}; load {timing.load()}; '
        f'LoRA rank {args.rank}; median ms over {timing.MIN_PASSES} passes '
        f'x {args.repeats} interleaved calls\n')
  print('| model | B | trained | step | ms | / non-private full | temp MB | '
        'peak MB | trained (noised) dimension |')
  print('|---|---|---|---|---|---|---|---|---|')
  for kind in args.models:
    for batch in args.batch_sizes:
      rows = build_rows(kind, batch, args.rank)
      runners = {label: (lambda c=c, a=a: jax.block_until_ready(c(*a)))
                 for label, (c, a, _) in rows.items()}
      times, _ = timing.interleaved(runners, passes=timing.MIN_PASSES,
                                    repeats=args.repeats, warmup=args.warmup)
      stats = {label: timing.summarize(t) for label, t in times.items()}
      base = stats['full | non-private']['median']
      for label, (compiled, _, size) in rows.items():
        trained, method = label.split(' | ')
        mem = timing.memory_bytes(compiled)
        mb = lambda v: f'{(np.nan if v is None else v) / 2**20:.1f}'  # noqa
        print(f'| {kind} | {batch} | {trained} | {method} | '
              f'{timing.cell(stats[label])} | '
              f"{stats[label]['median'] / base:.2f}x | {mb(mem['temp'])} | "
              f"{mb(mem['peak'])} | {size:,} |", flush=True)
  print('\n' + timing.legend())


if __name__ == '__main__':
  main()
