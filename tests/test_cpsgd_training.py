"""experiments/cpsgd_training: config validation, a tiny run and its report."""

import json
import math
import os

import dp_accounting
import pytest

from dpjax import accounting
from dpjax import distributed as dist
from experiments import cpsgd_training as exp
from experiments.common import report as report_lib

TINY = dict(num_clients=20, clients_per_round=10, rounds=3, levels=[2],
            trials=[512], unrotated=[[2, 32]], num_seeds=2, evals=3)


def test_config_modes_and_overrides():
  quick, full = exp.config('quick'), exp.config('full')
  assert quick['mode'] == 'quick' and full['rounds'] > quick['rounds']
  assert full['num_seeds'] > quick['num_seeds']
  cfg = exp.config('quick', seed=3, delta=1e-6, dataset=None, rounds=7)
  assert (cfg['seed'], cfg['delta'], cfg['dataset'], cfg['rounds']) == (
      3, 1e-6, 'digits', 7)
  assert exp.round_delta(cfg) == pytest.approx(1e-6 / 14)


@pytest.mark.parametrize('overrides, match', [
    (dict(epsilons=[1.0]), 'drop --epsilons'),
    (dict(dataset='diabetes'), 'regression dataset'),
    (dict(dataset='csv:/tmp/x.csv'), 'regression dataset'),
    (dict(dataset='imagenet'), 'unknown dataset'),
    (dict(frobnicate=1), 'unknown option'),
    (dict(rounds=0), 'rounds=0'),
    (dict(clients_per_round=101), 'clients_per_round=101'),
    (dict(clip_norm=-1.0), 'clip_norm=-1.0'),
    (dict(momentum=1.0), 'momentum=1.0'),
    (dict(delta=1.5), 'delta=1.5'),
    (dict(levels=[1]), 'levels k=1'),
    (dict(trials=[0]), 'trials m=0'),
    (dict(trials=[]), 'non-empty list'),
    (dict(unrotated=[[16]]), 'pairs'),
    (dict(trials=[2**30]), r'< 2\^31'),
    (dict(model='cnn'), 'model='),
])
def test_config_refuses_what_it_cannot_honour(overrides, match):
  with pytest.raises(ValueError, match=match):
    exp.config('quick', **overrides)
  with pytest.raises(ValueError, match='mode'):
    exp.config('medium')


def test_tiny_run_and_report(tmp_path):
  cfg = exp.config('quick', **TINY)
  results = exp.run(cfg, str(tmp_path), progress=False)
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
  delta_r = exp.round_delta(cfg)
  protocol = dist.CpsgdConfig(
      l2_norm_clip=cfg['clip_norm'], levels=2, trials=512, rotate=True,
      linf_clip=dist.rotated_linf_clip(cfg['clip_norm'], d, 10, delta_r))
  assert big['x_max'] == protocol.linf_clip
  assert big['bits_per_client'] == dist.cpsgd_bits(protocol, d)
  event = dist.cpsgd_round_event(protocol, d, 10, delta_r)
  assert big['epsilon_round'] == pytest.approx(event.epsilon)
  assert big['bits_per_coordinate'] == pytest.approx(math.log2(514))
  assert big['bits_fixed'] == 10 and big['message_length'] == 1024
  assert big['epsilon_total'] == pytest.approx(accounting.epsilon(
      dp_accounting.SelfComposedDpEvent(event, 3), cfg['delta'], 'pld'))
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
  assert ledger.num_events == cfg['rounds']
  text = exp.report(results, str(tmp_path))
  assert text.startswith('## cpsgd_training (quick)')
  assert 'No privacy guarantee' in text and 'cpSGD k=2 m=32 no rot' in text
  assert '**yes**' in text or '**no**' in text
  assert 'NO amplification' in text
  assert os.path.getsize(tmp_path / 'accuracy_vs_bits.png') > 0
