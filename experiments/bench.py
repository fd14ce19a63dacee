"""Performance benchmark (not a test): DP-SGD steps against a non-private step.

Every column is one full jitted training step on random data: gradients (and
clipping) + noise + optimizer update + ``optax.apply_updates``:

* non-private: ``jax.grad`` of the mean batch loss + ``optax.sgd``.
* noise only: ``dpjax.add_gaussian_noise`` on a params-shaped zero update +
  ``optax.apply_updates``, the cost every DP step pays on top of its
  gradients (threefry on CPU; the same sampler in every DP column).
* dpjax ghost: ``dpjax.clipped_grad_sum(..., method='ghost')`` (no
  per-example gradients; Bu et al. 2023 book-keeping) -> ``add_gaussian_noise``
  -> ``normalize`` -> ``optax.sgd``.
* dpjax vmap: the same chain on ``clipped_grad_sum(..., method='vmap')``.
* optax DP: ``jax.vmap(jax.grad)`` +
  ``optax.contrib.differentially_private_aggregate`` + ``optax.sgd``.
* jax_privacy: ``jax_privacy.clipping.clipped_grad`` (vmap inside) +
  ``noise_addition.gaussian_privatizer`` + ``optax.sgd`` (needs the ``bench``
  extra; skipped with the reason printed when it is missing).
* Opacus (PyTorch, CPU): ``PrivacyEngine.make_private`` with
  ``grad_sample_mode='hooks'`` (per-sample gradients) and ``'ghost'`` (fast
  gradient clipping), against a plain PyTorch step (the ``torch`` column).
  Optional, as above.

Models: the 784-512-512-10 MLP (tanh) and the Tramer & Boneh MNIST DP-CNN
(Conv 16 8x8 /2 pad 2 -> MaxPool 2 /1 -> Conv 32 4x4 /2 -> MaxPool 2 /1 ->
Dense 32 -> Dense 10, tanh, 26,010 parameters; Tramer & Boneh 2021), softmax
cross-entropy on random 28x28x1 inputs. Timing (``time_group``): warmup
calls, then rounds that cycle through the methods (so that drift in machine
load hits them alike), each method making ``--burst`` consecutive calls per
round after one untimed call (warm caches and allocator pages, as in a
training loop), each call followed by ``block_until_ready``; the table gives
the median over all timed calls.
Rounds shrink when a row would exceed ``--time-budget`` seconds; a method
whose warmup call takes more than ``--slow`` seconds is timed by that call
alone. PyTorch methods are timed after the JAX ones, not interleaved (their
OpenMP threads keep spinning after a call and would slow the next JAX call).
Peak memory is the compiled executable's ``memory_analysis()`` (temp +
argument + output bytes), deterministic on CPU; the last lines give its growth
per example between the smallest and largest B.

Run: ``python -m experiments.bench [--batch-sizes 64 256 1024] [--repeats 10]
[--burst 3] [--quick]``.
"""

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.contrib

import dpjax

LR, CLIP, SIGMA = 0.1, 1.0, 1.1
JAX_METHODS = ('non-private', 'ghost', 'vmap', 'optax', 'jax_privacy')


class MLP(nn.Module):
  """784-512-512-10, tanh."""

  @nn.compact
  def __call__(self, x):
    x = x.reshape(x.shape[:-3] + (-1,))
    for width in (512, 512):
      x = jnp.tanh(nn.Dense(width)(x))
    return nn.Dense(10)(x)


class CNN(nn.Module):
  """Tramer & Boneh (2021) MNIST DP-CNN, 26,010 parameters."""

  @nn.compact
  def __call__(self, x):
    x = jnp.tanh(nn.Conv(16, (8, 8), strides=2, padding=((2, 2), (2, 2)))(x))
    x = nn.max_pool(x, (2, 2), strides=(1, 1))
    x = jnp.tanh(nn.Conv(32, (4, 4), strides=2, padding='VALID')(x))
    x = nn.max_pool(x, (2, 2), strides=(1, 1))
    x = jnp.tanh(nn.Dense(32)(x.reshape(x.shape[:-3] + (-1,))))
    return nn.Dense(10)(x)


MODELS = {'mlp-784-512-512-10': MLP, 'tb-mnist-cnn': CNN}


def optional_imports() -> dict[str, Any]:
  """name -> module, or name -> reason string when it cannot be used."""
  out = {}
  try:
    # pylint: disable=g-import-not-at-top
    from jax_privacy import clipping as jp_clipping
    from jax_privacy import noise_addition as jp_noise
    # pylint: enable=g-import-not-at-top
    out['jax_privacy'] = (jp_clipping, jp_noise)
  except Exception as e:  # pylint: disable=broad-except
    out['jax_privacy'] = f'jax_privacy unavailable ({type(e).__name__}: {e})'
  try:
    import opacus  # pylint: disable=g-import-not-at-top
    import torch  # pylint: disable=g-import-not-at-top
    out['torch'] = (torch, opacus)
  except Exception as e:  # pylint: disable=broad-except
    out['torch'] = f'torch/opacus unavailable ({type(e).__name__}: {e})'
  return out


# --- JAX steps ---------------------------------------------------------------


def make_jax_steps(model: nn.Module, batch_size: int, optional: dict
                   ) -> dict[str, tuple[Any, Callable]]:
  """name -> (optax transformation, step(params, state, batch, mask))."""

  def example_loss(params, example):
    x, y = example
    return optax.softmax_cross_entropy_with_integer_labels(
        model.apply(params, x), y)

  def batch_loss(params, batch):
    x, y = batch
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(
        model.apply(params, x), y))

  key = jax.random.key(0)
  privatize = lambda: optax.chain(  # noqa: E731
      dpjax.add_gaussian_noise(SIGMA * CLIP, key=key),
      dpjax.normalize(batch_size), optax.sgd(LR))
  steps = {}

  sgd = optax.sgd(LR)

  def non_private(params, state, batch, mask):
    del mask
    updates, state = sgd.update(jax.grad(batch_loss)(params, batch), state,
                                params)
    return optax.apply_updates(params, updates), state

  steps['non-private'] = (sgd, non_private)

  noise_tx = dpjax.add_gaussian_noise(SIGMA * CLIP, key=key)

  def noise_only(params, state, batch, mask):  # the DP floor: noise + update
    del batch, mask
    updates, state = noise_tx.update(jax.tree.map(jnp.zeros_like, params),
                                     state)
    return optax.apply_updates(params, updates), state

  steps['noise'] = (noise_tx, noise_only)

  for method in ('ghost', 'vmap'):
    tx = privatize()
    clipped = dpjax.clipped_grad_sum(example_loss, CLIP, method=method)

    def dp_step(params, state, batch, mask, tx=tx, clipped=clipped):
      grad_sum = clipped(params, batch, mask).grad_sum
      updates, state = tx.update(grad_sum, state, params)
      return optax.apply_updates(params, updates), state

    steps[method] = (tx, dp_step)

  optax_tx = optax.chain(optax.contrib.differentially_private_aggregate(
      l2_norm_clip=CLIP, noise_multiplier=SIGMA, key=key), optax.sgd(LR))
  vmap_grads = jax.vmap(jax.grad(example_loss), (None, 0))

  def optax_step(params, state, batch, mask):
    del mask
    updates, state = optax_tx.update(vmap_grads(params, batch), state, params)
    return optax.apply_updates(params, updates), state

  steps['optax'] = (optax_tx, optax_step)

  if not isinstance(optional['jax_privacy'], str):
    jp_clipping, jp_noise = optional['jax_privacy']
    jp_grad = jp_clipping.clipped_grad(
        example_loss, l2_clip_norm=CLIP, batch_argnums=1,
        keep_batch_dim=False)
    jp_tx = optax.chain(jp_noise.gaussian_privatizer(stddev=SIGMA * CLIP,
                                                     prng_key=key),
                        optax.scale(1.0 / batch_size), optax.sgd(LR))

    def jp_step(params, state, batch, mask):
      del mask
      updates, state = jp_tx.update(jp_grad(params, batch), state, params)
      return optax.apply_updates(params, updates), state

    steps['jax_privacy'] = (jp_tx, jp_step)
  return steps


def peak_bytes(compiled) -> int | None:
  stats = compiled.memory_analysis()
  if stats is None:
    return None
  return (stats.temp_size_in_bytes + stats.argument_size_in_bytes
          + stats.output_size_in_bytes)


# --- PyTorch / Opacus steps --------------------------------------------------


def make_torch_steps(name: str, batch_size: int, optional: dict,
                     x_np: np.ndarray, y_np: np.ndarray) -> dict[str, Callable]:
  """name -> step() for plain PyTorch and Opacus (hooks and ghost modes)."""
  torch, opacus = optional['torch']
  warnings.filterwarnings('ignore', message='.*(Secure RNG|Full backward hook)')
  torch.manual_seed(0)
  torch.set_num_threads(os.cpu_count() or 1)
  nn_t = torch.nn

  def build():
    if name.startswith('mlp'):
      return nn_t.Sequential(nn_t.Flatten(), nn_t.Linear(784, 512), nn_t.Tanh(),
                             nn_t.Linear(512, 512), nn_t.Tanh(),
                             nn_t.Linear(512, 10))
    return nn_t.Sequential(
        nn_t.Conv2d(1, 16, 8, 2, padding=2), nn_t.Tanh(),
        nn_t.MaxPool2d(2, 1), nn_t.Conv2d(16, 32, 4, 2), nn_t.Tanh(),
        nn_t.MaxPool2d(2, 1), nn_t.Flatten(), nn_t.Linear(32 * 4 * 4, 32),
        nn_t.Tanh(), nn_t.Linear(32, 10))

  x = torch.from_numpy(np.transpose(x_np, (0, 3, 1, 2)).copy())
  y = torch.from_numpy(y_np.astype(np.int64))
  loader = torch.utils.data.DataLoader(
      torch.utils.data.TensorDataset(x, y), batch_size=batch_size)
  steps = {}

  model = build()
  opt = torch.optim.SGD(model.parameters(), lr=LR)
  criterion = nn_t.CrossEntropyLoss()

  def torch_step():
    opt.zero_grad(set_to_none=True)
    criterion(model(x), y).backward()
    opt.step()

  steps['torch'] = torch_step
  for mode in ('hooks', 'ghost'):
    dp_model = build()
    dp_opt = torch.optim.SGD(dp_model.parameters(), lr=LR)
    out = opacus.PrivacyEngine().make_private(
        module=dp_model, optimizer=dp_opt, data_loader=loader,
        criterion=nn_t.CrossEntropyLoss(), noise_multiplier=SIGMA,
        max_grad_norm=CLIP, poisson_sampling=False, grad_sample_mode=mode)
    if mode == 'ghost':
      dp_model, dp_opt, dp_crit, _ = out
    else:
      dp_model, dp_opt, _ = out
      dp_crit = nn_t.CrossEntropyLoss()

    def dp_step(m=dp_model, o=dp_opt, c=dp_crit):
      o.zero_grad(set_to_none=True)
      c(m(x), y).backward()
      o.step()

    steps['opacus' if mode == 'hooks' else 'opacus-ghost'] = dp_step
  return steps


# --- one row -----------------------------------------------------------------


def time_group(runners: dict[str, Callable], repeats: int, warmup: int,
               burst: int, budget: float, slow: float):
  """Seconds per call of each runner; returns (times, rounds).

  Rounds cycle through the runners (so that drift in machine load hits them
  alike); in each round a runner makes one untimed call, which re-warms
  caches and the allocator's pages after the previous runner (on CPU a step
  that follows one with a GB-sized temp buffer otherwise pays page faults),
  then ``burst`` consecutive timed calls, as in a training loop. Rounds shrink
  to fit ``budget`` seconds (at least 3). A runner whose warmup call takes
  more than ``slow`` seconds is timed once, by that call.
  """
  last = {}
  for method, run in runners.items():
    for _ in range(warmup):
      start = time.perf_counter()
      run()
      last[method] = time.perf_counter() - start
      if last[method] > slow:
        break
  slow_methods = {m for m, t in last.items() if t > slow}
  per_round = (burst + 1) * sum(t for m, t in last.items()
                                if m not in slow_methods)
  rounds = max(3, min(repeats, int(budget / max(per_round, 1e-9))))
  times = {m: [last[m]] if m in slow_methods else [] for m in runners}
  for _ in range(rounds):
    for method, run in runners.items():
      if method in slow_methods:
        continue
      run()  # untimed: re-warm after the previous runner
      for _ in range(burst):
        start = time.perf_counter()
        run()
        times[method].append(time.perf_counter() - start)
  return times, rounds


def bench_row(name: str, batch_size: int, repeats: int, warmup: int,
              burst: int, budget: float, slow: float,
              optional: dict) -> dict[str, Any]:
  """Median ms per step and peak bytes for every method (see time_group)."""
  model = MODELS[name]()
  kp, kx, ky = jax.random.split(jax.random.key(1), 3)
  params = model.init(kp, jnp.zeros((28, 28, 1)))
  x = jax.random.normal(kx, (batch_size, 28, 28, 1))
  y = jax.random.randint(ky, (batch_size,), 0, 10)
  batch, mask = (x, y), jnp.ones((batch_size,), bool)
  runners, memory, carry = {}, {}, {}
  for method, (tx, step) in make_jax_steps(model, batch_size,
                                           optional).items():
    state = tx.init(params)
    compiled = jax.jit(step).lower(params, state, batch, mask).compile()
    memory[method] = peak_bytes(compiled)
    carry[method] = (params, state)

    def run(method=method, compiled=compiled):
      carry[method] = jax.block_until_ready(
          compiled(*carry[method], batch, mask))

    runners[method] = run
  groups = [runners]  # JAX methods, then PyTorch ones (timed apart: the
  # OpenMP threads of torch keep spinning after a call and slow the next one)
  if not isinstance(optional['torch'], str):
    groups.append(make_torch_steps(name, batch_size, optional, np.asarray(x),
                                   np.asarray(y)))
  times, calls = {}, None
  for group in groups:
    group_times, rounds = time_group(group, repeats, warmup, burst, budget,
                                     slow)
    times.update(group_times)
    calls = rounds * burst if calls is None else calls
  ms = {m: 1e3 * statistics.median(t) for m, t in times.items()}
  counts = {m: len(t) for m, t in times.items()}
  n_params = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(params))
  return {'ms': ms, 'memory': memory, 'calls': calls, 'counts': counts,
          'params': n_params}


# --- table -------------------------------------------------------------------


def _cell(row: dict, method: str, base: str | None) -> str:
  ms = row['ms']
  if method not in ms:
    return 'skipped'
  out = f'{ms[method]:.2f}'
  if base is not None and base in ms:
    out += f' ({ms[method] / ms[base]:.2f}x)'
  n = row['counts'][method]
  if n != row['calls']:
    out += f" [{n} call{'s' if n > 1 else ''}]"
  return out


def _mib(memory: dict, method: str) -> str:
  value = memory.get(method)
  return '-' if value is None else f'{value / 2**20:.1f}'


HEADER = ('| model | params | B | calls | non-private ms | noise only ms '
          '| dpjax ghost ms (/np) '
          '| dpjax vmap ms (/np) | optax DP ms (/np) | jax_privacy ms (/np) '
          '| torch ms | Opacus ms (/torch) | Opacus ghost ms (/torch) '
          '| optax / ghost | jax_privacy / ghost | peak MiB np / ghost / vmap '
          '/ optax / jax_privacy |')


def format_row(name: str, batch_size: int, row: dict) -> str:
  ms, mem = row['ms'], row['memory']
  speedup = lambda m: (f"{ms[m] / ms['ghost']:.1f}x" if m in ms  # noqa: E731
                       else 'skipped')
  memory = ' / '.join(_mib(mem, m) for m in JAX_METHODS)
  cells = [name, f"{row['params']:,}", str(batch_size), str(row['calls']),
           _cell(row, 'non-private', None), _cell(row, 'noise', None),
           _cell(row, 'ghost', 'non-private'),
           _cell(row, 'vmap', 'non-private'),
           _cell(row, 'optax', 'non-private'),
           _cell(row, 'jax_privacy', 'non-private'), _cell(row, 'torch', None),
           _cell(row, 'opacus', 'torch'), _cell(row, 'opacus-ghost', 'torch'),
           speedup('optax'), speedup('jax_privacy'), memory]
  return '| ' + ' | '.join(cells) + ' |'


class OneLineParser(argparse.ArgumentParser):
  """argparse that reports a bad argument in one line (status 2)."""

  def error(self, message):  # one line, no usage dump, exit status 2
    sys.stderr.write(f'{self.prog}: error: {message}\n')
    sys.exit(2)


def parse_args(argv):
  parser = OneLineParser(prog='python -m experiments.bench',
                   description=__doc__.splitlines()[0])
  parser.add_argument('--batch-sizes', type=int, nargs='+',
                      default=[64, 256, 1024])
  parser.add_argument('--repeats', type=int, default=10,
                      help='timing rounds (each method makes --burst calls '
                      'per round; the median is over all of them)')
  parser.add_argument('--burst', type=int, default=3,
                      help='consecutive timed calls per method and round')
  parser.add_argument('--warmup', type=int, default=2,
                      help='untimed calls first')
  parser.add_argument('--time-budget', type=float, default=20.0,
                      help='seconds of timed calls per row and framework; '
                      'rounds shrink to fit (at least 3)')
  parser.add_argument('--slow', type=float, default=5.0,
                      help='a method whose warmup call takes longer than this '
                      'many seconds is timed by that one call ([1 call] in '
                      'the table)')
  parser.add_argument('--models', nargs='+', default=list(MODELS),
                      choices=list(MODELS))
  parser.add_argument('--quick', action='store_true',
                      help='B in {64, 256}, 3 rounds, 1 warmup, 10 s budget')
  args = parser.parse_args(argv)
  if args.quick:
    args.batch_sizes, args.repeats, args.warmup = [64, 256], 3, 1
    args.time_budget = min(args.time_budget, 10.0)
  if any(b <= 0 for b in args.batch_sizes):
    parser.error(f'--batch-sizes must be positive, got {args.batch_sizes}')
  if args.repeats < 1 or args.warmup < 1 or args.burst < 1:
    parser.error('--repeats, --warmup and --burst must be at least 1')
  if not args.time_budget > 0 or not args.slow > 0:
    parser.error('--time-budget and --slow must be > 0, got '
                 f'{args.time_budget} and {args.slow}')
  return args


def main(argv=None):
  args = parse_args(argv)
  optional = optional_imports()
  device = jax.devices()[0]
  versions = [f'jax {jax.__version__}', f'optax {optax.__version__}']
  if not isinstance(optional['jax_privacy'], str):
    import jax_privacy  # pylint: disable=g-import-not-at-top
    versions.append(f'jax_privacy {jax_privacy.__version__}')
  if not isinstance(optional['torch'], str):
    torch, opacus = optional['torch']
    versions += [f'torch {torch.__version__}', f'opacus {opacus.__version__}']
  print(', '.join(versions) + f'; device {device.platform}: '
        f'{device.device_kind}, {os.cpu_count()} CPU cores')
  for reason in (v for v in optional.values() if isinstance(v, str)):
    print(f'skipped: {reason}; install with pip install -e ".[bench]"')
  print('load average at start (1, 5, 15 min): '
        + ', '.join(f'{x:.2f}' for x in os.getloadavg()))
  print(f'clip {CLIP}, noise multiplier {SIGMA}, float32, random data; median '
        f'ms per jitted training step over `calls` timed calls ({args.burst} '
        f'consecutive per round, after one untimed call) after {args.warmup} '
        'warmup call(s); '
        '(/np) = ratio to the non-private step; peak MiB = XLA '
        'memory_analysis (temp + arguments + outputs)\n')
  print(HEADER)
  print('|' + '---|' * HEADER.count(' | ') + '---|')
  rows = {}
  for name in args.models:
    for b in args.batch_sizes:
      rows[name, b] = bench_row(name, b, args.repeats, args.warmup,
                                args.burst, args.time_budget, args.slow,
                                optional)
      print(format_row(name, b, rows[name, b]), flush=True)
  print('\nload average at end (1, 5, 15 min): '
        + ', '.join(f'{x:.2f}' for x in os.getloadavg()))
  sizes = sorted(args.batch_sizes)
  if len(sizes) > 1:
    for name in args.models:
      lo, hi = rows[name, sizes[0]]['memory'], rows[name, sizes[-1]]['memory']
      slopes = ', '.join(
          f'{m} {(hi[m] - lo[m]) / (sizes[-1] - sizes[0]) / 1024:.1f}'
          for m in JAX_METHODS if m in hi and hi[m] is not None)
      print(f'{name}: peak-memory growth per example, KiB (B={sizes[0]}..'
            f'{sizes[-1]}): {slopes}')


if __name__ == '__main__':
  main()
