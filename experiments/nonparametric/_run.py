"""nonparametric's runs: every method on every dataset, paired by seed."""

import csv
import warnings
from typing import Any

import jax
import numpy as np

from dpjax import nonparametric as npm
from experiments.common import data as data_lib
from experiments.common import runner
from experiments.nonparametric._config import Config


def load_classification_csv(path: str, seed: int, test_fraction: float,
                            target: str | None = None):
  """A classification CSV (header row): non-numeric columns become integer
  codes, the target (default: the last column) becomes class indices, rows
  with empty fields are dropped, then a seeded split and standardization."""
  with open(path, newline='') as f:
    rows = list(csv.reader(f))
  header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])
                           and all(v.strip() for v in r)]
  t = header.index(target) if target else len(header) - 1
  cols = []
  for j in range(len(header)):
    vals = [r[j].strip() for r in body]
    try:
      cols.append(np.array([float(v) for v in vals]))
    except ValueError:
      cats = sorted(set(vals))
      cols.append(np.array([cats.index(v) for v in vals], float))
  y = np.unique(cols[t], return_inverse=True)[1].astype(np.int32)
  x = np.stack([c for j, c in enumerate(cols) if j != t], 1)
  rng = np.random.default_rng(seed)
  perm = rng.permutation(len(y))
  n_test = max(1, int(round(test_fraction * len(y))))
  te, tr = perm[:n_test], perm[n_test:]
  mu, sd = x[tr].mean(0), x[tr].std(0) + 1e-12
  x = (x - mu) / sd
  return (x[tr], y[tr], x[te], y[te], int(y.max()) + 1)


def load(name: str, seed: int, cfg: Config) -> tuple:
  if name.startswith('csv:'):
    return load_classification_csv(name[4:], seed, cfg.test_fraction)
  opts = dict(test_fraction=cfg.test_fraction)
  if cfg.max_test:
    opts['max_test'] = cfg.max_test
  if name.startswith('synthetic'):
    ds = data_lib.load('synthetic', seed=seed, n_samples=cfg.n_synthetic,
                       n_features=int(name[len('synthetic'):]), **opts)
  else:
    ds = data_lib.load(name, seed=seed, **opts)
  flat = lambda a: np.asarray(a, np.float64).reshape(len(a), -1)
  return (flat(ds.x_train), np.asarray(ds.y_train), flat(ds.x_test),
          np.asarray(ds.y_test), ds.num_classes)


def _diffprivlib():
  try:
    import diffprivlib.models as dpl  # pylint: disable=g-import-not-at-top
    return dpl, None
  except Exception as e:  # pylint: disable=broad-except
    return None, f'diffprivlib unavailable: {e!r}'


def methods_on(key, data, eps, cfg, dpl, only=None):
  """Test accuracy of each method on one split; dict method -> float."""
  x, y, xt, yt, k = data
  both = np.vstack([x, xt])
  bounds = (both.min(0), both.max(0) + 1e-9)  # public by convention
  m = min(cfg.projection_dim, x.shape[1])
  hist = dict(bins=cfg.bins, projection_dim=m)
  keys = jax.random.split(key, 4)
  acc = lambda p: float(np.mean(np.asarray(p) == yt))
  out = {}
  want = lambda name: only is None or name in only
  common = dict(epsilon=eps, bounds=bounds, num_classes=k)
  if want('noisy_reg'):
    rel, _ = npm.noisy_reg(keys[0], x, y, **common, **hist)
    out['noisy_reg'] = acc(npm.predict(rel, xt))
  if want('private_histogram'):
    rel, _ = npm.private_histogram(keys[0], x, y, **common, **hist)
    out['private_histogram'] = acc(npm.predict(rel, xt))
  if want('dp_knn'):
    rel, _ = npm.dp_knn(keys[1], x, y, xt, **common)
    out['dp_knn'] = acc(npm.predict(rel, xt))
  if want('rdt'):
    rel, _ = npm.random_decision_trees(keys[2], x, y, **common,
                                       num_trees=cfg.num_trees)
    out['rdt'] = acc(npm.predict(rel, xt))
  if only is not None:
    return out
  rel = npm.histogram(x, y, bounds=bounds, num_classes=k, key=keys[0], **hist)
  out['histogram'] = acc(npm.predict(rel, xt))
  from sklearn import ensemble, neighbors  # pylint: disable=g-import-not-at-top
  seed = int(jax.random.randint(keys[3], (), 0, 2**30))
  out['knn'] = acc(neighbors.KNeighborsClassifier(cfg.knn_k).fit(
      x, y).predict(xt))
  out['rf'] = acc(ensemble.RandomForestClassifier(
      50, random_state=seed).fit(x, y).predict(xt))
  if dpl is not None:
    lo, hi = bounds
    norm = float(np.max(np.linalg.norm(np.clip(both, lo, hi), axis=1)))
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', RuntimeWarning)
      out['dpl_nb'] = acc(dpl.GaussianNB(
          epsilon=eps, bounds=(lo, hi), random_state=seed).fit(x, y).predict(xt))
      out['dpl_lr'] = acc(dpl.LogisticRegression(
          epsilon=eps, data_norm=norm, random_state=seed).fit(
              np.clip(x, lo, hi), y).predict(xt))
      out['dpl_rf'] = acc(dpl.RandomForestClassifier(
          n_estimators=cfg.num_trees, epsilon=eps, bounds=(lo, hi),
          classes=list(range(k)), random_state=seed).fit(x, y).predict(xt))
  return out


def run(cfg: Config, ctx: runner.Context) -> dict[str, Any]:
  """Table 5.3 (every method on every dataset) and the Fig. 5.1 sweep."""
  dpl, dpl_error = (None, 'diffprivlib disabled by config')
  if cfg.diffprivlib:
    dpl, dpl_error = _diffprivlib()
  seeds = cfg.seeds
  table, info = {}, {}
  for name in cfg.datasets:
    per = {}
    for s in seeds:
      data = load(name, s, cfg)
      info[name] = dict(n_train=len(data[0]), n_test=len(data[2]),
                        d=data[0].shape[1], num_classes=data[4])
      res = methods_on(jax.random.key(s), data, cfg.epsilon, cfg, dpl)
      for method, a in res.items():
        per.setdefault(method, []).append(a)
    table[name] = per
    ctx.say(f'{name} done')
  sweep = {}
  for name in cfg.sweep_datasets:
    sweep[name] = {}
    for eps in cfg.sweep:
      per = {}
      for s in seeds:
        res = methods_on(jax.random.key(s), load(name, s, cfg), eps, cfg,
                         None, only=('noisy_reg', 'dp_knn'))
        for method, a in res.items():
          per.setdefault(method, []).append(a)
      sweep[name][str(eps)] = per
    ctx.say(f'sweep {name} done')
  return dict(dataset=dict(name=', '.join(info)), table=table,
              datasets=info, sweep=sweep,
              diffprivlib=dpl_error or 'diffprivlib available')
