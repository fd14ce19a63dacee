"""Test setup: four host CPU devices and strict dtype promotion.

Four devices so that the 4-way client mesh of tests/test_cpsgd.py runs
in-process.
"""

import os

os.environ['XLA_FLAGS'] = (
    os.environ.get('XLA_FLAGS', '') + ' --xla_force_host_platform_device_count=4')

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update('jax_numpy_dtype_promotion', 'strict')
jax.config.update('jax_platforms', 'cpu')
