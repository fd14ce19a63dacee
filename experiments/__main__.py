"""The reproduction CLI.

  python -m experiments                  # every experiment, quick mode, + report
  python -m experiments list
  python -m experiments run NAME|all [--quick|--full] [--dataset D] [--seed S]
                                     [--out DIR] [--epsilons E ...] [--delta D]
  python -m experiments report DIR

A run writes ``DIR/NAME/results.json`` (every number with its epsilon, delta,
dataset, seed and the exact configuration), ``DIR/NAME/report.md`` with tables
and PNG plots, and ``DIR/REPORT.md`` gathering all experiments in DIR. Training
runs checkpoint under ``DIR/NAME/checkpoints``; rerunning the same command
resumes them. Bad input prints one line and exits with status 2.
"""

import argparse
import os
import sys
import time

from absl import logging as absl_logging

from experiments import registry
from experiments.common import checkpoint
from experiments.common import data as data_lib
from experiments.common import report as report_lib
from experiments.common import verdict as verdict_lib
from experiments.common import validation

DEFAULT_OUT = 'results'


class _Parser(argparse.ArgumentParser):

  def error(self, message):  # one line, no usage dump
    raise ValueError(message)


def _parser() -> argparse.ArgumentParser:
  parser = _Parser(prog='python -m experiments',
                   description='Paper reproductions with dpjax.')
  sub = parser.add_subparsers(dest='command')
  sub.add_parser('list', help='list the registered experiments')
  run = sub.add_parser('run', help='run an experiment (or all) and report')
  run.add_argument('name', help="an experiment name, or 'all'")
  mode = run.add_mutually_exclusive_group()
  mode.add_argument('--quick', dest='mode', action='store_const',
                    const='quick', help='small setting (default)')
  mode.add_argument('--full', dest='mode', action='store_const', const='full',
                    help='paper-scale setting')
  run.add_argument('--dataset', help=f'one of {", ".join(data_lib.DATASETS)}, or csv:PATH')
  run.add_argument('--seed', type=int, default=0, help='first seed')
  run.add_argument('--out', default=DEFAULT_OUT, help='output directory')
  run.add_argument('--epsilons', type=float, nargs='+',
                   help='target epsilons (override the experiment default)')
  run.add_argument('--delta', type=float, help='target delta')
  run.add_argument('--no-progress', dest='progress', action='store_false',
                   help='no progress bars')
  report = sub.add_parser('report', help='rewrite the report of DIR')
  report.add_argument('dir')
  return parser


def _names(name: str) -> list[str]:
  if name == 'all':
    return list(registry.EXPERIMENTS)
  if name not in registry.EXPERIMENTS:
    raise ValueError(f"unknown experiment {name!r}; known: "
                     f"{', '.join(registry.EXPERIMENTS)} (or 'all')")
  return [name]


def _validate_run_args(args) -> None:
  validation.non_negative_int(seed=args.seed)
  if args.dataset is not None and not data_lib.is_known(args.dataset):
    raise ValueError(f'unknown dataset {args.dataset!r}; known: '
                     f'{", ".join(data_lib.DATASETS)} or csv:PATH')
  for eps in args.epsilons or []:
    validation.positive(epsilon=eps)
  if args.delta is not None:
    validation.open_unit(delta=args.delta)


def run_experiments(names, mode, out, progress=True, **overrides) -> None:
  for name in names:
    exp = registry.EXPERIMENTS[name]
    cfg = exp.config(mode, **overrides)
    exp_dir = os.path.join(out, name)
    start = time.time()
    print(f'[{name}] running ({mode}) ...', file=sys.stderr, flush=True)
    results = exp.run(cfg, exp_dir, progress=progress)
    report_lib.write_results(exp_dir, results)
    print(f'[{name}] done in {time.time() - start:.0f} s', file=sys.stderr)
  write_report(out)


def _claims_summary(dirs) -> str:
  """The verdict rule, stated once, and every experiment's claims."""
  rows = []
  for d in dirs:
    results = report_lib.read_results(d)
    rows += [dict(c, claim=f"{results['experiment']}: {c['claim']}")
             for c in results.get('claims', ())]
  return (f'{verdict_lib.RULE}\n\n' + verdict_lib.claims_table(rows) +
          '\n\n' if rows else '')


def write_report(out: str) -> str:
  """Renders each experiment's report in ``out`` and the combined report."""
  if os.path.exists(os.path.join(out, report_lib.RESULTS_FILE)):
    dirs = [out]  # DIR is one experiment's directory
  else:
    dirs = [os.path.join(out, n) for n in registry.EXPERIMENTS
            if os.path.exists(os.path.join(out, n, report_lib.RESULTS_FILE))]
  if not dirs:
    raise ValueError(f'no {report_lib.RESULTS_FILE} under {out!r}; run an '
                     'experiment first')
  sections = []
  for d in dirs:
    results = report_lib.read_results(d)
    section = registry.EXPERIMENTS[results['experiment']].report(results, d)
    with open(os.path.join(d, report_lib.REPORT_FILE), 'w') as f:
      f.write(section)
    rel = os.path.relpath(d, out)
    sections.append(section.replace('](', f']({rel}/') if rel != '.'
                    else section)
  if dirs == [out]:  # one experiment's directory: its report.md is the report
    path = os.path.join(out, report_lib.REPORT_FILE)
  else:
    path = os.path.join(out, report_lib.COMBINED_REPORT_FILE)
    with open(path, 'w') as f:
      f.write('# dpjax reproductions\n\n' + _claims_summary(dirs) +
              '\n'.join(sections))
  print(f'wrote {path}', file=sys.stderr)
  print('\n'.join(sections))
  return path


def main(argv=None) -> int:
  absl_logging.set_verbosity(absl_logging.ERROR)  # dp_accounting's order notes
  try:
    args = _parser().parse_args(argv)
    if args.command is None:
      run_experiments(list(registry.EXPERIMENTS), 'quick', DEFAULT_OUT)
    elif args.command == 'list':
      for name, exp in registry.EXPERIMENTS.items():
        print(f'{name:24s} {exp.DESCRIPTION}')
    elif args.command == 'run':
      names = _names(args.name)
      _validate_run_args(args)
      run_experiments(names, args.mode or 'quick', args.out, args.progress,
                      dataset=args.dataset, seed=args.seed,
                      epsilons=args.epsilons, delta=args.delta)
    else:
      write_report(args.dir)
  except (ValueError, OSError, checkpoint.CheckpointError) as e:
    print(f'python -m experiments: error: {e}', file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())
