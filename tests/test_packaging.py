"""The package ships what a user installing it with pip needs."""

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
