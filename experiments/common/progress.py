"""Progress of a long loop: a tqdm bar on a terminal, log lines elsewhere.

When the stream is not a terminal (CI logs, ``nohup``, a pipe), a bar prints
nothing useful, so ``Progress`` writes one line at least every ``interval``
seconds instead: the step, the metrics given (epsilon so far) and an ETA.

Example:
  >>> import io
  >>> ticks = iter([0.0, 40.0])
  >>> out = io.StringIO()
  >>> bar = Progress(10, 'demo', stream=out, clock=lambda: next(ticks))
  >>> bar.update(4, epsilon=0.5)
  >>> print(out.getvalue().strip())
  demo: step 4/10, epsilon 0.5, 40 s elapsed, ETA 60 s
"""

import sys
import time
from typing import Callable, TextIO

import tqdm


class Progress:
  """``update(n, **metrics)`` after each step; ``close()`` at the end."""

  def __init__(self, total: int, desc: str, *, enabled: bool = True,
               initial: int = 0, interval: float = 30.0,
               stream: TextIO | None = None,
               clock: Callable[[], float] = time.monotonic):
    self.total, self.desc, self.step = total, desc, initial
    self.interval, self.clock = interval, clock
    self.stream = sys.stderr if stream is None else stream
    self.enabled = enabled
    self.tty = enabled and hasattr(self.stream, 'isatty') and (
        self.stream.isatty())
    self.bar = (tqdm.tqdm(total=total, initial=initial, desc=desc,
                          leave=False, dynamic_ncols=True, file=self.stream)
                if self.tty else None)
    self.start = self.last = clock()
    self.first = initial
    self.metrics: dict[str, float] = {}

  def update(self, n: int = 1, **metrics: float) -> None:
    self.step += n
    self.metrics.update(metrics)
    if self.bar is not None:
      if metrics:
        self.bar.set_postfix({k: f'{v:.3g}' for k, v in self.metrics.items()})
      self.bar.update(n)
      return
    now = self.clock()
    if self.enabled and (now - self.last >= self.interval
                         or (self.step >= self.total and now > self.start)):
      self.last = now
      self.stream.write(self.line(now) + '\n')
      self.stream.flush()

  def line(self, now: float) -> str:
    elapsed = now - self.start
    done = self.step - self.first
    eta = (elapsed / done * (self.total - self.step)) if done > 0 else None
    parts = [f'{self.desc}: step {self.step}/{self.total}']
    parts += [f'{k} {v:.3g}' for k, v in self.metrics.items()]
    parts.append(f'{elapsed:.0f} s elapsed')
    parts.append('ETA ?' if eta is None else f'ETA {eta:.0f} s')
    return ', '.join(parts)

  def close(self) -> None:
    if self.bar is not None:
      self.bar.close()
