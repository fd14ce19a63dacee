"""lm_finetune's text: the installed Python standard library, as bytes.

The corpus is the source of the standard library of the Python that runs
the experiment (``sysconfig.get_paths()['stdlib']``; Python Software
Foundation License, its ``LICENSE.txt``), read as bytes (byte-level
tokens, vocabulary 256: no tokenizer to fit). Third-party code
(``site-packages``) is never read. The split is by file and by domain:

* public: the library's modules (every ``*.py`` outside ``test/``), for
  non-private pretraining;
* private: the library's own test suite (``test/``), split by file into
  train / validation / test (a file's bytes go to one part only, chosen
  from a hash of its path, so no window straddles two parts).

Each part is cut into non-overlapping windows of ``seq_len + 1`` bytes (the
inputs and, shifted by one, the targets); ``windows`` keeps a
seed-determined subset of a part's windows. ``Corpus.digest`` is the
SHA-256 of every window kept, so two runs can tell whether they read the
same text (it changes with the Python version).
"""

import dataclasses
import hashlib
import os
import sys
import sysconfig

import numpy as np

PRIVATE_DIR = 'test'  # under the stdlib root: the private domain
# Private files per 100 (by path hash) that go to validation and test.
VALIDATION_PERCENT, TEST_PERCENT = 10, 20


class CorpusUnavailableError(RuntimeError):
  """The standard library's source or its test suite is not installed."""


@dataclasses.dataclass(frozen=True)
class Corpus:
  """Windows [N, seq_len + 1] of uint8 per part, and where they came from."""
  public: np.ndarray
  train: np.ndarray
  val: np.ndarray
  test: np.ndarray
  source: str  # the corpus in words: Python version, files, bytes
  digest: str  # SHA-256 of every window kept, in part order


def _files(root: str) -> tuple[list[str], list[str]]:
  """(public, private) ``*.py`` paths relative to ``root``, sorted."""
  public, private = [], []
  for folder, dirs, names in os.walk(root):
    rel = os.path.relpath(folder, root)
    dirs[:] = sorted(d for d in dirs
                     if not (rel == '.' and d == 'site-packages')
                     and d != '__pycache__')
    for name in sorted(names):
      if name.endswith('.py'):
        path = os.path.normpath(os.path.join(rel, name))
        (private if path.split(os.sep)[0] == PRIVATE_DIR
         else public).append(path)
  return public, private


def _private_part(path: str) -> str:
  """'train', 'val' or 'test' for a private file, from its path's hash."""
  bucket = int(hashlib.sha256(path.encode()).hexdigest(), 16) % 100
  if bucket < VALIDATION_PERCENT:
    return 'val'
  return 'test' if bucket < VALIDATION_PERCENT + TEST_PERCENT else 'train'


def _windows(root: str, paths: list[str], length: int) -> np.ndarray:
  """Every non-overlapping window of ``length`` bytes of each file."""
  out = []
  for path in paths:
    with open(os.path.join(root, path), 'rb') as f:
      data = np.frombuffer(f.read(), np.uint8)
    n = len(data) // length
    if n:
      out.append(data[:n * length].reshape(n, length))
  return (np.concatenate(out) if out
          else np.zeros((0, length), np.uint8))


def _subset(windows: np.ndarray, n: int, rng: np.random.Generator,
            part: str) -> np.ndarray:
  if len(windows) < n:
    raise CorpusUnavailableError(
        f'Expected at least {n} {part} windows, the corpus has '
        f'{len(windows)}.')
  return windows[np.sort(rng.choice(len(windows), n, replace=False))]


def load(seq_len: int, sizes: dict[str, int], seed: int,
         root: str | None = None) -> Corpus:
  """The corpus's windows: ``sizes`` maps each part (public, train, val,
  test) to how many windows to keep, drawn with ``seed``."""
  if sorted(sizes) != ['public', 'test', 'train', 'val']:
    raise ValueError(f'Expected sizes for public, train, val and test, got '
                     f'{sorted(sizes)}.')
  root = root or sysconfig.get_paths()['stdlib']
  public, private = _files(root)
  if not public or not private:
    raise CorpusUnavailableError(
        f'Expected the standard library source and its test suite under '
        f'{root!r} (some distributions ship the tests as a separate '
        'package, e.g. libpython3-testsuite).')
  parts = dict(public=public, train=[], val=[], test=[])
  for path in private:
    parts[_private_part(path)].append(path)
  rng = np.random.default_rng(seed)
  kept = {part: _subset(_windows(root, paths, seq_len + 1), sizes[part],
                        rng, part) for part, paths in parts.items()}
  digest = hashlib.sha256()
  for part in ('public', 'train', 'val', 'test'):
    digest.update(kept[part].tobytes())
  version = '.'.join(map(str, sys.version_info[:3]))
  source = (f'the Python {version} standard library (PSF License): '
            f'{len(public)} module files public, {len(private)} test-suite '
            'files private')
  return Corpus(source=source, digest=digest.hexdigest(), **kept)
