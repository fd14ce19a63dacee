"""The cpSGD experiments: configuration checks, helpers, a tiny run of each."""

import math

import numpy as np
import pytest

from experiments import cpsgd_dme
from experiments import cpsgd_mechanisms
from experiments.common import report as report_lib

# ------------------------------------------------------------ configuration


@pytest.mark.parametrize('module', [cpsgd_mechanisms, cpsgd_dme])
def test_config_records_cli_options_and_refuses_a_dataset(module):
  cfg = module.config('quick', epsilons=[2.0, 1.0, 2.0], delta=1e-6, seed=3)
  assert cfg['epsilons'] == [1.0, 2.0]
  assert (cfg['delta'], cfg['seed'], cfg['mode']) == (1e-6, 3, 'quick')
  assert module.config('full')['mode'] == 'full'
  with pytest.raises(ValueError, match='drop --dataset'):
    module.config('quick', dataset='digits')
  with pytest.raises(ValueError, match='unknown mode'):
    module.config('medium')


@pytest.mark.parametrize('overrides, match', [
    (dict(scale_denominators=[1, 0]), 'scale_denominators'),
    (dict(scale_denominators=[0.5]), 'scale_denominators'),
    (dict(dims=[]), 'dims'),
    (dict(validate_epsilons=[3.0]), 'validate_epsilons'),
    (dict(samples=1), 'samples=1'),
    (dict(p=1.0), 'p=1.0'),
    (dict(accountant='exact'), 'accountant'),
])
def test_mechanisms_config_rejects_bad_values(overrides, match):
  with pytest.raises(ValueError, match=match):
    cpsgd_mechanisms.config('quick', **overrides)


def test_mechanisms_epsilon_override_keeps_a_validation_point():
  cfg = cpsgd_mechanisms.config('quick', epsilons=[3.0, 5.0])
  assert cfg['validate_epsilons'] == [5.0]


@pytest.mark.parametrize('overrides, match', [
    (dict(variants=['none', 'spin']), 'variants'),
    (dict(inputs=[]), 'inputs'),
    (dict(levels=[1, 4]), 'levels'),
    (dict(num_trials=[0]), 'num_trials'),
    (dict(reps=1), 'reps=1'),
    (dict(spikes=300), 'spikes=300'),
    (dict(epsilons=[], num_trials=[]), 'at least one'),
    (dict(clamp_levels=[1]), 'clamp_levels'),
])
def test_dme_config_rejects_bad_values(overrides, match):
  with pytest.raises(ValueError, match=match):
    cpsgd_dme.config('quick', **overrides)


# ----------------------------------------------------------------- helpers


def test_dme_trials_for_epsilon_and_condition_failure():
  cfg = cpsgd_dme.config('quick', num_clients=10, dimension=16)
  m = cpsgd_dme.trials_for_epsilon(cfg, 'rotate', 4, 4.0)
  eps = lambda m: cpsgd_dme.round_epsilon(
      cfg, cpsgd_dme.make_protocol(cfg, 'rotate', 4, m))
  assert eps(m) <= 4.0 and (eps(m - 1) is None or eps(m - 1) > 4.0)
  assert eps(1) is None  # n m p (1-p) below Theorem 1's condition
  with pytest.raises(ValueError, match='unreachable'):
    cpsgd_dme.trials_for_epsilon(cfg, 'none', 2, 1e-5)


def test_dme_inputs_are_unit_vectors_and_seeded():
  cfg = cpsgd_dme.config('quick', num_clients=5, dimension=32, spikes=3)
  a, b = cpsgd_dme.make_inputs(cfg), cpsgd_dme.make_inputs(cfg)
  for name in ('spread', 'spiky'):
    np.testing.assert_array_equal(a[name], b[name])
    np.testing.assert_allclose(np.linalg.norm(a[name], axis=1), 1, rtol=1e-6)
  assert np.all(np.sum(a['spiky'] != 0, axis=1) == 3)


# --------------------------------------------------------------- tiny runs


def _run_and_report(module, cfg, tmp_path):
  out = str(tmp_path)
  results = module.run(cfg, out, progress=False)
  report_lib.write_results(out, results)
  text = module.report(report_lib.read_results(out), out)
  assert text.startswith(f'## {module.NAME} (quick)')
  assert results['config'] == cfg and results['seed'] == cfg['seed']
  return results, text


def test_mechanisms_tiny_run_and_report(tmp_path):
  cfg = cpsgd_mechanisms.config('quick', epsilons=[2.0], dims=[1],
                                scale_denominators=[1, 4], samples=400)
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
  assert all(abs(v['z']) < 5 for v in results['validation'])
  assert (tmp_path / 'error_vs_epsilon.png').stat().st_size > 0
  assert 'approaches the Gaussian one' in text and '**' in text


def test_dme_tiny_run_and_report(tmp_path):
  # d = 64: the rotated X_max (0.76) is below D, and one spike of size 1
  # per client is clamped without rotation.
  cfg = cpsgd_dme.config('quick', num_clients=10, dimension=64, levels=[4],
                         epsilons=[4.0], clamp_levels=[4], reps=2, spikes=1)
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
  assert (tmp_path / 'mse_vs_bits.png').stat().st_size > 0
  assert 'Rotation reduces the MSE for spiky vectors' in text
