"""Test setup: four host CPU devices and strict dtype promotion.

Four devices so that the 4-way client mesh of tests/test_cpsgd.py runs
in-process.
"""

import gc
import os

os.environ['XLA_FLAGS'] = (
    os.environ.get('XLA_FLAGS', '') + ' --xla_force_host_platform_device_count=4')

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update('jax_numpy_dtype_promotion', 'strict')
jax.config.update('jax_platforms', 'cpu')


@pytest.fixture(autouse=True, scope='module')
def _release_compiled_programs():
  """Drops each test module's compiled programs when the module is done.

  Every XLA CPU executable keeps its own memory mappings; a single process
  running the whole suite otherwise accumulates tens of thousands of them
  and hits the kernel's per-process map limit (vm.max_map_count, 65530 by
  default), where LLVM crashes inside a later compilation.
  """
  yield
  jax.clear_caches()
  gc.collect()
