"""The correlated_noise experiment: configuration, claims, a tiny run."""

import numpy as np
import pytest

from experiments import correlated_noise
from experiments.common import runner
from experiments.common import verdict
from experiments.correlated_noise import _claims


def test_config_modes_and_validation():
  configure = correlated_noise.EXPERIMENT.configure
  quick, full = configure('quick'), configure('full')
  assert quick.num_seeds >= 5 and full.num_seeds >= 10
  assert quick.clips == tuple(sorted(quick.clips))
  for overrides, match in ((dict(target_quantile=1.0), 'target_quantile'),
                           (dict(target_quantile=0.0), 'target_quantile'),
                           (dict(clips=[1.0]), 'clips'),
                           (dict(epsilon=0.0), 'epsilon'),
                           (dict(examples_per_user=0), 'examples_per_user')):
    with pytest.raises(ValueError, match=match):
      configure('quick', **overrides)


def _part(settings, val, test):
  val, test = np.asarray(val), np.asarray(test)
  chosen = np.argmax(val, axis=1)
  return dict(settings=settings, val=val.tolist(), test=test.tolist(),
              chosen=[settings[i] for i in chosen],
              selected_test=test[np.arange(len(test)), chosen].tolist())


def test_claims_pick_on_validation_and_follow_the_seed_rule():
  cfg = correlated_noise.Config(num_seeds=4, clips=(0.1, 1.0),
                                learning_rates=(0.1,))
  # Validation prefers C = 1, whose test accuracy is 0.8; C = 0.1 is 0.6.
  fixed = _part([(0.1, 0.1), (1.0, 0.1)], [[0.5, 0.9]] * 4,
                [[0.6, 0.8]] * 4)
  adaptive = _part([0.1], [[0.8]] * 4, [[0.79], [0.8], [0.78], [0.8]])
  user = _part([0.1], [[0.5]] * 4, [[0.5], [0.52], [0.49], [0.51]])
  example = _part([0.1], [[0.8]] * 4, [[0.8], [0.81], [0.79], [0.8]])
  correlated = dict(_part([(0.1, 0.1), (1.0, 0.1)], [[0.5, 0.9]] * 4,
                          [[0.6, 0.85], [0.6, 0.86], [0.6, 0.84],
                           [0.6, 0.85]]), bands=4)
  families = _claims.claims(dict(fixed=fixed, adaptive=adaptive,
                                 bandmf=correlated, user_level=user,
                                 example_level=example), cfg)
  found = [c for f in families for c in f.verdicts()]
  assert len(found) == 5 and all(c['verdict'] in verdict.VERDICTS
                                 for c in found)
  by = {c['claim'].split(' (')[0]: c for c in found}
  within = next(c for c in found if 'within' in c['claim'])
  assert within['mean'] == pytest.approx(-0.0075)
  assert within['verdict'] == 'held'
  assert all(c['verdict'] == 'held' for c in found), by


@pytest.mark.slow
def test_tiny_run_reads_each_epsilon_from_what_ran(tmp_path):
  exp = correlated_noise.EXPERIMENT
  cfg = exp.configure('quick', num_seeds=2, epochs=1, clips=[0.3, 1.0],
                      learning_rates=[0.1], expected_users=48)
  results = exp.run(cfg, runner.Context(exp.name, str(tmp_path), False))
  for part in ('fixed', 'adaptive', 'bandmf', 'user_level',
               'example_level'):
    assert results[part]['epsilon'] <= cfg.epsilon * (1 + 1e-6)
    assert results[part]['epsilon'] > 0.9 * cfg.epsilon
    assert np.asarray(results[part]['test']).shape[0] == 2
    assert min(results[part]['selected_test']) > 0.2  # learns in one epoch
  assert results['user_level']['unit'] == 'user'
  # Adaptive clipping at the same epsilon runs less gradient noise than
  # sigma but records sigma (its count noise spends the rest).
  assert results['adaptive']['noise_multiplier'] == pytest.approx(
      results['fixed']['noise_multiplier'], rel=1e-5)
  body = exp.report_body(dict(results, config=cfg.to_dict()), str(tmp_path))
  assert 'chosen on validation' in body
