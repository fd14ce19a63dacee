"""A compile budget for the test suite (a pytest plugin; tests/conftest.py loads it).

Almost all test time is tracing, lowering and XLA compilation, so the number
of programs a module compiles is its cost, and unlike seconds it does not
depend on the machine, its load or the persistent compilation cache. The
plugin counts XLA compilations per test module (JAX's
``/jax/core/compile/backend_compile_duration`` event fires once per program
handed to the backend, whether or not the on-disk cache then answers), prints
the ten most expensive modules at the end of every run, and fails the run when
a module compiles more programs than ``tests/compile_budget.json`` allows.

The budget has one entry per module and stage: ``default`` for ``-m "not
slow"``, ``slow`` for ``-m slow``; a run without ``-m`` is held to their sum.
A module without a budget fails too. After a deliberate change, rewrite the
stage's budgets from a full run of that stage with ``--compile-budget-update``
(measured count plus 50% and 20 programs of slack: a module's count
moves with what ran before it in the same worker process, by up to 40%
in the runs measured, although each module starts with emptied caches) and commit the file; the
diff shows what the change costs. ``--compile-budget-tests N`` lists the N
tests that compile the most. Works under pytest-xdist: each worker counts
its own compilations and the controller adds them up (collection, which every
worker repeats, is counted once).
"""

import collections
import json
import math
import os
import time

import jax
import pytest

BUDGET_FILE = os.path.join(os.path.dirname(__file__), 'compile_budget.json')
COMPILE_EVENT = '/jax/core/compile/backend_compile_duration'
TRACE_EVENTS = ('/jax/core/compile/jaxpr_trace_duration',
                '/jax/core/compile/jaxpr_to_mlir_module_duration')
CACHE_HIT_EVENT = '/jax/compilation_cache/cache_hits'
STAGES = {'not slow': 'default', 'slow': 'slow'}
# A module's count moves with what its worker ran before it: measured for
# tests/test_train.py, 109 alone, 146 and 207 in two full 2-worker runs.
SLACK = 0.5, 20
SHOWN = 10


def stage_of(markexpr: str) -> str:
  """'default', 'slow', or 'all' (no marker filter: both budgets added)."""
  markexpr = ' '.join((markexpr or '').split())
  if not markexpr:
    return 'all'
  return STAGES.get(markexpr, 'other')


def budget_for(count: int) -> int:
  return math.ceil(count * (1 + SLACK[0])) + SLACK[1]


def _module(nodeid: str) -> str:
  return nodeid.split('::')[0]


def _new_stats():
  return {'collect_compiles': 0, 'run_compiles': 0, 'compile_seconds': 0.0,
          'trace_seconds': 0.0, 'cache_hits': 0, 'seconds': 0.0}


class CompileBudget:
  """Counts compilations per module; checks them against the budget file."""

  def __init__(self, config):
    self.config = config
    self.stage = stage_of(config.getoption('markexpr'))
    self.update = config.getoption('compile_budget_update')
    self.budget_file = config.getoption('compile_budget_file')
    self.is_worker = hasattr(config, 'workerinput')
    self.stats = collections.defaultdict(_new_stats)
    self.per_test = collections.Counter()  # compilations of each test
    self.shown_tests = config.getoption('compile_budget_tests')
    self.current, self.collecting = '<session>', False
    self.test = None
    self.over: list[str] = []
    jax.monitoring.register_event_duration_secs_listener(self._on_duration)
    jax.monitoring.register_event_listener(self._on_event)

  # --- counting (in the process that compiles) -------------------------------

  def _on_duration(self, event, duration_secs, **_):
    stats = self.stats[self.current]
    if event == COMPILE_EVENT:
      stats['collect_compiles' if self.collecting else 'run_compiles'] += 1
      if self.test and not self.collecting:
        self.per_test[self.test] += 1
      stats['compile_seconds'] += duration_secs
    elif event in TRACE_EVENTS:
      stats['trace_seconds'] += duration_secs

  def _on_event(self, event, **_):
    if event == CACHE_HIT_EVENT:
      self.stats[self.current]['cache_hits'] += 1

  @pytest.hookimpl(hookwrapper=True)
  def pytest_make_collect_report(self, collector):
    is_module = isinstance(collector, pytest.Module)
    if is_module:
      self.current, self.collecting = collector.nodeid, True
      start = time.perf_counter()
    yield
    if is_module:
      self.collecting = False
      if not self.is_worker:
        self.stats[collector.nodeid]['seconds'] += time.perf_counter() - start

  def pytest_runtest_logstart(self, nodeid, location):
    del location
    self.current, self.test = _module(nodeid), nodeid

  def pytest_runtest_logreport(self, report):
    if not self.is_worker:  # the controller sees every worker's reports
      self.stats[_module(report.nodeid)]['seconds'] += report.duration

  # --- pytest-xdist: workers send their counts, the controller adds them -----

  def pytest_sessionfinish(self, session):
    if self.is_worker:
      self.config.workeroutput['compile_budget'] = json.dumps(self.stats)
      self.config.workeroutput['compile_budget_tests'] = json.dumps(
          self.per_test)
      return
    self.over = self._check()
    if self.over and not self.update:
      session.exitstatus = pytest.ExitCode.TESTS_FAILED

  def pytest_testnodedown(self, node, error):
    del error
    output = getattr(node, 'workeroutput', {})
    self.per_test.update(json.loads(output.get('compile_budget_tests', '{}')))
    sent = output.get('compile_budget')
    for module, theirs in json.loads(sent or '{}').items():
      ours = self.stats[module]
      for name, value in theirs.items():
        if name == 'seconds':
          continue
        ours[name] = (max(ours[name], value) if name == 'collect_compiles'
                      else ours[name] + value)

  # --- the budget --------------------------------------------------------------

  def _compiles(self, module: str) -> int:
    stats = self.stats[module]
    return stats['collect_compiles'] + stats['run_compiles']

  def _modules(self) -> list[str]:
    return [m for m in self.stats if m.endswith('.py')]

  def _allowed(self, budgets, module):
    stages = ('default', 'slow') if self.stage == 'all' else (self.stage,)
    found = [budgets.get(s, {}).get(module) for s in stages]
    if all(b is None for b in found):
      return None
    return sum(b or 0 for b in found)

  def _check(self) -> list[str]:
    if self.stage == 'other':
      return []
    budgets = {}
    if os.path.exists(self.budget_file):
      with open(self.budget_file) as f:
        budgets = json.load(f)
    if self.update and self.stage in ('default', 'slow'):
      ran = {m: budget_for(self._compiles(m)) for m in self._modules()}
      budgets[self.stage] = dict(sorted({**budgets.get(self.stage, {}),
                                         **ran}.items()))
      with open(self.budget_file, 'w') as f:
        json.dump(budgets, f, indent=1, sort_keys=True)
        f.write('\n')
    over = []
    for module in sorted(self._modules()):
      allowed, used = self._allowed(budgets, module), self._compiles(module)
      if allowed is None:
        over.append(f'{module}: {used} compilations and no budget in '
                    f'{os.path.basename(self.budget_file)}')
      elif used > allowed:
        over.append(f'{module}: {used} compilations, budget {allowed}')
    return over

  def pytest_terminal_summary(self, terminalreporter):
    if self.is_worker:
      return
    tr = terminalreporter
    modules = sorted(self._modules(), key=lambda m: -self.stats[m]['seconds'])
    total = sum(self._compiles(m) for m in modules)
    hits = sum(self.stats[m]['cache_hits'] for m in modules)
    tr.section(f'compile budget ({self.stage} stage): {total} compilations, '
               f'{hits} read from the disk cache')
    tr.write_line(f'{"module":36s} {"seconds":>8s} {"compiles":>9s} '
                  f'{"compile s":>10s} {"trace s":>8s} {"cache hits":>10s}')
    for m in modules[:SHOWN]:
      s = self.stats[m]
      tr.write_line(f'{m:36s} {s["seconds"]:8.1f} {self._compiles(m):9d} '
                    f'{s["compile_seconds"]:10.1f} {s["trace_seconds"]:8.1f} '
                    f'{s["cache_hits"]:10d}')
    for test, count in self.per_test.most_common(self.shown_tests):
      tr.write_line(f'{count:6d} compilations  {test}')
    if self.update and self.stage in ('default', 'slow'):
      tr.write_line(f'budgets of the {self.stage} stage rewritten in '
                    f'{self.budget_file}')
    for line in self.over:
      tr.write_line(f'OVER BUDGET {line}', red=True, bold=True)
    if self.over and not self.update:
      tr.write_line('A module compiles more programs than its budget allows: '
                    'pass hyperparameters as arguments instead of baking them '
                    'into new closures, jit whole steps, share programs '
                    'between tests; or, for a deliberate change, rewrite the '
                    'budget with --compile-budget-update and commit it.',
                    red=True)


def addoption(parser):
  parser.addoption(
      '--compile-budget-update', action='store_true', default=False,
      help="rewrite tests/compile_budget.json for this run's stage "
      '(-m "not slow" or -m slow) from the measured compilations')
  parser.addoption('--compile-budget-file', default=BUDGET_FILE,
                   help='the budget file (default: %(default)s)')
  parser.addoption(
      '--compile-budget-tests', type=int, default=0, metavar='N',
      help='also list the N tests that compile the most programs')


def register(config):
  config.pluginmanager.register(CompileBudget(config), 'compile_budget')
