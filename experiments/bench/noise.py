"""Noise and rotation benchmark (not a test): exact samplers and the FWHT.

Rows, all measured in one run (``timing.time_medians``: calls interleaved
across the methods of a row in two passes, a median with the range of the
pass medians, after warmup calls; compilation excluded and reported
separately), each call followed by ``jax.block_until_ready``:

* discrete Gaussian: ``dpjax.noise.discrete_gaussian(key, (N,), sigma=sigma)``
  (jitted, N = 10^6 by default) against an exact reference written here in
  plain Python with ``fractions.Fraction`` and ints, following Canonne, Kamath
  and Steinke (2020) Alg. 1-3 literally (Bernoulli(exp(-gamma)) by the
  K-loop, discrete Laplace by Alg. 2, discrete Gaussian by Alg. 3 with
  t = floor(sigma) + 1), as in IBM's discretegauss.py. The reference draws
  ``--oracle-draws`` samples per repeat; its samples per second are
  extrapolated per sample.
* FWHT: ``dpjax.compression.fwht`` at d = 2^12 against the dense product
  ``x @ (H / sqrt(d))`` with the d x d Sylvester matrix (both jitted,
  float32), for one vector (dominated by per-call overhead) and for a batch
  of ``--fwht-batch`` vectors, and ``dpjax.compression.fwht`` alone at d = 2^20.
* Binomial: ``dpjax.noise.binomial`` (exact; 32 trials per random word,
  bit-sliced comparison with the binary digits of p', popcount) at
  m = 1000 and m = 2^20 trials for p = 1/2, a dyadic p = 3/8 and a general
  p = 0.3, against an exact per-trial sampler (one uint32 word per trial
  compared with p' 2^32, summed: what a sampler drawing each trial costs),
  ``jax.random.bernoulli(key, p, (size, m)).sum(-1)`` (per trial, float
  uniforms, not exact) and ``jax.random.binomial`` (not exact; reference),
  all jitted and timed in the same run. The speed-up is against
  the exact per-trial sampler. p = 1/2 costs one bit per trial; a dyadic
  p = a / 2^b costs b bits; a general p (b = 32) costs 32 bits per trial, as
  many as the per-trial sampler, so there the gain is only the popcount.

Run: ``python -m experiments bench noise [--draws 1000000] [--repeats 5]
[--sections gaussian fwht binomial]``.
"""

import fractions
import itertools
import math
import random

import jax
import jax.numpy as jnp
import numpy as np
from scipy import linalg

import dpjax
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = ('--draws 10000 --oracle-draws 1000 --repeats 2 --warmup 1 '
         '--fwht-batch 8')

SIGMAS = (0.5, 3.0, 50.0, 1000.0, 10000.0)


# --- the exact reference, in plain Python (Canonne et al. 2020) --------------


def _bernoulli(rng: random.Random, p: fractions.Fraction) -> bool:
  return rng.randrange(p.denominator) < p.numerator


def _bernoulli_exp(rng: random.Random, gamma: fractions.Fraction) -> bool:
  """Bernoulli(exp(-gamma)), gamma >= 0 rational (Alg. 1)."""
  if gamma <= 1:
    k = 1
    while _bernoulli(rng, gamma / k):
      k += 1
    return k % 2 == 1
  for _ in range(math.floor(gamma)):
    if not _bernoulli_exp(rng, fractions.Fraction(1)):
      return False
  return _bernoulli_exp(rng, gamma - math.floor(gamma))


def _discrete_laplace(rng: random.Random, t: int) -> int:
  """P(x) proportional to exp(-|x| / t), t a positive integer (Alg. 2)."""
  while True:
    u = rng.randrange(t)
    if not _bernoulli_exp(rng, fractions.Fraction(u, t)):
      continue
    v = 0
    while _bernoulli_exp(rng, fractions.Fraction(1)):
      v += 1
    x = u + t * v
    y = rng.randrange(2)
    if y == 1 and x == 0:
      continue
    return (1 - 2 * y) * x


def reference_discrete_gaussian(rng: random.Random,
                                sigma2: fractions.Fraction) -> int:
  """One exact draw of N_Z(0, sigma2), sigma2 rational (Alg. 3)."""
  t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
  while True:
    y = _discrete_laplace(rng, t)
    gamma = (abs(y) - sigma2 / t)**2 / (2 * sigma2)
    if _bernoulli_exp(rng, gamma):
      return y


# --- timing ------------------------------------------------------------------


def _keyed(fn, start=0):
  """``fn`` of a fresh key at every call."""
  keys = itertools.count(start)
  return lambda: fn(jax.random.key(next(keys)))


def bench_discrete_gaussian(sigma, draws, oracle_draws, repeats, warmup):
  """(dpjax, reference) samples/s cells and the compile seconds, one sigma."""
  sample = jax.jit(
      lambda k: dpjax.noise.discrete_gaussian(k, (draws,), sigma=sigma))
  compile_s, _ = timing.timed_call(lambda: sample(jax.random.key(0)),
                                   jax.block_until_ready)
  sigma2 = dpjax.noise.discrete_gaussian_sigma_squared(sigma)
  rng = random.Random(0)
  stats = timing.time_medians(
      {'dpjax': _keyed(sample, 1),
       'reference': lambda: [reference_discrete_gaussian(rng, sigma2)
                             for _ in range(oracle_draws)]},
      repeats, warmup=max(warmup, 1), block=jax.block_until_ready, scale=1.0)
  ratio = ((draws / stats['dpjax']['median'])
           / (oracle_draws / stats['reference']['median']))
  return (timing.rate_cell(stats['dpjax'], draws / 1e6, ',.2f'),
          timing.rate_cell(stats['reference'], oracle_draws / 1e3, ',.1f'),
          ratio, compile_s)


def bench_fwht(repeats, warmup, batch):
  """Stats in ms of FWHT and dense products at d = 2^12, FWHT at 2^20."""
  small = 2**12
  x = jax.random.normal(jax.random.key(0), (small,))
  xs = jax.random.normal(jax.random.key(2), (batch, small))
  dense_h = jnp.asarray(linalg.hadamard(small) / np.sqrt(small), jnp.float32)
  fwht = jax.jit(dpjax.compression.fwht)
  dense = jax.jit(lambda m, v: v @ m)  # H is symmetric
  big = jax.random.normal(jax.random.key(1), (2**20,))
  calls = {'fwht_small': lambda: fwht(x), 'dense_small': lambda: dense(dense_h, x),
           'fwht_batch': lambda: fwht(xs),
           'dense_batch': lambda: dense(dense_h, xs),
           'fwht_big': lambda: fwht(big)}
  err = float(jnp.max(jnp.abs(fwht(x) - dense(dense_h, x))))
  return timing.time_medians(calls, repeats, warmup=max(warmup, 1),
                             block=jax.block_until_ready), err


BINOMIAL_PS = (0.5, 0.375, 0.3)
# trials m -> samples per call (2^24 trials per call in both rows)
BINOMIAL_SIZES = {1000: 2**14, 2**20: 16}


def per_trial_binomial(key, size, trials, p):
  """Exact Bin(trials, p'): one uint32 word per trial, compared and summed."""
  q = dpjax.noise.binomial_p(p)
  threshold = q.numerator * 2**32 // q.denominator  # p' 2^32, exact
  words = jax.random.bits(key, (size, trials), jnp.uint32)
  return jnp.sum(words < np.uint32(threshold), axis=-1, dtype=jnp.int32)


def bench_binomial(trials, p, repeats, warmup):
  """Stats in s of each Binomial sampler, timed interleaved."""
  size = BINOMIAL_SIZES[trials]
  samplers = {
      'dpjax': jax.jit(lambda k: dpjax.noise.binomial(k, (size,),
                                                      trials=trials, p=p)),
      'per_trial': jax.jit(lambda k: per_trial_binomial(k, size, trials, p)),
      'bernoulli': jax.jit(lambda k: jnp.sum(
          jax.random.bernoulli(k, p, (size, trials)), -1, dtype=jnp.int32)),
      'jax_binomial': jax.jit(lambda k: jax.random.binomial(
          k, trials, p, (size,))),
  }
  stats = timing.time_medians({n: _keyed(f, 50) for n, f in samplers.items()},
                              repeats, warmup=max(warmup, 1) + 1,
                              block=jax.block_until_ready, scale=1.0)
  return size, stats  # the first warmup call compiles


SECTIONS = ('gaussian', 'fwht', 'binomial')


def parse_args(argv):
  parser = timing.OneLineParser(prog='python -m experiments bench noise',
                   description=__doc__.splitlines()[0])
  parser.add_argument('--draws', type=int, default=1_000_000,
                      help='dpjax draws per call')
  parser.add_argument('--oracle-draws', type=int, default=20_000,
                      help='reference draws per repeat (extrapolated)')
  parser.add_argument('--sigmas', type=float, nargs='+', default=list(SIGMAS))
  timing.add_call_options(parser)
  parser.add_argument('--fwht-batch', type=int, default=256,
                      help='vectors in the batched FWHT row')
  parser.add_argument('--sections', nargs='+', default=list(SECTIONS),
                      choices=SECTIONS, help='which rows to run')
  args = parser.parse_args(argv)
  if args.draws < 1 or args.oracle_draws < 1:
    parser.error('--draws and --oracle-draws must be at least 1')
  if args.fwht_batch < 1:
    parser.error('--fwht-batch must be at least 1')
  timing.check_call_options(parser, args)
  if any(not 0 < s <= dpjax.noise.MAX_DISCRETE_SIGMA for s in args.sigmas):
    parser.error(f'--sigmas must be in (0, {dpjax.noise.MAX_DISCRETE_SIGMA:g}]')
  return args


def main(argv=None):
  args = parse_args(argv)
  print(f'{timing.legend()}, {args.repeats} calls per pass after '
        f'{args.warmup} warmup calls; reference = plain-Python exact Canonne '
        f'et al. Alg. 1-3 ({args.oracle_draws} draws per call, extrapolated '
        'per sample)\n')
  print('| benchmark | size | dpjax | baseline | baseline is | speed-up |')
  print('|---|---|---|---|---|---|')
  for sigma in args.sigmas if 'gaussian' in args.sections else ():
    ours, ref, ratio, compile_s = bench_discrete_gaussian(
        sigma, args.draws, args.oracle_draws, args.repeats, args.warmup)
    print(f'| discrete Gaussian sigma={sigma:g} (compile {compile_s:.1f} s) | '
          f'{args.draws:,} draws | {ours} M samples/s | '
          f'{ref} k samples/s | Python exact reference | '
          f'{ratio:.0f}x |', flush=True)
  if 'fwht' in args.sections:
    print_fwht(args)
  if 'binomial' in args.sections:
    print_binomial(args)


def print_binomial(args):
  repeats = max(args.repeats, 20)
  print(f'\nBinomial samplers, samples/s ({timing.legend()}, {repeats} '
        'calls per pass; speed-up = dpjax / exact per-trial)\n')
  print('| trials m | p | samples per call | dpjax (exact, bit-sliced) | '
        'per-trial exact (uint32 compare + sum) | bernoulli sum (not exact) | '
        'jax.random.binomial (not exact) | speed-up vs per-trial exact | '
        'vs bernoulli sum |')
  print('|---|---|---|---|---|---|---|---|---|')
  for trials in BINOMIAL_SIZES:
    for p in BINOMIAL_PS:
      size, stats = bench_binomial(trials, p, repeats, max(args.warmup, 1))
      rate = {k: size / v['median'] for k, v in stats.items()}
      m = '2^20' if trials == 2**20 else f'{trials:,}'
      cells = [m, f'{p:g}', f'{size:,}'] + [
          timing.rate_cell(stats[k], size) for k in (
              'dpjax', 'per_trial', 'bernoulli', 'jax_binomial')] + [
          f"{rate['dpjax'] / rate['per_trial']:.1f}x",
          f"{rate['dpjax'] / rate['bernoulli']:.1f}x"]
      print('| ' + ' | '.join(cells) + ' |', flush=True)


def print_fwht(args):
  t, err = bench_fwht(max(args.repeats, 20), max(args.warmup, 2),
                      args.fwht_batch)
  ms = {k: v['median'] for k, v in t.items()}
  print(f'| FWHT vs dense H x, one vector (max abs diff {err:.1e}) | d = 2^12 | '
        f'{timing.cell(t["fwht_small"], 3)} ms | '
        f'{timing.cell(t["dense_small"], 3)} ms | dense d x d matvec (jitted) '
        f'| {ms["dense_small"] / ms["fwht_small"]:.0f}x |')
  print(f'| FWHT vs dense, batch of {args.fwht_batch} vectors | d = 2^12 | '
        f'{timing.cell(t["fwht_batch"], 3)} ms | '
        f'{timing.cell(t["dense_batch"], 3)} ms | dense (B x d) @ (d x d) '
        f'matmul (jitted) | {ms["dense_batch"] / ms["fwht_batch"]:.0f}x |')
  print(f'| FWHT alone | d = 2^20 | {timing.cell(t["fwht_big"])} ms | - | - | '
        '- |', flush=True)


if __name__ == '__main__':
  main()
