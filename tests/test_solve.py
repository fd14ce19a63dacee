"""The one monotone solver behind every calibrate_*."""

import math

import numpy as np
import pytest

import dpjax
from dpjax import _solve


@pytest.mark.parametrize('answer', [1e-3, 0.7, 1.0, 3.3, 1234.5])
@pytest.mark.parametrize('tight', [True, False])
def test_smallest_float_brackets_the_answer_from_above(answer, tight):
  calls = []

  def ok(x):
    calls.append(x)
    return x >= answer

  x = _solve.smallest_float(ok, start=1.0, rtol=1e-6, tight=tight)
  assert answer <= x <= answer * (1 + 1e-6)
  assert len(calls) < 80


def test_smallest_float_stops_at_the_ceiling_and_the_floor():
  with pytest.raises(ValueError, match='never'):
    _solve.smallest_float(lambda x: False, start=1.0, rtol=1e-3,
                          ceiling=10.0, unreachable=_raise('never'))
  tried = []
  _solve.smallest_float(lambda x: tried.append(x) or x >= 9.0, start=1.0,
                        rtol=1e-3, ceiling=10.0)
  assert max(tried) == 10.0  # clamped to the ceiling, never above it
  assert _solve.smallest_float(lambda x: True, start=1.0, rtol=1e-3,
                               floor=1e-6) < 1e-6


@pytest.mark.parametrize('answer', [1, 2, 15, 16, 17, 1000])
def test_smallest_int_is_exact(answer):
  assert _solve.smallest_int(lambda n: n >= answer, start=1) == answer
  assert _solve.smallest_int(lambda n: n >= answer, start=16,
                             below=0) == answer
  with pytest.raises(ValueError, match='cap'):
    _solve.smallest_int(lambda n: n >= 10**6, start=1, ceiling=100,
                        unreachable=_raise('cap'))


def _raise(message):
  def unreachable(_):
    raise ValueError(message)
  return unreachable


CALIBRATIONS = {
    'calibrate': lambda: dpjax.accounting.calibrate(
        dpjax.accounting.gaussian_event, 4.0, 1e-5, steps=10),
    'calibrate_distributed_dp': lambda: dpjax.distributed.
    calibrate_distributed_dp('ddg', epsilon=4.0, delta=1e-5, num_clients=4,
                             dimension=8, bits=16, l2_norm_clip=1.0),
    'calibrate_decentralized': lambda: dpjax.distributed.
    calibrate_decentralized(dpjax.distributed.DecentralizedPrivacy(
        'qdpsgd1', 2.0, 0.5, 100, amplified=False), np.full((3, 2), 10),
                            4.0, 1e-5),
}


def test_every_calibrate_function_is_covered_here():
  public = {n for sub in ('accounting', 'transforms', 'distributed',
                          'nonparametric', 'sampling')
            for n in getattr(dpjax, sub).__all__ if n.startswith('calibrate')}
  assert public == set(CALIBRATIONS)


@pytest.mark.parametrize('name', sorted(CALIBRATIONS))
def test_every_calibrate_function_runs_on_the_one_solver(name, monkeypatch):
  used = []
  for solver in ('smallest_float', 'smallest_int'):
    real = getattr(_solve, solver)
    monkeypatch.setattr(_solve, solver, lambda *a, _r=real, _s=solver, **k: (
        used.append(_s), _r(*a, **k))[1])
  result = CALIBRATIONS[name]()
  assert used, f'{name} does not use dpjax._solve'
  assert result is not None and not (isinstance(result, float)
                                     and math.isnan(result))
