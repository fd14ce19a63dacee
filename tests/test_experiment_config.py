"""experiments/common/config.py: a mode's settings plus the command line's."""

import doctest

import pytest

from experiments.common import config

MODES = {'quick': dict(epsilons=[1.0], reps=2), 'full': dict(epsilons=[1.0],
                                                             reps=20)}
DEFAULTS = dict(delta=1e-5, seed=0)


def test_examples():
  assert doctest.testmod(config).failed == 0


def test_layers_and_none_means_not_given():
  cfg = config.from_mode('demo', 'full', MODES, DEFAULTS, delta=1e-6,
                         seed=None, reps=3)
  assert cfg == dict(delta=1e-6, seed=0, epsilons=[1.0], reps=3, mode='full')
  assert config.from_mode('demo', 'quick', MODES, DEFAULTS)['reps'] == 2


def test_refuses_unknown_modes_and_unusable_datasets():
  with pytest.raises(ValueError, match="unknown mode 'medium'"):
    config.from_mode('demo', 'medium', MODES, DEFAULTS)
  with pytest.raises(ValueError, match='demo uses no data; drop --dataset'):
    config.from_mode('demo', 'quick', MODES, DEFAULTS, dataset='digits',
                     no_dataset='uses no data')
  assert config.from_mode('demo', 'quick', MODES, DEFAULTS,
                          dataset='digits')['dataset'] == 'digits'


def test_explicit_validation_points_survive_an_epsilon_override():
  from experiments import cpsgd_mechanisms  # pylint: disable=g-import-not-at-top
  cfg = cpsgd_mechanisms.config('quick', epsilons=[3.0, 5.0],
                                validate_epsilons=[3.0])
  assert cfg['validate_epsilons'] == [3.0]
