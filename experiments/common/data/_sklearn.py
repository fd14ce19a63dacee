"""scikit-learn's bundled sets: digits images and the tabular sets.

This module holds ``SKLEARN_DATASETS`` and their loaders (``LOADERS``): each
returns the whole set as ``(x, y, num_classes, tabular)``, ``digits`` as
``[N, 8, 8, 1]`` images scaled by 1/16, ``iris``, ``wine`` and
``breast_cancer`` as classification tables and ``diabetes`` as a regression
table (``num_classes`` None); ``load`` splits and standardizes them.
"""

from typing import Any, Callable

import numpy as np
from sklearn import datasets as sk_datasets

SKLEARN_DATASETS = ('digits', 'iris', 'wine', 'breast_cancer', 'diabetes')


def _digits() -> tuple[np.ndarray, np.ndarray, int, bool]:
  d = sk_datasets.load_digits()
  x = (d.images / 16.0).astype(np.float32)[..., None]
  return x, d.target.astype(np.int32), 10, False


def _tabular(loader: Callable[..., Any], regression: bool = False
             ) -> Callable[[], tuple[np.ndarray, np.ndarray, int | None, bool]]:

  def load_fn():
    x, y = loader(return_X_y=True)
    if regression:
      return x, np.asarray(y, np.float32), None, True
    return x, np.asarray(y, np.int32), int(np.max(y)) + 1, True

  return load_fn


LOADERS = {
    'digits': _digits,
    'iris': _tabular(sk_datasets.load_iris),
    'wine': _tabular(sk_datasets.load_wine),
    'breast_cancer': _tabular(sk_datasets.load_breast_cancer),
    'diabetes': _tabular(sk_datasets.load_diabetes, regression=True),
}
