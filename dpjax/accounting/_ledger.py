"""PrivacyLedger: the DpEvents that actually ran and the bits they sent."""

import hashlib
import json
from typing import Any

import attr
import dp_accounting
import jax
import numpy as np

from dpjax import _validate
from dpjax.accounting import _accountants
from dpjax.accounting import _distributed
from dpjax.accounting import _events

_EVENT_TYPES = {
    name: cls for name, cls in vars(dp_accounting.dp_event).items()
    if isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)
}
_EVENT_TYPES['EpsilonDeltaDpEvent'] = _events.EpsilonDeltaDpEvent
for _cls in _distributed.EVENT_TYPES:
  _EVENT_TYPES[_cls.__name__] = _cls


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


def key_fingerprint(key: Any) -> str:
  """A short stable name of a PRNG key (SHA-256 of its key data).

  Example:
    >>> key_fingerprint(jax.random.key(0)) == key_fingerprint(jax.random.key(0))
    True
  """
  key = jax.numpy.asarray(key)
  if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
    key = jax.random.key_data(key)
  data = np.asarray(key)
  return hashlib.sha256(data.dtype.str.encode() + data.tobytes()).hexdigest()[:16]


class PrivacyLedger:
  """Records the DpEvents a run actually executed, its privacy and its bits.

  Consecutive identical events are stored as one run ``(event, count)``, so a
  ledger of 10^5 identical steps stays small. ``record(..., bits=b)`` also
  counts b bits of communication per execution (e.g. bits per client per
  round); ``bits`` is the total. ``record(..., noise=(key, step))`` binds the
  record to the noise stream it used (a transform's key and the step count
  of its state): the ledger keeps the spent steps of each key and raises if
  a (key, step) is spent twice, since replayed noise (a second ``tx.init``,
  two transforms built from one key) voids the guarantee of both records.

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
               bits: list[float] | None = None,
               noise: dict[str, list[list[int]]] | None = None):
    self._runs: list[list[Any]] = []
    self._noise: dict[str, list[list[int]]] = {
        k: [list(r) for r in v] for k, v in (noise or {}).items()}
    for i, (event, count) in enumerate(runs):
      self.record(event, count, bits=bits[i] if bits else 0)

  def _spend(self, key: Any, step: int, count: int) -> None:
    _validate.non_negative_int(step=step)
    name = key_fingerprint(key)
    spent = self._noise.setdefault(name, [])
    for start, stop in spent:
      if step < stop and start < step + count:
        raise ValueError(
            f'Noise of key {name} at steps [{max(start, step)}, '
            f'{min(stop, step + count)}) was already spent: replayed noise '
            'voids the guarantee (re-initialized transform state, or two '
            'transforms built from one key). Resume from the saved state, or '
            'use a fresh key.')
    if spent and spent[-1][1] == step:
      spent[-1][1] = step + count
    else:
      spent.append([step, step + count])
      spent.sort()

  def record(self, event: dp_accounting.DpEvent, count: int = 1, *,
             bits: float = 0, noise: tuple[Any, Any] | None = None) -> None:
    """Appends ``count`` executions of ``event``, each sending ``bits``.

    Args:
      event: the DpEvent of one execution.
      count: how many executions.
      bits: bits sent per execution.
      noise: ``(key, step)`` of the noise the executions used, steps
        ``step .. step + count - 1`` of ``key`` (e.g. ``(state.key,
        state.count)`` of a ``KeyStepState`` before the step). Raises if any
        of them was recorded before.
    """
    if not isinstance(event, dp_accounting.DpEvent):
      raise ValueError(f'Expected a DpEvent, got {type(event).__name__}.')
    _validate.non_negative_int(count=count)
    _validate.non_negative(bits=bits)
    if count == 0:
      return
    if noise is not None:
      key, step = noise
      self._spend(key, int(step), count)
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

  @property
  def noise_spent(self) -> dict[str, list[tuple[int, int]]]:
    """Per key fingerprint, the half-open step ranges recorded."""
    return {k: [tuple(r) for r in v] for k, v in self._noise.items()}

  def to_json(self) -> str:
    return json.dumps({'runs': [{'event': event_to_dict(e), 'count': c,
                                 'bits': b} for e, c, b in self._runs],
                       'noise': self._noise})

  @classmethod
  def from_json(cls, text: str) -> 'PrivacyLedger':
    data = json.loads(text)
    return cls([(event_from_dict(r['event']), r['count'])
                for r in data['runs']],
               [r.get('bits', 0) for r in data['runs']], data.get('noise'))

  def __eq__(self, other: object) -> bool:
    return (isinstance(other, PrivacyLedger) and self._runs == other._runs
            and self._noise == other._noise)

  def __repr__(self) -> str:
    return f'PrivacyLedger({self.runs!r})'
