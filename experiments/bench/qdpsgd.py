"""Decentralized round benchmark (not a test): one jitted round vs a Python loop.

For n agents in ``--num-agents`` (default 10, 100, 1000), each holding a
copy of a one-hidden-layer MLP of about 40K parameters (784 -> 50 -> 10,
sigmoid, the paper's MNIST model) and a deadline batch (B = 20, cap 36), it
times:

* **jitted**: one ``dpjax.distributed.qdpsgd1`` round over all agents at
  once (vmapped over agents, gossip as one W @ z per leaf);
* **loop**: the same round written as a Python loop over agents, each agent's
  gradient, quantization and noise jitted per agent (one dispatch per agent)
  and the gossip as a per-agent weighted sum, as a simulator without an
  agent axis would do it.

Both are measured in the same run, their calls interleaved in two passes
(``timing.time_medians``: a median with the range of the pass medians;
compilation excluded and reported). The loop is timed at up to
``--loop-max`` agents and extrapolated linearly beyond (reported as such).

Run: ``python -m experiments bench qdpsgd [--num-agents 10 100 1000]``.
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import clipping
from dpjax import compression
from dpjax import distributed as dd
from dpjax import noise
from dpjax import sampling
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--num-agents 10 --repeats 1 --loop-max 10'


def _model(key):
  k1, k2 = jax.random.split(key)
  return {'w1': jax.random.normal(k1, (784, 50)) * 0.03,
          'b1': jnp.zeros(50),
          'w2': jax.random.normal(k2, (50, 10)) * 0.1, 'b2': jnp.zeros(10)}


def _loss(p, example):
  x, y = example
  h = jax.nn.sigmoid(x @ p['w1'] + p['b1'])
  return -jax.nn.log_softmax(h @ p['w2'] + p['b2'])[y]


def _connected_graph(key, n: int):
  """An Erdos-Renyi graph on ``n`` agents (edge probability 4/n + 0.02), the
  first connected one of keys folded from ``key`` (1, 2, ...)."""
  graph = dd.erdos_renyi(jax.random.fold_in(key, 1), n, min(1.0, 4.0 / n + 0.02))
  attempt = 2
  while dd.num_components(graph) > 1:
    graph = dd.erdos_renyi(jax.random.fold_in(key, attempt), n,
                           min(1.0, 4.0 / n + 0.02))
    attempt += 1
  return graph


def _loop_round(q, state, w, key, x, y, masks, m: int):
  """The round as a Python loop over the first ``m`` agents: each agent's
  quantization and step jitted (one dispatch per agent), the gossip as a
  per-agent weighted sum."""
  summed = clipping.clipped_grad_sum(_loss, 0.5)

  @jax.jit
  def agent_step(xi, zi, mixed, wii, k, ex, mask):
    g = summed(xi, ex, mask).grad_sum.value
    size = jnp.maximum(jnp.sum(mask), 1)
    zeta = noise.tree_noise(noise.gaussian, k, xi, stddev=0.5)
    return jax.tree.map(
        lambda a, z, m, gg, e: a + 0.5 * (m - wii * z + wii * a - a)
        - 0.05 * (gg / size + e), xi, zi, mixed, g, zeta)

  @jax.jit
  def quantize(xi, k):
    leaves, tree = jax.tree.flatten(xi)
    ks = jax.random.split(k, len(leaves))
    return jax.tree.unflatten(tree, [q.dequantize(q.quantize(v, key=kk))
                                     for kk, v in zip(ks, leaves)])

  xs = [jax.tree.map(lambda p: p[i], state.params) for i in range(m)]
  keys = jax.random.split(key, m)
  w32 = np.asarray(w, np.float32)

  def loop():
    zs = [quantize(xs[i], keys[i]) for i in range(m)]
    out = []
    for i in range(m):
      nbrs = np.flatnonzero(w32[i, :m])
      mixed = jax.tree.map(lambda *zz: sum(
          float(w32[i, j]) * zz[k] for k, j in enumerate(nbrs)),
                           *[zs[j] for j in nbrs])
      out.append(agent_step(xs[i], zs[i], mixed, float(w32[i, i]), keys[i],
                            (x[i], y[i]), masks[i]))
    return out

  return loop


def bench(n: int, repeats: int, loop_max: int) -> dict:
  """One qdpsgd1 round over ``n`` agents, jitted and as a Python loop."""
  key = jax.random.key(0)
  params = _model(key)
  w = dd.mixing_matrix(_connected_graph(key, n))
  q = compression.low_precision_quantizer(0.05, 3)
  alg = dd.qdpsgd1(_loss, w, l2_norm_clip=0.5, noise_multiplier=1.0,
                   learning_rate=0.1, mixing_rate=0.5, quantizer=q)
  sampler = sampling.DeadlineSampler(1000, 20)
  b = sampler.sample(jax.random.fold_in(key, 2), n)
  x = jax.random.normal(jax.random.fold_in(key, 3), (n, b.mask.shape[1], 784))
  y = jnp.zeros((n, b.mask.shape[1]), jnp.int32)
  batch = dd.AgentBatch((x, y), b.mask)
  state = alg.init(params)
  compile_s, _ = timing.timed_call(lambda: alg.round(state, key, batch),
                                   jax.block_until_ready)
  m = min(n, loop_max)
  loop = _loop_round(q, state, w, key, x, y, b.mask, m)
  stats = timing.time_medians(
      {'jitted': lambda: alg.round(state, key, batch), 'loop': loop},
      repeats, block=jax.block_until_ready, scale=1.0)
  looped = {k: v * n / m if k in ('median', 'lo', 'hi') else v
            for k, v in stats['loop'].items()}
  return dict(agents=n, compile_s=compile_s, jitted=stats['jitted'],
              loop=looped, loop_extrapolated=m < n,
              ratio=looped['median'] / stats['jitted']['median'],
              params=sum(int(np.prod(v.shape)) for v in jax.tree.leaves(params)))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                   allow_abbrev=False)
  parser.add_argument('--num-agents', type=int, nargs='+',
                      default=[10, 100, 1000], help='agents n, one row each')
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--loop-max', type=int, default=100)
  args = parser.parse_args(argv)
  print(f'devices: {jax.devices()}; {timing.legend()}, {args.repeats} '
        'calls per pass')
  print('| agents | params | compile (s) | jitted round (s) | Python loop (s) '
        '| loop / jitted | jitted s per agent |')
  print('|---|---|---|---|---|---|---|')
  for n in args.num_agents:
    r = bench(n, args.repeats, args.loop_max)
    loop = timing.cell(r['loop'], 3) + (' (extrapolated)'
                                        if r['loop_extrapolated'] else '')
    print(f"| {n} | {r['params']} | {r['compile_s']:.1f} | "
          f"{timing.cell(r['jitted'], 4)} | {loop} | {r['ratio']:.1f} | "
          f"{r['jitted']['median'] / n:.2e} |", flush=True)


if __name__ == '__main__':
  main()
