"""``steps`` runs of one mechanism: the rule's ``*_event(..., *, steps=1)``.

Every privatizer's event companion takes ``steps``; one step is the
mechanism's own event, more are its ``SelfComposedDpEvent``.
"""

import dp_accounting

from dpjax import _validate


def repeated(event: dp_accounting.DpEvent,
             steps: int) -> dp_accounting.DpEvent:
  """``event`` for one step, else ``steps`` self-compositions of it.

  Example:
    >>> repeated(dp_accounting.GaussianDpEvent(1.0), 3).count
    3
  """
  _validate.positive_int(steps=steps)
  return event if steps == 1 else dp_accounting.SelfComposedDpEvent(event,
                                                                    steps)
