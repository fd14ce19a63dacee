"""Finished rows of a long experiment, kept so that it can run in parts.

A training run resumes from its checkpoints (``checkpoint.py``); an
experiment whose rows are each one long computation (qdpsgd: one row trains
every seed for all T rounds; audit: one case on every seed) keeps each
finished row's raw outputs instead.
A row's file is named by the SHA-256 of the run's whole configuration, the
row's own settings (its sigma included) and what computed it (the package
versions and device of ``runner.versions()`` and a digest of the dpjax and
experiments sources), so a row computed under any other configuration,
code or device is never read: it is just computed anew. The file also holds those settings and a digest of the
arrays; a row whose file does not match them, or cannot be read, is set
aside (``corrupt-<name>``) with a warning and computed again.

Only the training outputs are kept. Everything derived from them (epsilon
from the noise and batch sizes that ran, the rows and curves) is recomputed
on every run, so a resumed run writes the same results.json as one that
ran straight through.
"""

import functools
import hashlib
import json
import os
from typing import Any, Callable
import warnings

import numpy as np

import dpjax
import experiments
from experiments.common import checkpoint
from experiments.common import runner

_META = '__row__'


def _canonical(value: Any) -> str:
  return json.dumps(value, sort_keys=True, default=str)


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
  """SHA-256 of every .py file of the dpjax and experiments packages."""
  h = hashlib.sha256()
  for package in (dpjax, experiments):
    root = os.path.dirname(os.path.abspath(package.__file__))
    for folder, _, files in sorted(os.walk(root)):
      for name in sorted(f for f in files if f.endswith('.py')):
        path = os.path.join(folder, name)
        h.update(os.path.relpath(path, root).encode() + b'\0')
        with open(path, 'rb') as f:
          h.update(f.read() + b'\0')
  return h.hexdigest()


class RowCache:
  """The finished rows of one run under ``directory``.

  Args:
    directory: where the row files go (created on the first save).
    config: the run's whole configuration (JSON-ready).
  """

  def __init__(self, directory: str, config: dict[str, Any]):
    self.directory = directory
    self.config = json.loads(_canonical(config))
    self.provenance = dict(versions=runner.versions(), source=source_digest())

  def _meta(self, row: dict[str, Any]) -> str:
    return _canonical(dict(config=self.config, row=row,
                           provenance=self.provenance))

  def path(self, row: dict[str, Any]) -> str:
    name = hashlib.sha256(self._meta(row).encode()).hexdigest()[:32]
    return os.path.join(self.directory, f'{name}.npz')

  def get(self, row: dict[str, Any],
          compute: Callable[[], dict[str, np.ndarray]]
          ) -> dict[str, np.ndarray]:
    """The row's arrays: from its file when a good one exists, else
    ``compute()``, saved before it is returned."""
    path = self.path(row)
    if os.path.exists(path):
      try:
        return self._load(path, row)
      except Exception as e:  # pylint: disable=broad-except
        aside = os.path.join(self.directory,
                             'corrupt-' + os.path.basename(path))
        warnings.warn(f'Row file {path} is unreadable or does not match its '
                      f'row ({type(e).__name__}: {e}); moved to {aside}, '
                      'computing the row again.')
        os.replace(path, aside)
    out = {k: np.asarray(v) for k, v in compute().items()}
    if _META in out:
      raise ValueError(f'A row may not hold an array called {_META!r}.')
    self._save(path, row, out)
    return out

  def _load(self, path: str, row: dict[str, Any]) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
      stored = json.loads(str(f[_META]))
      out = {k: f[k] for k in f.files if k != _META}
    if stored.get('meta') != self._meta(row):
      raise ValueError('written for another configuration or row')
    if stored.get('digest') != checkpoint.digest(out):
      raise ValueError('its arrays do not match their digest')
    return out

  def _save(self, path: str, row: dict[str, Any],
            out: dict[str, np.ndarray]) -> None:
    os.makedirs(self.directory, exist_ok=True)
    meta = json.dumps(dict(meta=self._meta(row),
                           digest=checkpoint.digest(out)))
    tmp = path + '.tmp.npz'
    np.savez(tmp, **out, **{_META: np.asarray(meta)})
    os.replace(tmp, path)  # a killed save leaves no half-written row
