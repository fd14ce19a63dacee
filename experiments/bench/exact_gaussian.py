"""Exact vs float Gaussian path of DP-SGD (benchmark, not a test).

Rows, measured in one run, the float path first as the baseline of each
size, medians over timed repeats after warmup calls (compilation excluded
and reported), each call followed by ``jax.block_until_ready``; the two
paths are timed round-robin so machine load hits them alike:

* noise step: ``add_dpsgd_noise`` (float32 Gaussian) against
  ``add_dpsgd_noise(noise='exact')`` (randomized rounding to gamma Z plus
  the exact discrete Gaussian) on a clipped sum of d coordinates (each d of
  ``--dimensions``) at noise multiplier ``--noise-multiplier``, jitted;
* DP-SGD step: ``dpsgd(..., noise='float')`` against ``noise='exact'`` on
  per-example gradients [B, d] (B = ``--batch-size``; clip, noise,
  normalize, SGD), jitted;
* the privacy cost of the exact path's looser accounting: epsilon at delta
  1e-5 after ``--steps`` Poisson steps at rate ``--sampling-rate``, float
  event (tight sampled Gaussian, RDP) against the exact event (discrete
  Gaussian with the rounding's sensitivity, general subsampled RDP bound).

Run: ``python -m experiments bench exact_gaussian [--dimensions 10000
1000000] [--batch-size 32] [--noise-multiplier 1.1] [--repeats 5]``.
"""


import jax
import jax.numpy as jnp

import dpjax
from dpjax import clipping
from dpjax import transforms
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--dimensions 1000 --repeats 2 --warmup 1 --steps 10'


def _clipped_sum(row):
  """``row`` as the clipped sum of one example (the noise steps take only
  clipped sums)."""
  return clipping.clip_and_sum(row[None], 1.0, jnp.ones((1,), bool)).grad_sum


def _noise_steps(d, sigma):
  """The noise steps, each clipping its row inside the jitted step: the
  exact path needs the sum's bound concrete, which a jitted ClippedSum
  argument would trace (the one-row clip costs both paths alike)."""
  steps = {}
  for name in ('float', 'exact'):
    tx = transforms.add_dpsgd_noise(sigma, key=jax.random.key(0), noise=name)
    row = jnp.full((d,), 1.0 / d**0.5, jnp.float32)
    fn = jax.jit(lambda r, s, tx=tx: tx.update(_clipped_sum(r), s))
    steps[name] = (fn, (row, tx.init(None)))
  return steps


def _dpsgd_steps(d, batch, sigma):
  steps = {}
  params = jnp.zeros((d,), jnp.float32)
  grads = jax.random.normal(jax.random.key(1), (batch, d), jnp.float32)
  mask = jnp.ones((batch,), bool)
  for name in ('float', 'exact'):
    tx = dpjax.dpsgd(0.1, 1.0, sigma, dpjax.PoissonSampler(batch, 1.0),
                     key=jax.random.key(0), noise=name)
    state = tx.init(params)
    fn = jax.jit(lambda g, s, p, tx=tx: tx.update(g, s, p, mask=mask))
    steps[name] = (fn, (grads, state, params))
  return steps


def time_pair(steps, repeats, warmup):
  """{name: (timing.summarize stats in ms, compile s)}, interleaved.

  The two paths take turns (``timing.interleaved``) in two passes.
  """
  compile_s = {n: timing.timed_call(lambda f=f, a=a: f(*a),
                                    jax.block_until_ready)[0]
               for n, (f, a) in steps.items()}
  runners = {n: (lambda f=f, a=a: jax.block_until_ready(f(*a)))
             for n, (f, a) in steps.items()}
  times, _ = timing.interleaved(runners, passes=timing.MIN_PASSES,
                                repeats=repeats, warmup=warmup)
  return {n: (timing.summarize(t), compile_s[n]) for n, t in times.items()}


def epsilons(d, sigma, rate, steps):
  """(float epsilon, exact epsilon) of ``steps`` Poisson steps, delta 1e-5."""
  sampler = dpjax.PoissonSampler(100_000, rate)
  tx = transforms.add_dpsgd_noise(sigma, key=jax.random.key(0),
                                  noise='exact')
  _, state = tx.update(_clipped_sum(jnp.zeros((d,))), tx.init(None))
  exact = dpjax.accounting.step_event(state, sampler)
  eps = lambda ev: float(dpjax.accounting.epsilon(ev, 1e-5, steps=steps))
  return eps(sampler.dp_event(sigma)), eps(exact)


def parse_args(argv):
  parser = timing.OneLineParser(
      prog='python -m experiments bench exact_gaussian',
      description=__doc__.splitlines()[0])
  parser.add_argument('--dimensions', type=int, nargs='+',
                      default=[10_000, 1_000_000])
  parser.add_argument('--batch-size', type=int, default=32,
                      help='examples per DP-SGD step')
  parser.add_argument('--noise-multiplier', type=float, default=1.1,
                      help='noise stddev / L2 sensitivity')
  parser.add_argument('--sampling-rate', type=float, default=0.01,
                      help='Poisson rate of the epsilon row')
  parser.add_argument('--steps', type=int, default=1000,
                      help='steps of the epsilon row')
  timing.add_call_options(parser)
  args = parser.parse_args(argv)
  if any(d < 1 for d in args.dimensions) or args.batch_size < 1:
    parser.error('--dimensions and --batch-size must be at least 1')
  timing.check_call_options(parser, args)
  return args


def main(argv=None):
  args = parse_args(argv)
  print(f'device {jax.devices()[0].device_kind}; {timing.legend()}, '
        f'{args.repeats} calls per pass after {args.warmup} warmup calls; '
        f'noise multiplier {args.noise_multiplier}; ratio = exact / float '
        '(same run)\n')
  print('| row | d | float | exact | ratio | compile float / exact |')
  print('|---|---|---|---|---|---|')
  for d in args.dimensions:
    for row, steps in (
        ('noise step', _noise_steps(d, args.noise_multiplier)),
        (f'DP-SGD step, B={args.batch_size}',
         _dpsgd_steps(d, args.batch_size, args.noise_multiplier))):
      t = time_pair(steps, args.repeats, args.warmup)
      (tf, cf), (te, ce) = t['float'], t['exact']
      print(f'| {row} | {d:,} | {timing.cell(tf)} ms | {timing.cell(te)} ms '
            f"| {te['median'] / tf['median']:.1f}x | {cf:.1f} s / {ce:.1f} s "
            '|', flush=True)
  print(f'\n| epsilon at delta 1e-5, {args.steps} steps, '
        f'q={args.sampling_rate} | d | float | exact | ratio |')
  print('|---|---|---|---|---|')
  for d in args.dimensions:
    ef, ee = epsilons(d, args.noise_multiplier, args.sampling_rate,
                      args.steps)
    print(f'| noise multiplier {args.noise_multiplier} | {d:,} | {ef:.3f} | '
          f'{ee:.3f} | {ee / ef:.2f}x |')


if __name__ == '__main__':
  main()
