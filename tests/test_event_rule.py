"""The naming rule of privacy companions, checked over the public names.

``<mechanism>_event(<its hyperparameters>, *, steps=1) -> DpEvent`` only for a
privatizer whose accounting differs; a Gaussian or pure-DP privatizer is
planned with ``accounting.gaussian_event`` / ``pure_dp_event`` (a Laplace or
discrete Gaussian one with ``laplace_event`` / ``discrete_gaussian_event``);
for the stateful ones, the one reader
``dpjax.accounting.step_event(opt_state, sampler)`` (read from what ran);
``*_bits(..., dimension) -> int``; a release that returns ``(release,
event)`` has no separate event function; one ``calibrate``.
"""

import importlib
import inspect
import re

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax import distributed
from dpjax import nonparametric
from dpjax import transforms

# Subpackages whose *_event names are mechanism companions (accounting's are
# the events themselves; correlated_noise.bandmf_event's steps is the
# horizon T of its matrix, not a repetition).
COMPANION_PACKAGES = ('dpjax.transforms', 'dpjax.distributed',
                      'dpjax.nonparametric')

# A privatizer is a transformation that releases a noisy value. By name:
PRIVATIZER = re.compile(r'^(?!\w*_event$)(add_\w+_noise|\w+_privatizer|dp_\w+)$')
# Privatizers whose state answers its own event: the one reader
# dpjax.accounting.step_event reads it (every strategy and noise path).
READ_BY_STEP_EVENT = ('add_dpsgd_noise', 'dp_compgd', 'dp_compsgd',
                      'dp_projected_gd', 'dp_projected_sgd')
# Privatizers planned with an accounting event, named in their docstring.
PLANNED_BY = {
    'add_gaussian_noise': 'gaussian_event',
    'dp_gradient_estimate': 'gaussian_event',
    'ranked_sparsified_privatizer': 'gaussian_event',
    'add_laplace_noise': 'laplace_event',
    'laplace_privatizer': 'laplace_event',
    'add_discrete_gaussian_noise': 'discrete_gaussian_event',
}
# The planning events: one per accounting, whatever the argument convention.
PLANNING_EVENTS = {'gaussian_event', 'pure_dp_event', 'laplace_event',
                   'discrete_gaussian_event'}


def _public(module):
  return {name: getattr(module, name) for name in module.__all__}


def _privatizers():
  return sorted(n for n in transforms.__all__ if PRIVATIZER.match(n))


def test_the_rule_sees_the_privatizers():
  assert {'add_gaussian_noise', 'laplace_privatizer', 'compressive_privatizer',
          'ranked_sparsified_privatizer', 'dp_compgd'} <= set(_privatizers())


@pytest.mark.parametrize('name', _privatizers())
def test_every_privatizer_has_its_event_or_step_event(name):
  public = _public(transforms)
  event = public.get(f'{name}_event')
  step_event = public.get(f'{name}_step_event')
  if name in READ_BY_STEP_EVENT:
    step_event = dpjax.accounting.step_event
  planned = PLANNED_BY.get(name)
  if planned is not None:
    assert event is None, f'{name}_event duplicates accounting.{planned}'
    assert f'accounting.{planned}(' in public[name].__doc__, name
    return
  assert event or step_event, f'{name} has neither {name}_event nor a ' \
                              'step event'
  if event is not None:
    steps = inspect.signature(event).parameters.get('steps')
    assert steps is not None and steps.default == 1, f'{name}_event steps=1'
  if step_event is not None:
    first = next(iter(inspect.signature(step_event).parameters))
    assert first == 'opt_state', step_event.__name__


def test_every_event_name_follows_the_rule():
  names = [n for n in transforms.__all__ if n.endswith('_event')]
  for name in names:
    if name.endswith('_step_event'):
      assert name[:-len('_step_event')] in transforms.__all__, name
    else:
      assert name[:-len('_event')] in transforms.__all__, name


@pytest.mark.parametrize('make', [
    lambda s: dpjax.accounting.gaussian_event(2.0, steps=s),
    lambda s: dpjax.accounting.gaussian_event(1.1, sampling_rate=0.1,
                                              steps=s),
    lambda s: dpjax.accounting.pure_dp_event(0.5, steps=s),
    lambda s: dpjax.accounting.laplace_event(0.5, steps=s),
    lambda s: dpjax.accounting.discrete_gaussian_event(2.0, 1.0, steps=s),
    lambda s: transforms.add_exact_gaussian_noise_event(2.0, 1.0, 4,
                                                        steps=s),
])
def test_steps_composes_the_one_step_event(make):
  one, three = make(1), make(3)
  assert not isinstance(one, dp_accounting.SelfComposedDpEvent)
  assert three == dp_accounting.SelfComposedDpEvent(one, 3)
  with pytest.raises(ValueError, match='steps'):
    make(0)


def test_bits_functions_count_an_integer_number_of_bits():
  assert transforms.laplace_privatizer_bits(dimension=64) == 2048
  assert isinstance(transforms.compressive_privatizer_bits(8), int)
  assert isinstance(dpjax.compression.sparse_message_bits(100, 10), int)
  assert 'dimension' in inspect.signature(
      dpjax.distributed.gaussian_protocol_bits).parameters


def test_the_planning_events_are_the_only_accounting_event_factories():
  names = {n for n in dpjax.accounting.__all__ if n.endswith('_event')}
  assert PLANNING_EVENTS <= names
  # The rest convert or read events, or are a mechanism's or a sampler's
  # own accounting (balls_in_bins_event: BallsInBinsSampler's epoch).
  assert names - PLANNING_EVENTS <= {'step_event', 'replace_one_event',
                                     'ddg_event', 'skellam_event',
                                     'balls_in_bins_event'}


def test_a_zero_noise_multiplier_is_the_non_private_gaussian():
  event = dpjax.accounting.gaussian_event(0.0, sampling_rate=0.5, steps=3)
  assert dpjax.accounting.epsilon(event, 1e-5) == float('inf')


def test_glossary_names_of_the_arguments():
  assert float(dpjax.audit.reconstruction_error_bound(
      stddev=2.0, rate=0.5, k=1.0)) == 8.0
  setting = dpjax.distributed.DecentralizedPrivacy('qdpsgd1', 2.0, 0.5, 100,
                                                   amplified=False)
  sizes = [[10, 10]]
  new = dpjax.distributed.agent_epsilons(setting, sizes, 1e-5,
                                         noise_multiplier=3.0)
  assert new.tolist() == dpjax.distributed.agent_epsilons(
      setting._replace(noise_multiplier=3.0), sizes, 1e-5).tolist()
  for fn in (dpjax.transforms.l2_ball_gaussian_width,
             dpjax.transforms.projection_dim_schedule,
             dpjax.transforms.gaussian_projection,
             dpjax.recovery.operator_norm_squared,
             dpjax.nonparametric.jl_projection,
             dpjax.transforms.sparsity_schedule,
             dpjax.transforms.rs_dpsgd_bits,
             dpjax.compression.sparse_message_bits):
    assert 'dimension' in inspect.signature(fn).parameters, fn.__name__


def _companions():
  for package in COMPANION_PACKAGES:
    module = importlib.import_module(package)
    for name in module.__all__:
      if name.endswith('_event') and not name.endswith('_step_event'):
        yield f'{package}.{name}', getattr(module, name)


@pytest.mark.parametrize('name, event', list(_companions()))
def test_every_companion_event_takes_steps_one(name, event):
  steps = inspect.signature(event).parameters.get('steps')
  assert steps is not None and steps.default == 1, name


def test_distributed_step_events_read_what_ran_first():
  names = [n for n in distributed.__all__ if n.endswith('_step_event')]
  assert names == ['qdpsgd_step_event']
  for name in names:
    first = next(iter(inspect.signature(
        getattr(distributed, name)).parameters))
    assert first == 'metrics', name


CPSGD = distributed.CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=2000)
DDG = distributed.DistributedDpConfig(mechanism='skellam', l2_norm_clip=1.0,
                                      bits=16, gamma=1e-3, stddev=2.0,
                                      num_clients=100)
Q1 = distributed.DecentralizedPrivacy('qdpsgd1', 2.0, 0.5, 1000)


@pytest.mark.parametrize('make', [
    lambda s: distributed.cpsgd_event(CPSGD, 10, 100, 1e-5, steps=s),
    lambda s: distributed.distributed_dp_event(DDG, 1000, steps=s),
    lambda s: distributed.qdpsgd_event(Q1, 20, steps=s),
])
def test_distributed_and_nonparametric_events_compose_steps(make):
  one, three = make(1), make(3)
  assert not isinstance(one, dp_accounting.SelfComposedDpEvent)
  assert three == dp_accounting.SelfComposedDpEvent(one, 3)
  with pytest.raises(ValueError, match='steps'):
    make(0)


def test_qdpsgd_step_event_reads_the_round_and_qdpsgd_event_the_sizes():
  metrics = distributed.RoundMetrics(np.array([20, 0]), np.zeros(2), 0.0,
                                     np.float32(2.0))
  new = distributed.qdpsgd_step_event(metrics, Q1, 0)
  assert new == distributed.qdpsgd_event(Q1, 20)
  with pytest.raises(ValueError, match='setting'):
    distributed.qdpsgd_step_event(metrics, 20, 0)
  q2 = Q1._replace(algorithm='qdpsgd2', learning_rate=0.1, mixing_rate=0.5,
                   eta=0.1, dimension=4)
  event = distributed.qdpsgd_step_event(metrics, q2, 0, l2_sensitivity=0.5)
  assert event == distributed.qdpsgd_event(q2, 20, l2_sensitivity=0.5)
  assert event == dp_accounting.ZCDpEvent((0.5 / 0.5)**2 / (2 * 2.0**2))


X = np.array([[0.1], [0.2], [0.9]], np.float32)
Y = np.array([1, 1, 0])
RELEASES = {
    'dp_histogram': lambda e: nonparametric.dp_histogram(
        jax.random.key(0), X, Y, epsilon=e, bounds=(0.0, 1.0),
        num_classes=2, bins=2),
    'noisy_reg': lambda e: nonparametric.noisy_reg(
        jax.random.key(0), X, Y, epsilon=e, bounds=(0.0, 1.0),
        num_classes=2, bins=2),
    'dp_knn': lambda e: nonparametric.dp_knn(
        jax.random.key(0), X, Y, jnp.array([[0.5]]), epsilon=e,
        bounds=(0.0, 1.0), num_classes=2, k=1),
    'random_decision_trees': lambda e: nonparametric.random_decision_trees(
        jax.random.key(0), X, Y, epsilon=e, bounds=(0.0, 1.0), num_classes=2,
        num_trees=2, depth=1),
}


@pytest.mark.parametrize('release', sorted(RELEASES))
def test_a_release_that_returns_its_event_has_no_event_function(release):
  assert f'{release}_event' not in nonparametric.__all__
  assert not hasattr(nonparametric, f'{release}_event')
  _, event = RELEASES[release](0.7)
  assert event.delta == 0 and 0.7 - 1e-6 < event.epsilon <= 0.7


def _bits_functions():
  for package in ('dpjax.compression', 'dpjax.distributed', 'dpjax.transforms'):
    module = importlib.import_module(package)
    for name in module.__all__:
      if name.endswith('_bits'):
        yield f'{package}.{name}', getattr(module, name)


# Bits that do not depend on the vector's length: the m measurements alone.
NO_DIMENSION = {'dpjax.transforms.compressive_privatizer_bits'}


@pytest.mark.parametrize('name, fn', list(_bits_functions()))
def test_every_bits_function_names_the_length_dimension(name, fn):
  params = inspect.signature(fn).parameters
  assert ('dimension' in params) != (name in NO_DIMENSION), name


def test_bits_functions_return_integers():
  cpsgd = distributed.CpsgdConfig(l2_norm_clip=1.0, levels=3, trials=2)
  sched = transforms.SparsityMaskSchedule.cooling(0.5, 1, 2, jnp.zeros(8))
  counts = [transforms.dpsgd_bits(dimension=8),
            transforms.laplace_privatizer_bits(dimension=8),
            transforms.compressive_privatizer_bits(4),
            dpjax.compression.sparse_message_bits(dimension=8, num_kept=2),
            distributed.gaussian_protocol_bits(dimension=8),
            distributed.distributed_dp_bits(DDG, dimension=8),
            distributed.cpsgd_bits(cpsgd, dimension=8, fixed_width=True)]
  assert all(type(c) is int for c in counts), counts  # pylint: disable=unidiomatic-typecheck
  # One integer per step; cpSGD's default is the exact d log2(k + m).
  assert transforms.rs_dpsgd_bits(sched, dimension=8).dtype == np.int64
  assert distributed.cpsgd_bits(cpsgd, dimension=8) == 8 * np.log2(5)


def test_dpsgd_bits_takes_the_dimension():
  assert transforms.dpsgd_bits(55) == 55 * 32
  assert transforms.dpsgd_bits(55, value_bits=16) == 55 * 16
