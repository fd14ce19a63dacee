"""Datasets for the experiments, as numpy arrays, with an honest fallback.

``load(name)`` returns a ``Dataset`` that says which data actually ran:

* tfds sets (``mnist``, ``fashion_mnist``, ``cifar10``, ``svhn_cropped``) are
  read through ``tfds.data_source`` (random access to prepared ArrayRecord
  files; no TensorFlow needed) from ``data_dir``, else ``$TFDS_DATA_DIR``, else
  the tfds default (``~/tensorflow_datasets``). Nothing is ever downloaded
  (``download=False``). If the data is not prepared there, ``load`` logs one
  plain line (``mnist is not available (no prepared tfds data in DIR); ran
  digits instead``), stores it in ``Dataset.note`` and returns scikit-learn's
  bundled ``digits`` (8x8x1 images, 10 classes). All four tfds sets fall back
  to ``digits``, the only bundled image set: for ``cifar10``/``svhn_cropped``
  this also changes the image shape (32x32x3 -> 8x8x1) and the content
  (objects / house numbers -> handwritten digits), so pick the model from
  ``Dataset.name``/``input_shape``, never from the requested name.
* scikit-learn sets: ``digits`` (images ``[N, 8, 8, 1]`` scaled by 1/16),
  ``iris``, ``wine``, ``breast_cancer`` (classification) and ``diabetes``
  (regression).
* generated sets: ``synthetic`` (``sklearn.datasets.make_classification``),
  ``synthetic_regression`` (a tabular regression problem shaped like the
  Lending Club loans; see ``make_regression_problem``) and
  ``sphere_logistic`` (Huang thesis section 7.4; see ``make_sphere_logistic``).
* a CSV file: ``csv:PATH`` (regression on one numeric column, default
  ``int_rate``; see ``load_csv``); ``is_known`` accepts it, ``DATASETS``
  lists only the named sets.

Conventions: ``x`` is float32; images are NHWC in [0, 1]; tabular features are
standardized with the mean and standard deviation of the train split (stored in
``extras``). Classification labels are int32 in ``[0, num_classes)``;
regression targets are float32. Offline sets are split train/test by ``seed``
(stratified for classification; ``test_fraction=0.2`` by default); the same
seed gives identical arrays. Generated data draws from
``np.random.default_rng(seed)``.

Options common to every set: ``max_train`` / ``max_test`` keep a
seed-determined random subset of that many examples (in original order).

Example:
  >>> ds = load('iris', seed=0)
  >>> ds.x_train.shape, ds.num_classes, ds.task
  ((120, 4), 3, 'classification')
"""

import dataclasses
import logging
import inspect
import math
import os
from typing import Any, Callable

import numpy as np
from sklearn import datasets as sk_datasets
from sklearn import model_selection

TFDS_DATASETS = ('mnist', 'fashion_mnist', 'cifar10', 'svhn_cropped')
SKLEARN_DATASETS = ('digits', 'iris', 'wine', 'breast_cancer', 'diabetes')
GENERATED_DATASETS = ('synthetic', 'synthetic_regression', 'sphere_logistic')
CSV_PREFIX = 'csv:'


DATASETS = TFDS_DATASETS + SKLEARN_DATASETS + GENERATED_DATASETS


def is_known(name: str) -> bool:
  """Whether ``load`` takes this name: one of ``DATASETS`` or ``csv:PATH``."""
  return name in DATASETS or (name.startswith(CSV_PREFIX) and
                              len(name) > len(CSV_PREFIX))


# Every tfds set falls back to the only bundled image set.
FALLBACKS = {name: 'digits' for name in TFDS_DATASETS}

_COMMON_OPTIONS = ('max_train', 'max_test')
_SPLIT_OPTIONS = ('test_fraction',)

_log = logging.getLogger(__name__)


class DatasetUnavailableError(ValueError):
  """A tfds dataset is not prepared locally and fallback was not allowed."""


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
    source: where the data came from: 'tfds', 'sklearn' or 'generated'.
    note: empty, or the plain-English fallback message.
    extras: extra facts about the data (e.g. ``feature_mean``/``feature_std``
      of the train split, the labelling vector ``w`` of ``sphere_logistic``).
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
    line = (f'{self.name} ({self.source}; {len(self.x_train)} train / '
            f'{len(self.x_test)} test; input {self.input_shape}; {classes})')
    if self.fell_back:
      line += f' [{self.note or "requested " + self.requested}]'
    return line

  def __repr__(self) -> str:
    return f'Dataset({self.describe()})'


def load(name: str, *, seed: int = 0, data_dir: str | None = None,
         fallback: bool = True, **options: Any) -> Dataset:
  """Loads a dataset by name, falling back to bundled data if needed.

  Args:
    name: one of ``DATASETS``, or ``csv:PATH`` (``load_csv``).
    seed: seeds the train/test split of offline sets, generated data and
      ``max_train``/``max_test`` subsampling.
    data_dir: tfds data directory; default ``$TFDS_DATA_DIR`` or the tfds
      default. Ignored by offline sets.
    fallback: if True, an unprepared tfds set is replaced by its fallback
      (``FALLBACKS``) and the returned ``note`` says so; if False, raise.
    **options: ``max_train``, ``max_test`` (all sets); ``test_fraction``
      (sklearn sets and ``synthetic``); ``standardize_targets`` (``diabetes``);
      ``make_classification`` arguments (``synthetic``); ``n_samples``,
      ``dim``, ``intrinsic_dim``, ``n_test``, ``signal``, ``labelling``
      (``sphere_logistic``); ``n_samples``, ``n_features``, ``n_factors``,
      ``noise``, ``standardize_targets`` (``synthetic_regression``);
      ``target``, ``n_samples``, ``drop``, ``test_fraction``,
      ``standardize_targets`` (``csv:PATH``).

  Returns:
    A ``Dataset``.

  Raises:
    ValueError: unknown name or option, or an invalid option value.
    DatasetUnavailableError: the tfds set is not prepared and ``fallback`` is
      False.
  """
  if not is_known(name):
    raise ValueError(
        f'Unknown dataset {name!r}; known datasets: {", ".join(DATASETS)} '
        f'(or {CSV_PREFIX}PATH).')
  if name.startswith(CSV_PREFIX):
    unknown = sorted(set(options) - set(_CSV_OPTIONS))
    if unknown:
      raise ValueError(f'Unknown option(s) {", ".join(unknown)} for a CSV '
                       f'dataset; allowed: {", ".join(_CSV_OPTIONS)}.')
    return load_csv(name[len(CSV_PREFIX):], seed=seed, **options)
  _check_options(name, options)
  if name in TFDS_DATASETS:
    directory = _tfds_data_dir(data_dir)
    try:
      return _load_tfds(name, directory, seed, **options)
    except _TfdsUnavailable as e:
      substitute = FALLBACKS[name]
      message = (f'{name} is not available (no prepared tfds data in '
                 f'{directory}); ran {substitute} instead')
      if not fallback:
        raise DatasetUnavailableError(
            f'{name} is not available (no prepared tfds data in {directory}); '
            f'fallback=False, so {substitute} was not run instead'
        ) from e.__cause__
      _log.warning(message)
      _log.debug('tfds error for %s: %s', name, e.reason)
      ds = load(substitute, seed=seed, **options)
      return dataclasses.replace(ds, requested=name, note=message)
  if name == 'sphere_logistic':
    return _load_sphere_logistic(seed, **options)
  return _load_split(name, seed, **options)


def _check_options(name: str, options: dict[str, Any]) -> None:
  if name in TFDS_DATASETS:
    allowed = _COMMON_OPTIONS
  elif name == 'sphere_logistic':
    allowed = _COMMON_OPTIONS + _SPHERE_OPTIONS
  elif name == 'synthetic':
    allowed = _COMMON_OPTIONS + _SPLIT_OPTIONS + tuple(
        p for p in inspect.signature(sk_datasets.make_classification).parameters
        if p not in ('random_state', 'return_X_y'))
  elif name == 'diabetes':
    allowed = _COMMON_OPTIONS + _SPLIT_OPTIONS + ('standardize_targets',)
  elif name == 'synthetic_regression':
    allowed = _COMMON_OPTIONS + _SPLIT_OPTIONS + _REGRESSION_OPTIONS + (
        'standardize_targets',)
  else:
    allowed = _COMMON_OPTIONS + _SPLIT_OPTIONS
  unknown = sorted(set(options) - set(allowed))
  if unknown:
    raise ValueError(f'Unknown option(s) {", ".join(unknown)} for dataset '
                     f'{name!r}; allowed: {", ".join(allowed)}.')


# ---------------------------------------------------------------- tfds sets


class _TfdsUnavailable(Exception):

  def __init__(self, reason: str):
    super().__init__(reason)
    self.reason = reason


def _tfds_data_dir(data_dir: str | None) -> str:
  if data_dir:
    return os.fspath(data_dir)
  if os.environ.get('TFDS_DATA_DIR'):
    return os.environ['TFDS_DATA_DIR']
  return os.path.expanduser(os.path.join('~', 'tensorflow_datasets'))


def _load_tfds(name: str, data_dir: str, seed: int,
               max_train: int | None = None,
               max_test: int | None = None) -> Dataset:
  """Reads both splits of a prepared tfds set into numpy arrays."""
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise _TfdsUnavailable(f'tensorflow_datasets is not installed: {e}') from e
  sources = {}
  for split in ('train', 'test'):
    try:
      sources[split] = tfds.data_source(name, split=split, data_dir=data_dir,
                                        download=False)
      len(sources[split])
    except Exception as e:  # pylint: disable=broad-exception-caught
      raise _TfdsUnavailable(f'{type(e).__name__}: {e}') from e
  rng = np.random.default_rng(seed)
  x_train, y_train = _read_records(sources['train'], _subset(
      len(sources['train']), max_train, 'max_train', rng))
  x_test, y_test = _read_records(sources['test'], _subset(
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
    raise _TfdsUnavailable('the split is empty')
  images = np.stack([np.asarray(r['image']) for r in records])
  labels = np.asarray([r['label'] for r in records], dtype=np.int32)
  if images.ndim == 3:
    images = images[..., None]
  return (images.astype(np.float32) / np.float32(255.0)), labels


def _subset(n: int, limit: int | None, label: str,
            rng: np.random.Generator) -> np.ndarray:
  """All indices, or a sorted random subset of size ``limit``."""
  if limit is None:
    return np.arange(n)
  if not isinstance(limit, int) or limit <= 0:
    raise ValueError(f'Expected {label}={limit} to be an integer > 0.')
  if limit >= n:
    return np.arange(n)
  return np.sort(rng.choice(n, size=limit, replace=False))


# ------------------------------------------------- sklearn and synthetic sets


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


_SKLEARN_LOADERS = {
    'digits': _digits,
    'iris': _tabular(sk_datasets.load_iris),
    'wine': _tabular(sk_datasets.load_wine),
    'breast_cancer': _tabular(sk_datasets.load_breast_cancer),
    'diabetes': _tabular(sk_datasets.load_diabetes, regression=True),
}


def _synthetic(seed: int, n_samples: int = 1000, n_features: int = 20,
               n_classes: int = 2, **kwargs: Any
               ) -> tuple[np.ndarray, np.ndarray, int, bool]:
  """``make_classification`` with defaults that are valid for any n_classes."""
  kwargs.setdefault('n_informative', min(
      n_features, max(2, math.ceil(math.log2(2 * n_classes)) + 1)))
  kwargs.setdefault('n_redundant',
                    min(2, n_features - kwargs['n_informative']))
  x, y = sk_datasets.make_classification(
      n_samples=n_samples, n_features=n_features, n_classes=n_classes,
      random_state=seed, **kwargs)
  return x, y.astype(np.int32), n_classes, True


def _load_split(name: str, seed: int, test_fraction: float = 0.2,
                max_train: int | None = None, max_test: int | None = None,
                standardize_targets: bool = True, **kwargs: Any) -> Dataset:
  """Loads an offline set, splits it by seed and standardizes features."""
  if not 0 < test_fraction < 1:
    raise ValueError(f'Expected test_fraction={test_fraction} in (0, 1).')
  extras = {}
  if name == 'synthetic':
    x, y, num_classes, tabular = _synthetic(seed, **kwargs)
    source = 'generated'
  elif name == 'synthetic_regression':
    x, y, w = make_regression_problem(rng=np.random.default_rng(seed),
                                      **kwargs)
    num_classes, tabular, source = None, True, 'generated'
    extras['w'] = w
  else:
    x, y, num_classes, tabular = _SKLEARN_LOADERS[name]()
    source = 'sklearn'
  return _split_and_standardize(
      name, x, y, num_classes, tabular, source, seed, test_fraction,
      max_train, max_test, standardize_targets, extras)


def _split_and_standardize(name: str, x: np.ndarray, y: np.ndarray,
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
  keep = _subset(len(x_train), max_train, 'max_train', rng)
  x_train, y_train = x_train[keep], y_train[keep]
  keep = _subset(len(x_test), max_test, 'max_test', rng)
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


# ------------------------------------------------------- synthetic_regression

_REGRESSION_OPTIONS = ('n_samples', 'n_features', 'n_factors', 'noise')


def make_regression_problem(rng: np.random.Generator, *,
                            n_samples: int = 10_000, n_features: int = 63,
                            n_factors: int = 5, noise: float = 0.5
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """A tabular linear-regression problem shaped like the Lending Club loans.

  Columns are correlated through ``n_factors`` shared Gaussian factors: a
  latent column is ``G L_j + 0.5 e_j`` (G, e standard normal, loadings L_j
  i.i.d. N(0, 1 / n_factors)). Like the mix of Lending Club attributes, the
  first third of the columns stay Gaussian, the second third are skewed
  "amounts" exp(latent), and the rest are integer codes of the latent column
  cut at random quantiles into 2 to 12 levels (categorical attributes
  converted to integers). The target is linear in the standardized columns
  with heterogeneous importance, w_j = s_j 0.85^{r_j} (random signs s_j and a
  random ranking r_j of the columns: a few columns matter, most a little),
  plus an intercept of 1 and Gaussian label noise of ``noise`` times the
  standard deviation of the linear signal (``noise = 0.5``: R^2 about 0.8),
  so the least-squares loss stays clearly above zero.

  Args:
    rng: numpy generator (the only source of randomness).
    n_samples: number of rows.
    n_features: number of columns (63: with an intercept, 64 parameters).
    n_factors: number of shared factors (>= 1).
    noise: label-noise standard deviation relative to the signal's (>= 0).

  Returns:
    ``(x, y, w)``: float64 ``[n_samples, n_features]`` raw columns, float64
    ``[n_samples]`` targets, and the float64 ``[n_features]`` weights on the
    standardized columns.
  """
  for label, value in (('n_samples', n_samples), ('n_features', n_features),
                       ('n_factors', n_factors)):
    if not isinstance(value, int) or value <= 0:
      raise ValueError(f'Expected {label}={value} to be an integer > 0.')
  if not noise >= 0:
    raise ValueError(f'Expected noise={noise} >= 0.')
  loadings = rng.standard_normal((n_factors, n_features)) / math.sqrt(
      n_factors)
  latent = (rng.standard_normal((n_samples, n_factors)) @ loadings +
            0.5 * rng.standard_normal((n_samples, n_features)))
  x = latent.copy()
  third = n_features // 3
  x[:, third:2 * third] = np.exp(latent[:, third:2 * third])
  for j in range(2 * third, n_features):
    levels = int(rng.integers(2, 13))
    cuts = np.quantile(latent[:, j], np.sort(rng.uniform(0.05, 0.95,
                                                         levels - 1)))
    x[:, j] = np.searchsorted(cuts, latent[:, j])
  z = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
  w = rng.choice([-1.0, 1.0], n_features) * 0.85 ** rng.permutation(
      n_features)
  signal = z @ w
  y = 1.0 + signal + noise * signal.std() * rng.standard_normal(n_samples)
  return x, y, w


# ----------------------------------------------------------------- csv files

CSV_DROP = ('id', 'member_id', 'url', 'desc', 'title', 'emp_title')
"""Lending Club's identifier, web-address and free-text columns (dropped)."""
_CSV_MISSING = frozenset(('', 'na', 'n/a', 'nan', 'null', 'none'))
_CSV_MAX_MISSING_FRACTION = 0.5
_CSV_MAX_DISTINCT_FRACTION = 0.5
_CSV_OPTIONS = ('target', 'n_samples', 'drop', 'test_fraction', 'max_train',
                'max_test', 'standardize_targets')


def _csv_number(text: str) -> float:
  """'13.56%' -> 13.56, ' 3.0 ' -> 3.0; ValueError if not a number."""
  text = text.strip()
  if text.endswith('%'):
    text = text[:-1]
  return float(text)


def load_csv(path: str, *, seed: int = 0, target: str = 'int_rate',
             n_samples: int | None = 10_000,
             drop: tuple[str, ...] | list[str] = (),
             test_fraction: float = 0.2, max_train: int | None = None,
             max_test: int | None = None,
             standardize_targets: bool = True) -> Dataset:
  """Regression on a CSV file with a header row (e.g. Lending Club's loan.csv).

  Cleaning, as Farokhi (Sec. 4) describes it for the Lending Club data, with
  the choices the paper leaves open made explicit:

  1. Rows whose field count differs from the header's (e.g. summary lines at
     the end of the file) are skipped.
  2. Columns named in ``CSV_DROP`` (identifiers, the listing's web address,
     free text) or in ``drop`` are dropped, and so are columns missing
     (empty, NA, N/A, NaN, null, None; case-insensitive) in more than half of
     the rows: otherwise the next step would drop almost every row.
  3. Rows missing any remaining value are dropped; a seeded random subset of
     ``n_samples`` of them is kept, in file order (all if None or fewer).
  4. Each column is parsed as numbers ("13.56%" -> 13.56). A column that does
     not parse is categorical and becomes integer codes (its distinct values
     in sorted order -> 0, 1, ...), unless more than half of its (kept) values
     are distinct: that is free text or an identifier, and it is dropped.
     Constant columns are dropped. The target must parse as numbers.

  Then, as for the other tabular sets: seeded train/test split, features
  (and by default the target) standardized with train statistics. The file
  is read twice, streaming, so memory is O(rows x columns) booleans plus the
  kept rows.

  Args:
    path: the CSV file.
    seed: seeds the row subset and the split.
    target: the column to predict (default ``int_rate``).
    n_samples: rows kept after cleaning (None: all).
    drop: more columns to drop.
    test_fraction, max_train, max_test, standardize_targets: as ``load``.

  Returns:
    A regression ``Dataset`` named ``csv:PATH`` (source ``csv``); ``extras``
    lists the feature columns, which of them were integer-coded, the dropped
    columns with reasons, and the row counts.

  Raises:
    ValueError: unreadable file, missing or non-numeric target, no complete
      rows or no feature left, bad options.
  """
  name = CSV_PREFIX + path
  if not 0 < test_fraction < 1:
    raise ValueError(f'Expected test_fraction={test_fraction} in (0, 1).')
  if n_samples is not None and (not isinstance(n_samples, int) or
                                n_samples <= 0):
    raise ValueError(f'Expected n_samples={n_samples} to be an integer > 0.')
  import csv  # pylint: disable=g-import-not-at-top

  def rows():
    with open(path, newline='', encoding='utf-8', errors='replace') as f:
      reader = csv.reader(f)
      try:
        header = [h.strip() for h in next(reader)]
      except StopIteration:
        raise ValueError(f'{path} is empty') from None
      yield header
      yield from reader

  reader = rows()
  header = next(reader)
  if target not in header:
    raise ValueError(f'target column {target!r} is not in {path} (columns: '
                     f'{", ".join(header)})')
  width = len(header)
  missing, malformed = [], 0
  for row in reader:
    if len(row) != width:
      malformed += 1
      missing.append(None)
      continue
    missing.append(bytes(v.strip().lower() in _CSV_MISSING for v in row))
  good = np.array([m is not None for m in missing], bool)
  mask = np.zeros((len(missing), width), bool)
  if good.any():
    mask[good] = np.frombuffer(b''.join(m for m in missing if m is not None),
                               np.uint8).reshape(-1, width).astype(bool)
  mask[~good] = True
  dropped: dict[str, list[str]] = {}
  named = set(CSV_DROP) | set(drop)
  keep_cols = []
  for j, col in enumerate(header):
    if col == target:
      keep_cols.append(j)
    elif col in named:
      dropped.setdefault('identifier, url or text', []).append(col)
    elif good.any() and mask[good, j].mean() > _CSV_MAX_MISSING_FRACTION:
      dropped.setdefault('missing in most rows', []).append(col)
    else:
      keep_cols.append(j)
  complete = np.flatnonzero(good & ~mask[:, keep_cols].any(axis=1))
  if not complete.size:
    raise ValueError(f'{path}: no row has every kept column')
  chosen = complete[_subset(complete.size, n_samples, 'n_samples',
                            np.random.default_rng(seed))]
  wanted = set(chosen.tolist())
  values = []
  reader = rows()
  next(reader)
  for i, row in enumerate(reader):
    if i in wanted:
      values.append([row[j].strip() for j in keep_cols])
  columns = [header[j] for j in keep_cols]
  table = list(zip(*values))
  features, names, coded = [], [], []
  y = None
  for col, cells in zip(columns, table):
    try:
      numbers = np.array([_csv_number(c) for c in cells], np.float64)
    except ValueError:
      if col == target:
        raise ValueError(f'target column {target!r} is not numeric') from None
      distinct = sorted(set(cells))
      if len(distinct) > _CSV_MAX_DISTINCT_FRACTION * len(cells):
        dropped.setdefault('free text (mostly distinct values)', []).append(
            col)
        continue
      codes = {v: k for k, v in enumerate(distinct)}
      numbers = np.array([codes[c] for c in cells], np.float64)
      coded.append(col)
    if col == target:
      y = numbers
    elif np.ptp(numbers) == 0:
      dropped.setdefault('constant', []).append(col)
      if col in coded:
        coded.remove(col)
    else:
      features.append(numbers)
      names.append(col)
  if not features:
    raise ValueError(f'{path}: no feature column is left after cleaning')
  x = np.stack(features, axis=1)
  extras = dict(target=target, columns=names, coded=coded, dropped=dropped,
                rows_read=len(missing), rows_malformed=malformed,
                rows_complete=int(complete.size), rows_kept=len(chosen))
  ds = _split_and_standardize(name, x, y, None, True, 'csv', seed,
                              test_fraction, max_train, max_test,
                              standardize_targets, extras)
  return ds


# ------------------------------------------------------------ sphere_logistic

_SPHERE_OPTIONS = ('n_samples', 'dim', 'intrinsic_dim', 'n_test', 'signal',
                   'labelling')


def make_sphere_logistic(n: int, dim: int, intrinsic_dim: int,
                         rng: np.random.Generator, *, signal: float = 4.0,
                         labelling: str = 'bernoulli',
                         w: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Points uniform on the unit sphere, labelled by a low-dimensional w.

  Huang thesis section 7.4 (REFERENCES.md section 7): z uniform on
  S^{dim-1}; P[y = 1 | z] = sigmoid(<z, w>). The labelling vector w is nonzero
  on ``intrinsic_dim`` coordinates chosen at random (Gaussian entries), scaled
  to ``||w|| = signal * sqrt(dim)``. Because z is rotation invariant, a k-sparse
  w gives the same distribution of (<z, w>, y) as w in a random k-dim subspace;
  the sparse choice also makes w lie in a small l1 ball, the constraint set the
  thesis' compressed GD uses. The scale keeps <z, w> roughly N(0, signal^2)
  for every dim (z is about g/sqrt(dim)), so the task does not become a
  coin flip as dim grows; the thesis does not state its scale.

  Args:
    n: number of points.
    dim: ambient dimension d.
    intrinsic_dim: number k of nonzero coordinates of w (1 <= k <= d).
    rng: numpy generator.
    signal: typical size of the logit <z, w>.
    labelling: 'bernoulli' draws y ~ Bernoulli(sigmoid(<z, w>)); 'threshold'
      sets y = [<z, w> > 0] (noise-free).
    w: reuse this labelling vector instead of drawing one.

  Returns:
    ``(z, y, w)``: float32 ``[n, dim]`` unit-norm points, int32 ``[n]`` labels
    in {0, 1}, float32 ``[dim]`` labelling vector.
  """
  if w is None:
    if not 1 <= intrinsic_dim <= dim:
      raise ValueError(
          f'Expected 1 <= intrinsic_dim={intrinsic_dim} <= dim={dim}.')
    support = rng.choice(dim, size=intrinsic_dim, replace=False)
    w = np.zeros(dim)
    w[support] = rng.standard_normal(intrinsic_dim)
    w *= signal * math.sqrt(dim) / np.linalg.norm(w)
  z = rng.standard_normal((n, dim))
  z /= np.linalg.norm(z, axis=1, keepdims=True)
  logits = z @ w
  if labelling == 'bernoulli':
    y = rng.random(n) < 0.5 * (1.0 + np.tanh(0.5 * logits))  # sigmoid
  elif labelling == 'threshold':
    y = logits > 0
  else:
    raise ValueError(
        f"Expected labelling={labelling!r} to be 'bernoulli' or 'threshold'.")
  return z.astype(np.float32), y.astype(np.int32), w.astype(np.float32)


def _load_sphere_logistic(seed: int, n_samples: int = 3000, dim: int = 100,
                          intrinsic_dim: int = 1, n_test: int = 100,
                          signal: float = 4.0, labelling: str = 'bernoulli',
                          max_train: int | None = None,
                          max_test: int | None = None) -> Dataset:
  """``n_samples`` train points plus an independent test set of ``n_test``."""
  for label, value in (('n_samples', n_samples), ('dim', dim),
                       ('n_test', n_test)):
    if not isinstance(value, int) or value <= 0:
      raise ValueError(f'Expected {label}={value} to be an integer > 0.')
  rng = np.random.default_rng(seed)
  x_train, y_train, w = make_sphere_logistic(
      n_samples, dim, intrinsic_dim, rng, signal=signal, labelling=labelling)
  x_test, y_test, _ = make_sphere_logistic(
      n_test, dim, intrinsic_dim, rng, labelling=labelling, w=w)
  keep = _subset(n_samples, max_train, 'max_train', rng)
  x_train, y_train = x_train[keep], y_train[keep]
  keep = _subset(n_test, max_test, 'max_test', rng)
  x_test, y_test = x_test[keep], y_test[keep]
  return Dataset(name='sphere_logistic', requested='sphere_logistic',
                 x_train=x_train, y_train=y_train, x_test=x_test,
                 y_test=y_test, num_classes=2, source='generated',
                 extras={'w': w, 'intrinsic_dim': intrinsic_dim,
                         'signal': signal, 'labelling': labelling})
