"""Shared timing of the benchmarks: interleaved medians over passes.

Every benchmark figure is a median over timed calls that cycle through the
methods compared (so that drift in machine load hits them alike), taken in at
least two independent passes; the figure comes with the range of the pass
medians and a flag when they disagree by more than ``DISAGREE`` (25%). The
header of a run states the machine, the load average at its start and end,
the versions, ``XLA_FLAGS`` and the compute threads of JAX and PyTorch.
Compiled memory is XLA's ``memory_analysis()`` of the compiled executable
(deterministic on CPU), compiled FLOPs its ``cost_analysis()``.

Importing this module does not import JAX.
"""

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable

DISAGREE = 0.25  # a figure is flagged when max / min pass median > 1.25
MIN_PASSES = 2


class OneLineParser(argparse.ArgumentParser):
  """argparse that reports a bad argument in one line (status 2) and takes
  each flag by its whole name only (no prefixes: a retired flag that is the
  prefix of a current one is refused, not read as it)."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, allow_abbrev=False, **kwargs)

  def error(self, message):  # one line, no usage dump, exit status 2
    sys.stderr.write(f'{self.prog}: error: {message}\n')
    sys.exit(2)


def add_call_options(parser: argparse.ArgumentParser, repeats: int = 5,
                     warmup: int = 2) -> None:
  """``--repeats`` and ``--warmup`` of a benchmark timed by this module."""
  parser.add_argument('--repeats', type=int, default=repeats,
                      help='timed calls per method and pass (default '
                      '%(default)s)')
  parser.add_argument('--warmup', type=int, default=warmup,
                      help='untimed calls first (default %(default)s)')


def check_call_options(parser: argparse.ArgumentParser,
                       args: argparse.Namespace) -> None:
  """Refuses ``--repeats`` or ``--warmup`` below 1 (``parser.error``)."""
  for name in ('repeats', 'warmup'):
    if getattr(args, name) < 1:
      parser.error(f'--{name} must be at least 1, got {getattr(args, name)}')


def load() -> list[float]:
  """The 1, 5 and 15 minute load averages."""
  return [round(x, 2) for x in os.getloadavg()]


def cpu_cores() -> int:
  """Cores this process may run on (its affinity), else ``os.cpu_count``."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not Linux
    return os.cpu_count() or 1


def jax_compute_threads(xla_flags: str | None = None) -> int:
  """Threads of XLA's CPU intra-op pool: one per usable core.

  XLA's CPU client sizes its Eigen pool by the cores it may use; the flag
  ``--xla_cpu_multi_thread_eigen=false`` makes it one thread.
  """
  flags = os.environ.get('XLA_FLAGS', '') if xla_flags is None else xla_flags
  if '--xla_cpu_multi_thread_eigen=false' in flags.split():
    return 1
  return cpu_cores()


def set_torch_threads(torch, threads: int) -> dict[str, int]:
  """Sets PyTorch's intra-op threads to ``threads`` (JAX's count).

  The inter-op pool is left alone (it can be set once per process only and a
  training step runs no inter-op parallel work). Returns what torch reports.
  """
  torch.set_num_threads(threads)
  return {'torch_threads': int(torch.get_num_threads()),
          'torch_interop_threads': int(torch.get_num_interop_threads())}


def header(versions: dict[str, str], torch_threads: dict | None = None
           ) -> dict[str, Any]:
  """Machine, versions, XLA_FLAGS and thread counts of this process."""
  out = {'machine': f'{platform.machine()} {platform.processor() or ""}'
                    .strip() + f', {os.cpu_count()} CPUs, {cpu_cores()} '
                    'usable',
         'versions': dict(versions),
         'xla_flags': os.environ.get('XLA_FLAGS', ''),
         'jax_compute_threads': jax_compute_threads(),
         'python': platform.python_version()}
  out.update(torch_threads or {})
  return out


def header_line(head: dict[str, Any]) -> str:
  """The header as one line of text."""
  versions = ', '.join(f'{k} {v}' for k, v in head['versions'].items())
  torch = (f"; torch threads {head['torch_threads']} (inter-op "
           f"{head['torch_interop_threads']})" if 'torch_threads' in head
           else '')
  return (f"Machine: {head['machine']}; {versions}; XLA_FLAGS="
          f"'{head['xla_flags']}'; JAX compute threads "
          f"{head['jax_compute_threads']}{torch}")


def memory_bytes(compiled) -> dict[str, int | None]:
  """A compiled executable's temp bytes and peak (temp + args + outputs)."""
  stats = compiled.memory_analysis()
  if stats is None:
    return {'temp': None, 'peak': None}
  return {'temp': int(stats.temp_size_in_bytes),
          'peak': int(stats.temp_size_in_bytes + stats.argument_size_in_bytes
                      + stats.output_size_in_bytes)}


def flops(compiled) -> float | None:
  """A compiled executable's FLOP count (XLA cost analysis), or None."""
  try:
    cost = compiled.cost_analysis()
  except Exception:  # pylint: disable=broad-except
    return None
  if isinstance(cost, (list, tuple)):
    cost = cost[0] if cost else None
  value = (cost or {}).get('flops')
  return float(value) if value is not None and value > 0 else None


def interleaved(runners: dict[str, Callable[[], Any]], *, passes: int = 2,
                repeats: int = 10, warmup: int = 1, burst: int = 1,
                budget: float = float('inf'), slow: float = float('inf'),
                min_calls: int = 1, rewarm: bool = True,
                clock=time.perf_counter):
  """Seconds per call of each runner, per pass; returns (times, rounds).

  ``times[method]`` is a list of ``passes`` lists of call times. Each pass
  makes rounds that cycle through the runners; in a round each runner makes
  one untimed call (re-warms caches and allocator pages after the previous
  runner; ``rewarm=False`` drops it, for runners that take seconds) and then
  ``burst`` timed calls. Rounds per pass shrink to fit
  ``budget`` seconds, but not below ``min_calls`` timed calls. A runner whose
  warmup call takes more than ``slow`` seconds is timed by that call alone
  (one pass). A runner must block until its result is ready.
  """
  if passes < 1 or repeats < 1 or burst < 1 or warmup < 1:
    raise ValueError('passes, repeats, burst and warmup must be >= 1')
  last = {}
  for method, run in runners.items():
    for _ in range(warmup):
      start = clock()
      run()
      last[method] = clock() - start
      if last[method] > slow:
        break
  slow_methods = {m for m, t in last.items() if t > slow}
  per_round = (burst + rewarm) * sum(t for m, t in last.items()
                                if m not in slow_methods)
  fit = budget / max(per_round, 1e-9)
  rounds = max(-(-min_calls // burst),
               repeats if fit >= repeats else int(fit))
  times = {m: [[last[m]]] if m in slow_methods else [[] for _ in range(passes)]
           for m in runners}
  for p in range(passes):
    for _ in range(rounds):
      for method, run in runners.items():
        if method in slow_methods:
          continue
        if rewarm:
          run()  # untimed: re-warm after the previous runner
        for _ in range(burst):
          start = clock()
          run()
          times[method][p].append(clock() - start)
  return times, rounds


def summarize(per_pass: list[list[float]], scale: float = 1e3
              ) -> dict[str, Any]:
  """Median over all calls, the range of the pass medians and the flag.

  ``disagree`` is True when the largest pass median exceeds the smallest by
  more than ``DISAGREE``; with one pass (a slow method) it is None.
  """
  calls = [t for p in per_pass for t in p]
  medians = [statistics.median(p) * scale for p in per_pass if p]
  lo, hi = min(medians), max(medians)
  return {'median': statistics.median(calls) * scale, 'lo': lo, 'hi': hi,
          'passes': len(medians), 'calls': len(calls),
          'disagree': (hi > (1 + DISAGREE) * lo) if len(medians) > 1
                      else None}


def cell(stat: dict[str, Any], digits: int = 2) -> str:
  """``median [lo-hi]`` with a ``!`` when the passes disagree."""
  flag = ' !' if stat['disagree'] else ''
  return (f"{stat['median']:.{digits}f} [{stat['lo']:.{digits}f}-"
          f"{stat['hi']:.{digits}f}]{flag}")


def timed_call(fn: Callable[[], Any],
               block: Callable[[Any], Any] | None = None) -> tuple[float, Any]:
  """Seconds of one call of ``fn`` (until ``block`` of its result returns)
  and the result: a first call, compilation included."""
  start = time.perf_counter()
  out = fn()
  if block is not None:
    out = block(out)
  return time.perf_counter() - start, out


def time_medians(fns: dict[str, Callable[[], Any]], repeats: int,
                 warmup: int = 1, passes: int = MIN_PASSES,
                 block: Callable[[Any], Any] | None = None,
                 scale: float = 1e3, rewarm: bool = True
                 ) -> dict[str, dict[str, Any]]:
  """Interleaved timing of callables, summarized (``summarize``).

  ``block`` (e.g. ``jax.block_until_ready``) is applied to each result;
  ``scale`` converts seconds (1e3: ms, 1: s); ``rewarm`` as ``interleaved``.
  """
  block = block or (lambda x: x)
  runners = {m: (lambda f=f: block(f())) for m, f in fns.items()}
  times, _ = interleaved(runners, passes=passes, repeats=repeats,
                         warmup=warmup, rewarm=rewarm)
  return {m: summarize(t, scale) for m, t in times.items()}


def rate_cell(stat: dict[str, Any], amount: float, fmt: str = ',.0f') -> str:
  """``amount`` per unit of ``stat``'s time: median [lo-hi], ``!`` flag."""
  flag = ' !' if stat['disagree'] else ''
  return (f"{amount / stat['median']:{fmt}} [{amount / stat['hi']:{fmt}}-"
          f"{amount / stat['lo']:{fmt}}]{flag}")


def legend(passes: int = MIN_PASSES) -> str:
  """How a cell reads, for a benchmark's output."""
  return (f'median over calls interleaved across the methods in {passes} '
          'passes [range of the pass medians; ! when they differ by more '
          f'than {DISAGREE:.0%}]')
