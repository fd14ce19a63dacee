"""experiments/cpsgd_training: config validation, a tiny run and its report."""

import json
import math
import os

import dp_accounting
import jax
import numpy as np
import pytest

from dpjax import accounting
from dpjax import distributed as dist
from experiments import cpsgd_training as exp
from experiments.common import claims as claims_lib
from experiments.common import flags
from experiments.common import report as report_lib
from experiments.common import verdict as verdict_lib
from experiments.cpsgd_training import _claims
from experiments.cpsgd_training import _privacy

TINY = dict(num_clients=20, clients_per_round=10, rounds=3, levels=[2],
            trials=[512], unrotated=[2, 32], num_seeds=2, num_evals=3)


def test_config_modes_and_overrides():
  quick, full = exp.Config.preset('quick'), exp.Config.preset('full')
  assert quick.mode == 'quick' and full.rounds > quick.rounds
  assert full.num_seeds >= 10 and quick.num_seeds >= 3
  assert full.unrotated_pairs == [(2, 512), (16, 512)]
  cfg = exp.EXPERIMENT.configure('quick', seed=3, delta=1e-6, dataset=None,
                                 rounds=7)
  assert (cfg.seed, cfg.delta, cfg.dataset, cfg.rounds) == (
      3, 1e-6, 'digits', 7)
  assert _privacy.round_delta(cfg) == pytest.approx(1e-6 / 14)


def test_unrotated_pairs_come_flattened_from_the_command_line():
  mode, given = flags.parse(exp.Config, ['--full', '--unrotated', '4', '64'])
  cfg = exp.EXPERIMENT.configure(mode, **given)
  assert cfg.unrotated_pairs == [(4, 64)] and cfg.rounds == 200


@pytest.mark.parametrize('overrides, match', [
    (dict(epsilons=[1.0]), 'drop --epsilons'),
    (dict(dataset='diabetes'), 'regression dataset'),
    (dict(dataset='csv:/tmp/x.csv'), 'regression dataset'),
    (dict(dataset='imagenet'), 'unknown dataset'),
    (dict(frobnicate=1), 'unknown setting frobnicate'),
    (dict(rounds=0), 'rounds=0'),
    (dict(clients_per_round=101), 'clients_per_round=101'),
    (dict(l2_norm_clip=-1.0), 'l2_norm_clip=-1.0'),
    (dict(momentum=1.0), 'momentum=1.0'),
    (dict(delta=1.5), 'delta=1.5'),
    (dict(levels=[1]), r'levels\[0\]=1'),
    (dict(trials=[0]), r'trials\[0\]=0'),
    (dict(trials=[]), 'trials to hold at least 1'),
    (dict(unrotated=[16]), 'pairs'),
    (dict(unrotated=[1, 16]), 'unrotated levels k=1'),
    (dict(trials=[2**30]), r'< 2\^31'),
    (dict(model='cnn'), 'model='),
])
def test_config_refuses_what_it_cannot_honour(overrides, match):
  with pytest.raises(ValueError, match=match):
    exp.EXPERIMENT.configure('quick', **overrides)
  with pytest.raises(ValueError, match='mode'):
    exp.EXPERIMENT.configure('medium')


def test_tiny_run_and_report(tmp_path):
  cfg = exp.Config(**TINY)
  results = exp.EXPERIMENT.results(cfg, str(tmp_path), progress=False)
  json.dumps(results, allow_nan=False)  # strict JSON, no inf/nan
  report_lib.write_results(str(tmp_path), results)
  results = report_lib.read_results(str(tmp_path))
  assert results['dataset']['name'] == 'digits'
  assert results['seeds'] == [0, 1] and results['clients_per_round'] == 10
  d = results['dimension']
  assert d == 650 and results['padded_dimension'] == 1024
  by = {r['setting']: r for r in results['summary']}
  # n m = 10 * 32 fails Theorem 1: trained, no epsilon, no Gaussian twin
  small = by['cpSGD k=2 m=32 no rot']
  assert small['epsilon_round'] is None and small['no_guarantee']
  assert 'Gaussian @ cpSGD k=2 m=32 no rot' not in by
  assert small['message_length'] == d  # no rotation: no padding
  big = by['cpSGD k=2 m=512']
  delta_r = _privacy.round_delta(cfg)
  protocol = dist.CpsgdConfig(
      l2_norm_clip=cfg.l2_norm_clip, levels=2, trials=512, rotate=True,
      linf_clip=dist.rotated_linf_clip(cfg.l2_norm_clip, d, 10, delta_r))
  assert big['x_max'] == protocol.linf_clip
  assert big['bits_per_client'] == dist.cpsgd_bits(protocol, d)
  event = dist.cpsgd_event(protocol, d, 10, delta_r)
  assert big['epsilon_round'] == pytest.approx(event.epsilon)
  assert big['bits_per_coordinate'] == pytest.approx(math.log2(514))
  assert big['bits_fixed'] == 10 and big['message_length'] == 1024
  assert big['epsilon_total'] == pytest.approx(accounting.epsilon(
      dp_accounting.SelfComposedDpEvent(event, 3), cfg.delta, 'pld'))
  twin = by['Gaussian @ cpSGD k=2 m=512']
  assert twin['epsilon_round'] == pytest.approx(big['epsilon_round'],
                                                rel=2e-3)
  assert twin['bits_per_coordinate'] == 32
  assert by['non-private']['epsilon_round'] is None
  for row in results['summary']:
    assert row['seeds'] == 2 and 0 <= row['test_accuracy_mean'] <= 1
  ledger = accounting.PrivacyLedger.from_json(next(
      p['ledger'] for p in results['privacy']
      if p['trials'] == 512 and p['rotate']))
  assert ledger.num_events == cfg.rounds
  text = exp.EXPERIMENT.report(results, str(tmp_path))
  assert text.startswith('## cpsgd_training (quick)')
  assert 'No privacy guarantee' in text and 'cpSGD k=2 m=32 no rot' in text
  assert '**yes**' not in text and '**no**' not in text
  # the one matched configuration is the pre-specified primary claim
  assert results['plan'] == dict(primary='cpSGD k=2 m=512', close=[],
                                 pairs=[])
  primary, sanity = results['claims']
  assert (sanity['kind'], sanity['family']) == ('sanity', 'sanity')
  assert sanity['treatment'] == 'non-private'
  assert primary['family'] == 'primary' and primary['n'] == 2
  assert primary['threshold'] == -_claims.CLOSE
  assert primary['comparisons'] == 1
  assert primary['verdict'] in verdict_lib.VERDICTS
  assert verdict_lib.claims_table(results['claims']) in text
  assert all(c['passed'] for c in results['exact_checks'])
  assert 'Exact check' in text and 'wall time' in text
  assert 'NO amplification' in text
  assert os.path.getsize(tmp_path / 'accuracy_vs_bits.png') > 0


def _row(k, m, eps, rotate=True):
  return dict(levels=k, trials=m, rotate=rotate, epsilon_round=eps,
              bits_per_coordinate=dist.bits_per_coordinate(k, m))


def test_plan_is_fixed_by_the_per_round_epsilons():
  privacy = [_row(2, 32, 7.8), _row(4, 128, 8.6), _row(16, 512, 7.1),
             _row(2, 512, 1.7), _row(4, 32, 19.0), _row(2, 8, None),
             _row(16, 128, 8.0, rotate=False)]
  plan = _claims.plan(privacy)
  assert plan['primary'] == 'cpSGD k=2 m=512'  # smallest eps/round
  # every other configuration with an epsilon; no guarantee: no claim
  assert plan['close'] == ['cpSGD k=2 m=32', 'cpSGD k=4 m=128',
                           'cpSGD k=16 m=512', 'cpSGD k=4 m=32',
                           'cpSGD k=16 m=128 no rot']
  # rotated pairs within 1.25x of each other, fewer bits first; the
  # unrotated configuration is never paired (rotation changes epsilon)
  assert plan['pairs'] == [['cpSGD k=2 m=32', 'cpSGD k=4 m=128'],
                           ['cpSGD k=2 m=32', 'cpSGD k=16 m=512'],
                           ['cpSGD k=4 m=128', 'cpSGD k=16 m=512']]
  assert _claims.plan([_row(2, 8, None)]) == dict(primary=None, close=[],
                                                  pairs=[])


def _runs(accuracies):
  """Runs and summary rows from {setting: per-seed accuracies}."""
  runs = [dict(setting=s, seed=i, test_accuracy=a)
          for s, accs in accuracies.items() for i, a in enumerate(accs)]
  summary = [dict(setting=s, bits_per_coordinate=5.0, epsilon_round=2.0)
             for s in accuracies]
  return runs, summary


def _verdicts(plan, runs, summary, num_seeds):
  """The claims' verdicts on seeds 0 .. num_seeds - 1, 100 test points."""
  results = exp.Results(
      dataset=dict(n_test=100), model='logistic', dimension=650,
      padded_dimension=1024, clients_per_round=10, delta_round=1e-7,
      privacy=[], runs=runs, summary=summary, curves=[], comparisons=[],
      plan=plan, exact_checks=[])
  return claims_lib.verdicts(_claims.claims(results,
                                            exp.Config(num_seeds=num_seeds)))


def test_claims_are_paired_by_seed_with_bonferroni_per_family():
  seeds = [0, 1, 2, 3, 4]
  base = np.array([0.70, 0.95, 0.80, 0.60, 0.90])  # seeds differ a lot
  acc = {'A': base - 0.01, 'Gaussian @ A': base,          # close
         'B': base - 0.30, 'Gaussian @ B': base,          # far
         'C': base - [0.0, 0.1, -0.1, 0.05, -0.05], 'Gaussian @ C': base,
         'D': base + 0.02}
  runs, summary = _runs(acc)
  plan = dict(primary='A', close=['B', 'C'], pairs=[['A', 'D'], ['B', 'D']])
  claims = _verdicts(plan, runs, summary, len(seeds))
  by = {(c['family'], c['treatment'], c['control']): c for c in claims}
  a = by['primary', 'A', 'Gaussian @ A']
  # per-seed difference -0.01 on every seed: held although the seeds'
  # accuracies spread over 0.35 (unpaired, this would be inconclusive)
  assert a['verdict'] == 'held' and a['comparisons'] == 1
  assert a['mean'] == pytest.approx(-0.01) and a['n'] == 5
  assert 'the smallest eps/round' in a['claim']
  assert by['close', 'B', 'Gaussian @ B']['verdict'] == 'refuted'
  c = by['close', 'C', 'Gaussian @ C']
  assert c['verdict'] == 'inconclusive' and c['comparisons'] == 2
  assert c['confidence'] == pytest.approx(1 - 0.05 / 2)
  d = by['bits', 'D', 'A']  # more bits (treatment) minus fewer bits
  assert d['verdict'] == 'held' and d['mean'] == pytest.approx(0.03)
  assert d['threshold'] == 0 and d['comparisons'] == 2
  assert by['bits', 'D', 'B']['verdict'] == 'held'
  # a seed without a run is an error, never silently dropped
  with pytest.raises(KeyError):
    _verdicts(plan, runs, summary, len(seeds) + 1)


def test_per_seed_accuracy_is_a_count_over_the_test_set():
  # the same count of 360, averaged in float32 two ways, is one accuracy
  runs = [dict(setting='A', seed=0, test_accuracy=float(np.float32(340 / 360))),
          dict(setting='A', seed=1, test_accuracy=340 / 360 + 6e-8)]
  acc = _claims.per_seed(runs, 'A', [1, 0], 360)
  assert acc[0] == acc[1] == 340 / 360


def test_exact_checks_pass_and_fail():
  good = dict(epsilon_round=2.0, gauss_epsilon_round=2.001,
              epsilon_total=50.0, gauss_epsilon_total=20.0)
  assert all(c['passed'] for c in _claims.exact_checks([good]))
  bad = dict(good, gauss_epsilon_round=2.1, gauss_epsilon_total=60.0)
  assert not any(c['passed'] for c in _claims.exact_checks([good, bad]))
  assert _claims.exact_checks([dict(epsilon_round=None)]) == []


def test_switch_mean_runs_each_configuration_as_its_own_protocol():
  configs = [dist.CpsgdConfig(l2_norm_clip=1.0, levels=4, trials=1024),
             dist.CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=2048,
                              rotate=True, linf_clip=0.3)]
  mean = jax.jit(_privacy.cpsgd_switch_mean(configs))
  key = jax.random.key(3)
  vectors = jax.random.normal(jax.random.key(4), (8, 20)) * 0.2
  for i, config in enumerate(configs):
    protocol = dist.cpsgd_protocol(config, 20, 8, 1e-5)
    want = protocol.mean(key, vectors, protocol.param)
    np.testing.assert_allclose(mean(key, vectors, np.float32(i)), want,
                               rtol=1e-6, atol=1e-7)
