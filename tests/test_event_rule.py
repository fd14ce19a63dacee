"""The naming rule of privacy companions, checked over the public names.

``<mechanism>_event(<its hyperparameters>, *, steps=1) -> DpEvent`` for every
privatizer; ``<transform>_step_event(opt_state, ...)`` for the stateful ones
(read from what ran); ``*_bits(...) -> int``; every ``calibrate_*`` on the one
solver.
"""

import inspect
import re

import dp_accounting
import pytest

import dpjax
from dpjax import transforms

# A privatizer is a transformation that releases a noisy value. By name:
PRIVATIZER = re.compile(r'^(?!\w*_event$)(add_\w+_noise|\w+_privatizer|dp_\w+)$')
# Stateful privatizers whose event is read from the state that ran.
STEP_EVENTS = {
    'add_correlated_noise': 'bandmf_step_event',
    'add_dpsgd_noise': 'dpsgd_step_event',
    'add_exact_dpsgd_noise': 'dpsgd_step_event',
    'dp_compgd': 'dp_compgd_step_event',
    'dp_compsgd': 'dp_compsgd_step_event',
    'dp_projected_gd': 'dp_compgd_step_event',
    'dp_projected_sgd': 'dp_compsgd_step_event',
}


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
  step_event = public.get(STEP_EVENTS.get(name, f'{name}_step_event'))
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
      assert name in STEP_EVENTS.values() or name[:-len('_step_event')] in (
          transforms.__all__), name
    else:
      assert name[:-len('_event')] in transforms.__all__, name


@pytest.mark.parametrize('make', [
    lambda s: transforms.add_gaussian_noise_event(2.0, 1.0, steps=s),
    lambda s: transforms.add_laplace_noise_event(2.0, 1.0, steps=s),
    lambda s: transforms.add_discrete_gaussian_noise_event(2.0, 1.0, steps=s),
    lambda s: transforms.add_exact_gaussian_noise_event(2.0, 1.0, 4,
                                                        steps=s),
    lambda s: transforms.ranked_sparsified_privatizer_event(1.1, 0.1,
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


def test_renamed_step_events_warn_and_forward():
  with pytest.warns(DeprecationWarning, match='dp_compgd_step_event'):
    old = transforms.dp_compgd_state_event
  assert old is transforms.dp_compgd_step_event


def test_glossary_names_with_the_old_keyword_kept_one_release():
  new = float(dpjax.audit.reconstruction_error_bound(2.0, 0.5, 1.0))
  with pytest.warns(DeprecationWarning, match='use stddev='):
    old = float(dpjax.audit.reconstruction_error_bound(sigma=2.0, rate=0.5,
                                                       k=1.0))
  assert old == new == 8.0
  with pytest.raises(ValueError, match='stddev'):
    dpjax.audit.reconstruction_error_bound(2.0, 0.5, 1.0, sigma=2.0)
  setting = dpjax.distributed.DecentralizedPrivacy('qdpsgd1', 2.0, 0.5, 100,
                                                   amplified=False)
  sizes = [[10, 10]]
  with pytest.warns(DeprecationWarning, match='use noise_multiplier='):
    old = dpjax.distributed.agent_epsilons(setting, sizes, 1e-5, sigma=3.0)
  new = dpjax.distributed.agent_epsilons(setting, sizes, 1e-5,
                                         noise_multiplier=3.0)
  assert old.tolist() == new.tolist()
  for fn in (dpjax.transforms.l2_ball_gaussian_width,
             dpjax.transforms.projection_dim_schedule,
             dpjax.transforms.gaussian_projection,
             dpjax.recovery.operator_norm_squared,
             dpjax.nonparametric.jl_projection,
             dpjax.transforms.sparsity_schedule,
             dpjax.transforms.rs_dpsgd_bits,
             dpjax.compression.sparse_message_bits):
    assert 'dimension' in inspect.signature(fn).parameters, fn.__name__
