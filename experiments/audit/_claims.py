"""audit's claims, paired by seed (experiments.common.claims).

An audit's lower bound is itself a 95% statement about one mechanism: one
lower bound above the stated epsilon refutes that statement, and the table
flags it per case. The claims here pool the cases, one Bonferroni family:

* every stated epsilon survives its audit: 1 - lower / stated > 0, pooled
  over cases and seeds;
* the audit has teeth: lower / stated - 1 > 0 for the broken twins, pooled;
* the same two for the one-run gradient-canary audits of DP-SGD training
  (the black-box input-space canaries are reported, not claimed: they are
  far too weak to refute anything at these sizes).
"""

import numpy as np

from experiments.audit._config import Config
from experiments.audit._results import Case
from experiments.audit._results import Results
from experiments.common import claims as claims_lib


def ratios(row: Case, which: str) -> np.ndarray:
  """Lower bound / stated epsilon per seed, of the case ('honest') or of
  its broken twin ('broken')."""
  stated = row.epsilon if which == 'honest' else row.broken_epsilon
  return np.array([a.lower_bound / stated for a in getattr(row, which)])


def claims(results: Results, cfg: Config) -> claims_lib.ClaimFamily:
  del cfg
  rows = results.cases
  family = claims_lib.ClaimFamily()
  honest = [ratios(r, 'honest') for r in rows]
  if honest:
    family.add('every stated epsilon survives its audit (1 - lower '
               'bound / stated > 0, pooled over cases and seeds)',
               1 - np.concatenate(honest), kind='honest')
  broken = [ratios(r, 'broken') for r in rows if r.broken]
  if broken:
    family.add('the audit catches the broken twins (lower bound / '
               'their stated epsilon - 1 > 0, pooled)',
               np.concatenate(broken) - 1, kind='broken')
  for row_kind, sign, text in (
      ('honest', -1, 'one-run gradient-canary audits of DP-SGD training stay '
       'below the stated epsilon (1 - lower / stated > 0, pooled)'),
      ('broken', 1, 'one-run gradient-canary audits catch training without '
       'clipping (lower / stated - 1 > 0, pooled)')):
    r = [np.array([a.lower_bound for a in getattr(row, row_kind)])
         / row.epsilon for row in results.one_run if row.kind == 'gradient']
    if r:
      family.add(text, sign * (np.concatenate(r) - 1),
                 kind=f'one_run_{row_kind}')
  return family
