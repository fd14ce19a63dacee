"""PrivacyLedger: the DpEvents that actually ran and the bits they sent."""

import json
from typing import Any

import attr
import dp_accounting

from dpjax import _validate
from dpjax.accounting import _accountants
from dpjax.accounting import _events

_EVENT_TYPES = {
    name: cls for name, cls in vars(dp_accounting.dp_event).items()
    if isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)
}
_EVENT_TYPES['EpsilonDeltaDpEvent'] = _events.EpsilonDeltaDpEvent


def event_to_dict(event: dp_accounting.DpEvent) -> dict[str, Any]:
  """A JSON-ready dict: ``{"type": class name, field: value, ...}``."""

  def encode(value):
    if isinstance(value, dp_accounting.DpEvent):
      return event_to_dict(value)
    if isinstance(value, (list, tuple)):
      return [encode(v) for v in value]
    return value

  out = {'type': type(event).__name__}
  for field in attr.fields(type(event)):
    out[field.name] = encode(getattr(event, field.name))
  return out


def event_from_dict(data: dict[str, Any]) -> dp_accounting.DpEvent:
  """Inverse of ``event_to_dict``."""

  def decode(value):
    if isinstance(value, dict) and 'type' in value:
      return event_from_dict(value)
    if isinstance(value, list):
      return [decode(v) for v in value]
    return value

  data = dict(data)
  name = data.pop('type')
  if name not in _EVENT_TYPES:
    raise ValueError(f'Unknown DpEvent type {name!r} in ledger data.')
  return _EVENT_TYPES[name](**{k: decode(v) for k, v in data.items()})


class PrivacyLedger:
  """Records the DpEvents a run actually executed, its privacy and its bits.

  Consecutive identical events are stored as one run ``(event, count)``, so a
  ledger of 10^5 identical steps stays small. ``record(..., bits=b)`` also
  counts b bits of communication per execution (e.g. bits per client per
  round); ``bits`` is the total.

  Example:
    >>> ledger = PrivacyLedger()
    >>> for _ in range(100):
    ...   ledger.record(gaussian_step_event(1.0, 0.01))
    >>> ledger.num_events
    100
    >>> ledger == PrivacyLedger.from_json(ledger.to_json())
    True
  """

  def __init__(self, runs: list[tuple[dp_accounting.DpEvent, int]] = (),
               bits: list[float] | None = None):
    self._runs: list[list[Any]] = []
    for i, (event, count) in enumerate(runs):
      self.record(event, count, bits=bits[i] if bits else 0)

  def record(self, event: dp_accounting.DpEvent, count: int = 1, *,
             bits: float = 0) -> None:
    """Appends ``count`` executions of ``event``, each sending ``bits``."""
    if not isinstance(event, dp_accounting.DpEvent):
      raise ValueError(f'Expected a DpEvent, got {type(event).__name__}.')
    _validate.non_negative_int(count=count)
    _validate.non_negative(bits=bits)
    if count == 0:
      return
    last = self._runs[-1] if self._runs else None
    if last and last[0] == event and last[2] == bits:
      last[1] += count
    else:
      self._runs.append([event, count, bits])

  @property
  def runs(self) -> list[tuple[dp_accounting.DpEvent, int]]:
    return [(e, c) for e, c, _ in self._runs]

  @property
  def bits(self) -> float:
    """Total bits recorded (sum of count x bits over the runs)."""
    return sum(c * b for _, c, b in self._runs)

  @property
  def num_events(self) -> int:
    return sum(c for _, c, _ in self._runs)

  def event(self) -> dp_accounting.DpEvent:
    """Everything recorded, as one ``ComposedDpEvent``."""
    return dp_accounting.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(e, c) for e, c, _ in self._runs])

  def epsilon(self, delta: float, accountant: str = 'rdp') -> float:
    """epsilon spent so far at ``delta`` (0 for an empty ledger)."""
    return _accountants.epsilon(self.event(), delta, accountant)

  def delta(self, epsilon: float, accountant: str = 'rdp') -> float:
    """delta spent so far at ``epsilon``."""
    return _accountants.delta(self.event(), epsilon, accountant)

  def to_json(self) -> str:
    return json.dumps({'runs': [{'event': event_to_dict(e), 'count': c,
                                 'bits': b} for e, c, b in self._runs]})

  @classmethod
  def from_json(cls, text: str) -> 'PrivacyLedger':
    data = json.loads(text)
    return cls([(event_from_dict(r['event']), r['count'])
                for r in data['runs']],
               [r.get('bits', 0) for r in data['runs']])

  def __eq__(self, other: object) -> bool:
    return isinstance(other, PrivacyLedger) and self._runs == other._runs

  def __repr__(self) -> str:
    return f'PrivacyLedger({self.runs!r})'
