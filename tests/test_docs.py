"""Docstring examples of every dpjax module, and README's example, must run."""

import doctest
import importlib
import pathlib
import pkgutil
import re

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import dpjax

MODULES = sorted(m.name for m in pkgutil.walk_packages(dpjax.__path__,
                                                       'dpjax.'))
# Modules without examples of their own (plumbing re-exported elsewhere).
NO_EXAMPLES = {'dpjax._validate', 'dpjax.accounting'}
README = pathlib.Path(__file__).resolve().parents[1] / 'README.md'


@pytest.mark.parametrize('name', MODULES)
def test_docstring_examples(name):
  module = importlib.import_module(name)
  globs = dict(vars(module))
  globs.update(vars(dpjax.accounting))
  globs.update(jax=jax, jnp=jnp, np=np, optax=optax, dpjax=dpjax,
               dp_accounting=dp_accounting)
  result = doctest.testmod(module, extraglobs=globs, verbose=False,
                           optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 or name in NO_EXAMPLES, f'{name} has no examples'
  assert result.failed == 0


def test_readme_example_runs_as_written():
  blocks = re.findall(r'```python\n(.*?)```', README.read_text(), re.S)
  assert blocks, 'README.md has no python example'
  for block in blocks:
    exec(compile(block, str(README), 'exec'), {})  # pylint: disable=exec-used


def test_experiments_import_public_dpjax_names_only():
  """Experiments use dpjax's public API (DESIGN.md, Conventions 11)."""
  root = README.parent / 'experiments'
  private = re.compile(r'^\s*(from dpjax(\.\w+)* import _|import dpjax(\.\w+)*\._'
                       r'|from dpjax(\.\w+)*\._)|dpjax(\.[a-z]\w*)*\._\w', re.M)
  offenders = [str(p.relative_to(root.parent)) for p in root.rglob('*.py')
               if private.search(p.read_text())]
  assert not offenders, offenders
