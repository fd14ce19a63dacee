"""The experiment runner: envelope, skip-if-done, report skeleton, claim
families and compare-results."""

import dataclasses
import json
import os
import typing

import numpy as np
import pytest

from experiments import __main__ as cli
from experiments import registry
from experiments.common import claims as claims_lib
from experiments.common import compare
from experiments.common import config
from experiments.common import flags
from experiments.common import report as report_lib
from experiments.common import results as results_lib
from experiments.common import runner
from experiments.common import verdict as verdict_lib


@dataclasses.dataclass(frozen=True)
class Tiny(config.Config):
  NAME = 'tiny'
  PRESETS = {'quick': {}, 'full': dict(num_seeds=4)}
  num_seeds: int = config.setting(3, 'seeds', ge=1)
  epsilons: tuple[float, ...] = config.setting((1.0, 4.0), 'eps', gt=0)
  delta: float = config.setting(1e-5, 'delta', gt=0, lt=1)
  shift: float = config.setting(0.5, 'treatment minus control')


@dataclasses.dataclass(frozen=True, kw_only=True)
class TinyResults(results_lib.Results):
  scores: list[list[float]]  # per seed: (treatment, control)


def _tiny(calls):
  def run(cfg, ctx):
    calls.append((cfg, ctx.out_dir))
    return TinyResults(dataset=dict(name='none'),
                       scores=[[s * 0.1 + cfg.shift, s * 0.1 + s % 2 * 0.01]
                               for s in cfg.seeds])

  def claims(results, cfg):
    del cfg
    family = claims_lib.ClaimFamily()
    family.add('treatment beats control', [t for t, _ in results.scores],
               [c for _, c in results.scores], kind='paper')
    return family

  return runner.Experiment('tiny', 'a tiny experiment', Tiny, TinyResults,
                           run, claims,
                           lambda results, cfg, claims, out_dir: 'BODY')


def test_envelope_holds_config_privacy_data_seeds_versions_and_claims(
    tmp_path):
  exp = _tiny(calls := [])
  cfg = exp.configure('quick', seed=2)
  results = exp.results(cfg, str(tmp_path))
  assert set(runner.ENVELOPE) | {'scores'} == set(results)
  assert results['experiment'] == 'tiny'
  assert results['config'] == cfg.to_dict() and results['config']['seed'] == 2
  assert (results['epsilon'], results['delta']) == ([1.0, 4.0], 1e-5)
  assert results['seeds'] == [2, 3, 4] == [c.seed for c, _ in calls] + [3, 4]
  assert results['dataset'] == dict(name='none')
  assert set(results['versions']) == {'jax', 'jaxlib', 'numpy', 'dpjax',
                                      'python', 'device'}
  assert results['versions']['device'] == 'cpu'
  assert all(results['versions'].values())
  assert results['wall_seconds'] >= 0
  (claim,) = results['claims']
  assert claim['claim'] == 'treatment beats control'
  assert claim['verdict'] == 'held' and claim['comparisons'] == 1
  text = exp.report(results, str(tmp_path))
  assert text.startswith('## tiny (quick)\n\nBODY\n\n### Claims')
  assert verdict_lib.claims_table(results['claims']) in text
  assert 'Seeds 2..4; target epsilon 1, 4, delta 1e-05; data: none' in text


def test_run_must_return_its_record_and_leave_the_envelope_alone(tmp_path):
  exp = _tiny([])
  exp.run = lambda cfg, ctx: dict(dataset={}, scores=[])
  with pytest.raises(TypeError, match='must return its TinyResults, not dict'):
    exp.results(exp.configure(), str(tmp_path))

  @dataclasses.dataclass(frozen=True, kw_only=True)
  class Clash(results_lib.Results):
    seeds: list[int]

  with pytest.raises(ValueError, match=r"may not hold \['seeds'\]"):
    runner.Experiment('tiny', 'a tiny experiment', Tiny, Clash, exp.run,
                      exp.claims, exp.report_body)


def test_skip_if_done_and_force(tmp_path, capsys):
  exp = _tiny(calls := [])
  out = str(tmp_path)
  cfg = exp.configure('quick')
  assert runner.run_and_write(exp, cfg, out, mode='quick', progress=False)
  first = report_lib.read_results(os.path.join(out, 'tiny'))
  # The same configuration again: skipped, the file untouched.
  assert not runner.run_and_write(exp, exp.configure('quick'), out,
                                  mode='quick')
  assert 'already done' in capsys.readouterr().err
  assert len(calls) == 1
  assert report_lib.read_results(os.path.join(out, 'tiny')) == first
  # --force reruns it; another configuration runs.
  assert runner.run_and_write(exp, cfg, out, mode='quick', force=True)
  assert runner.run_and_write(exp, cfg.replace(shift=0.25), out, mode='quick')
  assert len(calls) == 3
  assert report_lib.read_results(os.path.join(out, 'tiny'))['config'][
      'shift'] == 0.25
  # An unreadable results.json is not "done".
  with open(os.path.join(out, 'tiny', 'results.json'), 'w') as f:
    f.write('{')
  assert runner.run_and_write(exp, cfg, out, mode='quick')


def test_configure_applies_the_common_flags_where_they_fit():
  exp = _tiny([])
  cfg = exp.configure('full', epsilons=[2.0], dataset=None, devices=None,
                      seed=1)
  assert (cfg.epsilons, cfg.num_seeds, cfg.seed) == ((2.0,), 4, 1)
  with pytest.raises(ValueError, match='tiny has no dataset setting; drop '
                     '--dataset'):
    exp.configure('quick', dataset='digits')
  with pytest.raises(ValueError, match='drop --allow-fallback'):
    exp.configure('quick', allow_fallback=True)
  with pytest.raises(ValueError, match='unknown setting shiftt'):
    exp.configure('quick', shiftt=1.0)
  compgd = registry.get('compgd')  # one total epsilon
  assert compgd.configure('quick', epsilons=[3.0]).epsilon == 3.0
  with pytest.raises(ValueError, match='runs at one total epsilon'):
    compgd.configure('quick', epsilons=[1.0, 3.0])


def test_converted_experiments_refuse_bad_settings_before_any_work(
    tmp_path, monkeypatch, capsys):
  ran = []
  for name in ('dpsgd_baseline', 'compgd'):
    monkeypatch.setattr(registry.get(name), 'run',
                        lambda *a, **k: ran.append(1))
  out = str(tmp_path)
  for argv, match in [
      (['run', 'dpsgd_baseline', '--epochz', '3'], 'unknown flag --epochz'),
      (['run', 'dpsgd_baseline', '--num-seeds', 'two'], 'invalid int'),
      (['run', 'dpsgd_baseline', '--delta', '1'], 'delta=1.0 in (0, 1)'),
      (['run', 'dpsgd_baseline', '--dataset', 'diabetes'],
       'regression dataset'),
      (['run', 'compgd', '--dimensions', '100', '5'],
       'd=5 >= compression=10'),
      (['run', 'compgd', '--num-val', '0'], 'num_val=0 >= 1'),
      (['run', 'compgd', '--num-seeds', '1'], 'num_seeds=1 >= 2'),
  ]:
    assert cli.main(argv + ['--out', out]) == 2
    assert match in capsys.readouterr().err
  with pytest.raises(ValueError, match='dpsgd_baseline: unknown setting '
                     'epochz'):
    registry.get('dpsgd_baseline').configure('quick', epochz=3)
  assert not ran and not os.listdir(out)


def _out_of_range(field, elem):
  """Values a field's declared range refuses (of an element, for a list)."""
  meta = field.metadata
  bounds = [(meta['ge'], -1), (meta['gt'], 0), (meta['le'], 1),
            (meta['lt'], 0)]
  out = [elem(b + shift) for b, shift in bounds if b is not None]
  if meta['choices'] is not None:
    out.append('not a choice' if elem is str else -12345)
  return out


_WRONG_TYPE = {int: 'x', float: 'x', str: 3, bool: 'yes', dict: 3}


@pytest.mark.parametrize('name', registry.NAMES)
def test_every_experiment_refuses_unknown_wrong_type_and_out_of_range(name):
  """Issue 34's typed configs: every field of every experiment, checked
  when the config is built (before any work), naming the field."""
  exp = registry.get(name)
  with pytest.raises(ValueError, match='unknown setting zzbogus'):
    exp.configure('quick', zzbogus=1)
  with pytest.raises(ValueError, match='unknown flag --zzbogus'):
    flags.parse(exp.config, ['--zzbogus', '1'])
  hints = typing.get_type_hints(exp.config)
  for f in dataclasses.fields(exp.config):
    if f.name == 'mode':
      continue
    base, elem, _ = config.field_type(hints[f.name])
    elem = elem or base
    as_field = (lambda v: (v,)) if base is tuple else (lambda v: v)
    bad = [as_field(_WRONG_TYPE[elem])] + [
        as_field(v) for v in _out_of_range(f, elem)]
    if elem in (int, float) and len(bad) == 1:  # no declared range:
      bad += [as_field(elem(-1)), as_field(elem(1e9))]  # validate refuses
    for value in bad:
      with pytest.raises(ValueError, match=f.name):
        exp.configure('quick', **{f.name: value})


def test_every_field_has_a_flag_in_run_name_help(capsys):
  for name in registry.NAMES:
    exp = registry.get(name)
    assert cli.main(['run', name, '--help']) == 0
    text = capsys.readouterr().out
    for f in dataclasses.fields(exp.config):
      if f.name != 'mode':
        assert '--' + f.name.replace('_', '-') in text, (name, f.name)


# --- claim families ---------------------------------------------------------


def test_claim_family_applies_the_correction_the_experiments_counted():
  rng = np.random.default_rng(0)
  specs = [(f'claim {i}', rng.normal(0.1 * i, 0.2, 5), rng.normal(0, 0.2, 5),
            dict(threshold=[0.0, -0.05, 0.02][i % 3],
                 higher_is_better=bool(i % 2)), dict(index=i))
           for i in range(5)]
  family = claims_lib.ClaimFamily()
  for text, t, c, kw, details in specs:
    family.add(text, t, c, kind='extension', **kw, **details)
  by_hand = [verdict_lib.claim(text, verdict_lib.paired_verdict(
      t, c, comparisons=len(specs), **kw), kind='extension', **details)
             for text, t, c, kw, details in specs]
  assert family.verdicts() == by_hand
  assert {c['comparisons'] for c in by_hand} == {5}
  assert len({c['verdict'] for c in by_hand}) > 1  # the check can tell


def test_claim_details_may_name_the_arms():
  # Experiments store which methods a claim compares as treatment= and
  # control=; those names are the values' parameters, so they must not clash.
  family = claims_lib.ClaimFamily()
  family.add('SPE beats RDT', [0.9, 0.8, 0.85], [0.7, 0.75, 0.7],
             kind='paper', treatment='spe', control='rdt')
  (claim,) = family.verdicts()
  assert (claim['treatment'], claim['control']) == ('spe', 'rdt')
  assert claim['verdict'] in verdict_lib.VERDICTS


def test_named_families_are_corrected_separately():
  primary = claims_lib.ClaimFamily('primary')
  primary.add('one', [0.3, 0.31, 0.29], kind='paper')
  rest = claims_lib.ClaimFamily('rest')
  for i in range(4):
    rest.add(f'r{i}', [0.3, 0.31, 0.29], kind='extension')
  out = claims_lib.verdicts([primary, rest])
  assert [c['comparisons'] for c in out] == [1, 4, 4, 4, 4]
  assert [c['family'] for c in out] == ['primary'] + ['rest'] * 4
  assert out[0]['high'] - out[0]['low'] < out[1]['high'] - out[1]['low']


def test_claim_family_reports_mde_and_the_seeds_an_expected_effect_needs():
  rng = np.random.default_rng(1)
  family = claims_lib.ClaimFamily()
  diffs = [rng.normal(0.02, 0.05, 5) for _ in range(3)]
  family.add('no effect stated', diffs[0], kind='extension')
  family.add('paper: +0.03', diffs[1], effect=0.03, kind='paper')
  family.add('paper: +0.5', diffs[2], effect=0.5, kind='paper', setting='x')
  out = family.verdicts()
  for c, d in zip(out, diffs):
    sd = float(np.std(d, ddof=1))
    assert c['mde'] == pytest.approx(verdict_lib.detectable_effect(
        sd, 5, comparisons=3))
  assert 'effect' not in out[0] and 'seeds_needed' not in out[0]
  # A small effect needs more than these 5 seeds, a large one fewer.
  assert out[1]['effect'] == 0.03 and out[1]['seeds_needed'] > 5
  assert out[1]['seeds_needed'] == verdict_lib.seeds_for_effect(
      0.03, out[1]['sd'], comparisons=3)
  assert out[2]['seeds_needed'] <= 5 and out[2]['setting'] == 'x'
  table = verdict_lib.claims_table(out)
  assert '| MDE | Expected effect | Seeds for it |' in table
  assert '| MDE |' in verdict_lib.claims_table(out[:1])
  assert 'Expected effect' not in verdict_lib.claims_table(out[:1])
  assert family.seeds_for(0.03, 0.05) == verdict_lib.seeds_for_effect(
      0.03, 0.05, comparisons=3)
  with pytest.raises(ValueError, match='effect'):
    family.add('bad', diffs[0], effect=0.0, kind='paper')


def test_every_claim_states_its_kind_and_a_sanity_claim_its_remedy():
  family = claims_lib.ClaimFamily()
  with pytest.raises(TypeError, match='kind'):
    family.add('no kind', [0.1, 0.2, 0.3])  # pylint: disable=missing-kwoa
  with pytest.raises(ValueError, match='kind must be one of'):
    family.add('bad kind', [0.1, 0.2, 0.3], kind='headline')
  with pytest.raises(ValueError, match='remedy'):
    family.add('sanity without a remedy', [0.1, 0.2, 0.3], kind='sanity')
  with pytest.raises(ValueError, match='remedy'):
    family.add('paper with a remedy', [0.1, 0.2, 0.3], kind='paper',
               remedy='more seeds')
  assert len(family) == 0
  for kind in claims_lib.KINDS:
    family.add(kind, [0.1, 0.2, 0.3], kind=kind,
               remedy='more seeds' if kind == 'sanity' else None)
  out = claims_lib.verdicts(family)
  assert [c['kind'] for c in out] == list(claims_lib.KINDS)
  assert [c.get('remedy') for c in out] == [None, None, 'more seeds']
  assert '| Claim | Kind | Mean difference |' in verdict_lib.claims_table(out)


def _gated(sanity_diffs):
  """Verdicts of a paper, an extension and a sanity claim (two families),
  the sanity claim on ``sanity_diffs``."""
  main, sanity = claims_lib.ClaimFamily('main'), claims_lib.ClaimFamily('s')
  main.add('paper held', [0.5, 0.6, 0.55], kind='paper')
  main.add('paper refuted', [-0.5, -0.6, -0.55], kind='paper')
  main.add('extension held', [0.5, 0.6, 0.55], kind='extension')
  sanity.add('ceiling beats it', sanity_diffs, kind='sanity',
             remedy='a smaller epsilon')
  return claims_lib.verdicts([main, sanity])


def test_a_failed_sanity_claim_leaves_the_paper_claims_not_tested(tmp_path):
  held = _gated([0.5, 0.6, 0.55])
  assert [c['outcome'] for c in held] == [c['verdict'] for c in held] == [
      'held', 'refuted', 'held', 'held']
  for failed in ([-0.5, -0.6, -0.55], [0.5, -0.6, 0.1]):  # refuted, undecided
    out = _gated(failed)
    # Only the paper claims change, and their verdicts stay stored.
    assert [c['outcome'] for c in out] == [
        claims_lib.NOT_TESTED, claims_lib.NOT_TESTED, 'held',
        out[3]['verdict']]
    assert [c['verdict'] for c in out[:3]] == ['held', 'refuted', 'held']
    assert claims_lib.failed_sanity(out) == [out[3]]
  table = verdict_lib.claims_table(out)
  assert '| not tested: sanity failed (computed: refuted) |' in table
  assert '| paper held | paper |' in table
  # The report names the failed sanity claim and the run that would decide.
  exp = _tiny([])
  exp.claims = lambda results, cfg: _gated_families(failed)
  results = exp.results(exp.configure(), str(tmp_path), progress=False)
  text = exp.report(results, str(tmp_path))
  assert 'Paper claims not tested: sanity failed' in text
  assert ('- ceiling beats it (inconclusive). The run that would make the '
          'experiment testable: a smaller epsilon') in text
  assert 'sanity failed' not in _tiny([]).report(
      _tiny([]).results(exp.configure(), str(tmp_path), progress=False),
      str(tmp_path))


def _gated_families(sanity_diffs):
  main, sanity = claims_lib.ClaimFamily('main'), claims_lib.ClaimFamily('s')
  main.add('paper held', [0.5, 0.6, 0.55], kind='paper')
  sanity.add('ceiling beats it', sanity_diffs, kind='sanity',
             remedy='a smaller epsilon')
  return [main, sanity]


@pytest.mark.parametrize('higher_is_better', [True, False])
def test_an_inconclusive_interval_that_excludes_the_effect_says_so(
    higher_is_better):
  sign = 1 if higher_is_better else -1
  family = claims_lib.ClaimFamily()
  short = [sign * d for d in (0.01, -0.005, 0.004, 0.0, 0.006)]
  wide = [sign * d for d in (0.05, -0.04, 0.03, 0.08, -0.01)]
  for text, diffs, kind in (('short of the paper', short, 'paper'),
                            ('short of ours', short, 'extension'),
                            ('wide', wide, 'paper')):
    family.add(text, diffs, effect=0.04, kind=kind,
               higher_is_better=higher_is_better)
  family.add('no effect stated', short, kind='paper',
             higher_is_better=higher_is_better)
  family.add('held, short of the effect', [sign * d for d in (
      0.01, 0.011, 0.012, 0.0105)], effect=0.04, kind='paper',
             higher_is_better=higher_is_better)
  out = claims_lib.verdicts(family)
  assert [c['verdict'] for c in out] == ['inconclusive'] * 4 + ['held']
  assert out[0]['high' if higher_is_better else 'low'] * sign < 0.04
  assert [c['outcome'] for c in out] == [
      "inconclusive; excludes the paper's effect",
      'inconclusive; excludes the expected effect', 'inconclusive',
      'inconclusive', 'held']
  assert [claims_lib.counted(c['outcome']) for c in out] == [
      'inconclusive'] * 4 + ['held']
  table = verdict_lib.claims_table(out)
  assert "| inconclusive; excludes the paper's effect |" in table
  assert 'computed' not in table
  # Still listed among the claims more seeds would decide.
  assert 'short of the paper' in verdict_lib.undecided_table(out)


def _old_dpsgd_claims(runs, cfg):
  """dpsgd_baseline.claims before the runner (comparisons counted by hand)."""
  def acc(model, target):
    rows = sorted((r for r in runs if r['model'] == model and
                   r['target_epsilon'] == target), key=lambda r: r['seed'])
    return [r['test_accuracy'] for r in rows]
  models_run = list(dict.fromkeys(r['model'] for r in runs))
  low, high = min(cfg['epsilons']), max(cfg['epsilons'])
  m = (1 + (low < high)) * len(models_run)
  out = []
  for model in models_run:
    if low < high:
      out.append(verdict_lib.claim(
          f'{model}: eps={high:g} beats eps={low:g} (test acc)',
          verdict_lib.paired_verdict(acc(model, high), acc(model, low),
                                     comparisons=m)))
    out.append(verdict_lib.claim(
        f"{model}: eps={high:g} within {cfg['within']:g} of non-private "
        '(test acc)', verdict_lib.paired_verdict(
            acc(model, high), acc(model, None), threshold=-cfg['within'],
            comparisons=m)))
  return out


@pytest.mark.parametrize('epsilons', [(1.0, 3.0, 8.0), (8.0,)])
def test_dpsgd_baseline_verdicts_equal_the_hand_counted_ones(epsilons):
  from experiments.dpsgd_baseline import _claims  # pylint: disable=g-import-not-at-top
  from experiments.dpsgd_baseline import _results  # pylint: disable=g-import-not-at-top
  exp = registry.get('dpsgd_baseline')
  cfg = exp.configure('quick', epsilons=list(epsilons))
  rng = np.random.default_rng(1)
  runs = [dict(model=model, target_epsilon=target, seed=seed,
               test_accuracy=float(rng.uniform(0.8, 0.95)))
          for model in ('mlp', 'digits_cnn') for target in (None,) + epsilons
          for seed in cfg.seeds]
  results = _results.Results(dataset={}, sampling_rate=0.1,
                             max_batch_size=1, runs=runs, selected=runs,
                             summary=[], selected_summary=[])
  new = claims_lib.verdicts(_claims.claims(results, cfg))
  assert new == [dict(c, kind='paper', outcome=c['verdict'])
                 for c in _old_dpsgd_claims(runs, cfg.to_dict())]
  assert len(new) == 2 * (1 + (len(epsilons) > 1))


def test_compgd_claims_compare_test_errors_at_epochs_chosen_on_validation():
  from experiments.compgd import _claims  # pylint: disable=g-import-not-at-top
  from experiments.compgd import _run  # pylint: disable=g-import-not-at-top
  from experiments.compgd._results import Results  # pylint: disable=g-import-not-at-top
  cfg = registry.get('compgd').configure('quick', num_seeds=4, epochs=[2, 5])
  d, k = cfg.dimensions[0], 1
  # DP-GD looks best at T=5 on validation but is best at T=2 on test: the
  # tuned error must be T=5's (a test-chosen T would be biased down).
  val = {'gd': [[0.2] * 4, [0.1] * 4], 'compgd': [[0.2] * 4, [0.1] * 4],
         'dp_gd': [[0.3] * 4, [0.2] * 4], 'dp_compgd': [[0.2] * 4, [0.3] * 4]}
  test = {'gd': [[0.13] * 4, [0.13] * 4],
          'compgd': [[0.14] * 4, [0.131, 0.132, 0.133, 0.134]],
          'dp_gd': [[0.10] * 4, [0.20, 0.21, 0.19, 0.20]],
          'dp_compgd': [[0.15, 0.16, 0.15, 0.16], [0.30] * 4]}
  rows, tuned = [], []
  for method in val:
    method_rows = [dict(method=method, d=d, intrinsic=k, epochs=e,
                        val_error=val[method][i], test_error=test[method][i])
                   for i, e in enumerate(cfg.epochs)]
    rows += method_rows
    tuned.append(dict(method=method, d=d, intrinsic=k,
                      **_run.tune(method_rows, cfg.epochs)))
  by = {t['method']: t for t in tuned}
  assert by['dp_gd']['chosen_epochs'] == [5] * 4
  assert by['dp_compgd']['chosen_epochs'] == [2] * 4
  results = Results(dataset={}, privacy=[], selection_privacy={}, rows=rows,
                    tuned=tuned, baselines=[dict(d=d, intrinsic=k,
                                                 zero_error=[0.5] * 4)])
  out = claims_lib.verdicts(_claims.claims(results, cfg))
  dp, nonprivate = out[0], out[1]
  assert dp['mean'] == pytest.approx(np.mean([-0.05, -0.05, -0.04, -0.04]))
  assert (dp['threshold'], dp['effect'], dp['family']) == (
      -_claims.MARGIN, _claims.MARGIN, 'primary')
  assert dp['verdict'] == 'held'  # 4-5 points better beats the 2-point bar
  assert nonprivate['threshold'] == _claims.MARGIN
  assert nonprivate['verdict'] == 'held'
  sanity = [c for c in out if c['family'] == 'sanity']
  assert [c['arm'] for c in sanity] == ['gd', 'dp_gd', 'dp_compgd']
  assert all(c['verdict'] == 'held' for c in sanity)
  assert {c['comparisons'] for c in out} == {2, 3}


# --- compare-results ----------------------------------------------------------


def test_compare_results_reports_every_moved_leaf(tmp_path, capsys):
  before = dict(config=dict(seed=0), rows=[dict(x=0.1, y=[1, 2])],
                wall_seconds=5.0, gone=1)
  after = json.loads(json.dumps(before))
  after.update(wall_seconds=7.0, versions=dict(jax='x'), seeds=[0])
  del after['gone']
  after['rows'][0]['x'] = float(np.nextafter(0.1, 1.0))
  paths = []
  for name, content in (('a', before), ('b', after)):
    os.makedirs(tmp_path / name)
    report_lib.write_results(str(tmp_path / name), content)
    paths.append(str(tmp_path / name))
  assert compare.main(paths) == 1
  out = capsys.readouterr().out
  assert 'differs   rows[0].x: 0.1 -> 0.10000000000000002 (relative ' in out
  assert '1 ulp' in out and 'only in A gone: 1\n' in out
  assert 'only in B: seeds' in out and 'wall_seconds:' not in out
  del before['gone']
  report_lib.write_results(paths[0], before)
  after['rows'][0]['x'] = 0.1
  report_lib.write_results(paths[1], after)
  assert cli.main(['compare-results'] + paths) == 0
  assert '0 differ, 0 missing in B; 1 fields only in B' in (
      capsys.readouterr().out)


def test_examples():
  import doctest  # pylint: disable=g-import-not-at-top
  for module in (claims_lib, compare, flags, results_lib):
    assert doctest.testmod(module).failed == 0, module.__name__


def test_compgd_noise_free_run_of_the_most_steps_gives_every_t():
  # The run calls the non-private trainers once, at the most epochs, and
  # reads every T off that curve: valid only if a run of T steps equals the
  # first T steps of a longer one (sigma = 0: the step sizes do not depend
  # on T). A private run at T steps stops there: NaN after it.
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from experiments.compgd import _run  # pylint: disable=g-import-not-at-top
  keys = jax.vmap(jax.random.key)(jnp.arange(2, dtype=jnp.uint32))
  fn = _run._trainer(True, 60, 20, 30, 20, 1, 4.0, 2, 4, 5)
  args = (jnp.float32(1.0), jnp.float32(_run.NO_CLIP))
  long, _, fixed = fn(keys, keys, jnp.float32(0.0), jnp.int32(4), *args)
  short, _, _ = fn(keys, keys, jnp.float32(0.0), jnp.int32(2), *args)
  np.testing.assert_allclose(short[:, :2], long[:, :2], rtol=1e-6)
  assert np.isnan(np.asarray(short[:, 2:])).all()
  assert not np.isnan(np.asarray(long)).any()
  # Errors are probabilities; w = 0 errs more than the Bayes predictor w*.
  assert ((long[..., :2] >= 0) & (long[..., :2] <= 1)).all()
  assert (fixed[:, 0] > fixed[:, 1]).all()


def test_claims_docstring_examples():
  import doctest  # pylint: disable=g-import-not-at-top
  result = doctest.testmod(claims_lib,
                           optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Part(results_lib.Record):
  value: float


def test_a_record_reads_back_nested_parts_and_refuses_a_missing_field():

  @dataclasses.dataclass(frozen=True, kw_only=True)
  class Out(results_lib.Results):
    part: Part
    maybe: Part | None = None
    parts: list[Part]
    rows: results_lib.Rows

  rec = Out(dataset={'name': 'x'}, part=Part(value=1.0), parts=[
      Part(value=2.0)], rows=[{'a': 1}])
  data = json.loads(json.dumps(rec.to_dict()))
  assert data == {'dataset': {'name': 'x'}, 'part': {'value': 1.0},
                  'maybe': None, 'parts': [{'value': 2.0}],
                  'rows': [{'a': 1}]}
  back = Out.from_dict(data)
  assert back == rec and isinstance(back.parts[0], Part)
  with pytest.raises(ValueError, match='Out: results hold no part'):
    Out.from_dict({k: v for k, v in data.items() if k != 'part'})


def test_a_record_reads_back_records_nested_in_dicts_of_dicts():

  @dataclasses.dataclass(frozen=True, kw_only=True)
  class Out(results_lib.Results):
    by_method: dict[str, dict[str, Part]]
    table: list[list[float]]

  rec = Out(dataset={}, by_method={'a': {'1': Part(value=1.0)}},
            table=[[1.0, 2.0]])
  back = Out.from_dict(json.loads(json.dumps(rec.to_dict())))
  assert back == rec and isinstance(back.by_method['a']['1'], Part)


# Names the glossary replaced (docs/experiments.md, Settings): one concept,
# one flag, in every experiment.
NOT_GLOSSARY = {'clip', 'clips', 'clip_norm', 'clip_norms', 'xi', 'user_clip',
                'projected_clip', 'dim', 'dims', 'd', 'n', 'n_test', 'n_val',
                'sigma', 'sigmas', 'reps', 'evals', 'lr', 'lr_scale',
                'clipping', 'eps', 'eps_small', 'eps_large'}


@pytest.mark.parametrize('name', registry.NAMES)
def test_settings_take_the_glossarys_names(name):
  fields = set(registry.get(name).config.field_names())
  assert not fields & NOT_GLOSSARY
  assert not {f for f in fields if f.endswith(('_clipping', '_clip_norm'))
              or f.startswith(('lr_', 'eps_'))}
