"""The reproduction CLI: bad input, a tiny end-to-end run, and the report."""

import json
import os
import subprocess
import sys
import time

import pytest

from experiments import __main__ as cli
from experiments import registry
from experiments.common import report as report_lib
from experiments.common import verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_list_names_every_experiment(capsys):
  assert cli.main(['list']) == 0
  out = capsys.readouterr().out
  for name in registry.EXPERIMENTS:
    assert name in out


@pytest.mark.parametrize('argv, match', [
    (['run', 'no_such_experiment'], "unknown experiment 'no_such_experiment'"),
    (['run', 'dpsgd_baseline', '--epsilons', '0'], 'epsilons[0]=0.0 > 0'),
    (['run', 'dpsgd_baseline', '--epsilons', '3', '-1'], 'epsilons[1]=-1.0'),
    (['run', 'all', '--epsilons', '3', '-1'], 'epsilon=-1.0'),
    (['run', 'dpsgd_baseline', '--epochz', '3'], 'unknown flag --epochz'),
    (['run', 'dpsgd_baseline', '--epochs', '2.5'], "invalid int value: '2.5'"),
    (['run', 'compgd', '--dataset', 'digits'], 'unknown flag --dataset'),
    (['run', 'dpsgd_baseline', '--delta', '1.5'], 'delta=1.5'),
    (['run', 'dpsgd_baseline', '--dataset', 'imagenet'], "unknown dataset"),
    (['run', 'dpsgd_baseline', '--seed', '-2'], 'seed=-2'),
    (['run', 'dpsgd_baseline', '--quick', '--full'], 'not allowed with'),
    (['run', 'dpsgd_baseline', '--epsilons', 'x'], 'invalid float'),
    (['report', 'no/such/dir'], 'no results.json'),
    (['frobnicate'], 'invalid choice'),
    (['run', 'compgd', '--accountant', 'exact'], "accountant='exact' in"),
    (['run', 'dpsgd_baseline', '--accountant', 'pld'],
     'unknown flag --accountant'),
    (['run', 'qdpsgd', '--accountant', 'pld'], 'unknown flag --accountant'),
    (['run', 'dpsgd_baseline', '--devices', '0'], 'devices=0'),
    (['run', 'dpsgd_baseline', '--devices', '99'],
     'xla_force_host_platform_device_count'),
    (['run', 'qdpsgd', '--devices', '2'], 'unknown flag --devices'),
    (['run', 'trees', '--epsilons', '2', '0.5'], 'unknown flag --epsilons'),
    (['run', 'nonparametric', '--delta', '1e-5'], 'unknown flag --delta'),
    (['run', 'audit', '--one-run-num-guesses', '9',
      '--one-run-num-canaries', '8'],
     'one_run_num_guesses=9 <= one_run_num_canaries=8'),
    (['run', 'compgd', '--out', __file__], 'is a file, not a directory'),
    (['run', 'all', '--jobs', '0'], 'jobs=0'),
])
def test_bad_input_is_one_line_and_status_2(argv, match, capsys):
  assert cli.main(argv) == 2
  captured = capsys.readouterr()
  lines = captured.err.strip().splitlines()
  assert len(lines) == 1, captured.err
  assert match in lines[0]
  assert 'Traceback' not in captured.err + captured.out


def test_bad_input_from_the_shell_has_no_traceback():
  proc = subprocess.run(
      [sys.executable, '-m', 'experiments', 'run', 'nope'], cwd=ROOT,
      capture_output=True, text=True, timeout=120)
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines() == [
      "python -m experiments: error: unknown experiment 'nope'; known: "
      f"{', '.join(registry.EXPERIMENTS)} (or 'all')"]


def test_unprepared_tfds_data_fails_up_front_unless_fallback_is_allowed(
    tmp_path, monkeypatch):
  monkeypatch.setenv('TFDS_DATA_DIR', str(tmp_path / 'tfds'))
  ran = []
  monkeypatch.setattr(registry.get('dpsgd_baseline'), 'results',
                      lambda cfg, *a, **k: ran.append(cfg) or {})
  monkeypatch.setattr(cli, 'write_report', lambda out: None)
  out = str(tmp_path / 'out')
  assert cli.main(['run', 'dpsgd_baseline', '--dataset', 'mnist',
                   '--out', out]) == 2
  assert not ran
  assert cli.main(['run', 'dpsgd_baseline', '--dataset', 'mnist',
                   '--allow-fallback', '--out', out]) == 0
  assert ran[0].allow_fallback is True and ran[0].dataset == 'mnist'


def test_no_arguments_print_help_fast_without_importing_jax():
  code = ('import sys, time; t = time.time(); from experiments import '
          '__main__ as m; m.main([]); '
          'print("jax" in sys.modules, round(time.time() - t, 3))')
  proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                        capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  assert 'usage: python -m experiments' in proc.stdout
  jax_imported, seconds = proc.stdout.split()[-2:]
  assert jax_imported == 'False' and float(seconds) < 2.0
  help_proc = subprocess.run([sys.executable, '-m', 'experiments', '--help'],
                             cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
  assert help_proc.returncode == 0 and 'run all' in help_proc.stdout


def test_run_name_help_lists_that_experiments_settings(capsys):
  assert cli.main(['run', 'compgd', '--help']) == 0
  compgd = capsys.readouterr().out
  assert cli.main(['run', 'qdpsgd', '--help']) == 0
  qdpsgd = capsys.readouterr().out
  assert compgd != qdpsgd
  assert '--accountant' in compgd and '--accountant' not in qdpsgd
  assert '--edge-probability FLOAT' in qdpsgd
  assert 'default 10, full 10 20 50' in ' '.join(qdpsgd.split())
  # A converted experiment: one flag per Config field, type and presets.
  assert '--solver-iterations INT' in compgd and (
      '--dimensions INT [INT ...]' in compgd)
  assert 'default 1000, full 1000 3000' in ' '.join(
      compgd.split())


def test_run_all_builds_every_configuration_from_the_cli_defaults():
  args = cli._parser().parse_args(['run', 'all'])  # what make reproduce runs
  configs = cli._configs(registry.NAMES, 'quick', cli.run_overrides(args))
  assert list(configs) == list(registry.NAMES)
  # run all --jobs schedules every experiment of the main job, longest
  # first; the main job is every paper reproduction, lm_finetune by name
  assert sorted(registry.LONGEST_FIRST) == sorted(registry.MAIN_JOB)
  assert cli._names('all') == [n for n in registry.NAMES  # pylint: disable=protected-access
                               if n != 'lm_finetune']


def test_accountant_flag_reaches_the_configuration():
  configs = cli._configs(['compgd'], 'quick', dict(accountant='pld'))
  assert configs['compgd'].accountant == 'pld'
  assert set(cli.ACCOUNTANTS) == set(__import__(
      'dpjax').accounting.ACCOUNTANTS)


def test_unwritable_out_fails_before_any_work(tmp_path, monkeypatch):
  ran = []
  monkeypatch.setattr(registry.get('compgd'), 'run',
                      lambda *a, **k: ran.append(1))
  monkeypatch.setattr(registry.get('qdpsgd'), 'results',
                      lambda *a, **k: ran.append(1))
  locked = tmp_path / 'locked'
  locked.mkdir()
  locked.chmod(0o500)
  try:
    if os.access(locked, os.W_OK):  # running as root: permissions are moot
      target = str(tmp_path / 'file')
      open(target, 'w').close()
    else:
      target = str(locked)
    assert cli.main(['run', 'compgd', '--out', target]) == 2
    assert cli.main(['run', 'qdpsgd', '--out', target]) == 2
  finally:
    locked.chmod(0o700)
  assert not ran


def test_tiny_run_writes_results_report_and_plot(tmp_path):
  out = str(tmp_path)
  cli.run_experiments(['dpsgd_baseline'], 'quick', out, progress=False,
                      epochs=1, num_seeds=1, epsilons=[8.0], seed=4,
                      dataset='digits', cnn=True)
  exp_dir = os.path.join(out, 'dpsgd_baseline')
  results = report_lib.read_results(exp_dir)
  assert results['config']['epsilons'] == [8.0]
  assert results['dataset']['name'] == 'digits'
  for run in results['runs']:  # every number carries its privacy context
    assert {'epsilon_rdp', 'epsilon_pld', 'delta', 'dataset', 'seed',
            'train_config', 'test_accuracy'} <= set(run)
    assert run['seed'] == 4 and run['dataset'] == 'digits'
    if run['target_epsilon'] is not None:
      assert run['epsilon_rdp'] <= 8.0 + 1e-6
      assert run['epsilon_pld'] <= run['epsilon_rdp']
  assert {(r['model'], r['target_epsilon'])
          for r in results['selected_summary']} == {
      ('mlp', None), ('mlp', 8.0), ('digits_cnn', None), ('digits_cnn', 8.0)}
  assert os.path.getsize(os.path.join(exp_dir, 'accuracy_vs_epsilon.png')) > 0
  with open(os.path.join(out, 'REPORT.md')) as f:
    combined = f.read()
  assert '| mlp | 8 | 0.5 |' in combined  # the clip grid, every C
  assert 'dpsgd_baseline/accuracy_vs_epsilon.png' in combined
  assert combined.count(verdict.RULE) == 1  # the rule, stated once
  assert 'dpsgd_baseline: mlp: eps=8 within 0.05 of non-private' in combined
  # The run table: mode, seeds, wall time and verdicts per experiment, and
  # the experiments this directory lacks (a run in parts says what is left).
  n_claims = len(results['claims'])
  wall = report_lib.fmt(float(results['wall_seconds']))
  assert f'| dpsgd_baseline | quick | 1 | {wall} |' in combined
  assert f'| total |  |  | {wall} |' in combined
  assert '(%d%%) |' % round(100 * sum(
      c['verdict'] == 'inconclusive' for c in results['claims'])
      / n_claims) in combined
  assert 'Not run in this directory: rs_tradeoff,' in combined
  assert results['versions']['device'] == 'cpu'
  assert '| device |' not in combined and ', on cpu' not in combined
  # One seed: every claim is inconclusive and says why no seed count is given.
  assert '## What would decide the inconclusive claims' in combined
  assert '| no spread (fewer than 2 seeds) |' in combined

  # `report DIR` redoes the report from results.json alone, and carries the
  # benchmark's table when `python -m experiments bench` wrote one there.
  os.remove(os.path.join(out, 'REPORT.md'))
  os.makedirs(os.path.join(out, 'bench'))
  with open(os.path.join(out, 'bench', 'bench.md'), 'w') as f:
    f.write('| model | B |\n|---|---|\n| mlp | 64 |\n')
  assert cli.main(['report', out]) == 0
  with open(os.path.join(out, 'REPORT.md')) as f:
    combined = f.read()
  assert '## bench' in combined and '| mlp | 64 |' in combined
  assert '](bench/bench.png)' in combined
  # A run on an accelerator is named in the run table and in its section.
  report_lib.write_results(exp_dir, dict(results, versions=dict(
      results['versions'], device='gpu: Test GPU')))
  assert cli.main(['report', out]) == 0
  with open(os.path.join(out, 'REPORT.md')) as f:
    combined = f.read()
  assert f'| dpsgd_baseline | quick | 1 | {wall} | gpu: Test GPU |' in combined
  assert f'| total |  |  | {wall} |  |' in combined
  assert f"dpjax {results['versions']['dpjax']}, on gpu: Test GPU." in combined
  report_lib.write_results(exp_dir, results)

  # Rerunning the same command skips the finished experiment ...
  start = time.time()
  cli.run_experiments(['dpsgd_baseline'], 'quick', out, progress=False,
                      epochs=1, num_seeds=1, epsilons=[8.0], seed=4,
                      dataset='digits', cnn=True)
  assert time.time() - start < 5
  assert report_lib.read_results(exp_dir) == results
  # ... and --force reruns it, resuming every run from its checkpoint.
  cli.run_experiments(['dpsgd_baseline'], 'quick', out, progress=False,
                      force=True, epochs=1, num_seeds=1, epsilons=[8.0],
                      seed=4, dataset='digits', cnn=True)
  again = report_lib.read_results(exp_dir)
  assert all(r['resumed_from'] == r['steps'] for r in again['runs'])
  assert json.dumps(again['summary']) == json.dumps(results['summary'])


TINY = {
    'rs_tradeoff': dict(dataset='digits', model='', epochs=1, num_seeds=2,
                        noise_multipliers=[4.0], l2_norm_clips=[0.5],
                        panels=[4.0, 0.5], final_rates=[0.0, 0.5]),
    'rs_privacy': dict(dataset='digits', model='', epochs=1, num_seeds=1,
                       final_rates=[0.5], l2_norm_clips=[1.0],
                       epsilons=[3.0]),
    'rs_attack': dict(num_images=1, num_trials=200, attack_steps=20,
                      rates=[0.0, 0.9]),
    'compressive_regression': dict(steps=20, num_seeds=1, num_examples=2000,
                                   kappas=[1, 5], epsilons=[1.0, 1000.0]),
    'cpsgd_mechanisms': dict(epsilons=[2.0], dimensions=[1],
                             scale_denominators=[1, 4], num_samples=400),
    'cpsgd_dme': dict(num_clients=10, dimension=64, levels=[4],
                      epsilons=[4.0], variants=['none'], num_repetitions=2,
                      cor3_num_clients=None),
    'cpsgd_training': dict(num_clients=20, rounds=2, levels=[2],
                           trials=[256], unrotated=[], num_seeds=1),
    'qdpsgd': dict(dataset='synthetic', rounds=3, num_seeds=2,
                   num_agents=[4], epsilons=[2.0], sweep_epsilons=[],
                   more_bits=[], mixing_rate_scale=1.0, hidden=8, num_evals=2,
                   data_options=dict(n_samples=400, n_features=16,
                                     n_classes=3)),
    'distributed_dp': dict(num_clients=4, dimension=16, bits=[16],
                           num_seeds=2, num_repetitions=2, levels=[4],
                           epsilons=[4.0]),
    'compgd': dict(num_seeds=2, dimensions=[20], epochs=[1], num_examples=200,
                   num_val=20, num_test=20, solver_iterations=5),
    'trees': dict(num_seeds=2, datasets=['iris'], num_trees=3,
                  sklearn_num_trees=5, min_test=1, median_epsilons=[2.0],
                  median_depths=[3], median_num_examples=200),
    'nonparametric': dict(num_seeds=2, datasets=['iris'], sweep_epsilons=[2.0],
                          sweep_datasets=['iris'], max_test=20, min_test=1),
    'correlated_noise': dict(num_seeds=2, epochs=1, l2_norm_clips=[0.3, 1.0],
                             learning_rates=[0.1], expected_num_users=48),
    'finetune': dict(num_seeds=2, epochs=1, learning_rates=[0.1], hidden=8,
                     rank=2, pretrain_epochs=1),
    'audit': dict(num_seeds=2, trials=400, cases=['gaussian', 'dpsgd_vmap'],
                  one_run_epsilons=[2.0], one_run_num_canaries=50,
                  one_run_num_guesses=10),
}


# The two slowest tiny runs (about 90 s together) go to the slow stage, which
# also runs every experiment on every dataset it accepts; finetune's tiny run
# is in the default stage in tests/test_finetune.py.
SLOW_TINY = ('finetune', 'rs_privacy', 'rs_tradeoff')


# qdpsgd's tiny run is the first run of its resume test below, which checks
# its report as this test does.
RUN_ELSEWHERE = ('qdpsgd',)


def _check_report(name, exp, results, out):
  """Checks the report of a finished run written to ``out``."""
  report_lib.write_results(out, results)
  text = exp.report(report_lib.read_results(out), out)
  assert text.startswith(f'## {name} (quick)')
  # Every experiment states its claims as verdicts of the one rule.
  assert results['claims'], 'no claims'
  assert all(c['verdict'] in verdict.VERDICTS for c in results['claims'])
  assert verdict.claims_table(results['claims']) in text
  assert '**yes**' not in text and '**no**' not in text
  for run in results.get('runs', []):
    assert run['dataset'] == 'digits' and 'train_config' in run


@pytest.mark.spread
@pytest.mark.parametrize('name', [
    pytest.param(n, marks=pytest.mark.slow) if n in SLOW_TINY else n
    for n in sorted(TINY) if n not in RUN_ELSEWHERE])
def test_every_experiment_runs_and_reports(name, tmp_path):
  assert set(TINY) | {'dpsgd_baseline', 'lm_finetune'} == set(
      registry.EXPERIMENTS)  # their tiny runs: their own test modules
  exp = registry.EXPERIMENTS[name]
  cfg = exp.configure('quick', **TINY[name])
  results = exp.results(cfg, str(tmp_path), progress=False)
  _check_report(name, exp, results, str(tmp_path))


def test_experiments_refuse_options_they_cannot_honour(capsys):
  assert cli.main(['run', 'rs_tradeoff', '--epsilons', '3']) == 2
  assert 'rs_tradeoff: unknown flag --epsilons' in capsys.readouterr().err
  assert cli.main(['run', 'cpsgd_training', '--epsilons', '3']) == 2
  assert 'cpsgd_training: unknown flag --epsilons' in capsys.readouterr().err


@pytest.mark.parametrize('argv, match', [
    (['--dataset', 'digits'], 'needs a regression dataset'),
    (['--epsilons', '3'], 'compares a small and a large epsilon'),
])
def test_compressive_regression_refuses_what_it_cannot_run(argv, match,
                                                            capsys):
  assert cli.main(['run', 'compressive_regression'] + argv) == 2
  assert match in capsys.readouterr().err


def test_compressive_regression_accepts_a_csv_dataset(tmp_path):
  path = tmp_path / 'loans.csv'
  rows = ['id,loan_amnt,grade,int_rate']
  rows += [f'{i},{1000 + 37 * i},{"ABC"[i % 3]},{5 + (i * 7) % 11}.5%'
           for i in range(60)]
  path.write_text('\n'.join(rows) + '\n')
  exp = registry.EXPERIMENTS['compressive_regression']
  cfg = exp.configure('quick', dataset=f'csv:{path}', steps=5, num_seeds=1,
                      kappas=[1], kappa=1, num_measurements=4,
                      epsilons=[1.0, 10.0])
  results = exp.results(cfg, str(tmp_path), progress=False)
  assert results['dataset']['name'] == f'csv:{path}'
  assert (results['n'], results['n_theta']) == (60, 3)  # intercept, 2 cols


def test_rs_tradeoff_needs_the_reference_rate():
  with pytest.raises(ValueError, match='to hold 0'):
    registry.EXPERIMENTS['rs_tradeoff'].configure('quick',
                                                  final_rates=[0.5, 0.9])


def _matrix():
  from experiments.common import data as data_lib  # pylint: disable=import-outside-toplevel
  names = [n for n in registry.NAMES if 'dataset' in
           registry.get(n).stored_config(registry.get(n).configure('quick'))]
  return [(n, d) for n in names for d in data_lib.DATASETS + ('csv',)]


@pytest.mark.spread
@pytest.mark.slow
@pytest.mark.parametrize('name, dataset', _matrix())
def test_every_offered_dataset_runs_or_is_refused_up_front(name, dataset,
                                                            tmp_path,
                                                            monkeypatch):
  """The (experiment x dataset) matrix: each pair either runs end to end on
  a tiny setting or is refused before any work in one line (status 2)."""
  from experiments.common import data as data_lib  # pylint: disable=import-outside-toplevel
  monkeypatch.setenv('TFDS_DATA_DIR', str(tmp_path / 'no_tfds'))
  if dataset == 'csv':
    path = tmp_path / 'loans.csv'
    rows = ['id,loan_amnt,grade,int_rate']
    rows += [f'{i},{1000 + 37 * i},{"ABC"[i % 3]},{5 + (i * 7) % 11}.5%'
             for i in range(60)]
    path.write_text('\n'.join(rows) + '\n')
    dataset = f'csv:{path}'
  tiny = dict(TINY.get(name, dict(epochs=1, num_seeds=1, epsilons=[8.0])))
  if name == 'compressive_regression':  # the CSV has 2 features: kappa 1
    tiny.update(num_examples=60, kappas=[1], kappa=1, num_measurements=4)
  if name == 'qdpsgd' and dataset != 'synthetic':
    tiny.pop('data_options')
  exp = registry.get(name)
  if 'expected_batch_size' in exp.config.field_names():
    # The MNIST-5k presets sample 256 a step; iris and wine keep 96 train
    # rows after the validation split, which the run refuses (not a tiny
    # setting).
    tiny.setdefault('expected_batch_size', 16)
  try:
    configs = cli._configs([name], 'quick', dict(tiny, dataset=dataset))  # pylint: disable=protected-access
  except ValueError as e:  # refused up front, in one line
    assert '\n' not in str(e) and str(e)
    if dataset in data_lib.TFDS_DATASETS and 'regression' not in str(e):
      assert 'tfds build' in str(e)  # offered, but not prepared here
    return
  assert dataset not in data_lib.TFDS_DATASETS  # no data here: must refuse
  results = exp.results(configs[name], str(tmp_path), progress=False)
  report_lib.write_results(str(tmp_path), results)
  assert exp.report(report_lib.read_results(str(tmp_path)), str(tmp_path))


@pytest.mark.slow
def test_parallel_jobs_give_the_sequential_results(tmp_path):
  """``run all --jobs 2``: each experiment in its own spawned process, the
  same results.json (but for the runner's wall time and versions)."""
  from experiments.common import compare  # pylint: disable=g-import-not-at-top
  from experiments.common import runner  # pylint: disable=g-import-not-at-top
  names = ('compgd', 'cpsgd_mechanisms')
  configs = {n: registry.get(n).configure('quick', **TINY[n]) for n in names}
  par, seq = str(tmp_path / 'par'), str(tmp_path / 'seq')
  runner.run_parallel(configs, par, mode='quick', force=False, jobs=2)
  for name, cfg in configs.items():
    runner.run_and_write(registry.get(name), cfg, seq, mode='quick',
                         progress=False)
  for name in names:
    a = compare.load(os.path.join(par, name, 'results.json'))
    b = compare.load(os.path.join(seq, name, 'results.json'))
    assert not compare.diff(a, b), name


def test_qdpsgd_resumes_from_its_finished_rows(tmp_path, monkeypatch):
  """A full qdpsgd run takes days on a CPU, so each finished row is kept: a
  rerun reads them without training and writes the same results; a corrupt
  row is set aside and trained again; another configuration, or other code,
  never reads them."""
  from experiments.common import row_cache  # pylint: disable=g-import-not-at-top
  from experiments.qdpsgd import _run as qdpsgd_run  # pylint: disable=g-import-not-at-top
  exp = registry.get('qdpsgd')
  cfg = exp.configure('quick', **TINY['qdpsgd'])
  first = exp.results(cfg, str(tmp_path), progress=False)
  _check_report('qdpsgd', exp, first, str(tmp_path / 'report'))
  files = sorted(tmp_path.glob('checkpoints/*/*.npz'))
  assert len(files) == len(qdpsgd_run.settings(cfg))

  real_trainer = qdpsgd_run.Scenario.trainer
  trained = []

  def counting_trainer(self, alg, deadline):
    trained.append(alg.name)
    return real_trainer(self, alg, deadline)

  monkeypatch.setattr(qdpsgd_run.Scenario, 'trainer', counting_trainer)
  second = exp.results(cfg, str(tmp_path), progress=False)
  assert not trained
  assert second['scenarios'] == first['scenarios']
  assert second['claims'] == first['claims']

  files[0].write_bytes(b'not a row')
  with pytest.warns(UserWarning, match='unreadable or does not match'):
    third = exp.results(cfg, str(tmp_path), progress=False)
  assert len(trained) == 1
  assert third['scenarios'] == first['scenarios']
  assert list(tmp_path.glob('checkpoints/*/corrupt-*'))

  row = dict(qdpsgd_run.settings(cfg)[0], sigma=0.0)
  cache = row_cache.RowCache(str(tmp_path), cfg.to_dict())
  other = row_cache.RowCache(
      str(tmp_path), exp.configure('quick', **dict(
          TINY['qdpsgd'], l2_norm_clip=0.4)).to_dict())
  assert other.path(row) != cache.path(row)
  assert cache.path(dict(row, sigma=1e-9)) != cache.path(row)
  cache.provenance = dict(cache.provenance, source='edited')
  assert cache.path(row) != row_cache.RowCache(
      str(tmp_path), cfg.to_dict()).path(row)


def test_audit_resumes_from_its_finished_cases(tmp_path, monkeypatch):
  """The full audit keeps each finished case too: a rerun audits nothing
  and reports the same bounds."""
  from experiments.audit import _run as audit_run  # pylint: disable=g-import-not-at-top
  exp = registry.get('audit')
  cfg = exp.configure('quick', **dict(TINY['audit'], cases=['gaussian']))
  # One case is enough (the run builds only the cases it audits), and the
  # one-run audits, short and recomputed, are not what is kept.
  monkeypatch.setattr(audit_run, 'one_run', lambda cfg, seeds: [])
  monkeypatch.setattr(exp, 'claims', lambda results, cfg: [])
  first = exp.results(cfg, str(tmp_path), progress=False)
  assert len(list(tmp_path.glob('checkpoints/cases/*.npz'))) == len(cfg.cases)
  monkeypatch.setattr(audit_run, '_audit', lambda *a: pytest.fail(
      'audited a finished case'))
  second = exp.results(cfg, str(tmp_path), progress=False)
  assert second['cases'] == first['cases']
  assert second['claims'] == first['claims']
