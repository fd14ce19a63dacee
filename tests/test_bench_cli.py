"""`python -m experiments bench dpsgd`: outputs of a tiny run, bad options."""

import argparse
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest

from experiments import __main__ as cli
from experiments import bench
from experiments import registry
from experiments.bench import dpsgd_cli

TINY = ['--models', 'mlp-784-512-512-10', '--batch-sizes', '2',
        '--plot-batch-sizes', '2', '--repeats', '1', '--burst', '1',
        '--min-calls', '1', '--warmup', '1', '--plot-calls', '1',
        '--methods', 'ghost', '--no-baselines', '--quick', '--passes', '2']


@pytest.mark.slow  # compiles and times real steps: 15-60 s
def test_bench_writes_json_table_and_plot_with_positive_ratios(tmp_path,
                                                               capsys):
  out = tmp_path / 'bench'
  assert cli.main(['bench', 'dpsgd', '--out', str(out),
                   '--xla-settings', 'default'] + TINY) == 0
  assert {'bench.json', 'bench.md', 'bench.png'} <= set(os.listdir(out))
  with open(out / 'bench.png', 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'
  with open(out / 'bench.json') as f:
    results = json.load(f)
  (row,) = results['rows']
  assert (row['model'], row['batch_size'], row['setting']) == (
      'mlp-784-512-512-10', 2, 'default')
  for stat in row['time'].values():  # 2 passes of 1 call: range = the calls
    assert stat['passes'] == 2 and stat['lo'] <= stat['median'] <= stat['hi']
    assert stat['disagree'] == (stat['hi'] > 1.25 * stat['lo'])
  # checked against dpjax vmap (exact norms), within ghost's own tolerance
  assert row['clip_error']['ghost'] <= dpsgd_cli.tolerance('ghost')
  assert set(row['ratio']) == {'ghost'}
  for value in list(row['ratio'].values()) + list(row['ms'].values()):
    assert math.isfinite(value) and value > 0
  assert row['memory']['ghost']['temp'] > 0
  assert row['skipped']['jax_privacy'] == 'not requested (--no-baselines)'
  assert row['skipped']['vmap'] == 'not requested (--methods)'
  assert {(p['method'], p['batch_size']) for p in results['plot_points']} == {
      ('non-private', 2), ('ghost', 2)}
  assert all(p['ms'] > 0 and p['temp_bytes'] > 0
             for p in results['plot_points'])
  with open(out / 'bench.md') as f:
    markdown = f.read()
  assert '| mlp-784-512-512-10 | 669,706 | 2 | default |' in markdown
  assert 'JAX compute threads' in markdown and 'XLA_FLAGS=' in markdown
  assert 'load average' in markdown
  assert 'skipped' in markdown  # the jax_privacy and Opacus columns
  assert results['table'] in capsys.readouterr().out


@pytest.mark.slow  # two processes, one per XLA setting: 30-90 s
def test_bench_runs_each_xla_setting_in_its_own_process(tmp_path):
  out = tmp_path / 'bench'
  assert cli.main(['bench', 'dpsgd', '--out', str(out), '--no-plot']
                  + TINY) == 0
  with open(out / 'bench.json') as f:
    results = json.load(f)
  assert [r['setting'] for r in results['rows']] == list(dpsgd_cli.SETTINGS)
  for setting, head in results['headers'].items():
    flag = dpsgd_cli.SETTINGS[setting]
    assert (flag in head['xla_flags'].split()) == bool(flag)
    assert (dpsgd_cli.YNN_FLAG in head['xla_flags']) == bool(flag)
  for row in results['rows']:
    assert set(row['ms']) == {'non-private', 'ghost'}
    assert all(v > 0 for v in row['ms'].values())


def test_bench_models_match_the_cli_names():
  from experiments.bench import models  # pylint: disable=g-import-not-at-top
  assert tuple(models.MODELS) == dpsgd_cli.MODEL_NAMES
  assert set(dpsgd_cli.TABLE_SIZES) == set(dpsgd_cli.MODEL_NAMES)


@pytest.mark.parametrize('argv,message', [
    (['--batch-sizes', '64', '0'], '--batch-sizes must be positive, got 0'),
    (['--plot-batch-sizes', '-8'],
     '--plot-batch-sizes must be positive, got -8'),
    (['--models', 'resnet'], "unknown model 'resnet'"),
    (['--methods', 'ghost', 'fast'], "unknown method 'fast'"),
    (['--min-calls', '0'], '--min-calls must be at least 1, got 0'),
    (['--time-budget', '-1'], '--time-budget must be > 0, got -1.0'),
    (['--batch-sizes', 'big'], "invalid int value: 'big'"),
    (['--passes', '0'], '--passes must be at least 1, got 0'),
    (['--xla-settings', 'fast'], "unknown XLA setting 'fast'"),
    (['--xla-settings', 'default', 'default'], '--xla-settings repeats'),
])
def test_bench_bad_options_exit_2_naming_the_value(argv, message, capsys):
  assert cli.main(['bench', 'dpsgd'] + argv) == 2
  err = capsys.readouterr().err
  assert err.startswith('python -m experiments: error: ')
  assert message in err


def test_bench_bad_option_fails_fast_without_importing_jax():
  code = ('import sys; from experiments import __main__ as m; '
          "rc = m.main(['bench', 'dpsgd', '--batch-sizes', '0']); "
          "sys.exit(rc + 10 * ('jax' in sys.modules))")
  proc = subprocess.run([sys.executable, '-c', code], capture_output=True,
                        text=True, check=False,
                        cwd=os.path.dirname(os.path.dirname(__file__)))
  assert proc.returncode == 2, proc.stderr
  assert 'got 0' in proc.stderr


def test_bench_module_entry_point_rejects_bad_input(capsys):
  from experiments.bench import dpsgd  # pylint: disable=g-import-not-at-top
  with pytest.raises(SystemExit) as exit_info:
    dpsgd.main(['--models', 'resnet'])
  assert exit_info.value.code == 2
  assert "unknown model 'resnet'" in capsys.readouterr().err


def test_bench_options_without_a_name_are_the_dpsgd_benchmark(capsys):
  assert cli.main(['bench', '--batch-sizes', '0']) == 2
  assert '--batch-sizes must be positive, got 0' in capsys.readouterr().err


def test_bench_list_names_every_benchmark_without_importing_jax():
  code = ('import sys; from experiments import __main__ as m; '
          "rc = m.main(['bench', 'list']); "
          "sys.exit(rc + 10 * ('jax' in sys.modules))")
  proc = subprocess.run([sys.executable, '-c', code], capture_output=True,
                        text=True, check=False,
                        cwd=os.path.dirname(os.path.dirname(__file__)))
  assert proc.returncode == 0, proc.stderr
  listed = [line.split()[0] for line in proc.stdout.splitlines()
            if line.startswith('  ')]
  assert listed == list(registry.BENCHMARKS)


def test_list_names_the_benchmarks_after_the_experiments(monkeypatch, capsys):
  monkeypatch.setattr(registry, 'NAMES', ('dpsgd_baseline',))  # one import
  assert cli.main(['list']) == 0
  lines = capsys.readouterr().out.splitlines()
  start = lines.index('benchmarks (python -m experiments bench NAME):')
  assert lines[0].split()[0] == 'dpsgd_baseline' and start == 2
  rows = lines[start + 1:start + 1 + len(registry.BENCHMARKS)]
  assert [row.split()[0] for row in rows] == list(registry.BENCHMARKS)
  for name, row in zip(registry.BENCHMARKS, rows):
    assert row.endswith(' ' + registry.benchmark_info(name).description)


@pytest.mark.parametrize('argv,message', [
    (['nosuch'], "unknown benchmark 'nosuch'"),
    (['all', '--full'], 'bench all takes only --quick'),
])
def test_bench_bad_name_exits_2(argv, message, capsys):
  assert cli.main(['bench'] + argv) == 2
  assert message in capsys.readouterr().err


def test_every_benchmark_is_a_module_with_main_and_quick_args():
  for name in registry.BENCHMARKS:
    mod = registry.benchmark(name)
    assert mod.__name__ == f'experiments.bench.{name}'
    with open(mod.__file__) as f:
      assert '\ndef main(argv' in f.read(), name
    info = registry.benchmark_info(name)  # read without importing
    assert info.description == mod.__doc__.splitlines()[0], name
    assert info.quick == tuple(mod.QUICK.split()), name
    assert info.quick and '--help' not in info.quick, name
  old = [f for f in os.listdir(os.path.dirname(bench.__file__) + '/..')
         if f.startswith('bench') and f.endswith('.py')]
  assert not old  # every benchmark lives in the package


# Flags the glossary replaced (dpjax/__init__.py, docs/vocabulary.md): d is
# --dimension(s), a count --num-*, a batch size --batch-size, a Poisson rate
# --sampling-rate (noise's --sigmas stays: a discrete Gaussian's sigma).
RETIRED_FLAGS = ('--d', '--dim', '--dims', '--n', '--n-test', '--trees',
                 '--agents', '--batch', '--rate')


class _Parsed(Exception):
  """Raised in place of running a benchmark whose arguments parsed."""


@pytest.mark.parametrize('name', registry.BENCHMARKS)
def test_benchmark_flags_take_glossary_names_and_quick_uses_them(
    name, monkeypatch, capsys):
  mod = registry.benchmark(name)
  with pytest.raises(SystemExit) as e:
    mod.main(['--help'])
  assert e.value.code == 0
  flags = set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]*',
                         capsys.readouterr().out))
  assert not flags & set(RETIRED_FLAGS), name
  quick = {a for a in mod.QUICK.split() if a.startswith('--')}
  assert quick <= flags, (name, quick - flags)
  # No alias, not even a prefix of a current flag (--dim of --dimension).
  parse = argparse.ArgumentParser.parse_args

  def parse_only(self, *args, **kwargs):
    parse(self, *args, **kwargs)
    raise _Parsed(name)
  monkeypatch.setattr(argparse.ArgumentParser, 'parse_args', parse_only)
  for flag in RETIRED_FLAGS:
    with pytest.raises(SystemExit) as e:
      mod.main([flag, '1'])
    assert e.value.code == 2, (name, flag)
    assert f'unrecognized arguments: {flag} 1' in capsys.readouterr().err


def test_every_module_with_quick_is_registered_and_bench_has_no_registry():
  folder = pathlib.Path(bench.__file__).parent
  with_quick = {f.stem for f in folder.glob('*.py')
                if '\nQUICK = ' in f.read_text()}
  assert with_quick == set(registry.BENCHMARKS)
  assert not {'NAMES', 'BENCHMARKS', 'module'} & set(vars(bench))


def test_registry_looks_each_kind_up_by_its_own_names():
  for lookup, name, kind in [
      (registry.benchmark, 'dpsgd_baseline', 'benchmark'),
      (registry.benchmark_info, 'timing', 'benchmark'),
      (registry.module, 'dpsgd', 'experiment'),
      (registry.get, 'noise', 'experiment')]:
    with pytest.raises(ValueError, match=f"unknown {kind} '{name}'; known: "):
      lookup(name)
  assert registry.module('dpsgd_baseline').__name__ == (
      'experiments.dpsgd_baseline')
  assert registry.benchmark('noise').__name__ == 'experiments.bench.noise'


def test_no_function_of_the_benchmarks_or_the_cli_passes_60_lines():
  import ast  # pylint: disable=g-import-not-at-top
  folder = pathlib.Path(bench.__file__).parent
  paths = sorted(folder.glob('*.py')) + [
      folder.parent / '__main__.py', folder.parent / 'registry.py']
  long = [f'{path.name}:{node.name} ({node.end_lineno - node.lineno + 1})'
          for path in paths for node in ast.walk(ast.parse(path.read_text()))
          if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
          and node.end_lineno - node.lineno + 1 > 60]
  assert not long
