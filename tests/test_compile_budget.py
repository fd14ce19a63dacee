"""The compile budget (tests/compile_budget.py) counts and enforces, also
under pytest-xdist: a tiny suite run in a subprocess against budget files."""

import json
import os
import subprocess
import sys

import pytest

import compile_budget  # tests/ is on the path: the conftest loads it too

HERE = os.path.dirname(os.path.abspath(__file__))
# Two jitted programs plus the eager ops that build their inputs.
TINY_MODULE = """
import jax
import jax.numpy as jnp


def test_two_programs():
  x = jnp.arange(3.0)
  jax.jit(lambda v: v + 1)(x).block_until_ready()
  jax.jit(lambda v: v * 2)(x).block_until_ready()


def test_no_program():
  assert 1 + 1 == 2
"""
CONFTEST = """
import compile_budget


def pytest_addoption(parser):
  compile_budget.addoption(parser)


def pytest_configure(config):
  compile_budget.register(config)
"""


def _run(tmp_path, budget, *args):
  (tmp_path / 'test_tiny.py').write_text(TINY_MODULE)
  (tmp_path / 'conftest.py').write_text(CONFTEST)
  budget_file = tmp_path / 'budget.json'
  if budget is not None:
    budget_file.write_text(json.dumps({'default': {'test_tiny.py': budget}}))
  env = dict(os.environ, PYTHONPATH=HERE, DPJAX_COMPILATION_CACHE='0')
  proc = subprocess.run(
      [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-m',
       'not slow', '--compile-budget-file', str(budget_file), *args],
      cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
  return proc, budget_file


def _count(output):
  rows = [l.split() for l in output.splitlines()]
  return next(int(r[2]) for r in rows
              if r[:1] == ['test_tiny.py'] and r[2:3] and r[2].isdigit())


@pytest.fixture(scope='module')
def measured(tmp_path_factory):
  """The tiny module's compilations, and the budget file an update wrote."""
  proc, budget_file = _run(tmp_path_factory.mktemp('update'), None,
                           '--compile-budget-update')
  assert proc.returncode == 0, proc.stdout + proc.stderr
  return _count(proc.stdout), json.loads(budget_file.read_text())


def test_update_writes_the_count_plus_slack(measured):
  count, budgets = measured
  assert count >= 2  # the two jitted programs at least
  assert budgets == {
      'default': {'test_tiny.py': compile_budget.budget_for(count)}}


def test_a_module_over_its_budget_fails_the_run(tmp_path, measured):
  count, _ = measured
  proc, _ = _run(tmp_path, count - 1)  # a hand-written budget below the count
  assert proc.returncode == 1, proc.stdout
  assert 'OVER BUDGET test_tiny.py' in proc.stdout
  assert '2 passed' in proc.stdout  # the tests themselves passed


def test_a_module_without_a_budget_fails(tmp_path):
  proc, _ = _run(tmp_path, None)
  assert proc.returncode == 1 and 'no budget' in proc.stdout


def test_xdist_workers_count_alike_and_pass_within_the_budget(tmp_path,
                                                              measured):
  count, _ = measured
  proc, _ = _run(tmp_path, count, '-n', '2', '--dist', 'loadfile')
  assert proc.returncode == 0, proc.stdout
  assert _count(proc.stdout) == count
