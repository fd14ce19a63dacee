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

Every claim states its ``kind`` (``KINDS``): ``paper`` (a statement of the
paper), ``extension`` (the project's own baseline, margin or setting) or
``sanity`` (the setup can show the effect: a non-private ceiling, a
noise-free run that learns, a known value). A sanity claim also states
``remedy``: the run that would make the experiment's paper claims testable
if it fails. ``verdicts`` gathers an experiment's families and sets each
claim's ``outcome`` (``outcome``): its verdict, except that a paper claim is
not tested while any sanity claim of its experiment is not held (the
verdict stays stored beside it), and that an inconclusive claim whose
interval excludes its expected ``effect`` says so.

Example:
  >>> family = ClaimFamily()
  >>> family.add('A beats B', [0.95, 0.96, 0.95, 0.97],
  ...            [0.90, 0.90, 0.91, 0.90], kind='paper')
  >>> family.add('loss down', [3.0, 2.5, 2.8], [3.2, 2.8, 3.1],
  ...            higher_is_better=False, kind='extension', setting='lr 0.1')
  >>> [(c['claim'], c['verdict'], c['comparisons']) for c in family.verdicts()]
  [('A beats B', 'held', 2), ('loss down', 'held', 2)]
  >>> family.seeds_for(0.01, sd=0.01)  # seeds to decide 0.01 at sd 0.01
  13
"""

import math
from typing import Any, Iterable, Sequence, Union

from experiments.common import verdict as verdict_lib

KINDS = ('paper', 'extension', 'sanity')
NOT_TESTED = 'not tested: sanity failed'
# An inconclusive claim whose interval excludes its expected effect: the
# paper's for a paper claim, the project's own otherwise.
EXCLUDES_EFFECT = {'paper': "inconclusive; excludes the paper's effect",
                   'other': 'inconclusive; excludes the expected effect'}


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
          kind: str, threshold: float = 0.0, higher_is_better: bool = True,
          effect: float | None = None, remedy: str | None = None,
          **details: Any) -> None:
    """Adds the claim "treatment - control beats ``threshold``", paired by
    seed (``control`` None: ``treatment`` holds the per-seed differences);
    ``details`` are stored with its verdict (``verdict.claim``; they may
    be named ``treatment`` or ``control``, e.g. the settings compared).
    ``kind``: one of ``KINDS``; ``remedy`` (sanity claims only, and
    required there): the run that would make the paper claims testable.
    ``effect``: the effect size the claim expects (e.g. the paper's), as a
    distance from ``threshold`` on the claimed side; the verdict then
    stores it and ``seeds_needed``."""
    if kind not in KINDS:
      raise ValueError(f'kind must be one of {KINDS}, got {kind!r}')
    if (kind == 'sanity') != bool(remedy):
      raise ValueError('a sanity claim states its remedy (the run that '
                       'would make the paper claims testable), and only a '
                       f'sanity claim does: {text!r}')
    details = dict(details, kind=kind)
    if remedy:
      details['remedy'] = remedy
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


def excludes_effect(c: dict[str, Any]) -> bool:
  """Whether a stored claim's interval excludes its expected ``effect``:
  the point ``effect`` beyond the threshold on the claimed side lies
  outside [low, high] (False without an effect or an interval)."""
  if c.get('effect') is None or math.isnan(c['low']):
    return False
  sign = 1.0 if c['direction'] == 'higher is better' else -1.0
  expected = c['threshold'] + sign * abs(c['effect'])
  return not c['low'] <= expected <= c['high']


def outcome(c: dict[str, Any], sanity_held: bool) -> str:
  """What the report shows for a stored claim: ``NOT_TESTED`` for a paper
  claim when its experiment's sanity claims did not all hold, else its
  verdict, marked ``EXCLUDES_EFFECT`` when inconclusive with an interval
  that excludes the expected effect."""
  if c['kind'] == 'paper' and not sanity_held:
    return NOT_TESTED
  if c['verdict'] == 'inconclusive' and excludes_effect(c):
    return EXCLUDES_EFFECT['paper' if c['kind'] == 'paper' else 'other']
  return c['verdict']


# What the report counts: every outcome falls under one of these.
OUTCOMES = ('held', 'refuted', 'inconclusive', 'not tested')


def counted(outcome_: str) -> str:
  """The ``OUTCOMES`` entry an outcome counts under."""
  return next(o for o in OUTCOMES if outcome_.startswith(o))


def failed_sanity(claims: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
  """An experiment's sanity claims that did not hold."""
  return [c for c in claims
          if c['kind'] == 'sanity' and c['verdict'] != 'held']


def verdicts(families: Union[ClaimFamily, Iterable[ClaimFamily]]
             ) -> list[dict[str, Any]]:
  """The claims of one experiment's family or families, in order, each
  with its ``outcome`` (the sanity gate applied over all of them)."""
  if isinstance(families, ClaimFamily):
    families = [families]
  out = [c for family in families for c in family.verdicts()]
  sanity_held = not failed_sanity(out)
  return [dict(c, outcome=outcome(c, sanity_held)) for c in out]
