"""DP-SGD demo on scikit-learn's bundled digits data (1797 8x8 images, 10 classes).

Trains a 64-64-10 tanh MLP on an 80/20 split with non-private SGD and with
DP-SGD (``dpjax.dpsgd``: Poisson sampling at expected batch 64, clip 1.0,
momentum 0.9) at target epsilon 1, 3 and 8 (delta 1e-5). Every executed step is
recorded in a ``PrivacyLedger``; epsilon is reported from it under the RDP and
PLD accountants, next to test accuracy. Prints a markdown table and writes
``results.md`` and ``results.json`` under ``results/demo/`` (or ``--out DIR``).

Run: ``python -m experiments [--seed S] [--out DIR]``.
"""

import argparse
import json
import os
import sys
import time

from absl import logging as absl_logging
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.datasets import load_digits

import dpjax
from dpjax import accounting

CONFIG = dict(train_fraction=0.8, hidden=64, expected_batch_size=64, epochs=25,
              learning_rate=0.05, momentum=0.9, l2_norm_clip=1.0, delta=1e-5,
              target_epsilons=[1.0, 3.0, 8.0])


class MLP(nn.Module):
  hidden: int = CONFIG['hidden']

  @nn.compact
  def __call__(self, x):
    return nn.Dense(10)(jnp.tanh(nn.Dense(self.hidden)(x)))


MODEL = MLP()


def loss_fn(params, example):
  """Softmax cross-entropy of ONE example ``(x [64], y [])``."""
  x, y = example
  return optax.softmax_cross_entropy_with_integer_labels(MODEL.apply(params, x), y)


def load_data(seed):
  digits = load_digits()
  x = (digits.data / 16.0).astype(np.float32)  # pixel values are 0..16
  y = digits.target.astype(np.int32)
  perm = np.random.default_rng(seed).permutation(len(x))
  n_train = int(CONFIG['train_fraction'] * len(x))
  tr, te = perm[:n_train], perm[n_train:]
  return (jnp.asarray(x[tr]), jnp.asarray(y[tr])), (jnp.asarray(x[te]), jnp.asarray(y[te]))


def train(data, sampler, steps, key, sigma=None):
  """Runs ``steps`` jitted steps; ``sigma=None`` is non-private SGD on the same batches."""
  x, y = data
  init_key, noise_key, batch_key = jax.random.split(key, 3)
  params = MODEL.init(init_key, x[0])
  lr, momentum = CONFIG['learning_rate'], CONFIG['momentum']
  if sigma is None:
    tx = optax.sgd(lr, momentum=momentum)
  else:
    tx = dpjax.dpsgd(lr, l2_norm_clip=CONFIG['l2_norm_clip'], noise_multiplier=sigma,
                     expected_batch_size=sampler.expected_batch_size, key=noise_key,
                     momentum=momentum)
  grads_fn = dpjax.per_example_grads(loss_fn)

  @jax.jit
  def step(params, state, t):
    batch = sampler.sample(jax.random.fold_in(batch_key, t))
    examples = (x[batch.indices], y[batch.indices])
    if sigma is None:  # masked sum over the expected batch size, like DP-SGD
      def batch_loss(p):
        losses = jax.vmap(loss_fn, (None, 0))(p, examples)
        return jnp.sum(jnp.where(batch.mask, losses, 0.0)) / sampler.expected_batch_size
      updates, state = tx.update(jax.grad(batch_loss)(params), state, params)
    else:
      grads = grads_fn(params, examples)
      updates, state = tx.update(grads, state, params, mask=batch.mask)
    return optax.apply_updates(params, updates), state

  state, ledger = tx.init(params), accounting.PrivacyLedger()
  for t in range(steps):
    params, state = step(params, state, t)
    if sigma is not None:
      ledger.record(sampler.dp_event(sigma))
  return jax.block_until_ready(params), ledger


def accuracy(params, data):
  x, y = data
  return float(jnp.mean(jnp.argmax(MODEL.apply(params, x), axis=-1) == y))


class _Parser(argparse.ArgumentParser):
  def error(self, message):  # one line, no usage dump, exit status 2
    sys.stderr.write(f'{self.prog}: error: {message}\n')
    sys.exit(2)


def parse_args(argv):
  parser = _Parser(prog='python -m experiments', description=__doc__.splitlines()[0])
  parser.add_argument('--seed', type=int, default=0, help='data split, init and noise seed')
  parser.add_argument('--out', default=os.path.join('results', 'demo'), help='output dir')
  args = parser.parse_args(argv)
  if not 0 <= args.seed < 2**32:
    parser.error(f'--seed must be in [0, 2**32), got {args.seed}')
  try:  # fail before training, not after
    os.makedirs(args.out, exist_ok=True)
  except OSError as e:
    parser.error(f'cannot create --out directory {args.out!r}: {e.strerror or e}')
  return args


def fmt(v, spec):
  return '-' if v is None else format(v, spec)


def main(argv=None):
  args = parse_args(argv)
  absl_logging.set_verbosity(absl_logging.ERROR)  # dp_accounting's RDP-order notes
  train_data, test_data = load_data(args.seed)
  n_train, delta = len(train_data[1]), CONFIG['delta']
  sampler = dpjax.PoissonSampler(n_train, CONFIG['expected_batch_size'] / n_train)
  steps = round(CONFIG['epochs'] / sampler.sampling_rate)
  key = jax.random.key(args.seed)
  rows = []
  for target in [None] + CONFIG['target_epsilons']:
    start = time.perf_counter()
    # Calibrate the event the sampler actually runs (truncated Poisson).
    sigma = None if target is None else accounting.calibrate(
        sampler.dp_event, target, delta, steps=steps)
    params, ledger = train(train_data, sampler, steps, key, sigma)
    eps = {a: None if sigma is None else ledger.epsilon(delta, a) for a in ('rdp', 'pld')}
    rows.append(dict(setting='non-private' if target is None else f'DP eps<={target:g}',
                     target_epsilon=target, noise_multiplier=sigma, steps=steps,
                     epsilon_rdp=eps['rdp'], epsilon_pld=eps['pld'],
                     test_accuracy=accuracy(params, test_data),
                     seconds=round(time.perf_counter() - start, 2),
                     ledger=None if sigma is None else json.loads(ledger.to_json())))
    print(f"{rows[-1]['setting']}: done in {rows[-1]['seconds']} s", file=sys.stderr)

  lines = ['| setting | sigma | steps | eps_rdp | eps_pld | test accuracy |',
           '|---|---|---|---|---|---|']
  lines += [f"| {r['setting']} | {fmt(r['noise_multiplier'], '.4f')} | {r['steps']} | "
            f"{fmt(r['epsilon_rdp'], '.3f')} | {fmt(r['epsilon_pld'], '.3f')} | "
            f"{r['test_accuracy']:.4f} |" for r in rows]
  header = (f'sklearn digits: {n_train} train / {len(test_data[1])} test, seed {args.seed}, '
            f'q={sampler.sampling_rate:.5f} (expected batch {sampler.expected_batch_size:g}, '
            f'cap {sampler.max_batch_size}), delta={delta:g}')
  table = '\n'.join([header, ''] + lines)
  print(table)
  try:
    with open(os.path.join(args.out, 'results.md'), 'w') as f:
      f.write(table + '\n')
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
      json.dump(dict(dataset='sklearn digits', seed=args.seed, config=CONFIG,
                     num_train=n_train, num_test=len(test_data[1]),
                     sampling_rate=sampler.sampling_rate,
                     max_batch_size=sampler.max_batch_size, jax_version=jax.__version__,
                     results=rows), f, indent=2)
  except OSError as e:
    sys.exit(f'python -m experiments: error: cannot write results to {args.out!r}: {e}')
  print(f'wrote {args.out}/results.md and results.json')


if __name__ == '__main__':
  main()
