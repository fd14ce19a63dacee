"""Power of a paired claim: its minimal detectable effect and seed count.

A claim's verdict (``verdict.paired_verdict``) is a two-sided Student-t
interval of the mean per-seed difference at level 1 - alpha / m. With n
seeds and per-seed spread s, a true effect delta is declared with
probability ``power`` when delta >= (t_{n-1}(1 - alpha / 2m) +
t_{n-1}(power)) s / sqrt(n): that bound is the minimal detectable effect
(MDE, the usual normal-approximation formula with t quantiles). It is read
back from a stored verdict's interval, so any experiment can print it beside
the interval, and ``seeds_for`` inverts it to choose a seed count.

Example:
  >>> from experiments.common import verdict
  >>> v = verdict.paired_verdict([0.02, 0.05, 0.01, 0.04, 0.03]).to_dict()
  >>> round(minimal_detectable_effect(v), 4)
  0.0263
  >>> seeds_for(0.02, 0.03, comparisons=6)
  9
"""

import math
from typing import Any, Mapping

from scipy import special


def _quantiles(n: int, level: float, power: float) -> tuple[float, float]:
  return (float(special.stdtrit(n - 1, 0.5 + level / 2)),
          float(special.stdtrit(n - 1, power)))


def minimal_detectable_effect(claim: Mapping[str, Any],
                              power: float = 0.8) -> float:
  """The MDE of a stored claim (``verdict.claim``), in its own units.

  NaN when no interval was formed (fewer than 2 seeds); 0 when every seed
  gave the same difference (no spread).
  """
  n, level = int(claim['n']), float(claim['confidence'])
  if not 0 < power < 1:
    raise ValueError(f'Expected power={power} in (0, 1).')
  if n < 2 or math.isnan(float(claim['low'])):
    return float('nan')
  t_level, t_power = _quantiles(n, level, power)
  stderr = (float(claim['high']) - float(claim['low'])) / 2 / t_level
  return (t_level + t_power) * stderr


def seeds_for(spread: float, effect: float, *, comparisons: int = 1,
              power: float = 0.8, confidence: float = 0.95,
              most: int = 1000) -> int:
  """The fewest seeds (>= 2) whose MDE is at most ``effect``, for per-seed
  differences of standard deviation ``spread``; ``most`` if none below."""
  if not (spread >= 0 and effect > 0 and comparisons >= 1):
    raise ValueError(f'Expected spread={spread} >= 0, effect={effect} > 0 '
                     f'and comparisons={comparisons} >= 1.')
  level = 1 - (1 - confidence) / comparisons
  for n in range(2, most + 1):
    t_level, t_power = _quantiles(n, level, power)
    if (t_level + t_power) * spread / math.sqrt(n) <= effect:
      return n
  return most


def mde_table(claims, scale: float = 1.0, unit: str = '') -> str:
  """A markdown table: each claim's mean, interval and MDE (80% power),
  multiplied by ``scale`` (e.g. 100 for accuracy points)."""
  lines = [f'| Claim | Mean{unit} | CI{unit} | MDE at 80% power{unit} | '
           'Seeds | Verdict |', '|---|---|---|---|---|---|']
  for c in claims:
    mde = minimal_detectable_effect(c)
    ci = ('-' if math.isnan(float(c['low'])) else
          f"[{scale * float(c['low']):.2f}, {scale * float(c['high']):.2f}]")
    lines.append(f"| {c['claim']} | {scale * float(c['mean']):.2f} | {ci} | "
                 f"{scale * mde:.2f} | {c['n']} | {c['verdict']} |")
  return '\n'.join(lines)
