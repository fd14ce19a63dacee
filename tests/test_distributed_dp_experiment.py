"""The distributed_dp experiment: configuration, a tiny run, its claims."""

import math

import numpy as np
import pytest

from dpjax import accounting
from dpjax import distributed as dist
from experiments import distributed_dp
from experiments.common import verdict
from experiments.distributed_dp import _claims
from experiments.distributed_dp import _training


def test_config_modes_and_validation():
  configure = distributed_dp.EXPERIMENT.configure
  quick, full = configure('quick'), configure('full')
  assert quick.num_seeds >= 3 and full.num_seeds >= 10
  assert full.bits == (12, 14, 16, 18, 20)
  for overrides, match in ((dict(bits=[1]), 'bits'),
                           (dict(bits=[40]), 'bits'),
                           (dict(num_clients=0), 'num_clients=0'),
                           (dict(epsilons=[0.0]), 'epsilons'),
                           (dict(k_stddevs=0.0), 'k_stddevs=0.0')):
    with pytest.raises(ValueError, match=match):
      configure('quick', **overrides)
  with pytest.raises(ValueError, match='drop --dataset'):
    configure('quick', dataset='digits')


def _row(mech, bits, per_seed):
  return dict(mechanism=mech, bits=bits, target_epsilon=1.0,
              mse=float(np.mean(per_seed)), per_seed=list(per_seed))


def test_claims_follow_the_seed_rule():
  cfg = distributed_dp.Config()
  g = [_row('gaussian', 32, [1.0, 1.02, 0.98, 1.01, 0.99])]
  rows = [_row('ddg', 16, [1.1, 1.12, 1.09, 1.11, 1.1]),
          _row('skellam', 16, [1.5, 1.6, 1.55, 1.52, 1.58]),
          _row('cpsgd', 16, [50, 52, 49, 51, 50]),
          _row('ddg', 12, [3.0] * 5),  # below close_bits: not in the claim
          dict(mechanism='cpsgd', bits=12, target_epsilon=1.0, mse=None)]
  found = _claims.dme_claims(cfg, rows, g).verdicts()
  assert len(found) == 5 and all(c['comparisons'] == 5 for c in found)
  assert all(c['verdict'] in verdict.VERDICTS for c in found)
  texts = [c['claim'] for c in found]
  by = {c['claim']: c['verdict'] for c in found}
  ddg_close = next(t for t in texts if t.startswith('DDG MSE within'))
  sk_close = next(t for t in texts if t.startswith('Skellam MSE within'))
  assert by[ddg_close] == 'held' and by[sk_close] == 'refuted'
  assert all(by[t] == 'held' for t in texts if 'below cpSGD' in t)
  assert by[next(t for t in texts if t.startswith('cpSGD'))] == 'held'


def test_training_is_full_mode_only_and_validated():
  preset = distributed_dp.Config.preset
  assert not preset('quick').training
  assert preset('full').training
  assert preset('quick', training=True).training
  for overrides, match in ((dict(training=1), 'training=1'),
                           (dict(train_rounds=0), 'train_rounds=0'),
                           (dict(train_bits=[1]), 'train_bits'),
                           (dict(train_clients_per_round=21),
                            'train_clients_per_round=21'),
                           (dict(train_epsilon=0.0), 'train_epsilon=0.0'),
                           (dict(train_momentum=1.0), 'train_momentum=1.0'),
                           (dict(train_dataset='nope'), 'train_dataset'),
                           (dict(train_dataset='diabetes'),
                            'train_dataset')):
    with pytest.raises(ValueError, match=match):
      preset('quick', **overrides)


def test_training_protocols_are_the_librarys_accounted_replace_one():
  cfg = distributed_dp.Config(train_rounds=2, train_num_clients=6,
                              train_bits=[12], levels=[4])
  d, n = 650, 6
  the_plan = _training.plan_settings(cfg, d, n)
  # cpSGD fits no 12-bit sum: it runs at the fewest bits where it fits
  by = {s['method']: s for s in the_plan['settings'] if 'event' in s}
  assert set(by) == {'ddg', 'skellam', 'cpsgd', 'gaussian'}
  for mech in ('ddg', 'skellam'):
    s = by[mech]
    config = the_plan['ddp_configs'][s['index']]
    replace_one = dist.distributed_dp_event(config, d, replace_one=True)
    # the builder's own event is add/remove-one; the run charges replace-one
    assert s['event'] == s['protocol'].event == replace_one
    assert s['event'] != dist.distributed_dp_protocol(config, d).event
    assert s['bits_per_client'] == dist.distributed_dp_bits(config, d)
  cp = by['cpsgd']
  assert cp['event'] == cp['protocol'].event
  assert cp['epsilon_round'] == pytest.approx(cp['event'].epsilon)
  g = by['gaussian']
  assert g['event'] == accounting.gaussian_event(
      math.sqrt(n) * g['client_stddev'] / (2 * cfg.train_l2_norm_clip))
  assert g['protocol'].param == g['client_stddev']


def _setting(method, bits, name):
  return dict(setting=name, method=method, bits=bits, event=object())


def test_training_claims_are_planned_from_the_settings():
  cfg = distributed_dp.Config(train_bits=[12, 16])
  settings = [_setting('ddg', 12, 'DDG b=12'), _setting('ddg', 16, 'DDG b=16'),
              dict(setting='Skellam b=16', method='skellam', bits=16,
                   note='sampler range'),  # not runnable: no claim on it
              _setting('cpsgd', 24, 'cpSGD b=24'),  # fits no swept b
              _setting('gaussian', 32, 'Gaussian')]
  the_plan = _claims.training_plan(cfg, settings)
  assert [p['kind'] for p in the_plan] == ['close', 'above cpSGD', 'gap']
  assert the_plan[1]['pairs'] == [('DDG b=12', 'cpSGD b=24'),
                                  ('DDG b=16', 'cpSGD b=24')]
  acc = {'DDG b=12': [0.80, 0.82, 0.81], 'DDG b=16': [0.90, 0.91, 0.90],
         'cpSGD b=24': [0.50, 0.52, 0.49], 'Gaussian': [0.91, 0.92, 0.90]}
  rows = [dict(setting=k, per_seed=v) for k, v in acc.items()]
  found = _claims.training_claims(the_plan, rows).verdicts()
  assert [c['verdict'] for c in found] == ['held', 'held', 'held']
  assert all(c['comparisons'] == 3 and c['family'] == 'training'
             for c in found)


def test_tiny_run_measures_every_mechanism_and_trains(tmp_path):
  # One run for both parts (the training is on only with training=True).
  cfg = distributed_dp.Config(num_clients=4, dimension=16,
                              bits=[16], num_seeds=2, num_repetitions=2,
                              levels=[4], epsilons=[4.0], training=True,
                              train_rounds=2, train_num_seeds=2,
                              train_num_clients=6, train_bits=[16])
  res = distributed_dp.EXPERIMENT.results(cfg, str(tmp_path), progress=False)
  mechs = {r['mechanism'] for r in res['rows']}
  assert mechs == {'ddg', 'skellam', 'cpsgd'}
  for r in res['rows']:
    if r['mse'] is not None:
      assert r['epsilon'] <= 4.0 and len(r['per_seed']) == 2
  ddg = next(r for r in res['rows'] if r['mechanism'] == 'ddg')
  assert ddg['rounds'] == 4 and ddg['flagged_rounds'] <= ddg['rounds']
  assert res['claims'] and res['gaussian'][0]['epsilon'] <= 4.0
  # The federated training part.
  tr = res['training']
  by = {r['method']: r for r in tr['rows']}
  assert set(by) == {'ddg', 'skellam', 'cpsgd', 'gaussian'}
  for r in tr['rows']:
    if r.get('test_accuracy') is None:
      assert r['note']  # why it did not run
      continue
    assert len(r['per_seed']) == 2 and 0 <= r['test_accuracy'] <= 1
    assert r['epsilon_total'] <= cfg.train_epsilon * (1 + 1e-3)
  ddg = by['ddg']
  assert len(ddg['flagged']) == 2 and all(0 <= f <= 2 for f in ddg['flagged'])
  assert len(ddg['wraparound_max']) == 2
  trained = [c for c in res['claims'] if c.get('family') == 'training']
  assert {'close', 'gap'} <= {c['comparison'] for c in trained}
  assert len(trained) == len(tr['plan'])
  assert all(c['verdict'] in verdict.VERDICTS for c in trained)
  assert all(c['claim'].startswith('federated training') for c in trained)
  assert all(c['comparisons'] == len(trained) for c in trained)
  text = distributed_dp.EXPERIMENT.report(res, str(tmp_path))
  assert 'Federated training' in text and 'flagged' in text
  assert text.count(trained[0]['claim']) == 1  # once, in the claims table
  assert (tmp_path / 'accuracy_vs_bits.png').exists()
