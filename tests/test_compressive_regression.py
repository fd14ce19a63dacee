"""compressive_regression's claims: paired log ratios over seeds, the kappa
picked on validation runs, the realized epsilon and the run that feeds them."""

import math

import numpy as np
import pytest

from experiments import registry
from experiments.common import claims as common_claims
from experiments.compressive_regression import _claims as claims_lib
from experiments.compressive_regression._results import Results

EXP = registry.get('compressive_regression')

EPS = [1.0, 1000.0]
CFG = EXP.configure('quick', epsilons=EPS, small_epsilon=1.0,
                    large_epsilon=1000.0, kappa=5, num_measurements=20)
# Losses that differ by orders of magnitude between seeds: only a paired
# statistic sees a constant ratio through that spread.
SCALE = np.array([1e2, 1e4, 1e6])


def _row(method, eps, per_seed, kappa=5):
  return dict(method=method, epsilon=eps, kappa=kappa,
              per_seed=list(map(float, per_seed)))


def _final(compressive=0.5, paper=0.5, laplace_mean=10.0):
  """Final rows: laplace = SCALE, the others a fixed multiple of it."""
  rows = []
  for eps in EPS:
    rows += [_row('laplace', eps, SCALE),
             _row('laplace_mean', eps, SCALE * laplace_mean),
             _row('compressive', eps, SCALE * compressive),
             _row('compressive_paper', eps, SCALE * paper)]
  return rows


def _kappa_rows(values):
  """Rows for kappas 1 and 3 from {kappa: multiple of SCALE}."""
  return [_row('compressive', eps, SCALE * v, kappa)
          for eps in EPS for kappa, v in values.items()]


def _claims(final=None, test=None, validation=None, ratio=(1.05,) * 3):
  test = test or _kappa_rows({1: 0.5, 3: 0.5})
  results = Results(dataset={}, n=0, n_theta=0, f_star=1.0,
                    rel_loss_at_zero=0.0, theta_star_norm=0.0,
                    clipped_fraction_at_theta_star=0.0,
                    clipped_fraction_at_zero=0.0, final=final or _final(),
                    curves=[], privacy=[],
                    realized=[dict(per_seed_ratio=list(ratio))],
                    kappa_sweep=test, kappa_validation=validation or test,
                    validation_seeds=[])
  return common_claims.verdicts(claims_lib.claims(results, CFG))


def _by_text(claims, *words):
  return [c for c in claims if all(w in c['claim'] for w in words)]


def _sweep(claims, sparsified, baseline, eps):
  """The one sweep claim of a pair at eps (not the kappa-picked one)."""
  found = [c for c in claims if 'chosen_kappas' not in c and (
      c['sparsified'], c.get('baseline'), c.get('epsilon')) == (
          sparsified, baseline, eps)]
  assert len(found) == 1
  return found[0]


def test_claims_form_one_bonferroni_family():
  claims = _claims()
  assert len(claims) == len(claims_lib.SWEEP) * len(EPS) + 1 + 4
  assert {c['comparisons'] for c in claims} == {len(claims)}
  assert {c['n'] for c in claims} == {3}
  assert len({c['claim'] for c in claims}) == len(claims)


def test_sweep_claims_are_paired_log_ratios():
  claims = _claims(_final(compressive=0.5, laplace_mean=0.1))
  below = _sweep(claims, 'compressive', 'laplace', 1.0)
  assert below['claim'].startswith('certified compressive ends below '
                                   '`laplace` at eps=1 ')
  assert below['mean'] == pytest.approx(math.log(0.5))
  assert below['direction'] == 'lower is better'
  assert below['verdict'] == 'held'
  worse = _sweep(claims, 'compressive', 'laplace_mean', 1000.0)
  assert worse['mean'] == pytest.approx(math.log(5.0))
  assert worse['verdict'] == 'refuted'
  paper = _sweep(claims, 'compressive_paper', 'laplace', 1000.0)
  assert paper['claim'].startswith("paper's compressive")


def test_sweep_claim_is_inconclusive_when_seeds_disagree():
  final = [r for r in _final() if not (r['method'] == 'compressive' and
                                       r['epsilon'] == 1.0)]
  final.append(_row('compressive', 1.0, SCALE * np.array([0.5, 2.0, 1.0])))
  claim = _sweep(_claims(final), 'compressive', 'laplace', 1.0)
  assert claim['verdict'] == 'inconclusive'


def test_kappa_is_picked_on_validation_not_on_the_test_runs():
  # On the test runs kappa 3 beats laplace by 100x on every seed; a best-of
  # test-runs claim would hold. Validation prefers kappa 1 on every seed, and
  # kappa 1's test runs are 2x worse than laplace: the claim is refuted.
  test = _kappa_rows({1: 2.0, 3: 0.01})
  validation = _kappa_rows({1: 0.1, 3: 0.2})
  claims = _claims(test=test, validation=validation)
  picked = _by_text(claims, 'validation', '`laplace`', 'eps=1 ')
  assert len(picked) == 1
  assert picked[0]['chosen_kappas'] == [1, 1, 1]
  assert picked[0]['mean'] == pytest.approx(math.log(2.0))
  assert picked[0]['verdict'] == 'refuted'


def test_kappa_pick_is_per_seed():
  validation = [_row('compressive', eps, SCALE * v, kappa) for eps in EPS
                for kappa, v in ((1, [1, 3, 1]), (3, [2, 1, 2]))]
  test = _kappa_rows({1: 0.5, 3: 0.25})
  picked, losses = claims_lib.chosen_kappas(validation, test,
                                            'compressive', 1.0)
  assert picked == [1, 3, 1]
  np.testing.assert_allclose(np.exp(losses), SCALE * [0.5, 0.25, 0.5])


@pytest.mark.parametrize('ratio, verdict', [
    ((1.05, 1.06, 1.055), 'held'),  # overspends on every seed
    ((1.0, 1.0, 1.0), 'inconclusive'),  # exactly the claim: no evidence
    ((0.9, 0.901, 0.902), 'refuted'),  # spends less on every seed
])
def test_realized_epsilon_claim(ratio, verdict):
  claim = _by_text(_claims(ratio=ratio), 'spends more')[0]
  assert claim['verdict'] == verdict
  assert claim['mean'] == pytest.approx(np.mean(ratio) - 1)


def test_modes_run_enough_seeds():
  assert EXP.configure('quick').num_seeds >= 3
  assert EXP.configure('full').num_seeds >= 10


def test_tiny_run_records_per_seed_losses_and_pairs_keys(tmp_path):
  cfg = EXP.configure('quick', steps=5, num_seeds=3, num_examples=300,
                      kappas=[1, 5], epsilons=[1.0, 1000.0])
  results = EXP.results(cfg, str(tmp_path), progress=False)
  assert results['seeds'] == [0, 1, 2]
  assert set(results['validation_seeds']).isdisjoint(results['seeds'])
  private = [r for r in results['final'] if r['epsilon'] is not None]
  assert all(len(r['per_seed']) == 3 for r in private)
  for r in private:
    assert r['final_rel_loss_mean'] == pytest.approx(np.mean(r['per_seed']))
  assert {(r['kappa'], r['epsilon']) for r in results['kappa_validation']} == {
      (k, e) for k in (1, 5) for e in (1.0, 1000.0)}
  # The main kappa's test runs are the main runs (same keys, same numbers).
  main = claims_lib.row_of(results['final'], 'compressive', 1.0)
  sweep = claims_lib.row_of(results['kappa_sweep'], 'compressive', 1.0, 5)
  assert sweep['per_seed'] == main['per_seed']
  # Validation keys differ from the test keys.
  val = claims_lib.row_of(results['kappa_validation'], 'compressive', 1.0, 5)
  assert val['per_seed'] != main['per_seed']
  assert len(results['claims']) == 3 * 2 + 1 + 4 + 1  # and the sanity claim
  assert results['claims'][-1]['kind'] == 'sanity'
  text = EXP.report(results, str(tmp_path))
  assert '| Verdict |' in text and 'wall time' in text
