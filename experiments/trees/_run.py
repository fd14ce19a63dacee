"""trees' run: load, build every ensemble per seed, score on the test set."""

import dataclasses
import math
import warnings
from typing import Any

import jax
import numpy as np
from scipy import stats
from sklearn import ensemble as sk_ensemble

from dpjax import nonparametric as npm
from experiments.common import data as data_lib
from experiments.common import runner
from experiments.trees import _median
from experiments.trees._config import Config
from experiments.trees._config import SEMI
from experiments.trees._config import SEMI_EXCLUDED
from experiments.trees._config import SUPERVISED
from experiments.trees._results import Results

PRIVATE_SUPERVISED = ('rdt', 'dp_rf', 'dp_dt')


def load(name: str, seed: int, cfg: Config):
  """(x_train, y_train, x_test, y_test, K, bounds): flat float32 features;
  bounds = each feature's range over train and test (public, as the thesis
  treats it)."""
  opts = dict(test_fraction=cfg.test_fraction)
  if name.startswith('syn'):
    d = int(name[3:-1])
    informative = min(d, cfg.synthetic_num_informative)
    ds = data_lib.load('synthetic', seed=cfg.synthetic_data_seed,
                       n_samples=cfg.synthetic_num_examples, n_features=d,
                       n_informative=informative,
                       n_redundant=min(2, d - informative), **opts)
    # one fixed set, resplit by seed (the thesis repeats runs on one set)
    x = np.concatenate([ds.x_train, ds.x_test])
    y = np.concatenate([ds.y_train, ds.y_test])
    perm = np.random.default_rng(seed).permutation(len(y))
    te, tr = np.split(perm, [max(1, int(round(cfg.test_fraction * len(y))))])
    ds = dataclasses.replace(ds, x_train=x[tr], y_train=y[tr], x_test=x[te],
                             y_test=y[te])
  else:
    if name == 'digits' and cfg.digits_max_train:
      opts['max_train'] = cfg.digits_max_train
    ds = data_lib.load(name, seed=seed, **opts)
  xtr = np.asarray(ds.x_train, np.float32).reshape(len(ds.x_train), -1)
  xte = np.asarray(ds.x_test, np.float32).reshape(len(ds.x_test), -1)
  allx = np.concatenate([xtr, xte])
  low, high = allx.min(0), allx.max(0)
  high = np.where(high > low, high, low + 1.0)  # constant pixels (digits)
  return (xtr, np.asarray(ds.y_train), xte, np.asarray(ds.y_test),
          int(ds.num_classes),
          (low.astype(np.float64), high.astype(np.float64)))


def _diffprivlib():
  try:
    from diffprivlib import models  # pylint: disable=g-import-not-at-top
    return models, None
  except Exception as e:  # pylint: disable=broad-except
    return None, f'diffprivlib unavailable: {e}'


def _accuracy(pred, y) -> float:
  return float(np.mean(np.asarray(pred) == np.asarray(y)))


def supervised(key, seed, data, cfg, depth, dp_models) -> dict[str, float]:
  xtr, ytr, xte, yte, k, bounds = data
  eps, out = cfg.epsilon, {}
  rf = sk_ensemble.RandomForestClassifier(cfg.sklearn_num_trees,
                                          random_state=seed).fit(xtr, ytr)
  out['rf'] = _accuracy(rf.predict(xte), yte)
  rel, _ = npm.spe(key, xtr, ytr, epsilon=eps, bounds=bounds, num_classes=k,
                   num_trees=cfg.num_trees, depth=depth)
  out['spe'] = _accuracy(npm.predict(rel, xte), yte)
  rel, _ = npm.random_decision_trees(
      jax.random.fold_in(key, 1), xtr, ytr, epsilon=eps, bounds=bounds,
      num_classes=k, num_trees=cfg.num_trees, depth=depth)
  out['rdt'] = _accuracy(npm.predict(rel, xte), yte)
  # Non-private ceilings: the same ensembles without (meaningful) noise.
  rel, _ = npm.spe(key, xtr, ytr, epsilon=cfg.ceiling_epsilon, bounds=bounds,
                   num_classes=k, num_trees=cfg.num_trees, depth=depth)
  out['spe_ceiling'] = _accuracy(npm.predict(rel, xte), yte)
  rel, _ = npm.random_decision_trees(
      jax.random.fold_in(key, 1), xtr, ytr, epsilon=float('inf'),
      bounds=bounds, num_classes=k, num_trees=cfg.num_trees, depth=depth)
  out['rdt_exact'] = _accuracy(npm.predict(rel, xte), yte)
  if dp_models is not None:
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')
      common = dict(epsilon=eps, bounds=bounds, classes=list(range(k)),
                    random_state=seed)
      m = dp_models.RandomForestClassifier(cfg.num_trees, **common)
      out['dp_rf'] = _accuracy(m.fit(xtr, ytr).predict(xte), yte)
      m = dp_models.DecisionTreeClassifier(**common)
      out['dp_dt'] = _accuracy(m.fit(xtr, ytr).predict(xte), yte)
  return out


def shallow_depth(num_labelled: int, num_trees: int, leaf_labels: int,
                  depth: int) -> int:
  """SSPE-2's sound shallow depth: about ``leaf_labels`` labelled points per
  leaf when each of ``num_trees`` trees counts its 1/N share. Under label-DP
  the features of S are public, so its size is too: no budget is spent.

  >>> shallow_depth(540, 10, 8, 10)
  2
  """
  per_tree = num_labelled / max(num_trees, 1)
  return int(max(1, min(depth, np.floor(np.log2(max(per_tree / leaf_labels,
                                                    1.0))))))


def sspe2_every_tree(key, xl, yl, xu, kw):
  """UNSOUND at the stated eps: N single-tree SSPE-2 releases, each counting
  every labelled point at eps, so a label is counted N times and the
  ensemble is (N eps)-label-DP, not eps. The row shows what SSPE-2 reaches
  only at N times the stated budget."""
  parts = [npm.sspe(jax.random.fold_in(key, t), xl, yl, xu, setting=2,
                    **dict(kw, num_trees=1))[0]
           for t in range(kw['num_trees'])]
  return parts[0]._replace(**{
      f: jax.numpy.concatenate([getattr(p, f) for p in parts])
      for f in ('attributes', 'thresholds', 'counts')})


def semi(key, seed, data, cfg, depth, eps, only=None) -> dict[str, float]:
  xtr, ytr, xte, yte, k, bounds = data
  nl = max(int(round(cfg.labelled_fraction * len(xtr))), cfg.num_trees)
  perm = np.random.default_rng(seed).permutation(len(xtr))
  xl, yl, xu = xtr[perm[:nl]], ytr[perm[:nl]], xtr[perm[nl:]]
  kw = dict(epsilon=eps, bounds=bounds, num_classes=k,
            num_trees=cfg.num_trees, depth=depth)
  shallow = dict(kw, depth=shallow_depth(nl, cfg.num_trees,
                                         cfg.shallow_leaf_labels, depth))
  ceiling = dict(kw, epsilon=cfg.ceiling_epsilon)
  runs = {
      'sspe1': lambda kk: npm.sspe(kk, xl, yl, xu, setting=1, **kw)[0],
      'sspe2': lambda kk: npm.sspe(kk, xl, yl, xu, setting=2, **kw)[0],
      'sspe2_shallow': lambda kk: npm.sspe(kk, xl, yl, xu, setting=2,
                                           **shallow)[0],
      'sspe2_all': lambda kk: sspe2_every_tree(kk, xl, yl, xu, kw),
      'pte': lambda kk: npm.pte(kk, xl, yl, xu, **kw)[0],
      'spe_labelled': lambda kk: npm.spe(kk, xl, yl, **kw)[0],
      'sspe2_ceiling': lambda kk: npm.sspe(kk, xl, yl, xu, setting=2,
                                           **ceiling)[0]}
  out = {}
  for i, (name, fn) in enumerate(runs.items()):
    if only is None or name in only:
      out[name] = _accuracy(npm.predict(fn(jax.random.fold_in(key, i)), xte),
                            yte)
  return out


def _depth(spec: str, d: int, cap: int) -> int:
  value = {'d/2': max(1, d // 2), 'd': d, '2d': 2 * d}[spec]
  return min(value, cap)


def mann_whitney(a, b) -> float:
  a, b = np.asarray(a), np.asarray(b)
  if np.all(a == a[0]) and np.array_equal(np.sort(a), np.sort(b)):
    return 1.0
  return float(stats.mannwhitneyu(a, b, alternative='two-sided').pvalue)


def seed_rows(name, seed, cfg, dp_models, info):
  """Every method's accuracy for one seed, averaged over independent splits
  (data seeds 1000 seed + r) until ``min_test`` test points are scored; the
  Table 8.2 rows only where the thesis runs them."""
  first = load(name, 1000 * seed, cfg)
  repeats = max(1, math.ceil(cfg.min_test / max(len(first[2]), 1)))
  rows, rows_small = {}, {}
  for r in range(repeats):
    split = 1000 * seed + r
    data = first if r == 0 else load(name, split, cfg)
    d = data[0].shape[1]
    depth = min(d, cfg.max_depth)
    info[name] = dict(n_train=len(data[0]), n_test=len(data[2]), d=d,
                      classes=data[4], depth=depth, repeats=repeats)
    key = jax.random.key(split)
    out = supervised(key, split, data, cfg, depth, dp_models)
    if name not in SEMI_EXCLUDED:
      out.update(semi(jax.random.fold_in(key, 7), split, data, cfg, depth,
                      cfg.epsilon))
      for m, a in semi(jax.random.fold_in(key, 8), split, data, cfg, depth,
                       cfg.small_epsilon,
                       only=('sspe1', 'spe_labelled')).items():
        rows_small.setdefault(m, []).append(a)
    for m, a in out.items():
      rows.setdefault(m, []).append(a)
  mean = lambda per: {m: float(np.mean(v)) for m, v in per.items()}
  return mean(rows), mean(rows_small)


def grid_rows(name: str, seed: int, cfg: Config) -> list[dict[str, Any]]:
  """Fig. 8.6 on one dataset and seed: SPE's accuracy per (depth, trees)."""
  xtr, ytr, xte, yte, k, bounds = load(name, seed, cfg)
  d = xtr.shape[1]
  rows = []
  for spec in cfg.grid_depths:
    depth = _depth(spec, d, 2 * cfg.max_depth if d <= 10 else cfg.max_depth)
    for t in cfg.grid_num_trees:
      if t > len(xtr):
        continue
      rel, _ = npm.spe(jax.random.key(seed), xtr, ytr, epsilon=cfg.epsilon,
                       bounds=bounds, num_classes=k, num_trees=t,
                       depth=depth)
      rows.append(dict(dataset=name, seed=seed, depth=spec,
                       depth_value=depth, trees=t,
                       accuracy=_accuracy(npm.predict(rel, xte), yte)))
  return rows


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Tables 8.1-8.2 per dataset and seed, Mann-Whitney tests, the grid."""
  dp_models, dp_error = _diffprivlib()
  seeds = cfg.seeds
  per_seed = {}  # dataset -> method -> [seed] accuracy (Table 8.1 / 8.2)
  small = {}     # dataset -> method -> [seed] at small_epsilon (Table 8.2)
  info = {}
  for name in cfg.datasets:
    acc, acc_small = {}, {}
    for seed in seeds:
      rows, rows_small = seed_rows(name, seed, cfg, dp_models, info)
      for m, a in rows.items():
        acc.setdefault(m, []).append(a)
      for m, a in rows_small.items():
        acc_small.setdefault(m, []).append(a)
    per_seed[name] = acc
    if acc_small:
      small[name] = acc_small
    ctx.say(f'{name}: ' + ', '.join(f'{m} {np.mean(v):.3f}'
                                    for m, v in acc.items()))
  median = [_median.median_distances(seed, cfg) for seed in seeds
            if cfg.median_epsilons]
  tests = {name: {m: mann_whitney(acc['spe'], acc[m])
                  for m in PRIVATE_SUPERVISED if m in acc}
           for name, acc in per_seed.items()}
  grid = [row for name in cfg.grid_datasets for seed in seeds
          for row in grid_rows(name, seed, cfg)] if cfg.grid else []
  return Results(dataset=dict(name=', '.join(info)), info=info,
                 per_seed=per_seed, small=small, mann_whitney=tests, grid=grid,
                 median=median, diffprivlib_error=dp_error,
                 methods=dict(supervised=list(SUPERVISED), semi=list(SEMI)))
