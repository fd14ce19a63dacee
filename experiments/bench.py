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
import json
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
from experiments import bench_cli

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


class Transformer(nn.Module):
  """One pre-LN transformer block over 32 tokens of a 256-word vocabulary.

  Token + position embeddings (dim 128), LayerNorm -> 4-head self-attention
  -> residual, LayerNorm -> MLP 512 (gelu) -> residual, LayerNorm, mean over
  tokens, Dense 10; 236,682 parameters.
  """
  vocab: int = 256
  seq_len: int = 32
  dim: int = 128
  heads: int = 4
  hidden: int = 512

  @nn.compact
  def __call__(self, tokens):
    x = nn.Embed(self.vocab, self.dim)(tokens)
    x = x + nn.Embed(self.seq_len, self.dim)(jnp.arange(self.seq_len))
    h = nn.LayerNorm()(x)
    x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(h, h)
    h = nn.LayerNorm()(x)
    x = x + nn.Dense(self.dim)(nn.gelu(nn.Dense(self.hidden)(h)))
    return nn.Dense(10)(nn.LayerNorm()(x).mean(axis=-2))


MODELS = {'mlp-784-512-512-10': MLP, 'tb-mnist-cnn': CNN,
          'transformer-128x4-seq32': Transformer}


def random_batch(name: str, batch_size: int, key: jax.Array):
  """(inputs, labels): 28x28x1 images, or token ids for the transformer."""
  kx, ky = jax.random.split(key)
  if name.startswith('transformer'):
    cfg = Transformer()
    x = jax.random.randint(kx, (batch_size, cfg.seq_len), 0, cfg.vocab)
  else:
    x = jax.random.normal(kx, (batch_size, 28, 28, 1))
  return x, jax.random.randint(ky, (batch_size,), 0, 10)


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
      grad_sum = clipped(params, batch, mask).grad_sum.value
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


def memory_bytes(compiled) -> dict[str, int | None]:
  """The compiled step's temp bytes and peak (temp + arguments + outputs)."""
  stats = compiled.memory_analysis()
  if stats is None:
    return {'temp': None, 'peak': None}
  return {'temp': int(stats.temp_size_in_bytes),
          'peak': int(stats.temp_size_in_bytes + stats.argument_size_in_bytes
                      + stats.output_size_in_bytes)}


def compile_steps(name: str, batch_size: int, optional: dict, methods=None):
  """(method -> run(), method -> memory_bytes, #params, (x, y)).

  ``run()`` makes one jitted step and blocks until it is done.
  """
  model = MODELS[name]()
  kp, kb = jax.random.split(jax.random.key(1))
  x, y = random_batch(name, batch_size, kb)
  params = model.init(kp, x[0])
  batch, mask = (x, y), jnp.ones((batch_size,), bool)
  runners, memory, carry = {}, {}, {}
  for method, (tx, step) in make_jax_steps(model, batch_size,
                                           optional).items():
    if methods is not None and method not in methods:
      continue
    state = tx.init(params)
    compiled = jax.jit(step).lower(params, state, batch, mask).compile()
    memory[method] = memory_bytes(compiled)
    carry[method] = (params, state)

    def run(method=method, compiled=compiled):
      carry[method] = jax.block_until_ready(
          compiled(*carry[method], batch, mask))

    runners[method] = run
  n_params = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(params))
  return runners, memory, n_params, (x, y)


# --- PyTorch / Opacus steps --------------------------------------------------


def _torch_transformer(torch):
  """The Transformer above in PyTorch, from modules Opacus can clip."""
  nn_t, cfg = torch.nn, Transformer()

  class Block(nn_t.Module):

    def __init__(self):
      super().__init__()
      self.tok = nn_t.Embedding(cfg.vocab, cfg.dim)
      self.pos = nn_t.Embedding(cfg.seq_len, cfg.dim)
      self.ln1, self.ln2, self.ln3 = (nn_t.LayerNorm(cfg.dim) for _ in range(3))
      self.q, self.k, self.v, self.o = (nn_t.Linear(cfg.dim, cfg.dim)
                                        for _ in range(4))
      self.fc1 = nn_t.Linear(cfg.dim, cfg.hidden)
      self.fc2 = nn_t.Linear(cfg.hidden, cfg.dim)
      self.head = nn_t.Linear(cfg.dim, 10)

    def forward(self, tokens):
      b, t = tokens.shape
      pos = torch.arange(t).expand(b, t)  # batch-first, as Opacus needs
      x = self.tok(tokens) + self.pos(pos)
      h = self.ln1(x)
      q, k, v = (z.reshape(b, t, cfg.heads, -1).transpose(1, 2)
                 for z in (self.q(h), self.k(h), self.v(h)))
      w = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1]**0.5, dim=-1)
      x = x + self.o((w @ v).transpose(1, 2).reshape(b, t, cfg.dim))
      h = self.ln2(x)
      x = x + self.fc2(torch.nn.functional.gelu(self.fc1(h),
                                                approximate='tanh'))
      return self.head(self.ln3(x).mean(dim=1))

  return Block()


def make_torch_steps(name: str, batch_size: int, optional: dict,
                     x_np: np.ndarray, y_np: np.ndarray
                     ) -> tuple[dict[str, Callable], dict[str, str]]:
  """(name -> step(), name -> why skipped) for plain PyTorch and Opacus."""
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
    if name.startswith('transformer'):
      return _torch_transformer(torch)
    return nn_t.Sequential(
        nn_t.Conv2d(1, 16, 8, 2, padding=2), nn_t.Tanh(),
        nn_t.MaxPool2d(2, 1), nn_t.Conv2d(16, 32, 4, 2), nn_t.Tanh(),
        nn_t.MaxPool2d(2, 1), nn_t.Flatten(), nn_t.Linear(32 * 4 * 4, 32),
        nn_t.Tanh(), nn_t.Linear(32, 10))

  if x_np.ndim == 4:  # NHWC -> NCHW images
    x = torch.from_numpy(np.transpose(x_np, (0, 3, 1, 2)).copy())
  else:
    x = torch.from_numpy(x_np.astype(np.int64))
  y = torch.from_numpy(y_np.astype(np.int64))
  loader = torch.utils.data.DataLoader(
      torch.utils.data.TensorDataset(x, y), batch_size=batch_size)
  steps, skipped = {}, {}

  model = build()
  opt = torch.optim.SGD(model.parameters(), lr=LR)
  criterion = nn_t.CrossEntropyLoss()

  def torch_step():
    opt.zero_grad(set_to_none=True)
    criterion(model(x), y).backward()
    opt.step()

  steps['torch'] = torch_step
  for mode in ('hooks', 'ghost'):
    column = 'opacus' if mode == 'hooks' else 'opacus-ghost'
    try:
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

      dp_step()  # fails here if Opacus cannot handle a layer
    except Exception as e:  # pylint: disable=broad-except
      skipped[column] = f'Opacus {mode} failed ({type(e).__name__}: {e})'
      continue
    steps[column] = dp_step
  return steps, skipped


# --- timing ------------------------------------------------------------------


def time_group(runners: dict[str, Callable], repeats: int, warmup: int,
               burst: int, budget: float, slow: float, min_calls: int = 1):
  """Seconds per call of each runner; returns (times, rounds).

  Rounds cycle through the runners (so that drift in machine load hits them
  alike); in each round a runner makes one untimed call, which re-warms
  caches and the allocator's pages after the previous runner (on CPU a step
  that follows one with a GB-sized temp buffer otherwise pays page faults),
  then ``burst`` consecutive timed calls, as in a training loop. Rounds shrink
  to fit ``budget`` seconds, but not below ``min_calls`` timed calls per
  runner. A runner whose warmup call takes more than ``slow`` seconds is
  timed once, by that call.
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
  rounds = max(-(-min_calls // burst),
               min(repeats, int(budget / max(per_round, 1e-9))))
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


def bench_row(name: str, batch_size: int, args, optional: dict, compiled
              ) -> dict[str, Any]:
  """Median ms per step, ratios and compiled memory of every method.

  ``compiled`` is ``compile_steps``'s result for this row.
  """
  runners, memory, n_params, (x, y) = compiled
  groups = [runners]  # JAX methods, then PyTorch ones (timed apart: the
  # OpenMP threads of torch keep spinning after a call and slow the next one)
  skipped = {}
  for method in set(DP_JAX) - set(runners):
    skipped[method] = (optional['jax_privacy']
                       if method == 'jax_privacy'
                       and isinstance(optional['jax_privacy'], str)
                       else 'not requested (--methods)')
  if isinstance(optional['torch'], str):
    for column in TORCH_METHODS:
      skipped[column] = optional['torch']
  else:
    torch_steps, torch_skipped = make_torch_steps(
        name, batch_size, optional, np.asarray(x), np.asarray(y))
    groups.append(torch_steps)
    skipped.update(torch_skipped)
  times, calls = {}, None
  for group in groups:
    group_times, rounds = time_group(group, args.repeats, args.warmup,
                                     args.burst, args.time_budget, args.slow,
                                     args.min_calls)
    times.update(group_times)
    calls = rounds * args.burst if calls is None else calls
  ms = {m: 1e3 * statistics.median(t) for m, t in times.items()}
  ratio = {m: ms[m] / ms[BASE[m]] for m in ms if m in BASE}
  param_bytes = 4 * n_params  # float32
  np_temp = memory['non-private']['temp']
  extra = {m: (v['temp'] - np_temp) / param_bytes for m, v in memory.items()
           if v['temp'] is not None and np_temp is not None
           and m != 'non-private'}
  return {'model': name, 'batch_size': batch_size, 'params': n_params,
          'param_bytes': param_bytes, 'calls': calls,
          'counts': {m: len(t) for m, t in times.items()}, 'ms': ms,
          'ratio': ratio, 'memory': memory, 'extra_temp_param_units': extra,
          'skipped': skipped}


def sweep(name: str, args, optional: dict, methods, cache: dict
          ) -> list[dict[str, Any]]:
  """Time and compiled memory of ``methods`` at each plot batch size.

  ``cache`` maps (model, B) to steps the table already compiled.
  """
  points = []
  limit = args.max_run_gib * 2**30
  for b in args.plot_batch_sizes:
    if (name, b) in cache:
      runners, memory, _, _ = cache[name, b]
      runners = {m: r for m, r in runners.items() if m in methods}
    else:
      runners, memory, _, _ = compile_steps(name, b, optional, methods)
    too_big = {m for m in runners if (memory[m]['peak'] or 0) > limit}
    times, _ = time_group(
        {m: r for m, r in runners.items() if m not in too_big}, args.plot_calls,
        1, 1, args.time_budget, args.slow, args.plot_calls)
    for m in methods:
      point = {'model': name, 'batch_size': b, 'method': m,
               'temp_bytes': memory[m]['temp'], 'peak_bytes': memory[m]['peak'],
               'ms': 1e3 * statistics.median(times[m]) if m in times else None,
               'calls': len(times.get(m, ()))}
      if m in too_big:
        point['not_run'] = (f'compiled peak {memory[m]["peak"] / 2**30:.1f} '
                            f'GiB > --max-run-gib {args.max_run_gib:g}')
      points.append(point)
    print(f'  plot {name} B={b}: ' + ', '.join(
        f"{p['method']} {p['ms']:.1f} ms" if p['ms'] is not None
        else f"{p['method']} not run" for p in points[-len(methods):]),
          file=sys.stderr, flush=True)
  return points


# --- table, JSON and plot ----------------------------------------------------

TORCH_METHODS = ('torch', 'opacus', 'opacus-ghost')
BASE = {'ghost': 'non-private', 'vmap': 'non-private', 'optax': 'non-private',
        'jax_privacy': 'non-private', 'opacus': 'torch',
        'opacus-ghost': 'torch'}
DP_JAX = ('ghost', 'vmap', 'optax', 'jax_privacy')
PLOT_METHODS = ('non-private', 'ghost', 'vmap')
LABELS = {'non-private': 'non-private', 'ghost': 'dpjax ghost',
          'vmap': 'dpjax vmap', 'optax': 'optax DP',
          'jax_privacy': 'jax_privacy', 'opacus': 'Opacus',
          'opacus-ghost': 'Opacus ghost'}


def _cell(row: dict, method: str) -> str:
  ms = row['ms']
  if method not in ms:
    return 'skipped'
  out = f'{ms[method]:.2f}'
  if method in row['ratio']:
    out += f" ({row['ratio'][method]:.2f}x)"
  n = row['counts'][method]
  if n != row['calls']:
    out += f" [{n} call{'s' if n > 1 else ''}]"
  return out


def _mib(memory: dict, method: str) -> str:
  value = memory.get(method, {}).get('temp')
  return '-' if value is None else f'{value / 2**20:.1f}'


HEADER = ('| model | params | B | calls | non-private ms | noise only ms '
          '| dpjax ghost ms (/np) | dpjax vmap ms (/np) | optax DP ms (/np) '
          '| jax_privacy ms (/np) | torch ms | Opacus ms (/torch) '
          '| Opacus ghost ms (/torch) | temp MiB np / ghost / vmap / optax / '
          'jax_privacy | extra temp / param bytes: ghost / vmap / optax / '
          'jax_privacy |')


def format_row(row: dict) -> str:
  mem, extra = row['memory'], row['extra_temp_param_units']
  temp = ' / '.join(_mib(mem, m) for m in ('non-private',) + DP_JAX)
  units = ' / '.join(f'{extra[m]:.1f}' if m in extra else '-' for m in DP_JAX)
  cells = [row['model'], f"{row['params']:,}", str(row['batch_size']),
           str(row['calls'])]
  cells += [_cell(row, m) for m in ('non-private', 'noise') + DP_JAX
            + TORCH_METHODS]
  return '| ' + ' | '.join(cells + [temp, units]) + ' |'


def table(rows: list[dict]) -> str:
  lines = [HEADER, '|' + '---|' * (HEADER.count(' | ') + 1)]
  return '\n'.join(lines + [format_row(r) for r in rows])


def plot(points: list[dict], path: str) -> None:
  """Time per step and compiled temp memory against B, a panel per model."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  models = list(dict.fromkeys(p['model'] for p in points))
  fig, axes = plt.subplots(2, len(models),
                           figsize=(max(5.5, 4.5 * len(models)), 7.5),
                           squeeze=False)
  for j, name in enumerate(models):
    for i, (key, scale, label) in enumerate(
        (('ms', 1.0, 'ms per step (noisy: shared CPU)'),
         ('temp_bytes', 2**-20, 'compiled temp MiB (deterministic)'))):
      ax = axes[i][j]
      for m in PLOT_METHODS:
        pts = [(p['batch_size'], p[key] * scale) for p in points
               if p['model'] == name and p['method'] == m
               and p[key] is not None]
        if pts:
          ax.plot(*zip(*pts), marker='o', label=LABELS[m])
      ax.set_xscale('log', base=2)
      ax.set_yscale('log')
      ax.set_xlabel('batch size B')
      ax.set_ylabel(label)
      ax.set_title(name, fontsize=9)
      ax.grid(True, which='both', alpha=0.3)
      ax.legend(fontsize=8)
  fig.suptitle('DP-SGD step vs batch size\n(time is noisy; points over '
               '--max-run-gib are compiled, not timed)', fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


class OneLineParser(argparse.ArgumentParser):
  """argparse that reports a bad argument in one line (status 2)."""

  def error(self, message):  # one line, no usage dump, exit status 2
    sys.stderr.write(f'{self.prog}: error: {message}\n')
    sys.exit(2)


def _load() -> list[float]:
  return [round(x, 2) for x in os.getloadavg()]


def main(argv=None, prog: str = 'python -m experiments.bench') -> dict:
  """Runs the benchmark; writes bench.json, bench.md and bench.png in --out."""
  try:
    args = bench_cli.parse_args(argv, prog)
  except bench_cli.ArgumentError as e:
    sys.stderr.write(f'{prog}: error: {e}\n')
    sys.exit(2)
  os.makedirs(args.out, exist_ok=True)
  if args.baselines:
    optional = optional_imports()
  else:  # not even imported
    optional = dict.fromkeys(('jax_privacy', 'torch'),
                             'not requested (--no-baselines)')
  device = jax.devices()[0]
  versions = {'jax': jax.__version__, 'optax': optax.__version__}
  if not isinstance(optional['jax_privacy'], str):
    import jax_privacy  # pylint: disable=g-import-not-at-top
    versions['jax_privacy'] = jax_privacy.__version__
  if not isinstance(optional['torch'], str):
    torch, opacus = optional['torch']
    versions.update(torch=torch.__version__, opacus=opacus.__version__)
  machine = (f'{device.platform}: {device.device_kind}, '
             f'{os.cpu_count()} CPU cores')
  load_start = _load()
  settings = (f'clip {CLIP}, noise multiplier {SIGMA}, float32, random data; '
              f'median ms per jitted training step over `calls` timed calls '
              f'({args.burst} consecutive per round after one untimed call, '
              f'at least {args.min_calls}, methods interleaved) after '
              f'{args.warmup} warmup call(s); (/np) = ratio to the '
              'non-private step of the same framework; temp MiB = compiled '
              'XLA memory_analysis temp bytes (deterministic on CPU); extra '
              'temp / param bytes = (temp - non-private temp) / (4 x params)')
  print(', '.join(f'{k} {v}' for k, v in versions.items())
        + f'; device {machine}')
  for reason in sorted({v for v in optional.values() if isinstance(v, str)}):
    print(f'skipped: {reason}; install with pip install -e ".[bench]"')
  print('load average at start (1, 5, 15 min): '
        + ', '.join(map(str, load_start)))
  print(settings + '\n')
  print(HEADER)
  print('|' + '---|' * (HEADER.count(' | ') + 1))
  rows, cache = [], {}
  methods = ('non-private',) + tuple(args.methods)
  plot_methods = [m for m in PLOT_METHODS if m in methods]
  for name in args.models:
    for b in bench_cli.table_sizes(args, name):
      compiled = compile_steps(name, b, optional, methods)
      if args.plot and b in args.plot_batch_sizes:
        cache[name, b] = compiled  # the plot times these steps again
      rows.append(bench_row(name, b, args, optional, compiled))
      print(format_row(rows[-1]), flush=True)
  for row in rows:
    for column, reason in sorted(row['skipped'].items()):
      if not isinstance(optional.get(
          'torch' if column in TORCH_METHODS else column), str):
        print(f"{row['model']} B={row['batch_size']}: {column} skipped: "
              f'{reason}')
  load_table = _load()
  print('\nload average after the table (1, 5, 15 min): '
        + ', '.join(map(str, load_table)))
  for name in args.models:
    sizes = sorted(r['batch_size'] for r in rows if r['model'] == name)
    if len(sizes) > 1:
      by_b = {r['batch_size']: r['memory'] for r in rows if r['model'] == name}
      lo, hi = by_b[sizes[0]], by_b[sizes[-1]]
      per_example = lambda m: (  # noqa: E731
          (hi[m]['peak'] - lo[m]['peak']) / (sizes[-1] - sizes[0]) / 1024)
      slopes = ', '.join(
          f'{m} {per_example(m):.1f}' for m in ('non-private',) + DP_JAX
          if m in hi and hi[m]['peak'] is not None)
      print(f'{name}: peak-memory growth per example, KiB (B={sizes[0]}..'
            f'{sizes[-1]}): {slopes}')
  points = []
  if args.plot:
    print(f'plot: B in {args.plot_batch_sizes}, median of {args.plot_calls} '
          'calls', file=sys.stderr)
    for name in args.models:
      points += sweep(name, args, optional, plot_methods, cache)
  version_text = ', '.join(f'{k} {v}' for k, v in versions.items())
  markdown = (f'Machine: {machine}; {version_text}; '
              f'load average (1, 5, 15 min) {load_start} at start, '
              f'{load_table} after the table; {time.strftime("%Y-%m-%d")}.\n\n'
              f'{settings}.\n\n{table(rows)}\n')
  results = {'date': time.strftime('%Y-%m-%d %H:%M:%S'), 'machine': machine,
             'versions': versions, 'load_start': load_start,
             'load_after_table': load_table, 'load_end': _load(),
             'settings': settings, 'args': vars(args), 'rows': rows,
             'plot_points': points, 'table': table(rows)}
  paths = [os.path.join(args.out, f) for f in ('bench.json', 'bench.md')]
  with open(paths[0], 'w') as f:
    json.dump(results, f, indent=1)
  with open(paths[1], 'w') as f:
    f.write(markdown)
  if points:
    paths.append(os.path.join(args.out, 'bench.png'))
    plot(points, paths[-1])
  print('\nwrote ' + ', '.join(paths))
  return results


if __name__ == '__main__':
  main()
