"""rs_privacy's claims: per epsilon, RS (r* tuned on validation) minus
DP-SGD test accuracy, paired by seed; one family over the epsilons."""

from typing import Any

from experiments.common import claims as claims_lib
from experiments.rs_privacy._config import Config


def claims(results: dict[str, Any], cfg: Config) -> claims_lib.ClaimFamily:
  del cfg
  by_eps: dict[float, dict[str, list]] = {}
  for r in sorted(results['runs'], key=lambda r: r['seed']):
    by_eps.setdefault(r['target_epsilon'], {}).setdefault(
        r['method'], []).append(r)
  family = claims_lib.ClaimFamily()
  for eps, rows in by_eps.items():
    rs, dp = rows['DP-SGD + RS'], rows['DP-SGD']
    family.add(f"eps={eps:g}: RS (r*={rs[0]['rate']:g}, tuned on validation) "
               'beats DP-SGD (test acc)', [r['test_accuracy'] for r in rs],
               [r['test_accuracy'] for r in dp], target_epsilon=eps)
  return family
