"""Progress lines when the output is not a terminal (logs, pipes)."""

import io

from experiments.common import progress


def _run(total, times, interval=30.0, **metrics):
  clock = iter(times)
  out = io.StringIO()  # not a terminal
  bar = progress.Progress(total, 'train', stream=out, interval=interval,
                          clock=lambda: next(clock))
  for step in range(total):
    bar.update(1, **(metrics if step == 1 else {}))
  bar.close()
  return out.getvalue().splitlines()


def test_a_line_at_least_every_interval_with_step_epsilon_and_eta():
  # start at 0; steps end at 10, 20, ..., 100 seconds.
  lines = _run(10, [0.0] + [10.0 * (i + 1) for i in range(10)],
               epsilon=1.25)
  assert lines[0] == ('train: step 3/10, epsilon 1.25, 30 s elapsed, '
                      'ETA 70 s')
  assert [l.split(',')[0] for l in lines] == [
      'train: step 3/10', 'train: step 6/10', 'train: step 9/10',
      'train: step 10/10']
  assert lines[-1].endswith('ETA 0 s')


def test_quiet_when_disabled_and_no_bar_escape_codes_in_logs():
  out = io.StringIO()
  bar = progress.Progress(5, 'x', enabled=False, stream=out,
                          clock=lambda: 100.0)
  for _ in range(5):
    bar.update(1)
  assert out.getvalue() == ''
  assert '\r' not in '\n'.join(_run(3, [0.0, 40.0, 80.0, 120.0]))
