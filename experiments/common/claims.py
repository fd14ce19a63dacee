"""Claim families: an experiment's claims, checked together.

An experiment adds its claims to a ``ClaimFamily``; the family checks each
with ``verdict.paired_verdict`` at the Bonferroni-corrected level of its own
size m (the number of claims added), so that the 95% holds for the family and
no experiment counts its comparisons by hand. An experiment whose claims form
separate families (e.g. a primary claim and secondary ones) makes one
``ClaimFamily`` per family, each named; a named family's claims carry
``family=NAME``.

Example:
  >>> family = ClaimFamily()
  >>> family.add('A beats B', [0.95, 0.96, 0.95, 0.97],
  ...            [0.90, 0.90, 0.91, 0.90])
  >>> family.add('loss down', [3.0, 2.5, 2.8], [3.2, 2.8, 3.1],
  ...            higher_is_better=False, setting='lr 0.1')
  >>> [(c['claim'], c['verdict'], c['comparisons']) for c in family.verdicts()]
  [('A beats B', 'held', 2), ('loss down', 'held', 2)]
"""

from typing import Any, Iterable, Sequence, Union

from experiments.common import verdict as verdict_lib


class ClaimFamily:
  """Claims corrected together: each at level 1 - 0.05 / len(family)."""

  def __init__(self, name: str | None = None, confidence: float = 0.95):
    self.name, self.confidence = name, confidence
    self._pending: list[tuple] = []

  def __len__(self) -> int:
    return len(self._pending)

  def add(self, text: str, treatment: Sequence[float],
          control: Union[Sequence[float], None] = None, /, *,
          threshold: float = 0.0, higher_is_better: bool = True,
          **details: Any) -> None:
    """Adds the claim "treatment - control beats ``threshold``", paired by
    seed (``control`` None: ``treatment`` holds the per-seed differences);
    ``details`` are stored with its verdict (``verdict.claim``), and may
    name the arms (``treatment='SPE'``): the values are positional."""
    self._pending.append((text, treatment, control, threshold,
                          higher_is_better, details))

  def verdicts(self) -> list[dict[str, Any]]:
    """Every claim's verdict, as stored in ``results['claims']``."""
    m = len(self._pending)
    extra = {} if self.name is None else dict(family=self.name)
    return [verdict_lib.claim(text, verdict_lib.paired_verdict(
        treatment, control, threshold=threshold,
        higher_is_better=higher_is_better, comparisons=m,
        confidence=self.confidence), **details, **extra)
            for text, treatment, control, threshold, higher_is_better, details
            in self._pending]


def verdicts(families: Union[ClaimFamily, Iterable[ClaimFamily]]
             ) -> list[dict[str, Any]]:
  """The claims of one family or of several, in order."""
  if isinstance(families, ClaimFamily):
    families = [families]
  return [c for family in families for c in family.verdicts()]
