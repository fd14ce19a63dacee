"""The one runner: an experiment supplies its parts, the runner the rest.

An experiment is a folder ``experiments/NAME/`` with the same files for the
same roles (docs/experiments.md shows the smallest one):

- ``_config.py``: ``Config``, a frozen ``config.Config`` dataclass whose
  field defaults are the quick preset and whose ``PRESETS['full']`` is the
  paper-scale run;
- ``_results.py``: ``Results``, the typed record of its numbers (a frozen
  ``results.Results`` dataclass: ``dataset``, a description of the data
  that ran, and the experiment's fields);
- ``_run.py``: ``run(cfg, ctx) -> Results``, a function of ``cfg`` alone
  (``ctx`` says where to checkpoint and whether to show progress), running
  the seeds ``cfg.seeds`` as one vmapped program where the experiment allows;
- ``_claims.py``: ``claims(results, cfg)``, a ``claims.ClaimFamily`` (or a
  list of them), which applies the multiple-comparison correction;
- ``_report.py``: ``report(results, cfg, claims, out_dir) -> str``, the
  experiment's markdown section body (tables, plots written to
  ``out_dir``); ``claims`` are the verdicts results.json holds;
- ``__init__.py``: the docstring (what is reproduced, from which paper) and
  ``EXPERIMENT = runner.Experiment(...)`` naming the five.

``_claims`` and ``_report`` read the record by attribute; the report step
rebuilds it (and the ``Config``) from results.json.

The runner owns the rest: the preset and overrides (``configure``), timing
and progress lines, the results envelope (``ENVELOPE``: the configuration,
target epsilons, delta, data, seeds, package versions, wall time, claims),
skip-if-done and ``--force`` (``run_and_write``), and the report skeleton
(``Experiment.report``: heading, body, claims table, a line of provenance).
"""

import dataclasses
import importlib.metadata
import json
import os
import sys
import time
from typing import Any, Callable, Iterable, Union

from experiments.common import claims as claims_lib
from experiments.common import config as config_lib
from experiments.common import report as report_lib
from experiments.common import results as results_lib
from experiments.common import verdict as verdict_lib

# Fields the runner adds to results.json; a record has none but 'dataset'.
ENVELOPE = ('experiment', 'config', 'epsilon', 'delta', 'dataset', 'seeds',
            'versions', 'wall_seconds', 'claims')
VERSIONED = ('jax', 'jaxlib', 'numpy', 'dpjax')
# The command line's settings shared by every experiment (``run all``).
COMMON = ('dataset', 'seed', 'epsilons', 'delta', 'accountant',
          'allow_fallback', 'devices')


def versions() -> dict[str, str | None]:
  """Installed versions of the packages that decide the numbers, and the
  device JAX ran on."""
  out = {}
  for name in VERSIONED:
    try:
      out[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      out[name] = None
  if out['dpjax'] is None:  # imported from a checkout, not installed
    import dpjax  # pylint: disable=g-import-not-at-top
    out['dpjax'] = dpjax.__version__
  out['python'] = sys.version.split()[0]
  import jax  # pylint: disable=g-import-not-at-top
  dev = jax.devices()[0]
  # Where the numbers came from: 'cpu', or e.g. 'gpu: NVIDIA H200'.
  out['device'] = (dev.platform if dev.platform == 'cpu'
                   else f'{dev.platform}: {dev.device_kind}')
  return out


@dataclasses.dataclass
class Context:
  """What a run may know besides its configuration."""
  name: str
  out_dir: str
  progress: bool = True
  start: float = dataclasses.field(default_factory=time.time)

  def say(self, message: str) -> None:
    """A progress line on stderr (when progress is on)."""
    if self.progress:
      print(f'[{self.name}] {message} ({time.time() - self.start:.0f} s)',
            file=sys.stderr, flush=True)

  def checkpoint_dir(self, label: str) -> str:
    return os.path.join(self.out_dir, 'checkpoints', label.replace(' ', '_'))


Claims = Union[claims_lib.ClaimFamily, Iterable[claims_lib.ClaimFamily]]


@dataclasses.dataclass
class Experiment:
  """An experiment's parts; see the module docstring."""
  name: str
  description: str
  config: type[config_lib.Config]
  record: type[results_lib.Results]
  run: Callable[[config_lib.Config, Context], results_lib.Results]
  claims: Callable[[results_lib.Results, config_lib.Config], Claims]
  report_body: Callable[[results_lib.Results, config_lib.Config,
                         results_lib.Rows, str], str]

  def __post_init__(self):
    clash = sorted({f.name for f in dataclasses.fields(self.record)}
                   & set(ENVELOPE) - {'dataset'})
    if clash:
      raise ValueError(f'{self.name}: its Results may not hold {clash} '
                       '(the runner adds them)')

  @property
  def modes(self) -> tuple[str, ...]:
    return tuple(self.config.PRESETS)

  def configure(self, mode: str = 'quick', **overrides: Any
                ) -> config_lib.Config:
    """The ``mode`` preset with ``overrides``; the command line's common
    settings (``COMMON``; None = not given) apply where the experiment has
    them, ``epsilons`` to a single ``epsilon`` too, and are refused, naming
    the flag, where it has not."""
    fields = set(self.config.field_names())
    given = {}
    for key, value in overrides.items():
      if key in COMMON and value is None:
        continue
      if key == 'epsilons' and 'epsilons' not in fields and 'epsilon' in (
          fields):
        if len(value) != 1:
          raise ValueError(f'{self.name} runs at one total epsilon; got '
                           f'--epsilons {list(value)}')
        key, value = 'epsilon', value[0]
      if key in COMMON and key not in fields:
        flag = '--' + key.replace('_', '-')
        raise ValueError(f'{self.name} has no {key} setting; drop {flag}')
      given[key] = value
    return self.config.preset(mode, **given)

  def stored_config(self, cfg: config_lib.Config) -> dict[str, Any]:
    """``cfg`` as results.json holds it (to compare for skip-if-done)."""
    return json.loads(json.dumps(cfg.to_dict(), sort_keys=True, default=str))

  def results(self, cfg: config_lib.Config, out_dir: str,
              progress: bool = True) -> dict[str, Any]:
    """Runs ``cfg`` and returns results.json's content: the envelope and
    what ``run`` returned."""
    ctx = Context(self.name, out_dir, progress)
    out = self.run(cfg, ctx)
    if type(out) is not self.record:  # pylint: disable=unidiomatic-typecheck
      raise TypeError(f'{self.name}.run must return its '
                      f'{self.record.__name__}, not {type(out).__name__}')
    claims = claims_lib.verdicts(self.claims(out, cfg))
    return dict(out.to_dict(), experiment=self.name, config=cfg.to_dict(),
                epsilon=cfg.target_epsilons(),
                delta=getattr(cfg, 'delta', None), seeds=cfg.seeds,
                versions=versions(), claims=claims,
                wall_seconds=round(time.time() - ctx.start, 1))

  def report(self, results: dict[str, Any], out_dir: str) -> str:
    """The report skeleton around the experiment's body."""
    cfg = self.config(**results['config'])
    body = self.report_body(self.record.from_dict(results), cfg,
                            results['claims'], out_dir).strip('\n')
    lines = [f"## {self.name} ({cfg.mode})", '', body, '', '### Claims',
             '', 'Paired by seed; verdicts per the rule at the top, '
             'Bonferroni within each family.', '',
             verdict_lib.claims_table(results['claims']), '']
    lines += _sanity_note(results['claims'])
    if 'versions' in results:  # not in results.json from before the runner
      seeds, v = results['seeds'], results['versions']
      eps = ', '.join(f'{e:g}' for e in results['epsilon']) or '-'
      lines += [
          f"Seeds {seeds[0]}..{seeds[-1]}; target epsilon {eps}, delta "
          f"{report_lib.fmt(results['delta'])}; data: "
          f"{results['dataset']['name']}; wall time "
          f"{results['wall_seconds']} s; jax {v['jax']}, numpy {v['numpy']}, "
          f"dpjax {v['dpjax']}{_on_device(v)}.", '']
    return '\n'.join(lines)


def _sanity_note(claims: list[dict[str, Any]]) -> list[str]:
  """Report lines naming the sanity claims that did not hold and the run
  each says would make the experiment testable; none when all held."""
  failed = claims_lib.failed_sanity(claims)
  if not failed:
    return []
  paper = any(c['kind'] == 'paper' for c in claims)
  lines = [('**Paper claims not tested: sanity failed.** ' if paper else
            '**Sanity failed** (this experiment makes no paper claim). ')
           + ('This sanity claim did not hold' if len(failed) == 1 else
              'These sanity claims did not hold') + ':', '']
  lines += [f"- {c['claim']} ({c['verdict']}). The run that would make the "
            f"experiment testable: {c['remedy']}" for c in failed]
  return lines + ['']


def off_cpu(device: str | None) -> bool:
  """Whether a recorded device (``versions()['device']``) is not the CPU
  (None: not recorded)."""
  return device not in (None, 'cpu')


def _on_device(v: dict[str, Any]) -> str:
  """', on DEVICE' where a run recorded a device other than the CPU."""
  device = v.get('device')
  return f', on {device}' if off_cpu(device) else ''


def done(exp_dir: str, stored: dict[str, Any]) -> bool:
  """Whether ``exp_dir`` holds results of exactly this configuration."""
  path = os.path.join(exp_dir, report_lib.RESULTS_FILE)
  if not os.path.exists(path):
    return False
  try:
    with open(path) as f:
      return json.load(f).get('config') == stored
  except (OSError, ValueError):
    return False


def run_and_write(exp, cfg, out: str, *, mode: str, progress: bool = True,
                  force: bool = False) -> bool:
  """Runs ``exp`` at ``cfg`` into ``out/NAME/results.json`` unless that
  holds this configuration already (``force`` reruns); True if it ran.

  ``exp`` is an ``Experiment`` or the registry's adapter of a module not yet
  converted (same ``name``, ``stored_config`` and ``results``).
  """
  exp_dir = os.path.join(out, exp.name)
  if not force and done(exp_dir, exp.stored_config(cfg)):
    print(f'[{exp.name}] already done: {exp_dir}/{report_lib.RESULTS_FILE} '
          'holds this configuration (--force reruns it)', file=sys.stderr,
          flush=True)
    return False
  start = time.time()
  print(f'[{exp.name}] running ({mode}) ...', file=sys.stderr, flush=True)
  results = exp.results(cfg, exp_dir, progress)
  report_lib.write_results(exp_dir, results)
  print(f'[{exp.name}] done in {time.time() - start:.0f} s', file=sys.stderr)
  return True


def run_named(name: str, cfg, out: str, mode: str, progress: bool,
              force: bool) -> bool:
  """``run_and_write`` of the registry's experiment ``name`` (a picklable
  entry point for the worker processes of ``run all --jobs N``)."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  from experiments import registry  # pylint: disable=g-import-not-at-top
  absl_logging.set_verbosity(absl_logging.ERROR)  # as the CLI's process
  return run_and_write(registry.get(name), cfg, out, mode=mode,
                       progress=progress, force=force)


def run_parallel(configs: dict, out: str, *, mode: str, force: bool,
                 jobs: int) -> None:
  """Runs the experiments of ``configs`` (name -> Config) ``jobs`` at a time,
  each in a fresh process (spawned: nothing but the Config crosses over),
  longest first (``registry.LONGEST_FIRST``).

  Every experiment is a pure function of its Config and keys, and each
  process sizes XLA's thread pool as a lone one would, so results.json is
  the same as from a sequential run; only wall times differ. Progress bars
  are off (lines of two processes would interleave). The first failure is
  raised once the running experiments end.
  """
  import concurrent.futures  # pylint: disable=g-import-not-at-top
  import multiprocessing  # pylint: disable=g-import-not-at-top
  context = multiprocessing.get_context('spawn')
  with concurrent.futures.ProcessPoolExecutor(
      max_workers=jobs, mp_context=context, max_tasks_per_child=1) as pool:
    from experiments import registry  # pylint: disable=g-import-not-at-top
    order = sorted(configs, key=lambda n: (
        registry.LONGEST_FIRST.index(n) if n in registry.LONGEST_FIRST
        else len(registry.LONGEST_FIRST)))
    futures = [pool.submit(run_named, name, configs[name], out, mode, False,
                           force) for name in order]
    for future in futures:
      future.result()
