"""Distributed DP round benchmark (not a test): DDG and Skellam vs cpSGD.

One round = every client's encoding, the secure sum and the server's
decoding, for n clients with vectors of length d, all measured in the same
run (medians over timed repeats after a warmup call, compilation reported
separately, each call followed by ``jax.block_until_ready``):

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
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import accounting
from dpjax import distributed


def _time(fn, repeats):
  start = time.perf_counter()
  jax.block_until_ready(fn(jax.random.key(0)))
  compile_s = time.perf_counter() - start
  times = []
  for r in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn(jax.random.key(r + 1)))
    times.append(time.perf_counter() - start)
  return statistics.median(times), compile_s


def _cpsgd(args, n, d):
  """Rotated cpSGD at the same per-round epsilon (smallest m, Theorem 1)."""
  xmax = distributed.rotated_linf_clip(1.0, d, n, args.delta)

  def make(m):
    return distributed.CpsgdConfig(l2_norm_clip=1.0, levels=args.levels,
                                   trials=m, linf_clip=xmax, rotate=True)

  def eps(m):
    try:
      return distributed.cpsgd_round_event(make(m), d, n,
                                           args.delta).epsilon
    except ValueError:
      return math.inf
  limit = (2**31 - 1) // n - args.levels
  return make(accounting.calibrate_trials(eps, args.epsilon,
                                          max_trials=limit))


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
  device = jax.devices()[0]
  load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
  print(f'jax {jax.__version__}, device {device.platform}, {os.cpu_count()} '
        f'CPU cores, load average {load:.2f} at start; n = {n}, d = {d}, '
        f'b = {args.bits}, eps = {args.epsilon:g} per round, medians over '
        f'{args.repeats} repeats\n')
  rng = np.random.default_rng(0)
  xs = rng.normal(size=(n, d)).astype(np.float32)
  xs = jnp.asarray(xs / np.linalg.norm(xs, axis=1, keepdims=True))
  rows = []
  cp = _cpsgd(args, n, d)
  t, c = _time(lambda k: distributed.distributed_mean(cp, k, xs),
               args.repeats)
  rows.append((f'cpSGD (k={cp.levels}, m={cp.trials}, rotation)', t, c))
  for mech in ('ddg', 'skellam'):
    cfg = distributed.calibrate_distributed_dp(
        mech, epsilon=args.epsilon, delta=args.delta, num_clients=n,
        dimension=d, bits=args.bits, l2_norm_clip=1.0, replace_one=True)
    t, c = _time(lambda k, cfg=cfg: distributed.secure_sum_round(
        cfg, k, xs).estimate, args.repeats)
    rows.append((f'{mech.upper() if mech == "ddg" else "Skellam"} '
                 f'(b={args.bits})', t, c))
  stddev = accounting.calibrate_gaussian_stddev(args.epsilon, args.delta,
                                                2.0, 'pld') / math.sqrt(n)
  t, c = _time(lambda k: distributed.gaussian_distributed_mean(
      k, xs, 1.0, stddev), args.repeats)
  rows.append(('Gaussian (32-bit floats)', t, c))
  base = rows[0][1]
  print('| protocol | s per round | compile s | time / cpSGD |')
  print('|---|---|---|---|')
  for name, t, c in rows:
    print(f'| {name} | {t:.4g} | {c:.3g} | {t / base:.3g} |', flush=True)


if __name__ == '__main__':
  main()
