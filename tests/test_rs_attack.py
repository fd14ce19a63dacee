"""rs_attack's claims: the Thm 5.1 bound and the rise in r, paired by seed."""

import numpy as np
import pytest

from experiments import registry
from experiments.common import claims as claims_lib
from experiments.rs_attack import _claims
from experiments.rs_attack import _results

EXP = registry.get('rs_attack')

RATES = [0.0, 0.5, 0.9]


def _cf(ratio, bound=0.01):
  """A closed-form result with error / bound = ``ratio`` [seeds, rates]."""
  ratio = np.asarray(ratio, np.float64)
  return _results.ClosedForm(
      trials=10, zeros=[int(r * 10) for r in RATES], rates=RATES,
      mse=(ratio * bound).tolist(), sem=np.zeros(ratio.shape).tolist(),
      bound=np.full(ratio.shape, bound).tolist())


def _inv(noisy):
  """An inversion result: per-seed MSE of the noisy settings [seeds, rates],
  the same on 2 images, plus a noiseless reference."""
  noisy = np.asarray(noisy, np.float64)
  lanes = np.concatenate([np.zeros_like(noisy[:, :1]), noisy], axis=1)
  return _results.Inversion(
      settings=['no noise'] + ['noisy'] * len(RATES), rates=[0.0] + RATES,
      noise_std=[0.0] + [0.01] * len(RATES), params=10,
      images=[[0, 1]] * len(noisy),
      mse=np.repeat(lanes[:, None, :], 2, axis=1).tolist())


RISING = [[1e-3, 3e-3, 2e-2], [2e-3, 5e-3, 4e-2], [1.5e-3, 4e-3, 3e-2]]


def _verdicts(cf, inv):
  results = _results.Results(dataset={}, closed_form=cf, inversion=inv)
  return [c for c in claims_lib.verdicts(_claims.claims(
      results, EXP.configure('quick'))) if c['kind'] != 'sanity']


def test_claims_are_one_bonferroni_family_in_order():
  claims = _verdicts(_cf([[1.0, 1.1, 1.3]] * 3), _inv(RISING))
  assert len(claims) == 1 + (len(RATES) - 1)
  assert all(c['comparisons'] == len(claims) for c in claims)
  assert all(c['n'] == 3 for c in claims)
  assert 'Thm 5.1 bound' in claims[0]['claim']
  assert claims[0]['rates'] == [0.5, 0.9]  # r = 0 is an equality, no claim
  assert [c['rates'] for c in claims[1:]] == [[0.0, 0.5], [0.5, 0.9]]


def test_bound_claim_takes_the_smallest_margin_over_r_above_zero():
  # r = 0 sits below the bound on every seed (Monte Carlo noise at an
  # equality) and does not count; the margin is min(0.1, 0.3) = 0.1.
  ratio = [[0.98, 1.10, 1.30], [0.97, 1.12, 1.25], [0.99, 1.11, 1.40]]
  claim = _verdicts(_cf(ratio), _inv(RISING))[0]
  assert claim['mean'] == pytest.approx(np.mean([0.10, 0.12, 0.11]))
  assert claim['verdict'] == 'held'
  # One rate below the bound on every seed refutes the claim.
  below = [[1.0, 0.90, 1.30], [1.0, 0.91, 1.25], [1.0, 0.89, 1.40]]
  assert _verdicts(_cf(below), _inv(RISING))[0]['verdict'] == 'refuted'
  # A margin that changes sign between seeds is inconclusive.
  mixed = [[1.0, 1.02, 1.30], [1.0, 0.99, 1.25], [1.0, 1.01, 1.40]]
  assert _verdicts(_cf(mixed), _inv(RISING))[0]['verdict'] == (
      'inconclusive')


def test_rise_claims_are_paired_log_differences():
  claims = _verdicts(_cf([[1.0, 1.1, 1.3]] * 3), _inv(RISING))
  noisy = np.log(RISING)
  assert claims[1]['mean'] == pytest.approx(np.mean(noisy[:, 1] - noisy[:, 0]))
  assert [c['verdict'] for c in claims[1:]] == ['held', 'held']
  # Seeds differ by 2x in scale, but the pairing removes that: a 10% rise on
  # every seed is held, and a 10% fall on every seed is refuted.
  scale = np.array([[1.0], [2.0], [4.0]])
  steps = scale * np.array([[1.0, 1.1, 1.0]])
  rise, fall = _verdicts(_cf([[1.0, 1.1, 1.3]] * 3), _inv(steps))[1:]
  assert (rise['verdict'], fall['verdict']) == ('held', 'refuted')
  # Identical differences on every seed: the interval is the point itself.
  assert rise['high'] - rise['low'] < 1e-9


def test_one_seed_is_inconclusive():
  claims = _verdicts(_cf([[1.0, 1.5, 2.0]]), _inv(RISING[:1]))
  assert {c['verdict'] for c in claims} == {'inconclusive'}


@pytest.mark.parametrize('rates', [[0.5], [0.5, 0.3], [0.0, 1.0]])
def test_config_needs_increasing_rates_below_one(rates):
  with pytest.raises(ValueError, match='increasing rates'):
    EXP.configure('quick', rates=rates)


def test_modes_run_enough_seeds():
  assert EXP.configure('quick').num_seeds >= 3
  assert EXP.configure('full').num_seeds >= 10


def test_tiny_run_pairs_rates_within_a_seed(tmp_path):
  cfg = EXP.configure('quick', num_seeds=3, num_images=2, num_trials=64,
                      trial_chunk=32, attack_steps=3, rates=[0.0, 0.5, 0.9],
                      dimension=10)
  results = EXP.results(cfg, str(tmp_path), progress=False)
  cf, inv = results['closed_form'], results['inversion']
  assert results['seeds'] == [0, 1, 2] and cf['trials'] == 64
  assert np.asarray(cf['mse']).shape == (3, 3)
  assert np.asarray(inv['mse']).shape == (3, 2, 4)  # seeds, images, settings
  # Seeds draw their own images, layers and bounds.
  assert inv['images'][0] != inv['images'][1]
  bound = np.asarray(cf['bound'])
  assert len({round(b, 9) for b in bound[:, 0]}) == 3
  # The bound grows as 1 / (1 - r) within a seed.
  np.testing.assert_allclose(bound[:, 1] / bound[:, 0], 2.0, rtol=1e-5)
  assert [c['n'] for c in results['claims']] == [3, 3, 3, 3]
  assert [c['kind'] for c in results['claims']] == ['paper'] * 3 + ['sanity']
  text = EXP.report(results, str(tmp_path))
  assert '| Verdict |' in text and 'wall time' in text
