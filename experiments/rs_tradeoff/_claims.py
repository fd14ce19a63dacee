"""rs_tradeoff's claims, one family, paired by seed against r* = 0.

Per curve and rate r* > 0: train accuracy at r* minus at r* = 0 on the same
seeds; DP-SGD claims a gain, the ablations a loss. Every rate is reported,
none is picked as "the best", so there is no best-of-k bias.
"""

from typing import Any

from experiments.common import claims as claims_lib
from experiments.rs_tradeoff._config import Config


def curve_name(setting: str, sigma, clip) -> str:
  """A curve's name in the claims."""
  if setting == 'dpsgd':
    return f'DP-SGD sigma C={sigma * clip:g}'
  return f'{setting} ' + (f'sigma={sigma:g}' if sigma else f'C={clip:g}')


def claims(results: dict[str, Any], cfg: Config) -> claims_lib.ClaimFamily:
  del cfg
  curves: dict[tuple, dict] = {}
  for r in sorted(results['runs'], key=lambda r: r['seed']):
    curves.setdefault((r['setting'], r['sigma'], r['clip']), {}).setdefault(
        r['rate'], []).append(r['train_accuracy'])
  family = claims_lib.ClaimFamily()
  for (setting, sigma, clip), by_rate in curves.items():
    helps = setting == 'dpsgd'
    for rate, acc in by_rate.items():
      if rate == 0:
        continue
      family.add(
          f"{curve_name(setting, sigma, clip)}: r*={rate:g} "
          f"{'beats' if helps else 'loses to'} r*=0 (train acc)", acc,
          by_rate[0.0], higher_is_better=helps, setting=setting, sigma=sigma,
          clip=clip, rate=rate)
  return family
