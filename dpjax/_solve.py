"""The one monotone solver behind every ``calibrate_*``.

Calibration asks for the least noise whose privacy meets a target: the
smallest x with ``ok(x)``, where ``ok`` (e.g. ``epsilon(x) <= target``) is
False below the answer and True above it. ``smallest_float`` brackets the
answer by doubling and halving from ``start`` and bisects geometrically to a
relative width ``rtol``; ``smallest_int`` doubles from ``start`` and bisects
to the exact integer. Both return a point where ``ok`` holds (the upper end
of the bracket), so a calibrated value never misses its target.

Example:
  >>> round(smallest_float(lambda x: x * x >= 2.0, start=1.0, rtol=1e-9), 6)
  1.414214
  >>> smallest_int(lambda n: 100 / n <= 0.3, start=1)
  334
"""

import math
from typing import Callable, NoReturn


def _no_limit(x: float) -> NoReturn:
  raise ValueError(f'No solution up to {x:g}.')


def smallest_float(ok: Callable[[float], bool], *, start: float,
                   rtol: float, ceiling: float = math.inf,
                   floor: float = 0.0, tight: bool = True,
                   unreachable: Callable[[float], NoReturn] = _no_limit
                   ) -> float:
  """Smallest x > 0 (within ``rtol``, from above) with ``ok(x)``.

  Args:
    ok: monotone predicate: False below the answer, True above it.
    start: first point tried (> 0).
    rtol: bisection stops when hi / lo - 1 <= rtol.
    ceiling: no point above it is tried; ``unreachable(x)`` is called (and
      must raise) when ``ok`` fails at x >= ceiling.
    floor: a bracket whose upper end falls below ``floor`` is returned as
      it is (the answer is then at most ``floor``).
    tight: True: double from ``start`` up to the first passing point hi,
      then halve lo = hi / 2 down while it passes (moving hi with it).
      False: halve lo from ``start`` while it passes and double hi from
      ``start`` while it fails, independently (hi stays at ``start`` if it
      passes there).
    unreachable: called with the last point tried when ``ok`` never holds.

  Returns:
    hi with ``ok(hi)`` and hi / lo - 1 <= rtol for a failing lo.

  Example:
    >>> smallest_float(lambda x: x >= 3.0, start=1.0, rtol=1e-6) >= 3.0
    True
  """
  if tight:
    hi = start
    while not ok(hi):
      if hi >= ceiling:
        unreachable(hi)
      hi = min(hi * 2, ceiling)
    lo = hi / 2
    while ok(lo):
      hi, lo = lo, lo / 2
      if hi < floor:
        return hi
  else:
    lo = hi = start
    while ok(lo):
      lo /= 2
    while not ok(hi):
      if hi >= ceiling:
        unreachable(hi)
      hi = min(hi * 2, ceiling)
  while hi / lo - 1 > rtol:
    mid = math.sqrt(lo * hi)
    if ok(mid):
      hi = mid
    else:
      lo = mid
  return hi


def smallest_int(ok: Callable[[int], bool], *, start: int,
                 below: int | None = None, ceiling: int | None = None,
                 unreachable: Callable[[int], NoReturn] = _no_limit) -> int:
  """Smallest integer n > ``below`` with ``ok(n)`` (exact).

  Args:
    ok: monotone predicate on integers (False below the answer).
    start: first point tried.
    below: an integer assumed to fail (default ``start - 1``): the answer is
      searched in (below, ...).
    ceiling: no point above it is tried; ``unreachable(n)`` is called (and
      must raise) when ``ok`` fails at n >= ceiling.
    unreachable: called with the last point tried when ``ok`` never holds.

  Returns:
    The smallest passing n (given ``ok`` monotone and ``below`` failing).

  Example:
    >>> smallest_int(lambda n: n * n >= 50, start=16, below=0)
    8
  """
  lo, hi = (start - 1 if below is None else below), start
  while not ok(hi):
    if ceiling is not None and hi >= ceiling:
      unreachable(hi)
    lo, hi = hi, (2 * hi if ceiling is None else min(2 * hi, ceiling))
  while hi - lo > 1:
    mid = (lo + hi) // 2
    if ok(mid):
      hi = mid
    else:
      lo = mid
  return hi
