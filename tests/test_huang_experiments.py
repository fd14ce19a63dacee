"""Huang ch. 5 / ch. 8 experiment settings: bin rule, splits, projection
bounds, Syn generator, SSPE-2 variants, Fig. 8.2, power."""

import math

import jax
import numpy as np
import pytest

from dpjax import nonparametric as npm
from experiments.common import claims as claims_lib
from experiments.common import power
from experiments.common import verdict
from experiments.nonparametric import _config as np_config
from experiments.nonparametric import _run as np_run
from experiments.trees import _claims as tr_claims
from experiments.trees import _config as tr_config
from experiments.trees import _median
from experiments.trees import _results as tr_results
from experiments.trees import _run as tr_run


def test_bin_rule_is_the_thesis_rate_rounded_up():
  # b = ceil(n^(1/(m+2))): synthetic10 (2700, 10) -> 2, iris (135, 4) -> 3
  assert np_run.bin_rule(2700, 10) == 2
  assert np_run.bin_rule(135, 4) == 3
  assert np_run.bin_rule(2700, 4) == math.ceil(2700 ** (1 / 6))
  assert np_config.Config.preset('quick').bins is None


def test_quick_preset_has_power_seeds_and_enough_test_points():
  cfg = np_config.Config.preset('quick')
  assert cfg.num_seeds >= 10 and cfg.max_test is None
  # iris: 15 test points per split -> 10 splits for 150 points per seed
  assert np_run.num_repeats(15, cfg.min_test) * 15 >= cfg.min_test
  assert np_run.num_repeats(300, cfg.min_test) == 1
  seeds = [s for seed in range(20) for s in np_run.split_seeds(seed, 10)]
  assert len(set(seeds)) == len(seeds)  # no split shared between seeds
  assert tr_config.Config.preset('quick').num_seeds >= 10


def test_projected_bounds_depend_on_the_projection_only():
  rng = np.random.default_rng(0)
  x, xt = rng.standard_normal((50, 30)), rng.standard_normal((5, 30))
  key = jax.random.key(3)
  _, _, (lo, hi) = np_run.project(key, x, xt, 4, 3.0)
  _, _, (lo2, hi2) = np_run.project(key, 100 * x, xt, 4, 3.0)
  np.testing.assert_array_equal(lo, lo2)
  np.testing.assert_array_equal(hi, hi2)
  phi = np.asarray(npm.jl_projection(key, 30, 4))
  box = np.abs(phi).sum(1) * 4.0  # image of the box [-4, 4]^30
  assert np.all(hi < box / 2)  # tighter than the box image


def test_syn_sets_use_make_classification_defaults(monkeypatch):
  seen = {}

  def fake_load(name, **kw):
    seen.update(kw)
    raise RuntimeError('stop')

  monkeypatch.setattr(tr_run.data_lib, 'load', fake_load)
  with pytest.raises(RuntimeError):
    tr_run.load('syn10d', 0, tr_config.Config.preset('quick'))
  assert seen['n_informative'] == 2 and seen['n_redundant'] == 2


def test_sspe2_every_tree_counts_every_label_n_times():
  rng = np.random.default_rng(1)
  xl, xu = rng.uniform(size=(200, 3)), rng.uniform(size=(300, 3))
  yl = (xl[:, 0] > 0.5).astype(np.int32)
  kw = dict(epsilon=1e4, bounds=(0.0, 1.0), num_classes=2, num_trees=4,
            depth=2)
  unsound = tr_run.sspe2_every_tree(jax.random.key(0), xl, yl, xu, kw)
  written, _ = npm.sspe(jax.random.key(0), xl, yl, xu, setting=2, **kw)
  per_tree = lambda rel: np.asarray(rel.counts).reshape(4, -1).sum(1)
  assert unsound.counts.shape == written.counts.shape
  np.testing.assert_allclose(per_tree(unsound), 200, atol=2)
  assert per_tree(written).sum() == pytest.approx(200, abs=2)


def test_shallow_depth_leaves_labels_per_leaf():
  assert tr_run.shallow_depth(540, 10, 8, 10) == 2
  assert tr_run.shallow_depth(5, 10, 8, 10) == 1
  assert tr_run.shallow_depth(10**6, 10, 8, 10) == 10


def test_median_distance_and_budgets():
  np.testing.assert_allclose(_median.budgets('geometric', 2.0, 5).sum(), 2.0)
  np.testing.assert_allclose(_median.budgets('uniform', 2.0, 5), 0.4)
  with pytest.raises(ValueError, match='kind'):
    _median.budgets('linear', 2.0, 5)
  z = np.random.default_rng(0).uniform(size=(2000, 3))
  exact = _median.tree_median_distance(4, z, [1e4] * 3)
  noisy = _median.tree_median_distance(4, z, [1e-3] * 3)
  # 32 candidates per node: a near-exact mechanism lands within about one
  # candidate spacing of the true median; a budget of 1e-3 picks uniformly
  assert exact < 0.03 < noisy
  assert _median.tree_median_distance(4, z, [1.0] * 3) == (
      _median.tree_median_distance(4, z, [1.0] * 3))


def test_trees_claims_include_allocation_and_sspe2():
  cfg = tr_config.Config.preset('quick', median_epsilons=(0.5, 2.0))
  acc = lambda v: [v + 0.01 * i for i in range(4)]
  results = tr_results.Results(
      dataset={}, info={}, mann_whitney={}, grid=[], diffprivlib_error=None,
      methods={},
      per_seed={'syn10d': dict(spe=acc(0.8), rdt=acc(0.7), sspe1=acc(0.8),
                               sspe2=acc(0.6))},
      small={'syn10d': dict(sspe1=acc(0.8), spe_labelled=acc(0.7))},
      median=[{str(d): {str(e): dict(geometric=0.1 + 0.001 * s,
                                     uniform=0.2)
                        for e in cfg.median_epsilons}
               for d in cfg.median_depths} for s in range(4)])
  verdicts = {c['comparison']: c['verdict'] for c in
              claims_lib.verdicts(tr_claims.claims(results, cfg))}
  assert verdicts['sspe2'] == 'refuted'
  assert verdicts['allocation'] == 'held'


def test_power_mde_matches_the_interval_rule():
  diffs = [0.02, 0.05, 0.01, 0.04, 0.03]
  v = verdict.paired_verdict(diffs, comparisons=3).to_dict()
  mde = power.minimal_detectable_effect(v)
  # an effect of exactly the MDE with the same spread is held at 80% power:
  # its mean sits (t_level + t_power) standard errors above 0
  se = np.std(diffs, ddof=1) / np.sqrt(5)
  assert mde / se == pytest.approx(
      verdict.special.stdtrit(4, 1 - 0.05 / 6) + verdict.special.stdtrit(
          4, 0.8))
  assert power.seeds_for(0.05, 0.05, comparisons=9) > power.seeds_for(
      0.05, 0.05, comparisons=1)
  with pytest.raises(ValueError, match='effect'):
    power.seeds_for(0.05, 0.0)


def test_synthetic_sets_are_one_set_resplit_by_seed():
  cfg = np_config.Config.preset('quick', synthetic_num_examples=200)
  a, b = np_run.load('synthetic10', 0, cfg), np_run.load('synthetic10', 1, cfg)
  rows = lambda d: np.sort(np.concatenate([d[0], d[2]]), axis=0)
  np.testing.assert_array_equal(rows(a), rows(b))  # the same data set
  assert not np.array_equal(a[2], b[2])  # split differently
  tcfg = tr_config.Config.preset('quick', synthetic_num_examples=200)
  ta, tb = tr_run.load('syn5d', 0, tcfg), tr_run.load('syn5d', 1, tcfg)
  np.testing.assert_array_equal(rows(ta), rows(tb))
  assert not np.array_equal(ta[2], tb[2])
