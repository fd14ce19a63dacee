"""The reproduction CLI.

  python -m experiments                  # this help
  python -m experiments list             # experiments, benchmarks, datasets
  python -m experiments run NAME|all [--quick|--full] [--dataset D] [--seed S]
                                     [--out DIR] [--epsilons E ...] [--delta D]
                                     [--accountant rdp|pld] [--force]
                                     [--allow-fallback] [--devices N]
                                     [--jobs N]
  python -m experiments run NAME --help  # that experiment's settings
  python -m experiments run NAME [--quick|--full] [--FIELD VALUE ...]
                                     # a converted experiment: one flag per
                                     # field of its Config (NAME --help)
  python -m experiments report DIR
  python -m experiments compare-results A B  # two results.json, field by field
  python -m experiments bench list     # the benchmarks
  python -m experiments bench NAME [ARGS ...]  # one (NAME --help: its args)
  python -m experiments bench all [--quick]    # every one (--quick: smallest)
  python -m experiments bench dpsgd [--quick] [--out DIR] ...
                                     # DP-SGD step benchmark; `bench --OPT`
                                     # is `bench dpsgd --OPT`

``run all`` (quick mode) is the main job. A run writes
``DIR/NAME/results.json`` (every number with its epsilon, delta, dataset, seed
and the exact configuration), ``DIR/NAME/report.md`` with tables and PNG
plots, and ``DIR/REPORT.md`` gathering all experiments in DIR. An experiment
whose results.json already holds the same configuration is not run again
(``--force`` reruns it); training runs checkpoint under
``DIR/NAME/checkpoints`` and resume. Every argument, the output directory
included, is checked before any work starts; bad input prints one line and
exits with status 2. JAX is imported only when an experiment is.
"""

import argparse
import os
import sys
import tempfile
from typing import Any

from experiments import registry

DEFAULT_OUT = 'results'
ACCOUNTANTS = ('rdp', 'pld')  # dpjax.accounting.ACCOUNTANTS (a test checks)
RESULTS_FILE = 'results.json'  # experiments.common.report.RESULTS_FILE
# `run NAME` takes the flags of the experiment's Config fields
# (experiments.common.flags); the shared parser below serves `run all`.


class _Parser(argparse.ArgumentParser):

  def error(self, message):  # one line, no usage dump
    raise ValueError(message)


def _parser() -> argparse.ArgumentParser:
  parser = _Parser(prog='python -m experiments',
                   description='Paper reproductions with dpjax. The main '
                   'job: python -m experiments run all')
  sub = parser.add_subparsers(dest='command')
  sub.add_parser('list', help='list the experiments, benchmarks and '
                 'datasets')
  run = sub.add_parser('run', help='run an experiment (or all) and report; '
                       'run NAME --help shows its settings')
  run.add_argument('name', help="an experiment name, or 'all'")
  mode = run.add_mutually_exclusive_group()
  mode.add_argument('--quick', dest='mode', action='store_const',
                    const='quick', help='small setting (default)')
  mode.add_argument('--full', dest='mode', action='store_const', const='full',
                    help='paper-scale setting')
  run.add_argument('--dataset', help='a dataset name (see `list`) or '
                   'csv:PATH')
  run.add_argument('--seed', type=int, default=0, help='first seed')
  run.add_argument('--out', default=DEFAULT_OUT, help='output directory')
  run.add_argument('--epsilons', type=float, nargs='+',
                   help='target epsilons (override the experiment default)')
  run.add_argument('--delta', type=float, help='target delta')
  run.add_argument('--accountant', choices=ACCOUNTANTS,
                   help='privacy accountant, for experiments with an '
                   'accountant setting')
  run.add_argument('--allow-fallback', action='store_true',
                   help='run bundled digits when a tfds set is not prepared '
                   '(the report names the data that ran)')
  run.add_argument('--devices', type=int,
                   help='data-parallel DP-SGD over the first N devices, for '
                   'experiments with a devices setting (CPU: force host '
                   'devices with XLA_FLAGS=--xla_force_host_platform_'
                   'device_count=N)')
  run.add_argument('--force', action='store_true',
                   help='rerun even if DIR/NAME/results.json holds the same '
                   'configuration')
  run.add_argument('--no-progress', dest='progress', action='store_false',
                   help='no progress bars')
  run.add_argument('--jobs', type=int, default=1,
                   help='experiments run at a time, each in its own process '
                   '(the same results; `make reproduce` uses 3 on 2 cores, '
                   'since the experiments wait on Python part of the '
                   'time)')
  report = sub.add_parser('report', help='rewrite the report of DIR')
  report.add_argument('dir')
  sub.add_parser('compare-results', add_help=False,
                 help='compare two results.json field by field (A B; '
                 'compare-results --help shows its options)')
  sub.add_parser('bench', add_help=False,
                 help='benchmarks (bench list); bench dpsgd: DP-SGD steps '
                 'against the non-private step, time ratios, compiled memory '
                 'and a plot against B (bench dpsgd --help: its options)')
  return parser


def _names(name: str) -> list[str]:
  if name == 'all':
    return list(registry.MAIN_JOB)
  registry.get(name)  # raises on an unknown name
  return [name]


def _check_out(out: str) -> None:
  """The output directory exists (or is created) and is writable."""
  if os.path.exists(out) and not os.path.isdir(out):
    raise ValueError(f'--out {out!r} is a file, not a directory')
  try:
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryFile(dir=out):
      pass
  except OSError as e:
    raise ValueError(f'--out {out!r} is not writable: {e.strerror}') from None


def _validate_run_args(args) -> None:
  from experiments.common import data as data_lib  # pylint: disable=g-import-not-at-top
  from experiments.common import validation  # pylint: disable=g-import-not-at-top
  validation.non_negative_int(seed=args.seed)
  if args.dataset is not None and not data_lib.is_known(args.dataset):
    raise ValueError(f'unknown dataset {args.dataset!r}; known: '
                     f'{", ".join(data_lib.DATASETS)} or csv:PATH')
  for eps in args.epsilons or []:
    validation.positive(epsilon=eps)
  if args.delta is not None:
    validation.open_unit(delta=args.delta)
  if args.devices is not None:
    validation.positive_int(devices=args.devices)
  validation.positive_int(jobs=args.jobs)


def run_overrides(args) -> dict:
  """The settings a ``run`` command line gives every experiment."""
  return dict(dataset=args.dataset, seed=args.seed, epsilons=args.epsilons,
              delta=args.delta, accountant=args.accountant,
              allow_fallback=args.allow_fallback or None,
              devices=args.devices)


def _configs(names, mode, overrides) -> dict[str, Any]:
  """Every experiment's configuration, built (and so checked) before any run."""
  configs = {}
  for name in names:
    exp = registry.get(name)
    configs[name] = cfg = exp.configure(mode, **overrides)
    stored = exp.stored_config(cfg)
    dataset = stored.get('dataset')
    if isinstance(dataset, str) and not stored.get('allow_fallback'):
      from experiments.common import data as data_lib  # pylint: disable=g-import-not-at-top
      data_lib.check_available(dataset)
  return configs


def run_experiments(names, mode, out, progress=True, force=False, jobs=1,
                    **overrides) -> None:
  """Runs ``names`` (skipping finished ones unless ``force``), ``jobs`` at a
  time in separate processes when above 1, then reports."""
  from experiments.common import runner  # pylint: disable=g-import-not-at-top
  _check_out(out)
  configs = _configs(names, mode, overrides)
  if jobs > 1 and len(configs) > 1:
    runner.run_parallel(configs, out, mode=mode, force=force, jobs=jobs)
  else:
    for name, cfg in configs.items():
      runner.run_and_write(registry.get(name), cfg, out, mode=mode,
                           progress=progress, force=force)
  write_report(out)


def _runs_table(dirs) -> str:
  """Each experiment's mode, seeds, wall time and outcome counts, and the
  registered experiments with no results here (a run in parts)."""
  import collections  # pylint: disable=g-import-not-at-top
  from experiments.common import claims as claims_lib  # pylint: disable=g-import-not-at-top
  from experiments.common import report as report_lib  # pylint: disable=g-import-not-at-top
  outcomes = claims_lib.OUTCOMES
  columns = [('experiment', 'experiment'), ('mode', 'mode'),
             ('seeds', 'seeds'), ('wall', 'wall time (s)')] + [
                 (v, v) for v in outcomes]
  rows, total = [], collections.Counter()
  for d in dirs:
    r = report_lib.read_results(d)
    counts = collections.Counter(claims_lib.counted(c['outcome'])
                                 for c in r.get('claims', ()))
    total.update(counts)
    rows.append(dict(counts, experiment=r['experiment'],
                     mode=r['config']['mode'], seeds=len(r['seeds']),
                     wall=r.get('wall_seconds'),
                     device=r.get('versions', {}).get('device')))
  share = 100 * total['inconclusive'] / max(1, sum(total.values()))
  rows.append(dict(total, experiment='total', mode='', seeds='', device='',
                   inconclusive=f"{total['inconclusive']} ({share:.0f}%)",
                   wall=float(sum(r['wall'] or 0.0 for r in rows))))
  for row in rows:  # an outcome no claim had is a count of 0, not '-'
    for v in outcomes:
      row.setdefault(v, 0)
  from experiments.common import runner  # pylint: disable=g-import-not-at-top
  if any(runner.off_cpu(r['device']) for r in rows[:-1]):
    # Name the device of every row once any ran off the CPU ('-': a run
    # from before results.json recorded it).
    columns.insert(4, ('device', 'device'))
  ran = {r['experiment'] for r in rows}
  missing = [n for n in registry.MAIN_JOB if n not in ran]
  note = (f"\nNot run in this directory: {', '.join(missing)}.\n"
          if missing else '')
  return ('Wall time is each experiment\'s own, in its process (`run all '
          '--jobs N` runs N at once).\n\n' +
          report_lib.markdown_table(rows, columns) + '\n' + note + '\n' +
          _kinds_table(dirs))


def _kinds_table(dirs) -> str:
  """Claims by kind (paper, extension, sanity) and outcome, over ``dirs``;
  inconclusive claims whose interval excludes their expected effect are
  counted among the inconclusive and again apart."""
  import collections  # pylint: disable=g-import-not-at-top
  from experiments.common import claims as claims_lib  # pylint: disable=g-import-not-at-top
  from experiments.common import report as report_lib  # pylint: disable=g-import-not-at-top
  counts = {k: collections.Counter() for k in claims_lib.KINDS}
  for d in dirs:
    for c in report_lib.read_results(d).get('claims', ()):
      counts[c['kind']][claims_lib.counted(c['outcome'])] += 1
      counts[c['kind']]['excludes'] += 'excludes' in c['outcome']
  rows = [dict({o: n[o] for o in claims_lib.OUTCOMES}, kind=k,
               excludes=n['excludes'], total=sum(
                   n[o] for o in claims_lib.OUTCOMES))
          for k, n in counts.items()]
  columns = [('kind', 'kind'), ('total', 'claims')] + [
      (o, o) for o in claims_lib.OUTCOMES] + [
          ('excludes', 'of the inconclusive: excludes the expected effect')]
  return ('Claims by kind: *paper* states the paper, *extension* the '
          'project\'s own baseline, margin or setting, *sanity* that the '
          'setup can show the effect; a paper claim is not tested where a '
          'sanity claim of its experiment failed.\n\n' +
          report_lib.markdown_table(rows, columns) + '\n\n')


def _claims_summary(dirs) -> str:
  """The verdict rule, stated once, and every experiment's claims."""
  from experiments.common import report as report_lib  # pylint: disable=g-import-not-at-top
  from experiments.common import verdict as verdict_lib  # pylint: disable=g-import-not-at-top
  rows = []
  for d in dirs:
    results = report_lib.read_results(d)
    rows += [dict(c, claim=f"{results['experiment']}: {c['claim']}")
             for c in results.get('claims', ())]
  if not rows:
    return ''
  undecided = verdict_lib.undecided_table(rows)
  if undecided:
    undecided = ('## What would decide the inconclusive claims\n\n'
                 f'{verdict_lib.UNDECIDED_NOTE}\n\n{undecided}\n\n')
  return (f'{verdict_lib.RULE}\n\n' + verdict_lib.claims_table(rows) +
          '\n\n' + undecided)


def write_report(out: str) -> str:
  """Renders each experiment's report in ``out`` and the combined report."""
  from experiments.common import report as report_lib  # pylint: disable=g-import-not-at-top
  if os.path.exists(os.path.join(out, RESULTS_FILE)):
    dirs = [out]  # DIR is one experiment's directory
  else:
    dirs = [os.path.join(out, n) for n in registry.NAMES
            if os.path.exists(os.path.join(out, n, RESULTS_FILE))]
  if not dirs:
    raise ValueError(f'no {RESULTS_FILE} under {out!r}; run an '
                     'experiment first')
  sections = []
  for d in dirs:
    results = report_lib.read_results(d)
    section = registry.get(results['experiment']).report(results, d)
    with open(os.path.join(d, report_lib.REPORT_FILE), 'w') as f:
      f.write(section)
    rel = os.path.relpath(d, out)
    section = section.rstrip('\n') + '\n'  # one blank line between sections
    sections.append(section.replace('](', f']({rel}/') if rel != '.'
                    else section)
  if dirs == [out]:  # one experiment's directory: its report.md is the report
    path = os.path.join(out, report_lib.REPORT_FILE)
  else:
    bench = os.path.join(out, 'bench', 'bench.md')
    if os.path.exists(bench):  # `python -m experiments bench dpsgd` wrote it
      with open(bench) as f:
        sections.append('## bench (`python -m experiments bench dpsgd`)\n\n' +
                        f.read().strip() + '\n\n![time and memory vs '
                        'batch size](bench/bench.png)\n')
    path = os.path.join(out, report_lib.COMBINED_REPORT_FILE)
    with open(path, 'w') as f:
      f.write('# dpjax reproductions\n\n' + _runs_table(dirs) +
              _claims_summary(dirs) + '\n'.join(sections))
  print(f'wrote {path}', file=sys.stderr)
  print('\n'.join(sections))
  return path


def experiment_help(name: str) -> str:
  """One experiment's description, the flags it takes, and its settings."""
  exp = registry.get(name)
  from experiments.common import flags  # pylint: disable=g-import-not-at-top
  return (f'{name}: {exp.description}\n\n' +
          flags.parser(exp.config).format_help())


def _wants_run_help(argv) -> bool:
  return (len(argv) >= 2 and argv[0] == 'run'
          and any(a in ('-h', '--help') for a in argv[1:]))


def _bench(argv) -> int:
  """``bench NAME|all|list``; dpsgd's options checked before JAX loads."""
  from experiments.bench import cli as bench_cli  # pylint: disable=g-import-not-at-top
  if argv and argv[0].startswith('-') and argv[0] not in ('-h', '--help'):
    argv = ['dpsgd'] + list(argv)  # `bench --OPT` is `bench dpsgd --OPT`
  if argv and argv[0] == 'dpsgd' and not {'-h', '--help'} & set(argv):
    from experiments.bench import dpsgd_cli  # pylint: disable=g-import-not-at-top
    _check_out(dpsgd_cli.parse_args(argv[1:]).out)  # ValueError on bad input
  return bench_cli.main(list(argv))


def _one_experiment(argv):
  """The ``runner.Experiment`` that ``run NAME ...`` names (not ``all``)."""
  if len(argv) < 2 or argv[0] != 'run' or argv[1].startswith('-') or (
      argv[1] == 'all'):
    return None
  return registry.get(argv[1])  # an unknown name is an error


def parse_run(argv) -> tuple[list[str], str, dict[str, Any], dict[str, Any]]:
  """``run ...``'s (names, mode, options, settings), checked before any
  work: one experiment takes its Config's flags, ``run all`` the shared
  parser's. ``options`` are out, progress, force."""
  exp = _one_experiment(argv)
  if exp is not None:
    from experiments.common import flags  # pylint: disable=g-import-not-at-top
    mode, given = flags.parse(exp.config, argv[2:])
    options = dict(out=given.pop('out', DEFAULT_OUT),
                   progress=given.pop('progress', True),
                   force=given.pop('force', False))
    return [exp.name], mode, options, given
  args = _parser().parse_args(argv)
  names = _names(args.name)
  _validate_run_args(args)
  return (names, args.mode or 'quick',
          dict(out=args.out, progress=args.progress, force=args.force,
               jobs=args.jobs),
          run_overrides(args))


def _compare(argv) -> int:
  """``compare-results A B``: 0 when equal but for the runner's fields."""
  from experiments.common import compare  # pylint: disable=g-import-not-at-top
  return compare.main(argv)


def main(argv=None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  try:
    if argv and argv[0] == 'bench':
      return _bench(argv[1:])
    if argv and argv[0] == 'compare-results':
      return _compare(argv[1:])
    parser = _parser()
    if _wants_run_help(argv):
      names = [a for a in argv[1:] if not a.startswith('-')]
      if names and names[0] != 'all':
        registry.get(names[0])  # an unknown name is an error
        print(experiment_help(names[0]))
        return 0
    if argv and argv[0] == 'run':
      names, mode, options, overrides = parse_run(argv)
      from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
      absl_logging.set_verbosity(absl_logging.ERROR)  # dp_accounting's notes
      run_experiments(names, mode, **options, **overrides)
      return 0
    args = parser.parse_args(argv)
    if args.command is None:
      parser.print_help()
    elif args.command == 'list':
      from experiments.common import data as data_lib  # pylint: disable=g-import-not-at-top
      for name, exp in registry.EXPERIMENTS.items():
        print(f'{name:24s} {exp.description}')
      print('\nbenchmarks (python -m experiments bench NAME):')
      for name in registry.BENCHMARKS:
        print(f'{name:24s} {registry.benchmark_info(name).description}')
      print(f'\ndatasets: {", ".join(data_lib.DATASETS)}, or csv:PATH')
    else:
      write_report(args.dir)
  except ValueError as e:
    print(f'python -m experiments: error: {e}', file=sys.stderr)
    return 2
  except OSError as e:
    print(f'python -m experiments: error: {e}', file=sys.stderr)
    return 2
  except Exception as e:  # pylint: disable=broad-except
    from experiments.common import checkpoint  # pylint: disable=g-import-not-at-top
    if isinstance(e, checkpoint.CheckpointError):
      print(f'python -m experiments: error: {e}', file=sys.stderr)
      return 2
    raise
  return 0


if __name__ == '__main__':
  sys.exit(main())
