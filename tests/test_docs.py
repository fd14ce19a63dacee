"""Docstring examples of every dpjax module, and README's example, must run;
every public name is in the API reference, and every relative link resolves."""

import doctest
import importlib
import os
import pathlib
import pkgutil
import re
import subprocess
import sys
import zlib

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
ROOT = README.parent
sys.path.insert(0, str(ROOT / 'docs'))
import apipages  # pylint: disable=g-import-not-at-top,wrong-import-position

SUBPACKAGES = apipages.subpackages()


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


# The task guides: each is a recipe whose code blocks run as written.
GUIDES = sorted((ROOT / 'docs' / 'guides').glob('*.md'))
DOCS = (README, README.parent / 'BUILD_NOTES.md', *GUIDES)


def _blocks(language):
  return [(str(doc.relative_to(ROOT)), block) for doc in DOCS
          for block in re.findall(rf'```{language}\n(.*?)```', doc.read_text(),
                                  re.S)]


def test_readme_is_short_and_starts_with_the_quickstart():
  """A newcomer reads the quickstart first; details live in docs/."""
  text = README.read_text()
  assert len(text.encode()) <= 15_000
  assert re.findall(r'^## (.+)$', text, re.M)[0].startswith('Quickstart')


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


def test_every_guide_has_a_recipe_and_is_in_the_guides_index():
  index = (ROOT / 'docs' / 'guides' / 'index.md').read_text()
  guides = [g for g in GUIDES if g.name != 'index.md']
  assert guides
  for guide in guides:
    assert re.search(r'```python\n', guide.read_text()), guide.name
    assert guide.name in index, f'{guide.name} is not in guides/index.md'


def test_links_into_the_api_reference_name_its_pages():
  """``project:`` links (the site's own pages, which Sphinx does not check
  here) reach a page the API reference writes."""
  pages = {'index', 'dpjax', *SUBPACKAGES}
  api = ROOT / 'docs' / apipages.API_DIR
  for doc in sorted((ROOT / 'docs').rglob('*.md')):
    for target in re.findall(r'\]\(project:([^)#\s]+)', doc.read_text()):
      path = (doc.parent / target).resolve()
      assert path.parent == api and path.suffix == '.rst' and (
          path.stem in pages), f'{doc.relative_to(ROOT)}: {target}'


@pytest.mark.parametrize('doc, block', _blocks('sh'))
def test_shell_blocks_name_real_targets_and_valid_arguments(doc, block):
  del doc
  makefile = (README.parent / 'Makefile').read_text()
  for line in block.splitlines():
    line = line.split('#')[0].strip()
    if line:
      _check_command(line, makefile)


def test_experiments_import_public_dpjax_names_only():
  """Experiments use dpjax's public API only (docs/decisions.md)."""
  root = README.parent / 'experiments'
  # a dunder (dpjax.__version__) is public
  private = re.compile(r'^\s*(from dpjax(\.\w+)* import _(?!_)'
                       r'|import dpjax(\.\w+)*\._(?!_)'
                       r'|from dpjax(\.\w+)*\._(?!_))'
                       r'|dpjax(\.[a-z]\w*)*\._(?!_)\w', re.M)
  offenders = [str(p.relative_to(root.parent)) for p in root.rglob('*.py')
               if private.search(p.read_text())]
  assert not offenders, offenders


def test_subpackages_are_found_at_run_time():
  assert {'dpjax.accounting', 'dpjax.transforms'} <= set(SUBPACKAGES)
  assert SUBPACKAGES == sorted(
      f'dpjax.{n}' for n in dpjax.__all__
      if isinstance(getattr(dpjax, n), type(dpjax)))


@pytest.mark.parametrize('name', ['dpjax'] + SUBPACKAGES)
def test_every_public_name_is_documented(name):
  """A docstring of its own; a constant, the comment above it."""
  assert not apipages.undocumented(name), (
      f'{name}: public names without documentation')


def test_a_name_without_documentation_is_reported(tmp_path, monkeypatch):
  package = tmp_path / 'undoc_pkg'
  package.mkdir()
  (package / '__init__.py').write_text(
      '"""A package."""\n'
      '# Documented by this comment.\nLIMIT = 3\n\nBARE = 4\n'
      'def f():\n  """Documented."""\n'
      'def g():\n  pass\n'
      'import dataclasses\n@dataclasses.dataclass\nclass C:\n  x: int = 0\n'
      "__all__ = ['BARE', 'C', 'LIMIT', 'f', 'g']\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  assert apipages.undocumented('undoc_pkg') == ['BARE', 'C', 'g']


@pytest.mark.parametrize('name', SUBPACKAGES)
def test_reference_page_lists_every_public_name(name):
  page = apipages.subpackage_page(name)
  listed = set(re.findall(
      rf'^\.\. (?!automodule)(?:py:)?\w+:: {re.escape(name)}\.(\w+)$', page,
      re.M))
  assert listed == {n for n, _ in apipages.public_names(name)}


def test_a_subpackage_in_parts_has_one_section_per_part():
  page = apipages.subpackage_page('dpjax.distributed')
  for part in apipages.parts('dpjax.distributed'):
    start = page.index(f'.. automodule:: {part}\n')
    end = page.find('.. automodule::', start + 1)
    section = page[start:end if end > 0 else None]
    listed = set(re.findall(
        r'^\.\. (?!automodule)(?:py:)?\w+:: dpjax\.distributed\.(\w+)$',
        section, re.M))
    assert listed == set(importlib.import_module(part).__all__), part


def test_reference_has_one_page_per_subpackage(tmp_path):
  pages = apipages.write_pages(tmp_path)
  assert pages == sorted(['index', 'dpjax'] + SUBPACKAGES)
  index = (tmp_path / 'index.rst').read_text()
  assert all(f'   {p}\n' in index for p in ['dpjax'] + SUBPACKAGES)
  top = (tmp_path / 'dpjax.rst').read_text()
  assert all(f'``dpjax.{n}``' in top for n in dpjax.__all__)


def _inventory(path):
  """Object names of a Sphinx objects.inv (format version 2)."""
  data = path.read_bytes()
  for _ in range(4):  # header lines
    data = data[data.index(b'\n') + 1:]
  return {line.split(' ', 1)[0]
          for line in zlib.decompress(data).decode().splitlines()}


@pytest.mark.slow
def test_make_docs_builds_every_public_name_offline(tmp_path):
  """What ``make docs`` runs; warnings (a malformed docstring) fail it."""
  pytest.importorskip(
      'sphinx', reason='the docs extra is not installed (pip install -e '
      '".[docs]"; `make test-slow` installs it): the site was not built')
  pytest.importorskip('myst_parser', reason='the docs extra is not installed')
  env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS='cpu')
  build = subprocess.run(
      [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q', '-b',
       'html', '-d', str(tmp_path / 'doctrees'), str(ROOT / 'docs'),
       str(tmp_path / 'html')], env=env, capture_output=True, text=True,
      check=False)
  assert build.returncode == 0, build.stderr[-4000:]
  documented = _inventory(tmp_path / 'html' / 'objects.inv')
  for package in SUBPACKAGES:
    names = {f'{package}.{n}' for n, _ in apipages.public_names(package)}
    assert names <= documented, sorted(names - documented)
    assert (tmp_path / 'html' / 'api' / f'{package}.html').exists()
  assert (tmp_path / 'html' / 'quickstart.html').exists()

