"""The distributed_dp experiment: configuration, a tiny run, its claims."""

import numpy as np
import pytest

from experiments import distributed_dp
from experiments.common import verdict
from experiments.distributed_dp import _claims


def test_config_modes_and_validation():
  quick, full = distributed_dp.config('quick'), distributed_dp.config('full')
  assert quick['num_seeds'] >= 3 and full['num_seeds'] >= 10
  assert full['bits'] == [12, 14, 16, 18, 20]
  for overrides, match in ((dict(bits=[1]), 'bits'),
                           (dict(bits=[40]), 'bits'),
                           (dict(num_clients=0), 'num_clients=0'),
                           (dict(epsilons=[0.0]), 'epsilons'),
                           (dict(k_stddevs=0.0), 'k_stddevs=0.0')):
    with pytest.raises(ValueError, match=match):
      distributed_dp.config('quick', **overrides)
  with pytest.raises(ValueError, match='generates its client vectors'):
    distributed_dp.config('quick', dataset='digits')


def _row(mech, bits, per_seed):
  return dict(mechanism=mech, bits=bits, target_epsilon=1.0,
              mse=float(np.mean(per_seed)), per_seed=list(per_seed))


def test_claims_follow_the_seed_rule():
  cfg = distributed_dp.config('quick')
  g = [_row('gaussian', 32, [1.0, 1.02, 0.98, 1.01, 0.99])]
  rows = [_row('ddg', 16, [1.1, 1.12, 1.09, 1.11, 1.1]),
          _row('skellam', 16, [1.5, 1.6, 1.55, 1.52, 1.58]),
          _row('cpsgd', 16, [50, 52, 49, 51, 50]),
          _row('ddg', 12, [3.0] * 5),  # below close_bits: not in the claim
          dict(mechanism='cpsgd', bits=12, target_epsilon=1.0, mse=None)]
  found = _claims.claims(cfg, rows, g)
  assert len(found) == 5
  assert all(c['verdict'] in verdict.VERDICTS for c in found)
  texts = [c['claim'] for c in found]
  by = {c['claim']: c['verdict'] for c in found}
  ddg_close = next(t for t in texts if t.startswith('DDG MSE within'))
  sk_close = next(t for t in texts if t.startswith('Skellam MSE within'))
  assert by[ddg_close] == 'held' and by[sk_close] == 'refuted'
  assert all(by[t] == 'held' for t in texts if 'below cpSGD' in t)
  assert by[next(t for t in texts if t.startswith('cpSGD'))] == 'held'


def test_tiny_run_measures_every_mechanism():
  cfg = distributed_dp.config('quick', num_clients=4, dimension=16,
                              bits=[16], num_seeds=2, reps=2, levels=[4],
                              epsilons=[4.0])
  res = distributed_dp.run(cfg, '', progress=False)
  mechs = {r['mechanism'] for r in res['rows']}
  assert mechs == {'ddg', 'skellam', 'cpsgd'}
  for r in res['rows']:
    if r['mse'] is not None:
      assert r['epsilon'] <= 4.0 and len(r['per_seed']) == 2
  ddg = next(r for r in res['rows'] if r['mechanism'] == 'ddg')
  assert ddg['rounds'] == 4 and ddg['flagged_rounds'] <= ddg['rounds']
  assert res['claims'] and res['gaussian'][0]['epsilon'] <= 4.0
