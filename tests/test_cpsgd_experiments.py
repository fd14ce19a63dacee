"""The cpSGD experiments: configuration checks, helpers, claim logic, a tiny
run of each."""

import dataclasses
import math

import numpy as np
import pytest

from experiments import cpsgd_dme
from experiments import cpsgd_mechanisms
from experiments import registry
from experiments.common import claims as claims_lib
from experiments.common import flags
from experiments.common import report as report_lib
from experiments.cpsgd_dme import _claims as dme_claims
from experiments.cpsgd_dme import _privacy as dme_privacy
from experiments.cpsgd_dme import _run as dme_run
from experiments.cpsgd_dme._results import Results as DmeResults
from experiments.cpsgd_mechanisms import _claims as mechanisms_claims
from experiments.cpsgd_mechanisms import _run as mechanisms_run
from experiments.cpsgd_mechanisms._results import Results as MechResults

# ------------------------------------------------------------ configuration


@pytest.mark.parametrize('module', [cpsgd_mechanisms, cpsgd_dme])
def test_config_records_cli_options_and_refuses_a_dataset(module):
  exp = module.EXPERIMENT
  cfg = exp.configure('quick', epsilons=[2.0, 1.0, 2.0], delta=1e-6, seed=3)
  assert cfg.epsilons == (1.0, 2.0)
  assert (cfg.delta, cfg.seed, cfg.mode) == (1e-6, 3, 'quick')
  assert exp.configure('full').mode == 'full'
  with pytest.raises(ValueError, match='drop --dataset'):
    exp.configure('quick', dataset='digits')
  with pytest.raises(ValueError, match='unknown mode'):
    exp.configure('medium')


@pytest.mark.parametrize('overrides, match', [
    (dict(scale_denominators=[1, 0]), 'scale_denominators'),
    (dict(scale_denominators=[0.5]), 'scale_denominators'),
    (dict(dimensions=[]), 'dimensions'),
    (dict(validate_epsilons=[3.0]), 'validate_epsilons'),
    (dict(num_samples=1), 'num_samples=1'),
    (dict(p=1.0), 'p=1.0'),
    (dict(accountant='exact'), 'accountant'),
    (dict(num_seeds=0), 'num_seeds=0'),
    (dict(match_tolerance=1.5), 'match_tolerance'),
])
def test_mechanisms_config_rejects_bad_values(overrides, match):
  with pytest.raises(ValueError, match=match):
    cpsgd_mechanisms.Config.preset('quick', **overrides)


def test_mechanisms_epsilon_override_keeps_a_validation_point():
  cfg = cpsgd_mechanisms.Config.preset('quick', epsilons=[3.0, 5.0])
  assert cfg.validate_epsilons == (5.0,)
  full = cpsgd_mechanisms.Config.preset('full', epsilons=[0.5, 2.0, 4.0])
  assert full.validate_epsilons == (0.5, 4.0)  # the preset's, where swept


@pytest.mark.parametrize('overrides, match', [
    (dict(variants=['none', 'spin']), 'variants'),
    (dict(inputs=[]), 'inputs'),
    (dict(levels=[1, 4]), 'levels'),
    (dict(trials=[0]), 'trials'),
    (dict(num_repetitions=1), 'num_repetitions=1'),
    (dict(num_spikes=300), 'num_spikes=300'),
    (dict(epsilons=[], trials=[]), 'at least one'),
    (dict(clamp_levels=[1]), 'clamp_levels'),
    (dict(num_seeds=0), 'num_seeds=0'),
    (dict(gaussian_tolerance=0.0), 'gaussian_tolerance'),
])
def test_dme_config_rejects_bad_values(overrides, match):
  with pytest.raises(ValueError, match=match):
    cpsgd_dme.Config.preset('quick', **overrides)


# ----------------------------------------------------------------- helpers


def test_dme_trials_for_epsilon_and_condition_failure():
  cfg = cpsgd_dme.Config(num_clients=10, dimension=16)
  m = dme_privacy.trials_for_epsilon(cfg, 'rotate', 4, 4.0)
  eps = lambda m: dme_privacy.round_epsilon(
      cfg, dme_privacy.make_protocol(cfg, 'rotate', 4, m))
  assert eps(m) <= 4.0 and (eps(m - 1) is None or eps(m - 1) > 4.0)
  assert eps(1) is None  # n m p (1-p) below Theorem 1's condition
  with pytest.raises(ValueError, match='unreachable'):
    dme_privacy.trials_for_epsilon(cfg, 'none', 2, 1e-5)


def test_dme_inputs_are_unit_vectors_and_seeded():
  cfg = cpsgd_dme.Config(num_clients=5, dimension=32, num_spikes=3)
  a, b = dme_run.make_inputs(cfg), dme_run.make_inputs(cfg)
  for name in ('spread', 'spiky'):
    np.testing.assert_array_equal(a[name], b[name])
    np.testing.assert_allclose(np.linalg.norm(a[name], axis=1), 1, rtol=1e-6)
  assert np.all(np.sum(a['spiky'] != 0, axis=1) == 3)
  other = dme_run.make_inputs(cfg, seed=cfg.seed + 1)  # a seed's own data
  assert not np.array_equal(a['spread'], other['spread'])


def test_quick_modes_run_at_least_three_seeds_and_full_ten():
  for module in (cpsgd_mechanisms, cpsgd_dme):
    assert module.Config.preset('quick').num_seeds >= 3
    assert module.Config.preset('full').num_seeds >= 10


# ------------------------------------------------------------ claim logic


def _point(formula, per_seed):
  return dict(formula=formula, per_seed=list(per_seed))


def _mech_results(**fields) -> MechResults:
  """A cpsgd_mechanisms record holding ``fields``, the rest empty."""
  return MechResults(**dict(
      dict(dataset={}, sensitivities={}, gaussian=[], rows=[], exact=[],
           validation=[], summary={}, exact_checks=[]), **fields))


def _dme_results(**fields) -> DmeResults:
  """A cpsgd_dme record holding ``fields``, the rest empty."""
  return DmeResults(**dict(
      dict(dataset={}, rotated_x_max=1.0, rows=[], gaussian=[], summary={},
           exact_checks=[], corollary3=None), **fields))


@pytest.mark.parametrize('scale, verdict', [
    ([1.01, 0.99, 1.02, 0.98], 'held'),  # within 10% on every seed
    ([1.3, 1.25, 1.35, 1.28], 'refuted'),  # a 30% bias
    ([1.02, 1.2, 0.97, 1.01], 'inconclusive'),  # one bad seed: too wide
])
def test_mechanisms_sampling_claim_takes_the_worst_point_per_seed(scale,
                                                                  verdict):
  cfg = cpsgd_mechanisms.Config(num_seeds=4)
  good = _point(10.0, [10.0, 10.05, 9.95, 10.0])
  tested = _point(2.0, [2.0 * x for x in scale])
  [c] = mechanisms_claims.claims(_mech_results(validation=[good, tested]),
                                 cfg).verdicts()
  np.testing.assert_allclose(c['per_seed'], np.abs(np.asarray(scale) - 1))
  assert (c['verdict'], c['n'], c['threshold']) == (verdict, 4, 0.1)
  assert c['direction'] == 'lower is better'


def test_mechanisms_formulas_are_exact_checks_not_claims():
  rows = [dict(dim=1, epsilon=1.0, scale_denominator=j, ratio_tight=r,
               ratio_classical=None, epsilon_theorem1=0.9)
          for j, r in ((1, 5.0), (4, 3.0), (16, 3.5))]  # not monotone
  checks = mechanisms_run.exact_checks(rows, [])
  assert [c['passed'] for c in checks] == [False, True]
  rows[2]['ratio_tight'] = 2.0
  assert all(c['passed'] for c in mechanisms_run.exact_checks(rows, []))


def _dme_row(variant, levels, name, mse, validation=None, test=None,
             expected=None, bound=1e9):
  seeds = len(mse)
  return dict(variant=variant, levels=levels, input=name, num_trials=levels,
              target_epsilon=1.0, target_epsilons=[1.0], mse=float(np.mean(
                  mse)), bits_per_coordinate=float(levels), bound=bound,
              clamped_fraction=0.0,
              per_seed=dict(mse=list(mse), validation=list(validation or mse),
                            test=list(test or mse),
                            expected=list(expected or mse),
                            expected_max=list(expected or mse),
                            clamped=[0.0] * seeds, bias_sq=[0.0] * seeds))


def test_dme_best_setting_is_chosen_on_validation_and_scored_on_test():
  cfg = cpsgd_dme.Config(inputs=['spiky'], num_seeds=3)
  # k=4 looks best on validation; k=8 would be best on test (best-of-k
  # bias): the claim must score k=4's test MSE.
  rows = [_dme_row('rotate', 4, 'spiky', [4.0] * 3, validation=[3.0] * 3,
                   test=[4.1, 4.2, 4.0]),
          _dme_row('rotate', 8, 'spiky', [4.0] * 3, validation=[3.5] * 3,
                   test=[2.0, 2.0, 2.0])]
  gauss = [dict(input='spiky', target_epsilon=1.0, expected=2.0,
                per_seed=dict(mse=[2.0, 2.0, 2.0]))]
  claims = claims_lib.verdicts(dme_claims.claims(
      _dme_results(rows=rows, gaussian=gauss), cfg))
  best = claims[-1]
  assert best['chosen'] == ['rotate k=4'] * 3
  np.testing.assert_allclose(best['per_seed'], [2.05, 2.1, 2.0])
  assert best['verdict'] == 'refuted' and best['threshold'] == 1.1
  # every claim of the experiment is one Bonferroni family
  assert {c['comparisons'] for c in claims} == {len(claims)} == {2}
  table = dme_claims.summary(cfg, rows, gauss)['selection']
  assert table[0]['chosen'] == 'rotate k=4 (3/3)'


def test_dme_rotation_claim_takes_the_smallest_gain_over_k():
  cfg = cpsgd_dme.Config(inputs=['spiky'], num_seeds=3)
  rows = [_dme_row('none', 2, 'spiky', [10.0, 11.0, 10.5]),
          _dme_row('rotate', 2, 'spiky', [2.0, 2.1, 2.0]),
          _dme_row('none', 4, 'spiky', [5.0, 5.0, 5.0]),
          _dme_row('rotate', 4, 'spiky', [4.0, 5.5, 4.5])]
  rotation = claims_lib.verdicts(dme_claims.claims(
      _dme_results(rows=rows), cfg))[0]
  np.testing.assert_allclose(rotation['per_seed'], [1.25, 5 / 5.5, 5 / 4.5])
  assert rotation['verdict'] == 'inconclusive'
  assert rotation['claim'].startswith('rotation lowers the MSE of spiky')


def test_dme_corollary3_claims_take_the_largest_k_against_both_gaussians():
  cfg = cpsgd_dme.Config(num_seeds=3)
  rows = [dict(levels=1024, num_trials=48181, bits_per_coordinate=15.6,
               per_seed=dict(expected=[1.04, 1.05, 1.06])),
          dict(levels=64, num_trials=281, bits_per_coordinate=8.4,
               per_seed=dict(expected=[2.6, 2.7, 2.8]))]
  cor3 = dict(num_clients=10000, dimension=256, epsilon=1.0,
              n_eps2_over_d=39.0625, rows=rows, gaussian_classical=1.0,
              gaussian_tight=0.6)
  claims = claims_lib.verdicts(dme_claims.claims(
      _dme_results(corollary3=cor3), cfg))
  classical, tight = claims[-2:]
  assert classical['family'] == tight['family'] == 'corollary 3'
  assert classical['comparisons'] == 2 and classical['levels'] == 1024
  np.testing.assert_allclose(classical['per_seed'], [1.04, 1.05, 1.06])
  np.testing.assert_allclose(tight['per_seed'], np.array([1.04, 1.05,
                                                          1.06]) / 0.6)
  assert (classical['verdict'], tight['verdict']) == ('held', 'refuted')
  assert classical['threshold'] == 1.1 and classical['effect'] == 0.1
  assert 'n eps^2 / d = 39.1' in classical['claim']
  # Without the run (cor3_num_clients None) there is no Corollary 3 claim.
  assert not [c for c in claims_lib.verdicts(dme_claims.claims(
      _dme_results(corollary3=None), cfg)) if c.get('family')]


def test_dme_bound_is_an_exact_check():
  rows = [_dme_row('none', 2, 'spread', [1.0, 1.0], bound=1.5),
          _dme_row('clamp', 2, 'spread', [9.0, 9.0], bound=1.5)]
  [bound] = dme_claims.exact_checks(rows)
  assert bound['passed'] and bound['detail'] == '1 of 1 points'
  rows[0]['per_seed']['expected_max'] = [1.0, 1.6]  # one seed's rotation
  assert not dme_claims.exact_checks(rows)[0]['passed']


# --------------------------------------------------------------- tiny runs


def _run_and_report(module, cfg, tmp_path):
  out = str(tmp_path)
  results = module.EXPERIMENT.results(cfg, out, progress=False)
  report_lib.write_results(out, results)
  text = module.EXPERIMENT.report(report_lib.read_results(out), out)
  assert text.startswith(f'## {module.NAME} (quick)')
  assert results['config'] == cfg.to_dict() and results['seeds'] == cfg.seeds
  return results, text


def test_mechanisms_tiny_run_and_report(tmp_path):
  cfg = cpsgd_mechanisms.Config(epsilons=[2.0], dimensions=[1],
                                scale_denominators=[1, 4], num_samples=400)
  results, text = _run_and_report(cpsgd_mechanisms, cfg, tmp_path)
  rows = results['rows']
  assert len(rows) == 2 and len(results['exact']) == 2
  assert results['gaussian'][0]['sigma_classical'] is None  # eps > 1
  for r in rows:
    assert r['epsilon_theorem1'] <= r['epsilon']
    assert r['error'] == pytest.approx(r['scale']**2 * r['num_trials'] / 4)
  for e in results['exact']:
    assert e['exact_epsilon'] < e['epsilon']
    assert e['num_trials_exact'] <= e['num_trials']
  assert len(results['validation']) == 2  # validate_epsilons became [2.0]
  seeds = cfg.num_seeds
  for v in results['validation']:
    assert len(v['per_seed']) == seeds and 0.7 < v['ratio'] < 1.3
  assert results['seeds'] == list(range(seeds))
  assert all(c['passed'] for c in results['exact_checks'])
  [claim] = results['claims']
  assert claim['n'] == seeds and claim['verdict'] in ('held', 'refuted',
                                                      'inconclusive')
  assert (tmp_path / 'error_vs_epsilon.png').stat().st_size > 0
  assert '| Exact check |' in text and '| Verdict |' in text
  assert '**yes**' not in text and '**no**' not in text


def test_dme_tiny_run_and_report(tmp_path):
  # d = 64: the rotated X_max (0.76) is below D, and one spike of size 1
  # per client is clamped without rotation.
  cfg = cpsgd_dme.Config(num_clients=10, dimension=64, levels=[4],
                         epsilons=[4.0], clamp_levels=[4], num_repetitions=2,
                         num_spikes=1, num_seeds=3, cor3_num_clients=300,
                         cor3_dimension=16, cor3_levels=[16, 64])
  results, text = _run_and_report(cpsgd_dme, cfg, tmp_path)
  rows = results['rows']
  assert {(r['variant'], r['input']) for r in rows} == {
      (v, i) for v in ('none', 'rotate', 'clamp')
      for i in ('spread', 'spiky')}
  for r in rows:
    assert r['epsilon'] <= 4.0 and r['target_epsilon'] == 4.0
    assert r['bits_fixed'] == math.ceil(r['bits_per_coordinate'])
    assert r['expected'] <= r['bound'] * (1 + 1e-9) or r['variant'] == 'clamp'
  clamp = {r['input']: r for r in rows if r['variant'] == 'clamp'}
  assert clamp['spread']['clamped_fraction'] == 0
  assert clamp['spiky']['bias_sq'] > 0
  assert [g['bits_per_coordinate'] for g in results['gaussian']] == [32, 32]
  for r in rows + results['gaussian']:
    assert len(r['per_seed']['mse']) == cfg.num_seeds
  assert (tmp_path / 'mse_vs_bits.png').stat().st_size > 0
  assert all(c['passed'] for c in results['exact_checks'])
  cor3 = results['corollary3']
  assert cor3['n_eps2_over_d'] == 300 / 16
  assert [r['levels'] for r in cor3['rows']] == [16, 64]
  for r in cor3['rows']:
    assert r['epsilon'] <= 1.0
    assert len(r['per_seed']['expected']) == cfg.num_seeds
  # More levels, less quantization error (at more bits).
  assert cor3['rows'][1]['expected'] < cor3['rows'][0]['expected']
  assert cor3['gaussian_tight'] < cor3['gaussian_classical']
  assert '### Corollary 3' in text
  claims = [c['claim'] for c in results['claims']]
  # rotation x 2 inputs, match, best vs Gaussian x 2, Corollary 3 x 2
  assert len(claims) == 7
  assert claims[0].startswith('rotation lowers the MSE of spread vectors')
  assert all(c['n'] == cfg.num_seeds for c in results['claims'])
  assert '| Verdict |' in text and '**yes**' not in text


# ------------------------------------------------------------------- flags


@pytest.mark.parametrize('name', ['cpsgd_mechanisms', 'cpsgd_dme',
                                  'cpsgd_training', 'distributed_dp'])
def test_every_setting_is_a_flag(name):
  cls = registry.get(name).config
  text = flags.parser(cls).format_help()
  for f in dataclasses.fields(cls):
    if f.name != 'mode':
      assert '--' + f.name.replace('_', '-') in text, (name, f.name)
