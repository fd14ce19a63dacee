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
from dpjax.accounting import _balls_in_bins
from dpjax.accounting import _events
from dpjax.accounting import _extended_accountants
from dpjax.accounting import _step_event
from dpjax.accounting import _tradeoff

_EVENT_TYPES = {
    name: cls for name, cls in vars(dp_accounting.dp_event).items()
    if isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)
}
_EVENT_TYPES['EpsilonDeltaDpEvent'] = _events.EpsilonDeltaDpEvent
_EVENT_TYPES['TruncatedPoissonSampledDpEvent'] = (
    _events.TruncatedPoissonSampledDpEvent)
_EVENT_TYPES['BallsInBinsDpEvent'] = _balls_in_bins.BallsInBinsDpEvent
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


_SAMPLED = (dp_accounting.PoissonSampledDpEvent,
            dp_accounting.SampledWithoutReplacementDpEvent,
            dp_accounting.SampledWithReplacementDpEvent,
            dp_accounting.TruncatedSubsampledGaussianDpEvent,
            _events.TruncatedPoissonSampledDpEvent,
            _balls_in_bins.BallsInBinsDpEvent)
NeighboringRelation = dp_accounting.NeighboringRelation


def is_amplified(event: dp_accounting.DpEvent) -> bool:
  """Whether ``event`` claims amplification by subsampling anywhere in it.

  Example:
    >>> is_amplified(gaussian_event(1.0, sampling_rate=0.01))
    True
  """
  walk = _extended_accountants.walk
  return any(isinstance(e, _SAMPLED) for e in walk(event))


_NO_NOISE = (dp_accounting.NoOpDpEvent, dp_accounting.NonPrivateDpEvent)
_WRAPPERS = (dp_accounting.ComposedDpEvent, dp_accounting.SelfComposedDpEvent,
             dp_accounting.PoissonSampledDpEvent,
             dp_accounting.SampledWithoutReplacementDpEvent,
             dp_accounting.SampledWithReplacementDpEvent)


def draws_noise(event: dp_accounting.DpEvent) -> bool:
  """Whether ``event`` claims a guarantee from randomness (any part of it
  other than ``NoOpDpEvent`` / ``NonPrivateDpEvent``).

  Example:
    >>> draws_noise(dp_accounting.NoOpDpEvent()), draws_noise(
    ...     gaussian_event(1.0))
    (False, True)
  """
  walk = _extended_accountants.walk
  return any(not isinstance(e, _NO_NOISE + _WRAPPERS) for e in walk(event))


def _stream(value: Any, name: str) -> tuple[Any, int]:
  """``(key, step)`` of a ``noise=`` or ``batch=`` argument."""
  if hasattr(value, 'key') and hasattr(value, 'step'):
    value = (value.key, value.step)
  try:
    key, step = value
  except (TypeError, ValueError):
    raise ValueError(f'Expected {name}=(key, step) or a sampled batch, got '
                     f'{type(value).__name__}.') from None
  if key is None or step is None:
    raise ValueError(f'{name}= carries no (key, step): draw the batch with '
                     'sampler.sample(key, step).')
  step = np.asarray(step)
  if step.shape:
    raise ValueError(f'Expected one run\'s {name}= step, got shape '
                     f'{step.shape}: index the run (e.g. the seed axis) first.')
  return key, int(step)


class PrivacyLedger:
  """Records the DpEvents a run actually executed, its privacy and its bits.

  Consecutive identical events are stored as one run ``(event, count)``, so a
  ledger of 10^5 identical steps stays small. ``record(..., bits=b)`` also
  counts b bits of communication per execution (e.g. bits per client per
  round); ``bits`` is the total.

  Fresh randomness. ``record(..., noise=(key, step))`` binds the record to
  the noise stream it used (a transform's key and the step count of its
  state), and ``record(..., batch=batch)`` to the batch it used (a sampler's
  ``sample(key, step)`` carries its key and step). The ledger keeps the
  spent steps of each key and raises if a (key, step) is spent twice, or if
  one key serves as both a batch and a noise key: replayed noise (a second
  ``tx.init``, two transforms built from one key) or a replayed batch (one
  sampler key every step) voids the guarantee of both records. An event
  that draws noise is refused without ``noise=`` (and, if amplified by
  subsampling, without ``batch=``), unless ``planned=True`` states that the
  record is not bound to its randomness: an accounting plan, or executions
  whose fresh noise the caller vouches for. The opt-out is recorded:
  ``planned`` counts such executions and survives ``to_json``, so a ledger
  shows how much of its epsilon went unchecked.

  Neighbouring relation. Each record holds under one relation
  (``neighboring_relation=``, default ``infer_neighboring_relation``); the
  ledger accounts under one, set at construction or by its first record,
  and refuses a record under the other. An add/remove-one event enters a
  replace-one ledger only converted, by ``replace_one_event`` (group
  privacy of size 2); there is no conversion the other way.

  Example:
    >>> ledger = PrivacyLedger()
    >>> for t in range(100):
    ...   ledger.record(gaussian_event(1.0), noise=(jax.random.key(0), t))
    >>> ledger.num_events
    100
    >>> ledger == PrivacyLedger.from_json(ledger.to_json())
    True
  """

  def __init__(self, runs: list[tuple[dp_accounting.DpEvent, int]] = (),
               bits: list[float] | None = None,
               noise: dict[str, list[list[int]]] | None = None, *,
               batches: dict[str, list[list[int]]] | None = None,
               neighboring_relation: NeighboringRelation | str | None = None,
               planned: int = 0):
    """A ledger, empty or restored (``runs`` are taken as already checked)."""
    self._runs: list[list[Any]] = []
    self._spent: dict[str, dict[str, list[list[int]]]] = {
        kind: {k: [list(r) for r in v] for k, v in (given or {}).items()}
        for kind, given in (('noise', noise), ('batch', batches))}
    if isinstance(neighboring_relation, str):
      neighboring_relation = NeighboringRelation[neighboring_relation]
    if neighboring_relation is not None and not isinstance(
        neighboring_relation, NeighboringRelation):
      raise ValueError('Expected neighboring_relation= a NeighboringRelation,'
                       f' got {neighboring_relation!r}.')
    if neighboring_relation is None and runs:
      relations = {_extended_accountants.infer_neighboring_relation(e)
                   for e, _ in runs}
      if len(relations) > 1:
        raise ValueError('neighboring_relation: the runs mix neighbouring '
                         'relations; state the ledger\'s.')
      neighboring_relation, = relations
    self._relation = neighboring_relation
    self._planned = int(planned)
    for i, (event, count) in enumerate(runs):
      self._check_event(event, count, bits[i] if bits else 0)
      self._append(event, count, bits[i] if bits else 0)

  @staticmethod
  def _check_event(event, count, bits):
    if not isinstance(event, dp_accounting.DpEvent):
      raise ValueError(f'Expected a DpEvent, got {type(event).__name__}.')
    _validate.non_negative_int(count=count)
    _validate.non_negative(bits=bits)

  def _append(self, event, count, bits):
    if count == 0:
      return
    last = self._runs[-1] if self._runs else None
    if last and last[0] == event and last[2] == bits:
      last[1] += count
    else:
      self._runs.append([event, count, bits])

  def _spend(self, kind: str, key: Any, step: int, count: int) -> list[Any]:
    """The new spent ranges of ``key`` (raises if any step was spent)."""
    _validate.non_negative_int(step=step)
    name = key_fingerprint(key)
    other = 'batch' if kind == 'noise' else 'noise'
    if name in self._spent[other]:
      raise ValueError(
          f'{kind}=: key {name} was recorded as a {other} key: batches and '
          'noise drawn from one key are not independent. Use separate keys.')
    spent = [list(r) for r in self._spent[kind].get(name, [])]
    cause = ('re-initialized transform state, or two transforms built from '
             'one key' if kind == 'noise' else
             'one sampler key and step for several steps: draw step t with '
             'sampler.sample(key, t)')
    for start, stop in spent:
      if step < stop and start < step + count:
        raise ValueError(
            f'{kind}=: {kind} of key {name} at steps [{max(start, step)}, '
            f'{min(stop, step + count)}) was already spent: a replayed '
            f'{kind} voids the guarantee ({cause}). Resume from the saved '
            'state, or use a fresh key.')
    if spent and spent[-1][1] == step:
      spent[-1][1] = step + count
    else:
      spent.append([step, step + count])
      spent.sort()
    return [name, spent]

  def record(self, event: dp_accounting.DpEvent, count: int = 1, *,
             bits: float = 0, noise: Any = None, batch: Any = None,
             neighboring_relation: NeighboringRelation | None = None,
             planned: bool = False) -> None:
    """Appends ``count`` executions of ``event``, each sending ``bits``.

    A refused record changes nothing.

    Args:
      event: the DpEvent of one execution.
      count: how many executions.
      bits: bits sent per execution.
      noise: ``(key, step)`` of the noise the executions used, steps
        ``step .. step + count - 1`` of ``key`` (e.g. ``(state.key,
        state.count)`` of a ``KeyStepState`` before the step, or the
        for a chain's step, ``record_step`` reads it). Raises if any was
        recorded.
      batch: the batch the executions used: a sampler's ``sample(key,
        step)`` (it carries both), or ``(key, step)``; steps ``step ..
        step + count - 1``. Raises if any was recorded.
      neighboring_relation: the relation ``event`` holds under; default
        ``infer_neighboring_relation(event)``. Must be the ledger's.
      planned: the record is not bound to its randomness (an accounting
        plan, e.g. of batch sizes, or a run whose noise the caller vouches
        for): it is accepted without ``noise=`` and ``batch=`` and counted
        in ``planned``.

    Raises:
      ValueError: a bad argument; an event that draws noise without
        ``noise=``, or an amplified one without ``batch=`` (and not
        ``planned``); a spent (key, step); an event under another
        neighbouring relation than the ledger's.
    """
    self._check_event(event, count, bits)
    if neighboring_relation is None:
      neighboring_relation = (
          _extended_accountants.infer_neighboring_relation(event))
    if (self._relation is not None and neighboring_relation is not None
        and neighboring_relation != self._relation):
      hint = (' Build the ledger with neighboring_relation=REPLACE_ONE and '
              'record replace_one_event(event) (group privacy).'
              if self._relation == NeighboringRelation.ADD_OR_REMOVE_ONE else
              ' Convert it with replace_one_event(event) (group privacy).')
      raise ValueError(
          f'neighboring_relation: the event holds under '
          f'{neighboring_relation.name} but the ledger accounts under '
          f'{self._relation.name}; mixing them undercounts.' + hint)
    if is_amplified(event) and not planned:
      for name, given in (('batch', batch), ('noise', noise)):
        if given is None:
          raise ValueError(
              f'{name}= is required to record an event amplified by '
              'subsampling: amplification holds only for a fresh batch and '
              'fresh noise each step (pass the sampled batch and the noise '
              '(key, step), or planned=True for an accounting plan).')
    if noise is None and not planned and draws_noise(event):
      raise ValueError(
          'noise= is required: pass the (key, step) of the noise the '
          'executions drew (a transform\'s (state.key, state.count) before '
          'the step; (key, 0) for a one-shot release), so that replayed '
          'noise is refused; or planned=True to record them unchecked.')
    if count == 0:
      return
    updates = []
    if noise is not None:
      updates.append(('noise', *self._spend('noise', *_stream(noise, 'noise'),
                                            count)))
    if batch is not None:
      key, step = _stream(batch, 'batch')
      if noise is not None and key_fingerprint(key) == updates[0][1]:
        raise ValueError('batch=: the batch key is the noise key: batches '
                         'and noise drawn from one key are not independent.')
      updates.append(('batch', *self._spend('batch', key, step, count)))
    for kind, name, spent in updates:
      self._spent[kind][name] = spent
    if self._relation is None:
      self._relation = neighboring_relation
    if planned:
      self._planned += count
    self._append(event, count, bits)

  def record_step(self, opt_state: Any, sampler: Any, batch: Any) -> None:
    """Records the step that produced ``opt_state``: its event, its noise
    and its batch, all read from what ran.

    ``step_event(opt_state, sampler)`` is the event; the noise stream
    ``(key, step)`` comes from the same privatizing state, so a replayed
    noise step (a second ``init``, two chains built from one key) or batch
    is refused like in ``record``. Under a sampler whose schedule follows
    the step (``CyclicPoissonSampler``: partition t mod b) the batch's step
    must be the privatizer's, the step the event is read for.

    Args:
      opt_state: the state the step returned (or its ``privacy_states``).
      sampler: the step's sampler (None for a full-batch step, as in
        ``step_event``).
      batch: the step's ``sampler.sample(key, step)`` (or ``(key, step)``);
        None for a full-batch step.

    Example:
      >>> sampler = dpjax.PoissonSampler(100, 0.1)
      >>> tx = dpjax.dpsgd(0.1, 1.0, 1.1, sampler, key=jax.random.key(0))
      >>> batch = sampler.sample(jax.random.key(1), 0)
      >>> _, s = tx.update(jnp.ones((batch.mask.size, 3)),
      ...                  tx.init(jnp.zeros(3)), jnp.zeros(3),
      ...                  mask=batch.mask)
      >>> ledger = PrivacyLedger()
      >>> ledger.record_step(s, sampler, batch)
      >>> ledger.num_events
      1
    """
    parts = _step_event.privacy_states(opt_state)
    event = _step_event.step_event(parts, sampler)
    noise = _step_event.noise_handle(parts)
    if getattr(sampler, 'num_partitions', None) is not None:
      _, step = _stream(batch, 'batch')
      if step != noise[1]:
        raise ValueError(
            f'batch=: the batch was drawn at step {step} but the step is '
            f'{noise[1]} of the run: a cyclic sampler\'s partition is the '
            'step mod num_partitions, so the batch must be '
            'sampler.sample(key, t) at the run\'s own step t (never a count '
            'restarted each epoch).')
    self.record(event, noise=noise, batch=batch)

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

  @property
  def neighboring_relation(self) -> NeighboringRelation | None:
    """The relation the ledger accounts under (None until set)."""
    return self._relation

  @property
  def planned(self) -> int:
    """Executions recorded with ``planned=True`` (not bound to randomness)."""
    return self._planned

  def epsilon(self, delta: float, accountant: str = 'rdp') -> float:
    """epsilon spent so far at ``delta`` (0 for an empty ledger)."""
    return _accountants.epsilon(self.event(), delta, accountant,
                                self._relation)

  def delta(self, epsilon: float, accountant: str = 'rdp') -> float:
    """delta spent so far at ``epsilon``."""
    return _accountants.delta(self.event(), epsilon, accountant,
                              self._relation)

  def tradeoff_curve(self, alphas) -> np.ndarray:
    """beta at each alpha: the f-DP curve of everything recorded
    (``accounting.tradeoff_curve``), beside ``epsilon``."""
    return _tradeoff.tradeoff_curve(self.event(), alphas, self._relation)

  def gdp_mu(self) -> float | None:
    """mu if everything recorded composes Gaussian mechanisms (mu-GDP,
    ``accounting.gdp_mu``), else None."""
    return _tradeoff.gdp_mu(self.event())

  @property
  def noise_spent(self) -> dict[str, list[tuple[int, int]]]:
    """Per noise key fingerprint, the half-open step ranges recorded."""
    return {k: [tuple(r) for r in v] for k, v in self._spent['noise'].items()}

  @property
  def batches_spent(self) -> dict[str, list[tuple[int, int]]]:
    """Per sampler key fingerprint, the half-open step ranges recorded."""
    return {k: [tuple(r) for r in v] for k, v in self._spent['batch'].items()}

  def to_json(self) -> str:
    relation = self._relation.name if self._relation else None
    return json.dumps({'runs': [{'event': event_to_dict(e), 'count': c,
                                 'bits': b} for e, c, b in self._runs],
                       'noise': self._spent['noise'],
                       'batches': self._spent['batch'],
                       'neighboring_relation': relation,
                       'planned': self._planned})

  @classmethod
  def from_json(cls, text: str) -> 'PrivacyLedger':
    data = json.loads(text)
    runs = [(event_from_dict(r['event']), r['count']) for r in data['runs']]
    return cls(runs, [r.get('bits', 0) for r in data['runs']],
               data.get('noise'), batches=data.get('batches'),
               neighboring_relation=data.get('neighboring_relation'),
               planned=data.get('planned', 0))

  def __eq__(self, other: object) -> bool:
    return (isinstance(other, PrivacyLedger) and self._runs == other._runs
            and self._spent == other._spent
            and self._relation == other._relation
            and self._planned == other._planned)

  def __repr__(self) -> str:
    return f'PrivacyLedger({self.runs!r})'
