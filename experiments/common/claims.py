"""Claim families: an experiment's claims, checked together.

An experiment adds its claims to a ``ClaimFamily``; the family checks each
with ``verdict.paired_verdict`` at the Bonferroni-corrected level of its own
size m (the number of claims added), so that the 95% holds for the family and
no experiment counts its comparisons by hand. An experiment whose claims form
separate families (e.g. a primary claim and secondary ones) makes one
``ClaimFamily`` per family, each named; a named family's claims carry
``family=NAME``.

Every claim reports its minimal detectable effect (``verdict.
detectable_effect``) at the family's corrected level and ``power``; a claim
added with ``effect=`` (the effect size the paper reports, in the claim's
units, measured from the threshold) also stores ``seeds_needed``: the seeds
that would decide that effect at the spread these seeds show
(``seeds_for``).

Example:
  >>> family = ClaimFamily()
  >>> family.add('A beats B', [0.95, 0.96, 0.95, 0.97],
  ...            [0.90, 0.90, 0.91, 0.90])
  >>> family.add('loss down', [3.0, 2.5, 2.8], [3.2, 2.8, 3.1],
  ...            higher_is_better=False, setting='lr 0.1')
  >>> [(c['claim'], c['verdict'], c['comparisons']) for c in family.verdicts()]
  [('A beats B', 'held', 2), ('loss down', 'held', 2)]
  >>> family.seeds_for(0.01, sd=0.01)  # seeds to decide 0.01 at sd 0.01
  13
"""

import math
from typing import Any, Iterable, Sequence, Union

from experiments.common import verdict as verdict_lib


class ClaimFamily:
  """Claims corrected together: each at level 1 - 0.05 / len(family)."""

  def __init__(self, name: str | None = None, confidence: float = 0.95,
               power: float = verdict_lib.POWER):
    self.name, self.confidence, self.power = name, confidence, power
    self._pending: list[tuple] = []

  def __len__(self) -> int:
    return len(self._pending)

  def add(self, text: str, treatment: Sequence[float],
          control: Union[Sequence[float], None] = None, /, *,
          threshold: float = 0.0, higher_is_better: bool = True,
          effect: float | None = None, **details: Any) -> None:
    """Adds the claim "treatment - control beats ``threshold``", paired by
    seed (``control`` None: ``treatment`` holds the per-seed differences);
    ``details`` are stored with its verdict (``verdict.claim``; they may
    be named ``treatment`` or ``control``, e.g. the settings compared).
    ``effect``: the effect size the claim expects (e.g. the paper's), as a
    distance from ``threshold``; the verdict then stores it and
    ``seeds_needed``."""
    if effect is not None:
      if not (isinstance(effect, (int, float)) and effect != 0
              and abs(effect) < float('inf')):
        raise ValueError(f'effect must be a finite nonzero number, got '
                         f'{effect!r}')
      details = dict(details, effect=float(effect))
    self._pending.append((text, treatment, control, threshold,
                          higher_is_better, details))

  def seeds_for(self, effect: float, sd: float) -> int:
    """Seeds that decide ``effect`` with ``power`` when the per-seed
    differences spread by ``sd`` (e.g. a pilot run's), at this family's
    corrected level (its size so far, at least 1)."""
    return verdict_lib.seeds_for_effect(
        effect, sd, comparisons=max(1, len(self)),
        confidence=self.confidence, power=self.power)

  def verdicts(self) -> list[dict[str, Any]]:
    """Every claim's verdict, as stored in ``results['claims']``."""
    m = len(self._pending)
    extra = {} if self.name is None else dict(family=self.name)
    out = []
    for (text, treatment, control, threshold, higher_is_better,
         details) in self._pending:
      v = verdict_lib.paired_verdict(
          treatment, control, threshold=threshold,
          higher_is_better=higher_is_better, comparisons=m,
          confidence=self.confidence, power=self.power)
      if 'effect' in details:
        details = dict(details, seeds_needed=(
            None if math.isnan(v.sd) else self.seeds_for(
                details['effect'], v.sd)))
      out.append(verdict_lib.claim(text, v, **details, **extra))
    return out


def verdicts(families: Union[ClaimFamily, Iterable[ClaimFamily]]
             ) -> list[dict[str, Any]]:
  """The claims of one family or of several, in order."""
  if isinstance(families, ClaimFamily):
    families = [families]
  return [c for family in families for c in family.verdicts()]
