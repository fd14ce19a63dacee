"""The benchmark harness: interleaving, passes, threads, clipped-sum checks."""

import ast
import os

import jax
import numpy as np
import pytest

from experiments.bench import dpsgd_cli
from experiments.bench import dpsgd_steps
from experiments.bench import models
from experiments.bench import timing


class _Clock:
  """A fake perf_counter: each runner advances it by its own cost."""

  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


def _runners(log, clock, costs):
  def make(name):
    def run():
      log.append(name)
      clock.now += costs[name]
    return run
  return {name: make(name) for name in costs}


def test_interleaved_cycles_methods_per_round_in_every_pass():
  log, clock = [], _Clock()
  costs = {'a': 1.0, 'b': 2.0, 'c': 3.0}
  times, rounds = timing.interleaved(
      _runners(log, clock, costs), passes=3, repeats=4, warmup=2, burst=2,
      clock=clock)
  assert rounds == 4
  warm = ['a', 'a', 'b', 'b', 'c', 'c']
  one_round = [m for m in costs for _ in range(1 + 2)]  # untimed + burst
  assert log == warm + one_round * rounds * 3
  for m, cost in costs.items():
    assert len(times[m]) == 3
    assert all(t == [cost] * (rounds * 2) for t in times[m])


def test_interleaved_budget_min_calls_and_slow_methods():
  log, clock = [], _Clock()
  costs = {'fast': 1.0, 'slow': 50.0}
  times, rounds = timing.interleaved(
      _runners(log, clock, costs), passes=2, repeats=10, burst=1,
      budget=5.0, slow=10.0, min_calls=3, clock=clock)
  # per round: (burst + 1) x 1 s of the fast method; the budget allows 2
  # rounds, min_calls asks for 3.
  assert rounds == 3
  assert times['slow'] == [[50.0]] and log.count('slow') == 1
  assert [len(t) for t in times['fast']] == [3, 3]


def test_interleaved_without_rewarm_makes_only_timed_calls():
  log, clock = [], _Clock()
  costs = {'a': 1.0, 'b': 2.0}
  times, rounds = timing.interleaved(
      _runners(log, clock, costs), passes=2, repeats=3, warmup=1, burst=1,
      rewarm=False, clock=clock)
  assert rounds == 3
  assert log == ['a', 'b'] + ['a', 'b'] * rounds * 2
  assert times == {'a': [[1.0] * 3] * 2, 'b': [[2.0] * 3] * 2}


def test_rate_cell_inverts_the_time_range_and_timed_call_blocks():
  stat = timing.summarize([[0.5], [0.25]], scale=1.0)  # seconds per call
  assert stat['disagree']
  assert timing.rate_cell(stat, 100.0) == '267 [200-400] !'
  seconds, out = timing.timed_call(lambda: 3, lambda x: x + 1)
  assert out == 4 and seconds >= 0


def test_every_benchmark_times_through_the_timing_module():
  """No benchmark reads the clock itself: its figures come from ``timing``
  (interleaved medians with pass ranges, or a timed first call)."""
  from experiments import bench  # pylint: disable=g-import-not-at-top
  from experiments import registry  # pylint: disable=g-import-not-at-top
  folder = os.path.dirname(bench.__file__)
  for name in registry.BENCHMARKS:
    with open(os.path.join(folder, f'{name}.py')) as f:
      tree = ast.parse(f.read())
    clocks = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
              and n.attr in ('perf_counter', 'time', 'median')
              and getattr(n.value, 'id', None) in ('time', 'statistics')]
    assert not clocks, name


@pytest.mark.parametrize('flag', ['--repeats', '--warmup'])
def test_call_options_refuse_values_below_one(flag, capsys):
  from experiments.bench import exact_gaussian  # pylint: disable=g-import-not-at-top
  with pytest.raises(SystemExit):
    exact_gaussian.parse_args([flag, '0'])
  assert f'{flag} must be at least 1, got 0' in capsys.readouterr().err


@pytest.mark.parametrize('medians,flag', [
    ((10.0, 12.0), False), ((10.0, 13.0), True), ((13.0, 10.0, 11.0), True),
    ((10.0,), None)])
def test_summarize_range_and_disagreement_flag(medians, flag):
  per_pass = [[m / 1e3] * 3 for m in medians]
  stat = timing.summarize(per_pass)
  assert stat['lo'] == pytest.approx(min(medians))
  assert stat['hi'] == pytest.approx(max(medians))
  assert stat['passes'] == len(medians) and stat['calls'] == 3 * len(medians)
  assert stat['disagree'] is flag
  assert timing.cell(stat).endswith(' !') == bool(flag)


def test_thread_settings_follow_jax_compute_threads():
  cores = len(os.sched_getaffinity(0))
  assert timing.jax_compute_threads('') == cores
  assert timing.jax_compute_threads(
      '--xla_cpu_multi_thread_eigen=false') == 1

  class FakeTorch:
    threads, interop = 7, 3

    def set_num_threads(self, n):
      self.threads = n

    def get_num_threads(self):
      return self.threads

    def get_num_interop_threads(self):
      return self.interop

  got = timing.set_torch_threads(FakeTorch(), timing.jax_compute_threads())
  assert got == {'torch_threads': timing.jax_compute_threads(),
                 'torch_interop_threads': 3}
  head = timing.header({'jax': jax.__version__}, got)
  assert head['jax_compute_threads'] == timing.jax_compute_threads()
  line = timing.header_line(head)
  assert f'JAX compute threads {head["jax_compute_threads"]}' in line
  assert f'torch threads {got["torch_threads"]}' in line


def test_xla_settings_flags_and_child_argv():
  env = '--xla_force_host_platform_device_count=4'
  assert dpsgd_cli.xla_flags('default', env) == env
  with_flag = dpsgd_cli.xla_flags('no-ynn-reduce', env)
  assert with_flag.split() == [env, dpsgd_cli.SETTINGS['no-ynn-reduce']]
  assert dpsgd_cli.xla_flags('default', with_flag) == env  # flag removed
  assert dpsgd_cli.strip_settings(
      ['--quick', '--xla-settings', 'default', 'no-ynn-reduce', '--burst',
       '1', '--xla-settings=default']) == ['--quick', '--burst', '1']


def _tiny_batch(name):
  x, y = models.random_batch(name, 3, jax.random.key(4))
  params = models.MODELS[name]().init(jax.random.key(5), x[0])
  return params, (x, y)


@pytest.mark.parametrize('name', dpsgd_cli.MODEL_NAMES)
def test_every_jax_framework_clipped_sum_agrees_with_dpjax(name):
  """What the benchmark checks before timing, on B = 3."""
  params, batch = _tiny_batch(name)
  optional = dpsgd_steps.optional_imports()
  sums = dpsgd_steps.clipped_sums(models.MODELS[name](), params, batch,
                                  optional, dpsgd_cli.METHODS)
  expected = {'ghost', 'vmap', 'optax'}
  if not isinstance(optional['jax_privacy'], str):
    expected.add('jax_privacy')
  assert set(sums) == expected
  ref = dpsgd_steps.flat(sums['vmap'])  # exact norms: the reference
  for method, value in sums.items():
    assert dpsgd_steps.agreement(ref, dpsgd_steps.flat(value)) <= (
        dpsgd_cli.tolerance(method)), method
  assert dpsgd_cli.tolerance('optax') == dpsgd_cli.TOL == 1e-5
  # The check can fail: a sum clipped at 1.01 C is caught.
  off = {k: 1.01 * v for k, v in ref.items()}
  assert dpsgd_steps.agreement(ref, off) > dpsgd_cli.TOL


def test_agreement_refuses_mismatched_parameters():
  with pytest.raises(ValueError, match='different parameters'):
    dpsgd_steps.agreement({'a': np.zeros(2)}, {'b': np.zeros(2)})


@pytest.mark.parametrize('name', dpsgd_cli.MODEL_NAMES)
def test_torch_models_match_flax_and_opacus_sums_match_dpjax(name):
  torch = pytest.importorskip('torch', reason='bench extra not installed')
  opacus = pytest.importorskip('opacus', reason='bench extra not installed')
  from experiments.bench import dpsgd_torch  # pylint: disable=g-import-not-at-top
  params, (x, y) = _tiny_batch(name)
  weights = dpsgd_torch.torch_layout(name, params)
  made = dpsgd_torch.make_steps(name, 3, (torch, opacus), np.asarray(x),
                                np.asarray(y), weights,
                                timing.jax_compute_threads())
  assert made['threads']['torch_threads'] == timing.jax_compute_threads()
  assert set(made['steps']) == set(dpsgd_torch.COLUMNS), made['skipped']
  model = dpsgd_torch.build(torch, name)
  model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v))
                         for k, v in weights.items()})
  x_t = (torch.from_numpy(np.transpose(np.asarray(x), (0, 3, 1, 2)).copy())
         if np.asarray(x).ndim == 4 else torch.from_numpy(
             np.asarray(x).astype(np.int64)))
  logits = models.MODELS[name]().apply(params, x)
  np.testing.assert_allclose(model(x_t).detach().numpy(), logits, atol=1e-5)
  sums = dpsgd_steps.clipped_sums(models.MODELS[name](), params, (x, y),
                                  {'jax_privacy': 'unused'}, ('vmap',))
  ref = dpsgd_torch.torch_layout(name, sums['vmap'])
  for column, value in made['clipped'].items():
    assert dpsgd_steps.agreement(ref, value) <= dpsgd_cli.TOL, column


def test_exact_gaussian_benchmark_steps_run_jitted():
  # The exact path needs the sum's bound concrete: a step that took the
  # ClippedSum as a jitted argument traced it and was refused.
  from experiments.bench import exact_gaussian  # pylint: disable=g-import-not-at-top
  for fn, args in exact_gaussian._noise_steps(16, 1.1).values():  # pylint: disable=protected-access
    out, _ = fn(*args)
    assert out.shape == (16,) and bool(np.all(np.isfinite(out)))
