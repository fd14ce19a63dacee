"""Distributed DP round benchmark (not a test): DDG and Skellam vs cpSGD.

One round = every client's encoding, the secure sum and the server's
decoding, for n clients with vectors of length d, all measured in the same
run (``timing.time_medians``: calls interleaved across the protocols in two
passes, each cell a median with the range of the pass medians; the first
call, with compilation, reported separately; each call followed by
``jax.block_until_ready``):

* DDG and Skellam: ``dpjax.distributed.secure_sum_round`` (clip, rotate,
  scale, conditional rounding, exact discrete Gaussian / Skellam share,
  modulo 2^b, modular sum, decode), vmapped over the clients, with gamma and
  the noise from ``calibrate_distributed_dp`` at (epsilon, delta) per round;
* cpSGD: ``dpjax.distributed.distributed_mean`` with rotation, k levels and
  the smallest Theorem 1 m for the same epsilon (replace-one, as cpSGD's
  Theorem 1 is stated);
* the Gaussian protocol (32-bit floats) for scale.

Ratios are per-round times over cpSGD's in this run.

Run (small): ``python -m experiments bench distributed_dp``; the issue's
size: ``python -m experiments bench distributed_dp --num-clients 1000
--dimension 65536`` (several GB of memory for the vmapped messages).
"""

import argparse
import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np

from dpjax import accounting
from dpjax import distributed
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--num-clients 100 --dimension 64 --repeats 2'


class _Keys:
  """A fresh key per call: ``fn(next key)``."""

  def __init__(self, fn):
    self.fn, self.calls = fn, 0

  def __call__(self):
    self.calls += 1
    return self.fn(jax.random.key(self.calls))


def _cpsgd(args, n, d):
  """Rotated cpSGD at the same per-round epsilon (smallest m, Theorem 1)."""
  xmax = distributed.rotated_linf_clip(1.0, d, n, args.delta)

  def make(m):
    return distributed.CpsgdConfig(l2_norm_clip=1.0, levels=args.levels,
                                   trials=m, linf_clip=xmax, rotate=True)

  def event(m):
    try:
      return distributed.cpsgd_event(make(m), d, n, args.delta)
    except ValueError:
      return dp_accounting.NonPrivateDpEvent()
  limit = (2**31 - 1) // n - args.levels
  return make(accounting.calibrate(event, args.epsilon, args.delta, start=1,
                                   ceiling=limit))


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                              allow_abbrev=False)
  p.add_argument('--num-clients', type=int, default=100)
  p.add_argument('--dimension', type=int, default=4096)
  p.add_argument('--bits', type=int, default=16)
  p.add_argument('--levels', type=int, default=16, help="cpSGD's k")
  p.add_argument('--epsilon', type=float, default=1.0)
  p.add_argument('--delta', type=float, default=1e-5)
  p.add_argument('--repeats', type=int, default=5)
  args = p.parse_args(argv)
  for name in ('num_clients', 'dimension', 'levels', 'repeats'):
    if getattr(args, name) < 1:
      p.error(f'--{name.replace("_", "-")} must be >= 1')
  return args


def main(argv=None):
  args = parse_args(argv)
  n, d = args.num_clients, args.dimension
  print(f'device {jax.devices()[0].platform}; n = {n}, d = {d}, '
        f'b = {args.bits}, eps = {args.epsilon:g} per round; '
        f'{timing.legend()}, {args.repeats} calls per pass\n')
  rng = np.random.default_rng(0)
  xs = rng.normal(size=(n, d)).astype(np.float32)
  xs = jnp.asarray(xs / np.linalg.norm(xs, axis=1, keepdims=True))
  fns = {}
  cp = _cpsgd(args, n, d)
  fns[f'cpSGD (k={cp.levels}, m={cp.trials}, rotation)'] = _Keys(
      lambda k: distributed.distributed_mean(cp, k, xs))
  for mech in ('ddg', 'skellam'):
    cfg = distributed.calibrate_distributed_dp(
        mech, epsilon=args.epsilon, delta=args.delta, num_clients=n,
        dimension=d, bits=args.bits, l2_norm_clip=1.0, replace_one=True)
    fns[f'{mech.upper() if mech == "ddg" else "Skellam"} (b={args.bits})'] = (
        _Keys(lambda k, cfg=cfg: distributed.secure_sum_round(
            cfg, k, xs).estimate))
  stddev = 2.0 * accounting.calibrate(accounting.gaussian_event, args.epsilon,
                                      args.delta, 'pld') / math.sqrt(n)
  fns['Gaussian (32-bit floats)'] = _Keys(
      lambda k: distributed.gaussian_distributed_mean(k, xs, 1.0, stddev))
  first = {name: timing.timed_call(fn, jax.block_until_ready)[0]
           for name, fn in fns.items()}
  stats = timing.time_medians(fns, args.repeats,
                              block=jax.block_until_ready, scale=1.0)
  base = next(iter(stats.values()))['median']
  print('| protocol | s per round | first call s (compile) | time / cpSGD |')
  print('|---|---|---|---|')
  for name, stat in stats.items():
    print(f"| {name} | {timing.cell(stat, 4)} | {first[name]:.3g} | "
          f"{stat['median'] / base:.3g} |", flush=True)
