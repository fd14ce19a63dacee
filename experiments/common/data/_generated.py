"""Generated sets: synthetic classification, regression and sphere logistic.

This module holds the data ``load`` generates from ``seed`` (all randomness
from ``np.random.default_rng(seed)`` or scikit-learn's ``random_state``):
``synthetic`` (``sklearn.datasets.make_classification``),
``synthetic_regression`` (a tabular regression problem shaped like the Lending
Club loans, ``make_regression_problem``) and ``sphere_logistic`` (Huang thesis
section 7.4, ``make_sphere_logistic``), with the options each accepts.
"""

import math
from typing import Any

import numpy as np
from sklearn import datasets as sk_datasets

from experiments.common.data._dataset import Dataset
from experiments.common.data._dataset import subset

GENERATED_DATASETS = ('synthetic', 'synthetic_regression', 'sphere_logistic')


def synthetic_classification(seed: int, n_samples: int = 1000,
                             n_features: int = 20, n_classes: int = 2,
                             **kwargs: Any
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


REGRESSION_OPTIONS = ('n_samples', 'n_features', 'n_factors', 'noise')


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


SPHERE_OPTIONS = ('n_samples', 'dim', 'intrinsic_dim', 'n_test', 'signal',
                   'labelling')


def make_sphere_logistic(n: int, dim: int, intrinsic_dim: int,
                         rng: np.random.Generator, *, signal: float = 4.0,
                         labelling: str = 'bernoulli',
                         w: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Points uniform on the unit sphere, labelled by a low-dimensional w.

  Huang thesis section 7.4: z uniform on
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


def load_sphere_logistic(seed: int, n_samples: int = 3000, dim: int = 100,
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
  keep = subset(n_samples, max_train, 'max_train', rng)
  x_train, y_train = x_train[keep], y_train[keep]
  keep = subset(n_test, max_test, 'max_test', rng)
  x_test, y_test = x_test[keep], y_test[keep]
  return Dataset(name='sphere_logistic', requested='sphere_logistic',
                 x_train=x_train, y_train=y_train, x_test=x_test,
                 y_test=y_test, num_classes=2, source='generated',
                 extras={'w': w, 'intrinsic_dim': intrinsic_dim,
                         'signal': signal, 'labelling': labelling})
