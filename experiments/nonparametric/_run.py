"""nonparametric's runs: every method on every dataset, paired by seed."""

import csv
import math
import warnings
from typing import Any, NamedTuple

import jax
import numpy as np

from dpjax import nonparametric as npm
from experiments.common import data as data_lib
from experiments.common import runner
from experiments.nonparametric._config import Config
from experiments.nonparametric._results import Results


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
    ds = data_lib.load('synthetic', seed=cfg.synthetic_data_seed,
                       n_samples=cfg.synthetic_num_examples,
                       n_features=int(name[len('synthetic'):]), **opts)
    return resplit(ds, seed, cfg.test_fraction)
  else:
    ds = data_lib.load(name, seed=seed, **opts)
  flat = lambda a: np.asarray(a, np.float64).reshape(len(a), -1)
  return (flat(ds.x_train), np.asarray(ds.y_train), flat(ds.x_test),
          np.asarray(ds.y_test), ds.num_classes)


def resplit(ds, seed: int, test_fraction: float) -> tuple:
  """A seeded train/test split of the whole of ``ds`` (train and test
  together): the thesis repeats its runs on one synthetic data set, so the
  seeds resplit a fixed set rather than drawing a new one."""
  x = np.concatenate([ds.x_train, ds.x_test]).astype(np.float64)
  x = x.reshape(len(x), -1)
  y = np.concatenate([ds.y_train, ds.y_test])
  perm = np.random.default_rng(seed).permutation(len(y))
  n_test = max(1, int(round(test_fraction * len(y))))
  te, tr = perm[:n_test], perm[n_test:]
  return x[tr], y[tr], x[te], y[te], ds.num_classes


def split_seeds(seed: int, repeats: int) -> list[int]:
  """The independent splits (data seeds) that seed ``seed`` averages over;
  disjoint across seeds for up to 1000 repeats."""
  return [1000 * seed + r for r in range(repeats)]


def num_repeats(n_test: int, min_test: int) -> int:
  """Splits per seed so that a seed scores at least ``min_test`` points."""
  return max(1, math.ceil(min_test / max(n_test, 1)))


def bin_rule(n: int, m: int) -> int:
  """The thesis's b = O(n^(1/(m+2))) (Thm. 4.12, 5.7) with constant 1,
  rounded up (b >= 2): fixed a priori from the public n and dimension m,
  not tuned on held-out private data."""
  return max(2, math.ceil(n ** (1.0 / (m + 2))))


def project(key, x, xt, m: int, clip: float):
  """Public JL projection of standardized features and public bounds.

  Phi is ``jl_projection(key, d, m)`` (data-independent); a projected
  coordinate phi_i . x of standardized features (unit variance by the
  convention above) has variance ||phi_i||^2 when the features are
  uncorrelated, so its public bound is +-clip ||phi_i||; points beyond it
  are clipped into the edge bins. A choice from Phi alone, so sound; it is
  tighter than the box image (sum_j |phi_ij| (high_j - low_j) / 2), which
  is about sqrt(d) times wider than the data.
  """
  phi = np.asarray(npm.jl_projection(key, x.shape[1], m), np.float64)
  c = clip * np.linalg.norm(phi, axis=1)
  return x @ phi.T, xt @ phi.T, (-c, c + 1e-9)


def _diffprivlib():
  try:
    import diffprivlib.models as dpl  # pylint: disable=g-import-not-at-top
    return dpl, None
  except Exception as e:  # pylint: disable=broad-except
    return None, f'diffprivlib unavailable: {e!r}'


class _Split(NamedTuple):
  """One train/test split, its public bounds and its public projection."""
  x: np.ndarray
  y: np.ndarray
  xt: np.ndarray
  yt: np.ndarray
  num_classes: int
  bounds: tuple  # each feature's range, train and test: public by convention
  px: np.ndarray  # the dense private histogram's inputs (JL-projected)
  pxt: np.ndarray
  phist: dict[str, Any]  # its bins, bounds and classes


def _split(keys, data, cfg) -> _Split:
  """The split with the projection to m = min(projection_dim, d) dims."""
  x, y, xt, yt, k = data
  n, d = x.shape
  both = np.vstack([x, xt])
  bounds = (both.min(0), both.max(0) + 1e-9)  # public by convention
  m = min(cfg.projection_dim, d)
  if m < d:
    px, pxt, pbounds = project(keys[4], x, xt, m, cfg.projected_linf_clip)
  else:
    px, pxt, pbounds = x, xt, bounds
  return _Split(x, y, xt, yt, k, bounds, px, pxt, dict(
      bins=cfg.bins or bin_rule(n, m), bounds=pbounds, num_classes=k))


def _accuracy(predicted, split: _Split) -> float:
  return float(np.mean(np.asarray(predicted) == split.yt))


def _private(keys, s: _Split, eps, cfg, want) -> dict[str, float]:
  """The accuracy of each private method of dpjax that ``want`` names."""
  out = {}
  common = dict(epsilon=eps, bounds=s.bounds, num_classes=s.num_classes)
  if want('noisy_reg'):  # unprojected: sparse cells
    rel, _ = npm.noisy_reg(keys[0], s.x, s.y, **common,
                           bins=cfg.bins or bin_rule(*s.x.shape))
    out['noisy_reg'] = _accuracy(npm.predict(rel, s.xt), s)
  if want('private_histogram'):
    rel, _ = npm.dp_histogram(keys[0], s.px, s.y, epsilon=eps, **s.phist)
    out['private_histogram'] = _accuracy(npm.predict(rel, s.pxt), s)
  if want('dp_knn'):
    rel, _ = npm.dp_knn(keys[1], s.x, s.y, s.xt, **common)
    out['dp_knn'] = _accuracy(npm.predict(rel, s.xt), s)
  if want('rdt'):
    rel, _ = npm.random_decision_trees(keys[2], s.x, s.y, **common,
                                       num_trees=cfg.num_trees)
    out['rdt'] = _accuracy(npm.predict(rel, s.xt), s)
  return out


def _ceilings(keys, s: _Split, cfg, seed: int) -> dict[str, float]:
  """Each private method's estimator without noise, and sklearn's."""
  x, y, xt = s.x, s.y, s.xt
  out = {}
  rel = npm.histogram(x, y, bounds=s.bounds, num_classes=s.num_classes,
                      bins=cfg.bins or bin_rule(*x.shape))
  out['histogram'] = _accuracy(npm.predict(rel, xt), s)
  rel = npm.histogram(s.px, y, **s.phist)
  out['histogram_proj'] = _accuracy(npm.predict(rel, s.pxt), s)
  rel, _ = npm.random_decision_trees(
      keys[2], x, y, epsilon=float('inf'), bounds=s.bounds,
      num_classes=s.num_classes, num_trees=cfg.num_trees)
  out['rdt_exact'] = _accuracy(npm.predict(rel, xt), s)
  # pylint: disable-next=g-import-not-at-top
  from sklearn import ensemble, linear_model, naive_bayes, neighbors
  fit = lambda model: _accuracy(model.fit(x, y).predict(xt), s)
  out['knn_2n'] = fit(neighbors.KNeighborsClassifier(min(2 * len(xt),
                                                         len(x))))
  out['nb'] = fit(naive_bayes.GaussianNB())
  with warnings.catch_warnings():  # lbfgs at its default 100 iterations
    warnings.simplefilter('ignore')
    out['lr'] = fit(linear_model.LogisticRegression())
  out['rf10'] = fit(ensemble.RandomForestClassifier(
      cfg.num_trees, random_state=seed))
  out['knn'] = fit(neighbors.KNeighborsClassifier(cfg.knn_k))
  return out


def _diffprivlib_models(s: _Split, eps, cfg, dpl, seed) -> dict[str, float]:
  """diffprivlib's GaussianNB, LogisticRegression and random forest."""
  x, y, xt = s.x, s.y, s.xt
  lo, hi = s.bounds
  both = np.vstack([x, xt])
  norm = float(np.max(np.linalg.norm(np.clip(both, lo, hi), axis=1)))
  out = {}
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', RuntimeWarning)
    nb = dpl.GaussianNB(epsilon=eps, bounds=(lo, hi), random_state=seed)
    out['dpl_nb'] = _accuracy(nb.fit(x, y).predict(xt), s)
    lr = dpl.LogisticRegression(epsilon=eps, data_norm=norm,
                                random_state=seed)
    out['dpl_lr'] = _accuracy(lr.fit(np.clip(x, lo, hi), y).predict(xt), s)
    rf = dpl.RandomForestClassifier(
        n_estimators=cfg.num_trees, epsilon=eps, bounds=(lo, hi),
        classes=list(range(s.num_classes)), random_state=seed)
    out['dpl_rf'] = _accuracy(rf.fit(x, y).predict(xt), s)
  return out


def methods_on(key, data, eps, cfg, dpl, only=None):
  """Test accuracy of each method on one split; dict method -> float."""
  keys = jax.random.split(key, 5)
  split = _split(keys, data, cfg)
  out = _private(keys, split, eps, cfg,
                 lambda name: only is None or name in only)
  if only is not None:
    return out
  seed = int(jax.random.randint(keys[3], (), 0, 2**30))
  out.update(_ceilings(keys, split, cfg, seed))
  if dpl is not None:
    out.update(_diffprivlib_models(split, eps, cfg, dpl, seed))
  return out


def seed_accuracy(name, seed, eps, cfg, dpl, only=None, info=None):
  """Every method's accuracy for one seed: the mean over its repeated
  splits (``split_seeds``), each with its own key."""
  first = load(name, split_seeds(seed, 1)[0], cfg)
  repeats = num_repeats(len(first[2]), cfg.min_test)
  per = {}
  for r, s in enumerate(split_seeds(seed, repeats)):
    data = first if r == 0 else load(name, s, cfg)
    if info is not None:
      info[name] = dict(n_train=len(data[0]), n_test=len(data[2]),
                        d=data[0].shape[1], num_classes=data[4],
                        repeats=repeats,
                        bins=cfg.bins or bin_rule(*data[0].shape))
    res = methods_on(jax.random.key(s), data, eps, cfg, dpl, only)
    for method, a in res.items():
      per.setdefault(method, []).append(a)
  return {m: float(np.mean(v)) for m, v in per.items()}


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Table 5.3 (every method on every dataset) and the Fig. 5.1 sweep."""
  dpl, dpl_error = (None, 'diffprivlib disabled by config')
  if cfg.diffprivlib:
    dpl, dpl_error = _diffprivlib()
  seeds = cfg.seeds
  table, info = {}, {}
  for name in cfg.datasets:
    per = {}
    for s in seeds:
      res = seed_accuracy(name, s, cfg.epsilon, cfg, dpl, info=info)
      for method, a in res.items():
        per.setdefault(method, []).append(a)
    table[name] = per
    ctx.say(f'{name} done')
  sweep = {}
  for name in cfg.sweep_datasets:
    sweep[name] = {}
    for eps in cfg.sweep_epsilons:
      per = {}
      for s in seeds:
        res = seed_accuracy(name, s, eps, cfg, None,
                            only=('noisy_reg', 'dp_knn'))
        for method, a in res.items():
          per.setdefault(method, []).append(a)
      sweep[name][str(eps)] = per
    ctx.say(f'sweep {name} done')
  return Results(dataset=dict(name=', '.join(info)), table=table,
                 datasets=info, sweep=sweep,
                 diffprivlib=dpl_error or 'diffprivlib available')
