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


DOCS = (README, README.parent / 'BUILD_NOTES.md')


def _blocks(language):
  return [(doc.name, block) for doc in DOCS
          for block in re.findall(rf'```{language}\n(.*?)```', doc.read_text(),
                                  re.S)]


def test_readme_quickstart_is_short():
  (_, first), *_ = _blocks('python')
  assert len(first.strip().splitlines()) <= 25


@pytest.mark.parametrize('doc, block', _blocks('python'))
def test_python_blocks_run_as_written(doc, block):
  exec(compile(block, doc, 'exec'), {})  # pylint: disable=exec-used


def _check_command(line, makefile):
  """A documented shell command names a real make target or parses as a CLI
  call with valid arguments (without running it)."""
  words = line.split()
  if words[0] == 'make':
    assert re.search(rf'^{words[1]}:', makefile, re.M), line
  elif words[:3] == ['python', '-m', 'experiments']:
    from experiments import __main__ as cli  # pylint: disable=import-outside-toplevel
    if cli._wants_run_help(words[3:]):  # pylint: disable=protected-access
      assert cli.experiment_help(words[4]), line
      return
    if words[3] == 'run':  # flags checked; one experiment's settings too
      names, mode, _, overrides = cli.parse_run(words[3:])
      if len(names) == 1:
        from experiments import registry  # pylint: disable=import-outside-toplevel
        registry.get(names[0]).configure(mode, **overrides)
    else:
      cli._parser().parse_args(words[3:])  # pylint: disable=protected-access
  else:
    raise AssertionError(f'undocumented command form: {line!r}')


@pytest.mark.parametrize('doc, block', _blocks('sh'))
def test_shell_blocks_name_real_targets_and_valid_arguments(doc, block):
  del doc
  makefile = (README.parent / 'Makefile').read_text()
  for line in block.splitlines():
    line = line.split('#')[0].strip()
    if line:
      _check_command(line, makefile)


def test_experiments_import_public_dpjax_names_only():
  """Experiments use dpjax's public API (BUILD_NOTES.md, Layout and conventions)."""
  root = README.parent / 'experiments'
  private = re.compile(r'^\s*(from dpjax(\.\w+)* import _|import dpjax(\.\w+)*\._'
                       r'|from dpjax(\.\w+)*\._)|dpjax(\.[a-z]\w*)*\._\w', re.M)
  offenders = [str(p.relative_to(root.parent)) for p in root.rglob('*.py')
               if private.search(p.read_text())]
  assert not offenders, offenders
