"""The claim verdict rule: its error rates by simulation, Bonferroni, the
selection-bias correction, input checks and the table rows.

Rates are measured over REPS simulated experiments from a fixed Generator and
compared with their exact values within 4 binomial standard errors
(sqrt(p (1 - p) / REPS)): wide enough that another seed would not fail a
correct rule (a 4-sigma miss has probability ~6e-5), narrow enough to catch a
normal quantile in place of Student-t's, or a one-sided interval.
"""

import doctest
import json
import math

import numpy as np
import pytest
from scipy import stats

from experiments.common import report
from experiments.common import verdict as vlib
from experiments.common.verdict import paired_verdict

REPS = 20000


def _rates(samples, **kwargs):
  """Fraction of each verdict over the rows of ``samples`` [reps, seeds]."""
  got = [paired_verdict(row, **kwargs).verdict for row in samples]
  return {k: got.count(k) / len(got) for k in vlib.VERDICTS}


def _tolerance(p, reps=REPS):
  return 4 * math.sqrt(p * (1 - p) / reps)


def _power(effect, n, level=0.95):
  """Exact P(the two-sided t interval lies above 0) for N(effect, 1) seeds."""
  crit = stats.t.ppf(0.5 + level / 2, n - 1)
  return float(stats.nct.sf(crit, n - 1, effect * math.sqrt(n)))


@pytest.mark.parametrize('effect,n', [(1.0, 10), (1.0, 15), (0.5, 30)])
def test_true_effect_is_held_at_the_t_tests_power(effect, n):
  # Power 0.803 (1.0, 10), 0.949 (1.0, 15) and 0.754 (0.5, 30): not >= 0.9
  # for one sd over ten seeds, which is what a paired t-test can give there.
  rng = np.random.default_rng(0)
  rates = _rates(rng.normal(effect, 1.0, (REPS, n)))
  power = _power(effect, n)
  assert abs(rates['held'] - power) <= _tolerance(power), (rates, power)
  assert rates['refuted'] < 1e-3


def test_reversed_effect_is_refuted():
  rng = np.random.default_rng(1)
  rates = _rates(rng.normal(-1.0, 1.0, (REPS, 10)))
  power = _power(1.0, 10)
  assert abs(rates['refuted'] - power) <= _tolerance(power), rates
  assert rates['held'] < 1e-3


@pytest.mark.parametrize('n', [2, 3, 10])
def test_null_effect_is_inconclusive_95_percent_of_the_time(n):
  # A two-sided 95% t interval covers the true mean 0 with probability
  # exactly 0.95, so "inconclusive in at least 95%" holds in expectation; the
  # measured rate may miss it only by sampling error, bounded by 4 SEs
  # (0.0062 here). Each wrong verdict has 2.5%: the errors are symmetric.
  rng = np.random.default_rng(2 + n)
  rates = _rates(rng.normal(0.0, 1.0, (REPS, n)))
  assert abs(rates['inconclusive'] - 0.95) <= _tolerance(0.95), rates
  for wrong in ('held', 'refuted'):
    assert abs(rates[wrong] - 0.025) <= _tolerance(0.025), rates


def test_selected_gain_of_a_null_effect_is_centred_at_zero():
  # K = 4 equally good settings; validation and test noise independent.
  reps, seeds, k = 4000, 5, 4
  rng = np.random.default_rng(3)
  val = 0.9 + 0.01 * rng.normal(size=(reps, seeds, k))
  test = 0.9 + 0.01 * rng.normal(size=(reps, seeds, k))
  corrected = np.stack([vlib.selected_gain(v, t) for v, t in zip(val, test)])
  naive = test.max(-1) - test[..., 0]
  for gains in (corrected, naive):
    assert gains.shape == (reps, seeds)
  sem = corrected.std() / math.sqrt(corrected.size)
  assert abs(corrected.mean()) <= 4 * sem, (corrected.mean(), sem)
  # E[max of 4 iid N(0, 1)] = 1.0294: the best-of-k bias in noise sds.
  assert naive.mean() == pytest.approx(0.01 * 1.0294, rel=0.02)
  assert naive.mean() > 50 * naive.std() / math.sqrt(naive.size)
  # As verdicts over 5 seeds: the corrected gain is held in 1.4% of these
  # null experiments (at most the rule's 2.5%), the naive one in 33%.
  held = lambda g: np.mean([paired_verdict(r).verdict == 'held' for r in g])
  assert held(corrected) <= 0.025 + _tolerance(0.025, reps)
  assert held(naive) > 0.25


def test_selection_finds_a_real_effect_and_counts_it_on_test_data():
  rng = np.random.default_rng(4)
  true = np.array([0.0, 0.0, 1.0, 0.0])  # setting 2 is better by 1
  val = true + 0.1 * rng.normal(size=(6, 4))
  test = true + 0.1 * rng.normal(size=(6, 4))
  assert vlib.selected_settings(val).tolist() == [2] * 6
  gain = vlib.selected_gain(val, test)
  np.testing.assert_array_equal(gain, test[:, 2] - test[:, 0])
  assert paired_verdict(gain).verdict == 'held'
  # A loss: lower is better, so the same scores pick setting 2 when negated.
  chosen = vlib.selected_settings(-val, higher_is_better=False)
  assert chosen.tolist() == [2] * 6
  np.testing.assert_array_equal(
      vlib.selected_gain(-val, -test, higher_is_better=False), -gain)
  # The baseline may be any setting; choosing it gives a gain of exactly 0.
  np.testing.assert_array_equal(vlib.selected_gain(val, test, baseline=2), 0.)


def test_selection_ties_go_to_the_lowest_index():
  scores = [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]
  assert vlib.selected_settings(scores).tolist() == [1, 0]
  assert vlib.selected_settings(scores, higher_is_better=False).tolist() == [
      0, 0]


DIFFS = np.array([0.12, 0.01, 0.25, 0.08, 0.17, 0.02])


@pytest.mark.parametrize('m', [1, 2, 5])
def test_interval_matches_scipy_with_bonferroni(m):
  v = paired_verdict(DIFFS, comparisons=m)
  level = 1 - 0.05 / m
  sem = stats.sem(DIFFS)
  low, high = stats.t.interval(level, len(DIFFS) - 1, loc=DIFFS.mean(),
                               scale=sem)
  assert (v.low, v.high) == pytest.approx((low, high), rel=1e-12)
  assert v.high - v.mean == pytest.approx(
      stats.t.ppf(1 - 0.05 / (2 * m), len(DIFFS) - 1) * sem, rel=1e-12)
  assert v.confidence == pytest.approx(level)
  assert (v.n, v.comparisons, v.method) == (6, m, 'paired t')


def test_bonferroni_widens_the_interval_and_can_change_the_verdict():
  widths = [paired_verdict(DIFFS, comparisons=m).high - paired_verdict(
      DIFFS, comparisons=m).low for m in (1, 2, 5, 20)]
  assert widths == sorted(widths) and len(set(widths)) == 4
  assert paired_verdict(DIFFS).verdict == 'held'
  assert paired_verdict(DIFFS, comparisons=2).verdict == 'inconclusive'


def test_bonferroni_bounds_the_family_wise_error():
  # Five null claims, each at 1 - 0.05/5: P(any wrong verdict) = 1 - 0.99^5.
  rng = np.random.default_rng(5)
  reps = 5000
  wrong = [any(paired_verdict(c, comparisons=5).verdict != 'inconclusive'
               for c in claims) for claims in rng.normal(size=(reps, 5, 8))]
  fwer = 1 - 0.99**5
  assert abs(np.mean(wrong) - fwer) <= _tolerance(fwer, reps)


def test_paired_matches_treatment_minus_control():
  control = np.array([0.90, 0.88, 0.91, 0.87, 0.93, 0.90])
  v = paired_verdict(control + DIFFS, control)
  w = paired_verdict(DIFFS)
  assert (v.mean, v.low, v.high) == pytest.approx((w.mean, w.low, w.high))
  assert v.verdict == w.verdict == 'held'


def test_lower_is_better_flips_the_verdict_not_the_units():
  loss_control = np.array([2.0, 2.2, 1.9, 2.1])
  loss_lower = loss_control - np.array([0.3, 0.2, 0.4, 0.25])
  down = paired_verdict(loss_lower, loss_control, higher_is_better=False)
  up = paired_verdict(loss_lower, loss_control)
  assert (down.verdict, up.verdict) == ('held', 'refuted')
  # Same interval, in treatment - control units, for either direction.
  assert (down.mean, down.low, down.high) == (up.mean, up.low, up.high)
  assert down.mean < down.high < 0
  assert (down.direction, up.direction) == ('lower is better',
                                            'higher is better')
  assert paired_verdict(loss_control, loss_lower,
                        higher_is_better=False).verdict == 'refuted'
  # "Reduces the loss by at least 0.1" holds; "by at least 0.5" is refuted.
  for threshold, want in ((-0.1, 'held'), (-0.5, 'refuted')):
    assert paired_verdict(loss_lower, loss_control, threshold=threshold,
                          higher_is_better=False).verdict == want
  # Simulated: a loss reduction of one sd is held at the t-test's power.
  rng = np.random.default_rng(6)
  rates = _rates(rng.normal(-1.0, 1.0, (REPS, 10)), higher_is_better=False)
  assert abs(rates['held'] - _power(1.0, 10)) <= _tolerance(0.8), rates


def test_zero_variance_is_the_point_interval():
  v = paired_verdict([0.5, 0.5, 0.5])
  assert (v.low, v.mean, v.high, v.verdict) == (0.5, 0.5, 0.5, 'held')
  assert paired_verdict([-0.2, -0.2]).verdict == 'refuted'
  assert paired_verdict([0.3, 0.3], threshold=0.3).verdict == 'inconclusive'
  # 0.1 + 0.1 + 0.1 != 0.3 in floating point; a constant stays exact anyway.
  assert paired_verdict([0.1] * 3, threshold=0.1).verdict == 'inconclusive'


def test_one_seed_is_inconclusive():
  v = paired_verdict([5.0], [1.0])
  assert (v.n, v.mean, v.verdict) == (1, 4.0, 'inconclusive')
  assert math.isnan(v.low) and math.isnan(v.high)
  assert vlib.verdict_table_row('c', v)['ci'] == '-'


@pytest.mark.parametrize('args,kwargs,match', [
    (([1.0, 2.0, 3.0], [1.0, 2.0]), {}, 'seeds'),
    (([1.0, float('nan'), 3.0],), {}, 'non-finite'),
    (([1.0, 2.0], [1.0, float('inf')]), {}, 'non-finite'),
    (([],), {}, 'shape'),
    (([[1.0, 2.0], [3.0, 4.0]],), {}, 'shape'),
    (([1.0, 2.0],), dict(confidence=1.0), 'confidence'),
    (([1.0, 2.0],), dict(comparisons=0), 'comparisons'),
    (([1.0, 2.0],), dict(comparisons=1.5), 'comparisons'),
    (([1.0, 2.0],), dict(threshold=float('nan')), 'threshold'),
])
def test_paired_verdict_rejects_bad_input(args, kwargs, match):
  with pytest.raises(ValueError, match=match):
    paired_verdict(*args, **kwargs)


@pytest.mark.parametrize('val,test,baseline,match', [
    ([[1.0, 2.0]], [[1.0, 2.0, 3.0]], 0, 'same'),
    ([1.0, 2.0], [1.0, 2.0], 0, 'shape'),
    ([[1.0, float('nan')]], [[1.0, 2.0]], 0, 'non-finite'),
    ([[1.0, 2.0]], [[1.0, 2.0]], 2, 'baseline'),
    ([[1.0, 2.0]], [[1.0, 2.0]], -1, 'baseline'),
])
def test_selected_gain_rejects_bad_input(val, test, baseline, match):
  with pytest.raises(ValueError, match=match):
    vlib.selected_gain(val, test, baseline=baseline)


def test_table_row_from_a_verdict_or_its_results_file_copy():
  v = paired_verdict(DIFFS, comparisons=3)
  row = vlib.verdict_table_row('gain > 0', v)
  assert row == vlib.verdict_table_row('gain > 0',
                                       json.loads(json.dumps(v.to_dict())))
  assert row == dict(claim='gain > 0', mean=v.mean,
                     ci=f'[{v.low:.4g}, {v.high:.4g}]', mde=v.mde,
                     level='98.33%', seeds=6, verdict='inconclusive')
  table = report.markdown_table([row], vlib.COLUMNS).splitlines()
  assert table[0] == ('| Claim | Mean difference | CI | MDE | Level | '
                      'Seeds | Verdict |')
  assert table[2] == (f'| gain > 0 | 0.1083 | [{v.low:.4g}, {v.high:.4g}] | '
                      f'{v.mde:.4g} | 98.33% | 6 | inconclusive |')


def test_rule_states_every_part_once():
  for part in ('paired', 'seed', 'Student-t', '95%', 'Bonferroni', 'held',
               'refuted', 'inconclusive', 'validation', 'held-out'):
    assert part in vlib.RULE, part
  assert '\n' not in vlib.RULE


def test_docstring_examples():
  result = doctest.testmod(vlib, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0


def test_claim_details_cannot_overwrite_the_verdict():
  v = vlib.paired_verdict([1.0, 2.0, 3.0])
  assert vlib.claim('up', v, rate=0.5)['rate'] == 0.5
  with pytest.raises(ValueError, match='method'):
    vlib.claim('up', v, method='x')


@pytest.mark.parametrize('n,m', [(3, 1), (5, 4), (10, 1), (20, 6), (50, 1)])
def test_detectable_effect_is_decided_at_about_80_percent_power(n, m):
  # At a true effect of one MDE (sd 1) the exact power of the Bonferroni t
  # interval (noncentral t) is 0.76-0.80: the formula's t quantiles make it
  # slightly conservative only for very few seeds.
  mde = vlib.detectable_effect(1.0, n, comparisons=m)
  power = _power(mde, n, level=1 - 0.05 / m)
  assert 0.75 <= power <= 0.81, power
  # Linear in sd; NaN where no interval can be formed.
  assert vlib.detectable_effect(3.0, n, comparisons=m) == pytest.approx(
      3 * mde)
  assert math.isnan(vlib.detectable_effect(1.0, 1))


def test_verdict_reports_its_detectable_effect_and_it_predicts_power():
  rng = np.random.default_rng(7)
  n, m = 10, 3
  diffs = rng.normal(0.0, 1.0, n)
  v = paired_verdict(diffs, comparisons=m)
  assert v.sd == pytest.approx(np.std(diffs, ddof=1))
  assert v.mde == pytest.approx(vlib.detectable_effect(v.sd, n,
                                                       comparisons=m))
  assert v.power == 0.8
  # Simulated: a true effect of one (true-sd) MDE is held ~80% of the time.
  mde = vlib.detectable_effect(1.0, n, comparisons=m)
  rates = _rates(rng.normal(mde, 1.0, (REPS, n)), comparisons=m)
  power = _power(mde, n, level=1 - 0.05 / m)
  assert abs(rates['held'] - power) <= _tolerance(power), (rates, power)
  assert abs(power - 0.8) < 0.02
  one = paired_verdict([1.0])
  assert math.isnan(one.sd) and math.isnan(one.mde)
  const = paired_verdict([0.5, 0.5, 0.5])
  assert (const.sd, const.mde) == (0.0, 0.0)


@pytest.mark.parametrize('effect,sd,m', [(0.5, 1.0, 1), (0.5, 1.0, 6),
                                         (0.01, 0.03, 9), (-2.0, 1.0, 1)])
def test_seeds_for_effect_is_the_fewest_that_detect_it(effect, sd, m):
  n = vlib.seeds_for_effect(effect, sd, comparisons=m)
  assert vlib.detectable_effect(sd, n, comparisons=m) <= abs(effect)
  if n > 2:
    assert vlib.detectable_effect(sd, n - 1, comparisons=m) > abs(effect)
  assert vlib.seeds_for_effect(effect, 0.0) == 2


@pytest.mark.parametrize('kwargs,match', [
    (dict(effect=0.0, sd=1.0), 'effect'),
    (dict(effect=float('inf'), sd=1.0), 'effect'),
    (dict(effect=1.0, sd=-1.0), 'sd'),
    (dict(effect=1.0, sd=float('nan')), 'sd'),
    (dict(effect=1.0, sd=1.0, power=1.0), 'power'),
    (dict(effect=1.0, sd=1.0, comparisons=0), 'comparisons'),
    (dict(effect=1e-6, sd=1.0), 'seeds'),
])
def test_seeds_for_effect_rejects_bad_input(kwargs, match):
  with pytest.raises(ValueError, match=match):
    vlib.seeds_for_effect(**kwargs)


def test_seeds_to_decide_an_inconclusive_claim_are_the_ones_that_would():
  """The seeds a stored inconclusive claim needs: with its observed gap and
  spread taken as true, that many seeds detect it at the claim's own
  Bonferroni level, one fewer do not; and the table lists only the
  inconclusive claims, with a phrase where no number can be given."""
  diffs = [0.02, -0.01, 0.03, 0.0, 0.015]
  v = paired_verdict(diffs, comparisons=4)
  assert v.verdict == 'inconclusive'
  stored = vlib.claim('gain', v)
  n = vlib.seeds_to_decide(stored)
  assert vlib.detectable_effect(v.sd, n, comparisons=4) <= abs(v.mean)
  assert vlib.detectable_effect(v.sd, n - 1, comparisons=4) > abs(v.mean)
  # Its Bonferroni level is the claim's own (0.95 over 4 comparisons).
  assert n > vlib.seeds_for_effect(v.mean, v.sd)
  decided = vlib.claim('clear', paired_verdict([1.0, 1.1, 0.9]))
  one = vlib.claim('one seed', paired_verdict([0.3]))
  null = vlib.claim('null', paired_verdict([0.1, -0.1, 0.05, -0.05]))
  assert vlib.seeds_to_decide(one).startswith('no spread')
  assert vlib.seeds_to_decide(null) == 'no effect seen'
  table = vlib.undecided_table([stored, decided, one, null])
  assert '| gain |' in table and '| clear |' not in table
  assert f'| {n} |' in table
  assert vlib.undecided_table([decided]) == ''


def test_table_shows_the_mde_and_tolerates_results_without_it():
  v = paired_verdict(DIFFS, comparisons=3)
  row = vlib.verdict_table_row('gain > 0', v)
  assert row['mde'] == v.mde and v.mde > 0
  old = {k: val for k, val in v.to_dict().items()
         if k not in ('sd', 'power', 'mde')}
  assert vlib.verdict_table_row('gain > 0', old)['mde'] is None
  assert '| - |' in vlib.claims_table([dict(old, claim='gain > 0')])
