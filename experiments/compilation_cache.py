"""JAX's persistent compilation cache for the tests, experiments and benchmarks.

Almost all of the test suite's time, and much of a quick experiment's, is XLA
compilation. JAX can keep compiled programs on disk and reuse them in the
next process; its default thresholds skip CPU programs (only those taking
over a second to compile are written), so ``configure`` lowers them to zero.

The cache lives outside the repository, per user:
``$XDG_CACHE_HOME/dpjax/jax-compilation-cache`` (``~/.cache/dpjax/...`` when
``XDG_CACHE_HOME`` is unset). Environment variables:

- ``DPJAX_COMPILATION_CACHE_DIR=PATH``: use PATH instead;
- ``DPJAX_COMPILATION_CACHE=0``: no persistent cache (a cold run).

A ``JAX_COMPILATION_CACHE_DIR`` the user set wins over the directory choice. Results never
depend on the cache: an entry is the executable XLA would compile for the
same program, flags, devices and JAX version (all part of its key).

Importing ``experiments`` calls ``configure()``, before JAX is imported
wherever the entry point is ``python -m experiments...``; the tests call it
from ``tests/conftest.py``. This module does not import JAX.
"""

import os
import sys

DISABLE_VAR = 'DPJAX_COMPILATION_CACHE'
DIR_VAR = 'DPJAX_COMPILATION_CACHE_DIR'
_OFF = ('0', 'false', 'no', 'off')


def default_dir(environ=os.environ) -> str:
  """The per-user cache directory (XDG base directory convention)."""
  base = environ.get('XDG_CACHE_HOME') or os.path.join(
      os.path.expanduser('~'), '.cache')
  return os.path.join(base, 'dpjax', 'jax-compilation-cache')


def cache_dir(environ=os.environ) -> str | None:
  """The directory ``configure`` uses, or None when the cache is off."""
  if environ.get(DISABLE_VAR, '').strip().lower() in _OFF:
    return None
  return (environ.get('JAX_COMPILATION_CACHE_DIR') or environ.get(DIR_VAR)
          or default_dir(environ))


def configure(environ=os.environ) -> str | None:
  """Turns the persistent cache on (or off) for this process; returns its dir.

  Sets JAX's environment variables, which JAX reads when it is imported, and
  updates ``jax.config`` directly when JAX is already imported.
  """
  path = cache_dir(environ)
  settings = {
      'jax_enable_compilation_cache': path is not None,
      # Cache every program: CPU programs compile in well under a second.
      'jax_persistent_cache_min_compile_time_secs': 0.0,
      'jax_persistent_cache_min_entry_size_bytes': -1,
  }
  if path is not None:
    settings['jax_compilation_cache_dir'] = path
  for name, value in settings.items():
    environ[name.upper()] = str(value)
  if 'jax' in sys.modules:
    jax = sys.modules['jax']
    for name, value in settings.items():
      jax.config.update(name, value)
  return path
