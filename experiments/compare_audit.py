"""Cross-check (not a test): dpjax.audit's bounds against jax_privacy's.

jax_privacy 2.0's ``auditing.CanaryScoreAuditor`` (the optional ``bench``
extra) computes the same two statistics from canary scores: the
Clopper-Pearson epsilon lower bound at one threshold
(``epsilon_clopper_pearson``, both error orders with ``one_sided=False``)
and the one-run bound of Steinke, Nasr & Jagielski 2023
(``epsilon_one_run``, guesses "in" above the threshold, k- = 0). This
script draws Gaussian scores for held-in and held-out canaries, fixes
thresholds, and prints both libraries' bounds side by side with their
difference; ``dpjax/`` never imports jax_privacy.

Run: ``python -m experiments.compare_audit [--num-canaries 10000]
[--delta 1e-5]``.
"""

import argparse

import numpy as np

from dpjax import audit


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--num-canaries', type=int, default=10_000,
                 help='held-in and held-out canaries each')
  p.add_argument('--delta', type=float, default=1e-5)
  args = p.parse_args(argv)
  n = args.num_canaries
  if n < 100 or not 0 < args.delta < 1:
    p.error(f'need --num-canaries >= 100 (got {n}) and --delta in (0, 1) '
            f'(got {args.delta})')
  try:
    from jax_privacy import auditing  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    print(f'jax_privacy is not installed ({e}); pip install -e ".[bench]"')
    return 1
  rng = np.random.default_rng(0)
  print('| shift | threshold | statistic | dpjax | jax_privacy | difference |')
  print('|---|---|---|---|---|---|')
  worst = 0.0
  for shift in (1.0, 2.0, 4.0):
    scores_in = rng.normal(shift, 1.0, n)
    scores_out = rng.normal(0.0, 1.0, n)
    theirs = auditing.CanaryScoreAuditor(scores_in, scores_out)
    for t in (shift / 2, shift + 0.5, shift + 1.5):
      fp = int(np.sum(scores_out >= t))  # guess "in" at score >= t
      fn = int(np.sum(scores_in < t))
      ours = audit.epsilon_lower_bound(fp, fn, n, args.delta, 0.95)
      ref = theirs.epsilon_clopper_pearson(
          0.05, args.delta, one_sided=False,
          threshold_strategy=auditing.Explicit(t))
      worst = max(worst, abs(ours - ref))
      print(f'| {shift:g} | {t:g} | Clopper-Pearson | {ours:.6f} | '
            f'{ref:.6f} | {ours - ref:+.2e} |')
      guesses = fp + (n - fn)
      correct = n - fn
      ours = audit.one_run_epsilon_lower_bound(correct, guesses, 2 * n,
                                               args.delta, 0.95)
      ref = theirs.epsilon_one_run(0.05, args.delta,
                                   threshold_strategy=auditing.Explicit(t))
      worst = max(worst, abs(ours - ref))
      print(f'| {shift:g} | {t:g} | one-run | {ours:.6f} | {ref:.6f} | '
            f'{ours - ref:+.2e} |')
  print(f'largest absolute difference: {worst:.2e}')
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
