"""rs_privacy's claims: per epsilon, tuned RS minus tuned DP-SGD test
accuracy, paired by seed; one family over the epsilons.

Each method's accuracy on a seed is the test accuracy at the setting that
seed chose on the validation split: C for DP-SGD, (C, r*) for RS, over the
same C grid (``_run.choose``). Zhu & Blaschko, Table 2, report gains of +0.3
to +3.1 points.
"""

from experiments.common import claims as claims_lib
from experiments.rs_privacy._config import Config
from experiments.rs_privacy._results import Results


def claims(results: Results, cfg: Config) -> claims_lib.ClaimFamily:
  del cfg
  by_eps: dict[float, dict[str, list]] = {}
  for r in sorted(results.selected, key=lambda r: r['seed']):
    by_eps.setdefault(r['target_epsilon'], {}).setdefault(
        r['method'], []).append(r['test_accuracy'])
  family = claims_lib.ClaimFamily()
  for eps, acc in by_eps.items():
    family.add(f'eps={eps:g}: RS beats DP-SGD, both tuned on validation over '
               'the same C grid (test acc)', acc['DP-SGD + RS'],
               acc['DP-SGD'], target_epsilon=eps)
  return family
