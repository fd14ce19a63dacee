"""Ghost norms on a tied GPT-style decoder against float64 per-example norms.

A measurement, not a test: a decoder language model (vocabulary 1024, width
128, 2 pre-LN blocks of 4-head causal self-attention and a 512 gelu MLP,
learned positional embedding, input embedding tied to the output projection)
at sequence lengths T, batch B. Per T it prints the largest relative excess
of the certified ghost norms over the exact per-example norms (vmap in
float64, run in a subprocess with x64 enabled), per example (all leaves) and
per leaf (the worst one), the smallest (a certified bound never falls below
the exact norm by more than float32 rounding of the norm itself), and the
relative difference of the clipped sums (clip = median float32 vmap norm)
from the float64 one, for ghost (book-keeping and two-pass) and float32 vmap.

Run: ``python -m experiments.bench.ghost_margin [--seq-lens 128 512 2048]
[--batch-sizes 16 4 2]``.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax


class TiedDecoder(nn.Module):
  """GPT-style decoder: tied token embedding, learned positions, pre-LN
  causal self-attention and MLP blocks, final LayerNorm, logits ``h E^T``."""
  vocab: int = 1024
  width: int = 128
  blocks: int = 2
  heads: int = 4
  max_len: int = 2048

  @nn.compact
  def __call__(self, tokens):
    embed = nn.Embed(self.vocab, self.width)
    pos = self.param('pos', nn.initializers.normal(0.02),
                     (self.max_len, self.width))
    x = embed(tokens) + pos[:tokens.shape[-1]]
    mask = nn.make_causal_mask(tokens)
    for _ in range(self.blocks):
      h = nn.LayerNorm()(x)
      x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(
          h, h, mask=mask)
      h = nn.LayerNorm()(x)
      x = x + nn.Dense(self.width)(nn.gelu(nn.Dense(4 * self.width)(h)))
    return embed.attend(nn.LayerNorm()(x))


def example_loss(model):
  """Next-token cross-entropy of one sequence of T + 1 tokens."""
  def loss(params, tokens):
    logits = model.apply(params, tokens[:-1])
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(
        logits, tokens[1:]))
  return loss


def setup(seq_len: int, batch_size: int, max_len: int = 2048, **kwargs):
  """(model, params, tokens [B, T + 1]) with fixed seeds."""
  model = TiedDecoder(max_len=max_len, **kwargs)
  tokens = jax.random.randint(jax.random.key(1), (batch_size, seq_len + 1),
                              0, model.vocab, jnp.int32)
  params = jax.jit(model.init)(jax.random.key(0), tokens[0, :-1])
  return model, params, tokens


def _reference(path: str) -> None:
  """float64 per-example norms (total and per leaf) and clipped sum."""
  data = np.load(path)
  model, params, tokens = setup(int(data['seq_len']),
                                int(data['batch_size']))
  leaves = [jnp.asarray(data[f'leaf{i}'], jnp.float64)
            for i in range(len(jax.tree.leaves(params)))]
  params = jax.tree.unflatten(jax.tree.structure(params), leaves)
  tokens = jnp.asarray(data['tokens'])
  grads = jax.vmap(jax.grad(example_loss(model)), (None, 0))(params, tokens)
  leaves = jax.tree.leaves(grads)
  sq = np.stack([np.sum(np.square(g).reshape(g.shape[0], -1), 1)
                 for g in leaves])
  norms = np.sqrt(sq.sum(0))
  c = np.minimum(1.0, float(data['clip']) / norms)
  total = np.concatenate([np.tensordot(c, g, 1).ravel() for g in leaves])
  np.savez(path, leaf_norms=np.sqrt(sq), norms=norms, clipped=total)


def _flat(tree):
  return np.concatenate([np.ravel(x) for x in jax.tree.leaves(tree)])


def measure(seq_len: int, batch_size: int) -> dict:
  """The module doc's numbers at one T."""
  model, params, tokens = setup(seq_len, batch_size)
  loss = example_loss(model)
  mask = jnp.ones(batch_size, bool)
  vmap = jax.jit(dpjax.clipped_grad_sum(loss, 1.0))(params, tokens, mask)
  clip = float(np.median(vmap.norms))
  out = {'T': seq_len, 'B': batch_size}
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, 'ref.npz')
    np.savez(path, seq_len=seq_len, batch_size=batch_size, clip=clip,
             tokens=tokens, **{f'leaf{i}': leaf for i, leaf in
                               enumerate(jax.tree.leaves(params))})
    subprocess.run([sys.executable, '-m', 'experiments.bench.ghost_margin',
                    '--reference', path], check=True,
                   env={**os.environ, 'JAX_ENABLE_X64': '1'})
    ref = dict(np.load(path))
  sums = {'vmap f32': jax.jit(dpjax.clipped_grad_sum(loss, clip))(
      params, tokens, mask).grad_sum.value}
  for mode in ('bookkeeping', 'two_pass'):
    run = jax.jit(dpjax.clipped_grad_sum(loss, clip, 'ghost',
                                         ghost_mode=mode))
    result = run(params, tokens, mask)
    sums[f'ghost {mode}'] = result.grad_sum.value
    excess = np.asarray(result.norms, np.float64) / ref['norms'] - 1
    out[f'{mode} norm excess max'] = float(excess.max())
    out[f'{mode} norm excess min'] = float(excess.min())
  leaf_sq = dpjax.clipping.ghost_grads(loss, params, tokens).sq_norms()
  # Leaves whose exact norm is below 1e-3 of the largest leaf's (the key
  # bias's gradient is 0 up to rounding: softmax ignores a shift) are left out.
  big = ref['leaf_norms'] > 1e-3 * ref['leaf_norms'].max(0)
  leaf_excess = [float(np.max(np.sqrt(np.asarray(s, np.float64))[b] / r[b] - 1,
                              initial=-np.inf))
                 for s, r, b in zip(leaf_sq, ref['leaf_norms'], big)]
  names = list(dpjax.clipping.ghost_plan(loss, params, tokens))
  worst = int(np.argmax(leaf_excess))
  out['worst leaf'] = f'{names[worst]} {leaf_excess[worst]:.2e}'
  for name, total in sums.items():
    diff = np.linalg.norm(_flat(total) - ref['clipped'])
    out[f'{name} sum rel diff'] = float(diff / np.linalg.norm(ref['clipped']))
  return out


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--seq-lens', type=int, nargs='+',
                      default=[128, 512, 2048])
  parser.add_argument('--batch-sizes', type=int, nargs='+',
                      default=[16, 4, 2])
  parser.add_argument('--reference', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.reference:
    _reference(args.reference)
    return
  model, params, tokens = setup(16, 1)
  for name, form in dpjax.clipping.ghost_plan(
      example_loss(model), params, tokens).items():
    print(f'{name}: {form}')
  for seq_len, batch_size in zip(args.seq_lens, args.batch_sizes,
                                 strict=True):
    for key, value in measure(seq_len, batch_size).items():
      print(f'{key}: {value:.3e}' if isinstance(value, float)
            else f'{key}: {value}')
    sys.stdout.flush()


if __name__ == '__main__':
  main()
