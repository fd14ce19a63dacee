"""`python -m experiments bench`: outputs of a tiny run, and bad options."""

import json
import math
import os
import subprocess
import sys

import pytest

from experiments import __main__ as cli
from experiments import bench_cli

TINY = ['--models', 'mlp-784-512-512-10', '--batch-sizes', '2',
        '--plot-batch-sizes', '2', '--repeats', '1', '--burst', '1',
        '--min-calls', '1', '--warmup', '1', '--plot-calls', '1',
        '--methods', 'ghost', '--no-baselines', '--quick']


@pytest.mark.slow  # compiles and times real steps: 15-60 s
def test_bench_writes_json_table_and_plot_with_positive_ratios(tmp_path,
                                                               capsys):
  out = tmp_path / 'bench'
  assert cli.main(['bench', '--out', str(out)] + TINY) == 0
  assert {'bench.json', 'bench.md', 'bench.png'} <= set(os.listdir(out))
  with open(out / 'bench.png', 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'
  with open(out / 'bench.json') as f:
    results = json.load(f)
  (row,) = results['rows']
  assert (row['model'], row['batch_size']) == ('mlp-784-512-512-10', 2)
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
  assert '| mlp-784-512-512-10 | 669,706 | 2 |' in markdown
  assert 'skipped' in markdown  # the jax_privacy and Opacus columns
  assert results['table'] in capsys.readouterr().out


def test_bench_models_match_the_cli_names():
  from experiments import bench  # pylint: disable=g-import-not-at-top
  assert tuple(bench.MODELS) == bench_cli.MODEL_NAMES
  assert set(bench_cli.TABLE_SIZES) == set(bench_cli.MODEL_NAMES)


@pytest.mark.parametrize('argv,message', [
    (['--batch-sizes', '64', '0'], '--batch-sizes must be positive, got 0'),
    (['--plot-batch-sizes', '-8'],
     '--plot-batch-sizes must be positive, got -8'),
    (['--models', 'resnet'], "unknown model 'resnet'"),
    (['--methods', 'ghost', 'fast'], "unknown method 'fast'"),
    (['--min-calls', '0'], '--min-calls must be at least 1, got 0'),
    (['--time-budget', '-1'], '--time-budget must be > 0, got -1.0'),
    (['--batch-sizes', 'big'], "invalid int value: 'big'"),
])
def test_bench_bad_options_exit_2_naming_the_value(argv, message, capsys):
  assert cli.main(['bench'] + argv) == 2
  err = capsys.readouterr().err
  assert err.startswith('python -m experiments: error: ')
  assert message in err


def test_bench_bad_option_fails_fast_without_importing_jax():
  code = ('import sys; from experiments import __main__ as m; '
          "rc = m.main(['bench', '--batch-sizes', '0']); "
          "sys.exit(rc + 10 * ('jax' in sys.modules))")
  proc = subprocess.run([sys.executable, '-c', code], capture_output=True,
                        text=True, check=False,
                        cwd=os.path.dirname(os.path.dirname(__file__)))
  assert proc.returncode == 2, proc.stderr
  assert 'got 0' in proc.stderr


def test_bench_module_entry_point_rejects_bad_input(capsys):
  from experiments import bench  # pylint: disable=g-import-not-at-top
  with pytest.raises(SystemExit) as exit_info:
    bench.main(['--models', 'resnet'])
  assert exit_info.value.code == 2
  assert "unknown model 'resnet'" in capsys.readouterr().err
