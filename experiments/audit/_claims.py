"""audit's claims, per case, paired by seed (experiments.common.claims).

An audit's lower bound is itself a 95% statement about one mechanism: one
lower bound above the stated epsilon refutes that statement, and the table
flags it per case. The claims are per case, never pooled over cases (a mean
over cases hides a twin that escapes on some seeds):

* ``honest`` (kind extension: dpjax's own stated epsilons), per case: the
  stated epsilon survives its audit, 1 - lower / stated > 0 per seed;
* ``twins`` (kind sanity: the audit can show a violation), per case with a
  broken twin: the twin is caught, lower / its stated epsilon - 1 > 0 per
  seed; the claim's text says on how many seeds it was;
* ``one-run``: the same two for the one-run gradient-canary audits of
  DP-SGD training (the black-box input-space canaries are reported, not
  claimed: they are far too weak to refute anything at these sizes).

Each family is Bonferroni-corrected over its own cases.
"""

import numpy as np

from experiments.audit._config import Config
from experiments.audit._results import Case
from experiments.audit._results import Results
from experiments.common import claims as claims_lib

REMEDY = ('more audit samples per seed (or a stronger attack), until the '
          'audit catches every broken twin on every seed')


def ratios(row: Case, which: str) -> np.ndarray:
  """Lower bound / stated epsilon per seed, of the case ('honest') or of
  its broken twin ('broken')."""
  stated = row.epsilon if which == 'honest' else row.broken_epsilon
  return np.array([a.lower_bound / stated for a in getattr(row, which)])


def _caught(margins: np.ndarray) -> str:
  return f'caught on {int(np.sum(margins > 0))} of {margins.size} seeds'


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  del cfg
  honest, twins, one_run = (claims_lib.ClaimFamily(name) for name in
                            ('honest', 'twins', 'one-run'))
  for row in results.cases:
    honest.add(f'{row.name}: the stated epsilon survives its audit (1 - '
               'lower bound / stated > 0)',
               1 - ratios(row, 'honest'), kind='extension', case=row.name)
    if row.broken:
      margins = ratios(row, 'broken') - 1
      twins.add(f'{row.name}: the audit catches the broken twin (lower '
                f'bound / its stated epsilon - 1 > 0; {_caught(margins)})',
                margins, kind='sanity', remedy=REMEDY, case=row.name)
  for row in results.one_run:
    if row.kind != 'gradient':
      continue
    ratio = {which: np.array([a.lower_bound for a in getattr(row, which)])
             / row.epsilon for which in ('honest', 'broken')}
    one_run.add(f'one-run gradient-canary audit of DP-SGD training at eps '
                f'{row.epsilon:.3g} stays below the stated epsilon (1 - '
                'lower / stated > 0)', 1 - ratio['honest'],
                kind='extension', case='one_run_honest')
    margins = ratio['broken'] - 1
    one_run.add(f'one-run gradient-canary audit at eps {row.epsilon:.3g} '
                'catches training without clipping (lower / stated - 1 > 0; '
                f'{_caught(margins)})', margins, kind='sanity',
                remedy=REMEDY, case='one_run_broken')
  return [f for f in (honest, twins, one_run) if len(f)]
