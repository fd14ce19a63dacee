"""Reading prepared tfds image sets (no download, no TensorFlow).

This module holds the tfds path of ``load``: ``TFDS_DATASETS``, the bundled
set each falls back to (``FALLBACKS``), the data directory lookup (argument,
``$TFDS_DATA_DIR``, ``~/tensorflow_datasets``) and ``load_tfds``, which reads
both splits through ``tfds.data_source`` (random access to prepared
ArrayRecord files) with ``download=False`` and raises ``TfdsUnavailable`` when
the data is not prepared, so that ``load`` can fall back.
"""

import os
from typing import Any

import numpy as np

from experiments.common.data._dataset import Dataset
from experiments.common.data._dataset import subset

TFDS_DATASETS = ('mnist', 'fashion_mnist', 'cifar10', 'svhn_cropped')

# Every tfds set falls back to the only bundled image set.
FALLBACKS = {name: 'digits' for name in TFDS_DATASETS}


class TfdsUnavailable(Exception):
  """The tfds set cannot be read here; ``reason`` says why."""

  def __init__(self, reason: str):
    super().__init__(reason)
    self.reason = reason


def tfds_data_dir(data_dir: str | None) -> str:
  """``data_dir``, else ``$TFDS_DATA_DIR``, else ``~/tensorflow_datasets``."""
  if data_dir:
    return os.fspath(data_dir)
  if os.environ.get('TFDS_DATA_DIR'):
    return os.environ['TFDS_DATA_DIR']
  return os.path.expanduser(os.path.join('~', 'tensorflow_datasets'))


def prepare_hint(name: str, data_dir: str) -> str:
  """How a user prepares ``name`` for ``data_dir`` (tfds cannot download here)."""
  return (f'prepare it on a machine with internet access with `pip install '
          f'tensorflow tensorflow-datasets && tfds build {name} --data_dir '
          f'DIR`, then copy DIR to {data_dir} (or set TFDS_DATA_DIR=DIR)')


def open_sources(name: str, data_dir: str) -> dict[str, Any]:
  """Both splits of a prepared tfds set; raises ``TfdsUnavailable``."""
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise TfdsUnavailable(f'tensorflow_datasets is not installed: {e}') from e
  sources = {}
  for split in ('train', 'test'):
    try:
      sources[split] = tfds.data_source(name, split=split, data_dir=data_dir,
                                        download=False)
      len(sources[split])
    except Exception as e:  # pylint: disable=broad-exception-caught
      raise TfdsUnavailable(f'{type(e).__name__}: {e}') from e
  return sources


def load_tfds(name: str, data_dir: str, seed: int,
              max_train: int | None = None,
              max_test: int | None = None) -> Dataset:
  """Reads both splits of a prepared tfds set into numpy arrays."""
  sources = open_sources(name, data_dir)
  rng = np.random.default_rng(seed)
  x_train, y_train = _read_records(sources['train'], subset(
      len(sources['train']), max_train, 'max_train', rng))
  x_test, y_test = _read_records(sources['test'], subset(
      len(sources['test']), max_test, 'max_test', rng))
  try:
    num_classes = int(
        sources['train'].dataset_info.features['label'].num_classes)
  except (AttributeError, KeyError, TypeError):
    num_classes = 10
  return Dataset(name=name, requested=name, x_train=x_train, y_train=y_train,
                 x_test=x_test, y_test=y_test, num_classes=num_classes,
                 source='tfds', extras={'data_dir': data_dir})


def _read_records(source: Any, indices: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
  records = [source[int(i)] for i in indices]
  if not records:
    raise TfdsUnavailable('the split is empty')
  images = np.stack([np.asarray(r['image']) for r in records])
  labels = np.asarray([r['label'] for r in records], dtype=np.int32)
  if images.ndim == 3:
    images = images[..., None]
  return (images.astype(np.float32) / np.float32(255.0)), labels
