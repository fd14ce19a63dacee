"""audit's numbers (``_run.run``)."""

import dataclasses

from experiments.common import results


@dataclasses.dataclass(frozen=True, kw_only=True)
class Audit(results.Record):
  """One seed's distinguishing audit of one mechanism."""
  lower_bound: float  # the Clopper-Pearson lower bound on epsilon
  estimate: float  # the same from the raw held-out error rates
  false_positives: int  # held-out errors on d
  false_negatives: int  # held-out errors on d'
  held_out: int  # held-out trials per input
  seconds: float  # wall time of the audit


@dataclasses.dataclass(frozen=True, kw_only=True)
class Case(results.Record):
  """A case of ``dpjax.audit.audit_cases()`` and its broken twin."""
  name: str  # the case's name
  epsilon: float  # stated epsilon
  delta: float  # stated delta
  relation: str  # the neighbouring relation audited
  attack: str  # the inputs and score of the attack
  honest: list[Audit]  # one per seed
  broken: list[Audit]  # the broken twin, one per seed (none without twin)
  broken_epsilon: float | None  # the twin's stated epsilon


@dataclasses.dataclass(frozen=True, kw_only=True)
class OneRunAudit(results.Record):
  """One seed's one-run audit."""
  lower_bound: float  # the lower bound on epsilon
  correct: int  # correct guesses
  seconds: float  # wall time of the audit


@dataclasses.dataclass(frozen=True, kw_only=True)
class OneRun(results.Record):
  """One-run audits of DP-SGD training at one stated epsilon."""
  kind: str  # 'gradient' (white-box) or 'input' (black-box) canaries
  target: float  # the target epsilon sigma is calibrated to
  epsilon: float  # the stated epsilon at that sigma
  delta: float  # stated delta
  noise_multiplier: float  # sigma of the training
  canaries: int  # canaries m
  guesses: int  # guesses r
  steps: int  # full-batch DP-SGD steps
  honest: list[OneRunAudit]  # clipped training, one per seed
  broken: list[OneRunAudit]  # training without clipping, one per seed


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  cases: list[Case]  # every audited case, in the configuration's order
  registered: list[str]  # every case of dpjax.audit.audit_cases()
  one_run: list[OneRun]  # per (stated epsilon, canary kind)
  devices: str  # the JAX devices that ran
