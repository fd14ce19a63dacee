"""One verdict rule for every claim check of every experiment.

A claim compares a treatment with a control over the same seeds. The verdict
is read off a paired Student-t confidence interval of the per-seed
difference, so that a claim that "held" on one seed must also survive the
spread between seeds:

>>> v = paired_verdict([0.92, 0.93, 0.92, 0.94], [0.90, 0.90, 0.91, 0.90])
>>> v.verdict, v.n, round(v.mean, 4)
('held', 4, 0.025)
>>> print(report.markdown_table([verdict_table_row('accuracy up', v)], COLUMNS))
| Claim | Mean difference | CI | MDE | Level | Seeds | Verdict |
|---|---|---|---|---|---|---|
| accuracy up | 0.025 | [0.004457, 0.04554] | 0.02686 | 95% | 4 | held |

Beside its interval each claim reports its minimal detectable effect
(``detectable_effect``): how far from the threshold the true mean must lie
for these seeds to decide the claim with 80% power. ``seeds_for_effect``
turns a pilot run's spread and a paper's effect size into the seeds needed.
"""

import dataclasses
import math
from typing import Any, Mapping, Sequence, Union

import numpy as np
from scipy import special

from experiments.common import report

RULE = (
    'Claim verdicts: every claim is checked paired by seed, on the per-seed '
    'differences treatment minus control, with a two-sided Student-t '
    'confidence interval of their mean at 95%; where an experiment checks m '
    'claims together, each interval is widened to 1 - 0.05/m (Bonferroni) so '
    'that the 95% holds for the family. A claim is *held* when the whole '
    'interval lies on the claimed side of its threshold (0 unless stated), '
    '*refuted* when the whole interval lies on the other side, and '
    '*inconclusive* when the interval contains the threshold or cannot be '
    'formed (fewer than 2 seeds; identical differences on every seed are '
    'their own interval). A claim about the best of several settings '
    'picks the setting per seed on a validation split and measures its gain '
    'over the reference setting on held-out test data; the best test score '
    'itself is never the evidence, since it is biased upward. Beside each '
    'interval, MDE is the minimal detectable effect: the distance from the '
    'threshold that a true mean difference needs for the claim to be '
    'decided with 80% power at its level, (t_level + t_0.8) sd / sqrt(n) '
    'with sd the spread of the per-seed differences; an inconclusive claim '
    'whose expected effect is below its MDE had too few seeds to decide it, '
    'which is not evidence of no effect. Every claim states its kind: '
    '*paper* (a statement of the paper), *extension* (the project\'s own '
    'baseline, margin or setting) or *sanity* (the setup can show the '
    'effect: a non-private ceiling, a noise-free run that learns, a known '
    'value). A paper claim is decided only when every sanity claim of its '
    'experiment holds; otherwise it reads *not tested: sanity failed*, its '
    'computed verdict beside it, and the experiment\'s report names the '
    'failed sanity claim and the run that would make it testable. An '
    'inconclusive claim whose interval excludes the effect it expects (the '
    'paper\'s, for a paper claim) says so: the data then speak against '
    'that effect, though not against the claim\'s threshold.')

METHOD = 'paired t'
VERDICTS = ('held', 'refuted', 'inconclusive')
POWER = 0.8  # of the minimal detectable effect
COLUMNS = (('claim', 'Claim'), ('mean', 'Mean difference'), ('ci', 'CI'),
           ('mde', 'MDE'), ('level', 'Level'), ('seeds', 'Seeds'),
           ('verdict', 'Verdict'))
# Added to COLUMNS by ``claims_table`` when a claim states the effect size
# it expects (``ClaimFamily.add(..., effect=...)``).
EFFECT_COLUMNS = (('effect', 'Expected effect'),
                  ('seeds_needed', 'Seeds for it'))


@dataclasses.dataclass(frozen=True)
class Verdict:
  """A claim's verdict; ``mean``, ``low``, ``high`` and ``threshold`` are in
  the units of treatment - control, whatever ``direction`` the claim has.

  ``confidence`` is the per-claim level after the Bonferroni correction;
  ``low`` and ``high`` are NaN when no interval can be formed (n < 2).
  ``sd`` is the sample standard deviation of the per-seed differences and
  ``mde`` the minimal detectable effect at ``power`` (``detectable_effect``;
  NaN when n < 2).
  """
  mean: float
  low: float
  high: float
  n: int
  threshold: float
  confidence: float
  comparisons: int
  direction: str  # 'higher is better' or 'lower is better'
  method: str
  verdict: str
  sd: float = float('nan')
  power: float = POWER
  mde: float = float('nan')

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def _finite(name: str, values, ndim: int) -> np.ndarray:
  arr = np.asarray(values, np.float64)
  if arr.ndim != ndim or arr.size == 0:
    want = '[seeds]' if ndim == 1 else '[seeds, settings]'
    raise ValueError(f'{name} must be {want}, got shape {arr.shape}')
  if not np.all(np.isfinite(arr)):
    raise ValueError(f'{name} has non-finite values: {arr.tolist()}')
  return arr


def _check_power(confidence: float, comparisons: int, power: float) -> None:
  if not (0.0 < confidence < 1.0 and 0.0 < power < 1.0
          and int(comparisons) == comparisons >= 1):
    raise ValueError(f'need confidence in (0, 1) ({confidence}), power in '
                     f'(0, 1) ({power}) and comparisons >= 1 ({comparisons})')


def _quantiles(n: int, confidence: float, comparisons: int,
               power: float) -> float:
  """t_{n-1} quantile of the Bonferroni two-sided level plus that of power."""
  level = 1.0 - (1.0 - confidence) / comparisons
  return float(special.stdtrit(n - 1, 0.5 + level / 2)
               + special.stdtrit(n - 1, power))


def detectable_effect(sd: float, n: int, *, comparisons: int = 1,
                      confidence: float = 0.95, power: float = POWER
                      ) -> float:
  """Minimal detectable effect of a paired claim over ``n`` seeds.

  The smallest distance |true mean difference - threshold| at which the
  claim's interval (``paired_verdict`` at level 1 - (1 - confidence) /
  comparisons) excludes the threshold with probability ``power``, given
  per-seed differences of standard deviation ``sd``:
  MDE = (t_{n-1, 1/2 + level/2} + t_{n-1, power}) sd / sqrt(n), the
  standard power formula of the one-sample t test (e.g. Cohen 1988, ch. 2)
  with Student-t quantiles. NaN for n < 2.

  >>> round(detectable_effect(1.0, 20), 3)
  0.661
  >>> round(detectable_effect(1.0, 20, comparisons=6), 3)
  0.851
  """
  _check_power(confidence, comparisons, power)
  if not (math.isfinite(sd) and sd >= 0):
    raise ValueError(f'need a finite sd >= 0, got {sd}')
  if n < 2:
    return float('nan')
  return _quantiles(n, confidence, comparisons, power) * sd / math.sqrt(n)


def seeds_for_effect(effect: float, sd: float, *, comparisons: int = 1,
                     confidence: float = 0.95, power: float = POWER,
                     max_seeds: int = 100_000) -> int:
  """The fewest seeds whose ``detectable_effect`` is at most ``effect``.

  ``sd`` is the spread of the per-seed differences from a pilot run and
  ``effect`` the effect size to decide (e.g. the paper's), both in the
  claim's units; ``comparisons`` is the size of the claim's family. Raises
  ValueError when more than ``max_seeds`` would be needed.

  >>> seeds_for_effect(0.5, 1.0), seeds_for_effect(0.5, 1.0, comparisons=6)
  (34, 52)
  """
  _check_power(confidence, comparisons, power)
  if not (math.isfinite(effect) and effect != 0):
    raise ValueError(f'need a finite nonzero effect, got {effect}')
  if not (math.isfinite(sd) and sd >= 0):
    raise ValueError(f'need a finite sd >= 0, got {sd}')
  effect = abs(effect)
  # (t_a + t_b) / sqrt(n) decreases in n: bisect on [2, max_seeds].
  def ok(n):
    return _quantiles(n, confidence, comparisons, power) * sd <= (
        effect * math.sqrt(n))
  if not ok(max_seeds):
    raise ValueError(f'effect {effect:g} needs more than {max_seeds} seeds '
                     f'at sd {sd:g}')
  lo, hi = 1, max_seeds  # not ok(lo) (one seed decides nothing), ok(hi)
  while hi - lo > 1:
    mid = (lo + hi) // 2
    lo, hi = (lo, mid) if ok(mid) else (mid, hi)
  return hi


def paired_verdict(treatment: Sequence[float],
                   control: Union[Sequence[float], None] = None, *,
                   threshold: float = 0.0, higher_is_better: bool = True,
                   comparisons: int = 1, confidence: float = 0.95,
                   power: float = POWER) -> Verdict:
  """Verdict on "treatment - control beats ``threshold``", paired by seed.

  ``treatment[i]`` and ``control[i]`` come from seed ``i``; with ``control``
  None, ``treatment`` already holds the per-seed differences (e.g. the output
  of ``selected_gain``). The claim is ``mean > threshold`` when higher is
  better and ``mean < threshold`` when lower is better (e.g. a loss: a
  lower-is-better claim "reduces the loss by 0.1" is ``threshold=-0.1``).
  The interval is two-sided at ``1 - (1 - confidence) / comparisons``;
  the verdict also carries its minimal detectable effect at ``power``.

  Identical differences on every seed (zero variance) give the interval that
  is the point itself: held or refuted by which side of the threshold it
  lies on, inconclusive when it equals the threshold. One seed is always
  inconclusive; no seeds, unequal lengths or non-finite values raise.

  >>> paired_verdict([3.0, 2.5, 2.8], [3.2, 2.8, 3.1],
  ...                higher_is_better=False).verdict  # loss went down
  'held'
  >>> paired_verdict([0.2, -0.1, 0.05]).verdict
  'inconclusive'
  """
  d = _differences(treatment, control)
  if not np.isfinite(threshold):
    raise ValueError(f'need a finite threshold ({threshold})')
  _check_power(confidence, comparisons, power)
  level = 1.0 - (1.0 - confidence) / comparisons
  n = int(d.size)
  mean, sd, low, high = _interval(d, level)
  verdict = _decide(low, high, threshold, higher_is_better)
  return Verdict(mean=mean, low=low, high=high, n=n, threshold=float(threshold),
                 confidence=level, comparisons=int(comparisons),
                 direction=('higher is better' if higher_is_better
                            else 'lower is better'),
                 method=METHOD, verdict=verdict, sd=sd, power=float(power),
                 mde=(float('nan') if n < 2 else detectable_effect(
                     sd, n, comparisons=comparisons, confidence=confidence,
                     power=power)))


def _differences(treatment, control) -> np.ndarray:
  """Per-seed treatment - control (``treatment`` itself without control)."""
  d = _finite('treatment', treatment, 1)
  if control is None:
    return d
  c = _finite('control', control, 1)
  if c.shape != d.shape:
    raise ValueError(f'treatment has {d.size} seeds but control has '
                     f'{c.size}; a paired check needs the same seeds')
  return d - c


def _interval(d: np.ndarray, level: float
              ) -> tuple[float, float, float, float]:
  """(mean, sd, low, high) of the two-sided t interval at ``level``; a
  constant ``d`` is its own interval, one seed has none (NaN)."""
  if np.all(d == d[0]):  # exact, so a constant equal to threshold stays equal
    mean, half, sd = float(d[0]), 0.0, 0.0
  else:
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    half = float(special.stdtrit(d.size - 1, 0.5 + level / 2) * sd
                 / np.sqrt(d.size))
  if d.size < 2:
    return mean, float('nan'), float('nan'), float('nan')
  return mean, sd, mean - half, mean + half


def _decide(low: float, high: float, threshold: float,
            higher_is_better: bool) -> str:
  """'held' when [low, high] lies on the claimed side of ``threshold``,
  'refuted' on the other, else (or without an interval) 'inconclusive'."""
  above, below = low > threshold, high < threshold
  if not higher_is_better:
    above, below = below, above
  return 'held' if above else 'refuted' if below else 'inconclusive'


def _scores(validation, test, baseline):
  val, tst = _finite('validation', validation, 2), _finite('test', test, 2)
  if val.shape != tst.shape:
    raise ValueError(f'validation {val.shape} and test {tst.shape} must '
                     'have the same [seeds, settings] shape')
  if not 0 <= baseline < val.shape[1]:
    raise ValueError(f'baseline {baseline} is not one of the '
                     f'{val.shape[1]} settings')
  return val, tst


def selected_settings(validation, *, higher_is_better: bool = True
                      ) -> np.ndarray:
  """Per seed, the index of the best validation score (ties: lowest index).

  >>> selected_settings([[0.5, 0.7, 0.7], [0.9, 0.1, 0.2]]).tolist()
  [1, 0]
  """
  val, _ = _scores(validation, validation, 0)
  return np.argmax(val, 1) if higher_is_better else np.argmin(val, 1)


def select_per_seed(runs: Sequence[Mapping[str, Any]],
                    group_by: Sequence[str], order_by: Sequence[str], *,
                    score: str = 'val_accuracy') -> list[dict[str, Any]]:
  """Per group (the values of ``group_by``) and seed, the run with the best
  ``score`` (``selected_settings``; ties: the first by ``order_by``), marked
  ``selected``. Groups in order of first appearance, seeds ascending.

  >>> runs = [dict(eps=1, seed=s, clip=c, val_accuracy=v)
  ...         for s, c, v in ((0, 1.0, .8), (0, .5, .8), (1, .5, .7),
  ...                         (1, 1.0, .9))]
  >>> [(r['seed'], r['clip']) for r in select_per_seed(runs, ('eps',),
  ...                                                  ('clip',))]
  [(0, 0.5), (1, 1.0)]
  """
  groups: dict[tuple, dict[Any, list]] = {}
  for r in runs:
    groups.setdefault(tuple(r[k] for k in group_by), {}).setdefault(
        r['seed'], []).append(r)
  out = []
  for by_seed in groups.values():
    for seed in sorted(by_seed):
      rows = sorted(by_seed[seed], key=lambda r: tuple(r[k] for k in order_by))
      best = int(selected_settings(np.array([[r[score] for r in rows]]))[0])
      out.append(dict(rows[best], selected=True))
  return out


def selected_gain(validation, test, *, baseline: int = 0,
                  higher_is_better: bool = True) -> np.ndarray:
  """Per-seed held-out gain of the setting chosen on validation data.

  ``validation`` and ``test`` are [seeds, settings] scores of the same runs
  on two independent splits. Each seed picks ``selected_settings`` on
  validation, and the gain is ``test[s, chosen] - test[s, baseline]`` (0 when
  the baseline itself is chosen). Because the choice never sees the test
  split, a null effect (all settings equal) gives gains centred at zero;
  taking instead ``max_k test[s, k] - test[s, baseline]`` is biased upward
  (best-of-k bias: about +1.03 noise sd for k = 4 equal settings), which
  turns noise into a "held" claim. Feed the result to ``paired_verdict``
  with ``control=None`` and the same ``higher_is_better``.

  >>> selected_gain([[0.5, 0.7], [0.6, 0.4]], [[0.50, 0.55], [0.62, 0.9]])
  array([0.05, 0.  ])
  """
  val, tst = _scores(validation, test, baseline)
  chosen = selected_settings(val, higher_is_better=higher_is_better)
  rows = np.arange(tst.shape[0])
  return tst[rows, chosen] - tst[:, baseline]


def verdict_table_row(claim: str, v: Union[Verdict, Mapping[str, Any]]
                      ) -> dict[str, Any]:
  """A row for ``report.markdown_table(rows, COLUMNS)``.

  ``v`` is a ``Verdict`` or a claim as read back from a results file
  (``claims.verdicts``: with its kind, and its outcome shown as the
  verdict, the computed verdict beside it where they differ). The interval is '-' when it could not be formed, and so is the MDE
  (or when a results file from before it was reported lacks it); a claim
  that states its expected ``effect`` also fills ``EFFECT_COLUMNS``.
  """
  d = v.to_dict() if isinstance(v, Verdict) else dict(v)
  low, high = float(d['low']), float(d['high'])
  ci = ('-' if np.isnan(low) else
        f"[{report.fmt(low)}, {report.fmt(high)}]")
  mde = d.get('mde')
  shown = d.get('outcome', d['verdict'])  # a stored claim's outcome
  if not shown.startswith(d['verdict']):  # not tested: say what it computed
    shown += f" (computed: {d['verdict']})"
  row = dict(claim=claim, mean=float(d['mean']), ci=ci,
             mde=None if mde is None else float(mde),
             level=f"{report.fmt(100 * float(d['confidence']))}%",
             seeds=int(d['n']), verdict=shown)
  if 'kind' in d:
    row['kind'] = d['kind']
  if d.get('effect') is not None:
    row.update(effect=float(d['effect']), seeds_needed=d.get('seeds_needed'))
  return row


def claim(text: str, v: Verdict, **details: Any) -> dict[str, Any]:
  """A claim as stored in ``results['claims']``: its text, its verdict's
  fields and any ``details`` (e.g. the setting chosen), whose names must not
  be the verdict's own."""
  fields = v.to_dict()
  clash = sorted(set(details) & (set(fields) | {'claim'}))
  if clash:
    raise ValueError(f'details {clash} would overwrite the verdict\'s fields')
  return dict(claim=text, **fields, **details)


UNDECIDED_COLUMNS = (('claim', 'Inconclusive claim'),
                     ('gap', 'Mean - threshold'), ('sd', 'SD per seed'),
                     ('seeds', 'Seeds'), ('needed', 'Seeds to decide it'))
UNDECIDED_NOTE = (
    'Seeds to decide it: the fewest seeds whose minimal detectable effect '
    '(80% power at the claim\'s Bonferroni level, with this run\'s spread) '
    'is at most the distance of the observed mean from the threshold, i.e. '
    'the run that would decide the claim if that distance were the true '
    'effect. It is a planning estimate: the observed distance is itself '
    'noisy, and where it is near zero no effect was seen and more seeds '
    'would only narrow the interval around the threshold.')


def seeds_to_decide(c: Mapping[str, Any], max_seeds: int = 100_000
                    ) -> Union[int, str]:
  """``seeds_for_effect`` of a stored claim, taking its observed distance
  from the threshold as the effect; a phrase when there is none to take."""
  n, sd = int(c['n']), float(c.get('sd', float('nan')))
  gap = float(c['mean']) - float(c['threshold'])
  if n < 2 or not math.isfinite(sd):
    return 'no spread (fewer than 2 seeds)'
  if gap == 0:
    return 'no effect seen'
  m = int(c['comparisons'])
  family = 1.0 - (1.0 - float(c['confidence'])) * m
  try:
    return seeds_for_effect(gap, sd, comparisons=m, confidence=family,
                            max_seeds=max_seeds)
  except ValueError:
    return f'more than {max_seeds:,}'


def undecided_table(claims: Sequence[Mapping[str, Any]]) -> str:
  """The inconclusive ``claims`` (by outcome: a paper claim not tested is
  not listed) and the seeds each would need
  (``seeds_to_decide``); '' when every claim is decided."""
  rows = [dict(claim=c['claim'],
               gap=float(c['mean']) - float(c['threshold']),
               sd=float(c.get('sd', float('nan'))), seeds=int(c['n']),
               needed=seeds_to_decide(c))
          for c in claims
          if c.get('outcome', c['verdict']).startswith('inconclusive')]
  if not rows:
    return ''
  return report.markdown_table(rows, UNDECIDED_COLUMNS)


def claims_table(claims: Sequence[Mapping[str, Any]]) -> str:
  """The markdown table of ``results['claims']``, each claim's kind beside
  it; with the expected effect and the seeds it needs when any claim
  states one."""
  rows = [verdict_table_row(c['claim'], c) for c in claims]
  columns = COLUMNS[:1] + (('kind', 'Kind'),) + COLUMNS[1:]
  if any('effect' in r for r in rows):
    columns = columns[:5] + EFFECT_COLUMNS + columns[5:]
  return report.markdown_table(rows, columns)
