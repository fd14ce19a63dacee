"""Audit benchmark (not a test): speed and tightness of the DP-SGD step audit.

The mechanism is one step of ``dpjax.dpsgd`` (vmap clipping) on 8 examples
of ``--dimension`` coordinates, add/remove-one: a gradient canary of norm
100 C along e_0 is masked out in D and present in D'. The noise stddev makes
the step exactly (eps, delta)-DP (``accounting.gaussian_stddev``, the
Gaussian mechanism's closed-form privacy profile), so a perfect attack with
infinite trials would reach the stated eps; the score is the update's e_0
part (the likelihood-ratio test for this pair).

Prints, in one run:

* trials per second of ``dpjax.audit.distinguishing_audit`` (both inputs,
  after compilation), and of the bare vmapped mechanism for comparison,
  their calls interleaved in two passes (``timing.time_medians``: a median
  with the range of the pass medians);
* for eps = 1 and 4: the 95% lower bound / stated eps at trials = 10^3 ...
  ``--max-trials`` (per input; the median over ``--keys`` audits, since the
  bound varies from key to key), and the fewest trials on that ladder whose
  median bound is within 20% of the stated eps (lower bound >= 0.8 eps).

Run: ``python -m experiments bench audit [--max-trials 10000000]
[--dimension 16] [--delta 1e-5]``.
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import dpjax
from dpjax import accounting
from dpjax import audit
from experiments.bench import timing

# The smallest setting (``bench all --quick``, the harness check).
QUICK = '--max-trials 10000 --keys 1 --epsilons 1.0'


def dpsgd_step(sigma: float, clip: float = 1.0):
  """(key, (grads, mask)) -> the negated update of one dpsgd step."""

  def mechanism(key, data):
    grads, mask = data
    # One example at rate 1: the divisor is 1, the release the noisy sum.
    tx = dpjax.dpsgd(learning_rate=1.0, l2_norm_clip=clip,
                     noise_multiplier=sigma,
                     sampler=dpjax.PoissonSampler(1, 1.0), key=key)
    params = jnp.zeros(grads.shape[1])
    updates, _ = tx.update(grads, tx.init(params), params, mask=mask)
    return -updates

  return mechanism


def canary_pair(dimension: int):
  grads = np.random.default_rng(0).normal(size=(8, dimension)) * 0.3
  grads[0] = 0.0
  grads[0, 0] = 100.0
  grads = jnp.asarray(grads, jnp.float32)
  return (grads, jnp.arange(8) > 0), (grads, jnp.ones(8, bool))


def score(update):
  return update[0]


def _throughput(mechanism, d, d_prime, delta, trials, repeats=3
                ) -> tuple[str, str]:
  """Trials per second of the audit and of the bare mechanism (cells)."""
  run = jax.jit(jax.vmap(lambda k: score(mechanism(k, d))))
  keys = jax.random.split(jax.random.key(2), 4096)
  fns = {'audit': lambda: audit.distinguishing_audit(
      jax.random.key(1), mechanism, d, d_prime, trials=trials, delta=delta,
      score=score).epsilon_lower_bound,
         'bare': lambda: run(keys)}
  stats = timing.time_medians(fns, repeats, block=jax.block_until_ready,
                              scale=1.0, rewarm=False)
  return (timing.rate_cell(stats['audit'], 2 * trials),
          timing.rate_cell(stats['bare'], 4096))


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                              allow_abbrev=False)
  p.add_argument('--max-trials', type=int, default=10_000_000)
  p.add_argument('--dimension', type=int, default=16)
  p.add_argument('--delta', type=float, default=1e-5)
  p.add_argument('--keys', type=int, default=3,
                 help='audits per trials level (different keys)')
  p.add_argument('--epsilons', type=float, nargs='+', default=[1.0, 4.0])
  args = p.parse_args(argv)
  if (args.max_trials < 1000 or args.dimension < 1 or args.keys < 1
      or not 0 < args.delta < 1):
    p.error(f'need --max-trials >= 1000 (got {args.max_trials}), '
            f'--dimension >= 1 (got {args.dimension}), --keys >= 1 (got '
            f'{args.keys}), --delta in (0, 1) (got {args.delta})')
  d, d_prime = canary_pair(args.dimension)
  print(f'DP-SGD step audit, dimension={args.dimension}, '
        f'delta={args.delta:g}, devices={jax.devices()}')
  sigma = accounting.gaussian_stddev(1.0, args.delta, 1.0)
  audit_rate, bare_rate = _throughput(dpsgd_step(sigma), d, d_prime,
                                      args.delta, 200_000)
  print(f'throughput ({timing.legend()}): {audit_rate} trials/s through '
        f'distinguishing_audit (scores + threshold + bound), {bare_rate} '
        'trials/s for the bare vmapped mechanism')
  ladder = [t for t in (10**3, 10**4, 10**5, 10**6, 2 * 10**6, 5 * 10**6,
                        10**7, 2 * 10**7, 5 * 10**7, 10**8)
            if t <= args.max_trials]
  for eps in args.epsilons:
    sigma = accounting.gaussian_stddev(eps, args.delta, 1.0)
    stated = accounting.gaussian_epsilon(sigma, 1.0, args.delta)
    mech = dpsgd_step(sigma)
    needed = None
    print(f'\neps={eps:g}: noise multiplier {sigma:.4f}, stated eps '
          f'{stated:.4f}')
    print(f'| trials per input | lower bound (median of {args.keys} keys) | '
          'min - max | lower / stated | seconds per audit |')
    print('|---|---|---|---|---|')
    for trials in ladder:
      seconds, bounds = timing.timed_call(lambda: [
          audit.distinguishing_audit(
              jax.random.key(k), mech, d, d_prime, trials=trials,
              delta=args.delta, score=score, chunk=1 << 16
          ).epsilon_lower_bound for k in range(args.keys)])
      bound = float(np.median(bounds))
      ratio = bound / stated
      print(f'| {trials:,} | {bound:.4f} | {min(bounds):.3f} - '
            f'{max(bounds):.3f} | {ratio:.3f} | '
            f'{seconds / args.keys:.1f} |')
      if needed is None and ratio >= 0.8:
        needed = trials
    print(f'fewest trials for a lower bound within 20% of eps={eps:g}: '
          + (f'{needed:,}' if needed else f'more than {ladder[-1]:,}'))


if __name__ == '__main__':
  main()
