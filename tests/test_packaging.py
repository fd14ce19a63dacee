"""The package ships what a user installing it with pip needs."""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_typed_marker_is_shipped():
  project = tomllib.loads((ROOT / 'pyproject.toml').read_text())
  assert (ROOT / 'dpjax' / 'py.typed').is_file()
  assert 'py.typed' in project['tool']['setuptools']['package-data']['dpjax']


def test_license_is_an_spdx_string_not_a_deprecated_table():
  project = tomllib.loads((ROOT / 'pyproject.toml').read_text())
  assert project['project']['license'] == 'Apache-2.0'
