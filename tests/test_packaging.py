"""The package ships what a user installing it with pip needs."""

import ast
import pathlib
import subprocess
import sys
import tomllib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_typed_marker_is_shipped():
  project = tomllib.loads((ROOT / 'pyproject.toml').read_text())
  assert (ROOT / 'dpjax' / 'py.typed').is_file()
  assert 'py.typed' in project['tool']['setuptools']['package-data']['dpjax']


def test_license_is_an_spdx_string_not_a_deprecated_table():
  project = tomllib.loads((ROOT / 'pyproject.toml').read_text())
  assert project['project']['license'] == 'Apache-2.0'


@pytest.mark.slow
def test_pip_builds_a_wheel_with_the_library(tmp_path):
  """What `pip install .` installs: a wheel with dpjax, its subpackages and
  the typed marker (built with pip's default build isolation)."""
  proc = subprocess.run(
      [sys.executable, '-m', 'pip', 'wheel', '--no-deps', '-q', str(ROOT),
       '-w', str(tmp_path)], capture_output=True, text=True, timeout=600,
      cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert 'deprecat' not in proc.stderr.lower(), proc.stderr[-2000:]
  (wheel,) = tmp_path.glob('dpjax-*.whl')
  names = set(zipfile.ZipFile(wheel).namelist())
  for required in ('dpjax/py.typed', 'dpjax/__init__.py',
                   'dpjax/nonparametric/__init__.py',
                   'dpjax/accounting/__init__.py'):
    assert required in names


# Import name -> distribution name, where they differ.
_DISTRIBUTIONS = {'dp_accounting': 'dp-accounting', 'attr': 'attrs'}


def _third_party_imports() -> set[str]:
  """Top-level modules that dpjax/ imports and the standard library lacks."""
  names = set()
  for path in (ROOT / 'dpjax').rglob('*.py'):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Import):
        names.update(a.name.split('.')[0] for a in node.names)
      elif isinstance(node, ast.ImportFrom) and node.level == 0:
        names.add(node.module.split('.')[0])
  return {n for n in names if n not in sys.stdlib_module_names
          and n != 'dpjax'}


def test_core_dependencies_are_exactly_what_dpjax_imports():
  """`pip install dpjax` pulls only what the library imports: no
  TensorFlow (tensorflow-datasets serves the experiments' loaders, in the
  experiments extra)."""
  project = tomllib.loads((ROOT / 'pyproject.toml').read_text())
  declared = {d.split('>')[0].split('<')[0].split('=')[0].strip()
              for d in project['project']['dependencies']}
  imported = {_DISTRIBUTIONS.get(n, n) for n in _third_party_imports()}
  # jaxlib is jax's runtime, imported through jax.
  assert declared - {'jaxlib'} == imported
  assert not any('tensorflow' in d for d in declared)
  assert any(d.startswith('tensorflow-datasets')
             for d in project['project']['optional-dependencies']['experiments'])
