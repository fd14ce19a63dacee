"""Test setup: the persistent compilation cache, four host CPU devices, strict
dtype promotion and the compile budget (tests/compile_budget.py).

Four devices so that the 4-way client mesh of tests/test_cpsgd.py runs
in-process. The on-disk cache (experiments/compilation_cache.py) is on for
every pytest run, also `python -m pytest tests/test_x.py`:
DPJAX_COMPILATION_CACHE=0 turns it off, DPJAX_COMPILATION_CACHE_DIR moves it.
"""

import gc
import os

from experiments import compilation_cache

os.environ['XLA_FLAGS'] = (
    os.environ.get('XLA_FLAGS', '') + ' --xla_force_host_platform_device_count=4')
# LLVM codegen without its optimization passes (also in the experiments the
# tests start as subprocesses): compiles about a quarter faster. XLA's own
# HLO passes (fusion, layout, buffer assignment) still run, so programs,
# their compiled memory and the tested values keep their meaning. Claims
# that depend on codegen (two different programs agree bit for bit) hold at
# the level users compile at, not always at this one: those tests take the
# `full_optimization` fixture.
os.environ.setdefault('JAX_DISABLE_MOST_OPTIMIZATIONS', '1')
compilation_cache.configure()

import hypothesis  # pylint: disable=g-import-not-at-top,wrong-import-position
import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position

import compile_budget  # pylint: disable=g-import-not-at-top,wrong-import-position
import dpjax  # pylint: disable=g-import-not-at-top,wrong-import-position
from dpjax import audit  # pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update('jax_numpy_dtype_promotion', 'strict')
# Property tests draw the same examples on every run (derived from each
# test's name), so a failure reproduces and the compile budget of the slow
# stage does not move with the draw. DPJAX_HYPOTHESIS_RANDOM=1 explores anew.
hypothesis.settings.register_profile(
    'fixed', derandomize=not os.environ.get('DPJAX_HYPOTHESIS_RANDOM'))
hypothesis.settings.load_profile('fixed')
jax.config.update('jax_platforms', 'cpu')


def pytest_addoption(parser):
  compile_budget.addoption(parser)


def pytest_configure(config):
  compile_budget.register(config)


def pytest_collection_modifyitems(items):
  """Keeps each module in one pytest-xdist worker (``--dist loadgroup``),
  except tests marked ``spread``: heavy, independent programs (an experiment
  on one dataset, one audit case) that go to whichever worker is free."""
  for item in items:
    if item.get_closest_marker('spread') is None:
      item.add_marker(pytest.mark.xdist_group(item.nodeid.split('::')[0]))


@pytest.fixture(autouse=True)
def _fresh_programs_for_spread_tests(request):
  """A spread test compiles from empty in-memory caches and leaves them
  empty, so its module's compile count does not depend on which worker ran
  it or what ran there before."""
  spread = request.node.get_closest_marker('spread') is not None
  if spread:
    _forget_programs()
  yield
  if spread:
    _forget_programs()


def _forget_programs():
  """Empties JAX's in-memory caches and the audit cases built in this
  process (building one compiles programs: a module that reused another's
  cases would count fewer compilations than it costs alone)."""
  jax.clear_caches()
  audit.audit_case.cache_clear()
  audit.audit_cases.cache_clear()


@pytest.fixture
def standard_draw():
  """``draw(noise_state, like)``: the standard normal draw z of the last
  step of an ``add_dpsgd_noise`` state, shaped like ``like``; the step's
  noise is sigma x bound x z (under a strategy, the t-th Z before C^{-1}).

  The derivation ``add_dpsgd_noise`` documents: the stream (sigma folded
  in) at the step, with the sum's bound folded in.
  """
  def draw(state, like):
    key, step = state.noise_handle()
    key = dpjax._keys.fold_public(jax.random.fold_in(key, step),
                                  state.l2_sensitivity)
    return dpjax.noise.tree_noise(dpjax.noise.gaussian, key, like,
                                  stddev=1.0)
  return draw


@pytest.fixture
def full_optimization():
  """Compiles the test's programs at JAX's default optimization level."""
  before = jax.config.read('jax_disable_most_optimizations')
  jax.clear_caches()  # no program compiled at the other level is reused
  jax.config.update('jax_disable_most_optimizations', False)
  yield
  jax.clear_caches()
  jax.config.update('jax_disable_most_optimizations', before)


@pytest.fixture(autouse=True, scope='module')
def _release_compiled_programs():
  """Drops each test module's compiled programs when the module is done.

  Every XLA CPU executable keeps its own memory mappings; a single process
  running the whole suite otherwise accumulates tens of thousands of them
  and hits the kernel's per-process map limit (vm.max_map_count, 65530 by
  default), where LLVM crashes inside a later compilation. Clearing before
  the module too makes its compile count independent of what ran before it
  (the first module of a process would otherwise reuse programs compiled
  while collecting).
  """
  _forget_programs()
  yield
  _forget_programs()
  gc.collect()
