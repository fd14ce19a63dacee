"""An experiment's numbers as a typed record, and its results.json leaves.

Each experiment declares what its ``run`` returns as a frozen dataclass
derived from ``Results``; ``_claims`` and ``_report`` read it by attribute.
Every record holds ``dataset`` (a description of the data that ran); its
other fields are the experiment's. A field may be a number, a string, a
list or dict of them (a table is a list of row dicts keyed by column), a
``Record`` (a part with fields of its own: no ``dataset``), or a list or dict
of records. ``to_dict`` gives the
JSON leaves results.json holds and ``from_dict`` reads them back, so a report
rendered from the file sees the same record the run returned:

  >>> import dataclasses
  >>> @dataclasses.dataclass(frozen=True, kw_only=True)
  ... class Row(Record):
  ...   accuracy: float
  >>> @dataclasses.dataclass(frozen=True, kw_only=True)
  ... class Demo(Results):
  ...   rows: list[Row]
  ...   by_epsilon: dict[str, Row]
  >>> rec = Demo(dataset={'name': 'digits'}, rows=[Row(accuracy=0.9)],
  ...            by_epsilon={'1': Row(accuracy=0.8)})
  >>> d = rec.to_dict()
  >>> d['rows'], d['by_epsilon']['1']['accuracy']
  ([{'accuracy': 0.9}], 0.8)
  >>> Demo.from_dict(dict(d, experiment='demo')) == rec  # envelope ignored
  True
  >>> Demo.from_dict({'dataset': {}})
  Traceback (most recent call last):
    ...
  ValueError: Demo: results hold no by_epsilon, rows
"""

import dataclasses
import types
import typing
from typing import Any, Mapping

# A table: one dict per row, keyed by column (as ``report.markdown_table``
# reads it).
Rows = list[dict[str, Any]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
  """Base of a typed record: its fields become results.json's leaves."""

  def to_dict(self) -> dict[str, Any]:
    """The record as results.json's leaves (records become dicts)."""
    return {f.name: _leaves(getattr(self, f.name))
            for f in dataclasses.fields(self)}

  @classmethod
  def from_dict(cls, data: Mapping[str, Any]) -> 'Record':
    """The record from results.json's content (other keys, such as the
    runner's envelope, are ignored); refuses one missing a field."""
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = {f.name for f in fields
                if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    missing = sorted(required - set(data))
    if missing:
      raise ValueError(f"{cls.__name__}: results hold no "
                       f"{', '.join(missing)}")
    return cls(**{f.name: _read(hints[f.name], data[f.name])
                  for f in fields if f.name in data})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(Record):
  """Base of an experiment's record (what ``run`` returns); ``dataset``
  describes the data that ran."""
  dataset: dict[str, Any]


def _leaves(value: Any) -> Any:
  if isinstance(value, Record):
    return value.to_dict()
  if isinstance(value, (list, tuple)):
    return [_leaves(v) for v in value]
  if isinstance(value, dict):
    return {k: _leaves(v) for k, v in value.items()}
  return value


def _record_type(tp) -> type[Record] | None:
  return tp if isinstance(tp, type) and issubclass(tp, Record) else None


def _read(tp, value: Any) -> Any:
  """``value`` (JSON) as the annotation ``tp`` holds it: records, at any
  depth of lists, dicts' values and optionals, are rebuilt; the rest is
  kept."""
  if value is None:
    return None
  record = _record_type(tp)
  if record is not None:
    return record.from_dict(value)
  args = [a for a in typing.get_args(tp) if a is not type(None)]
  origin = typing.get_origin(tp)
  if origin in (list, tuple) and args:
    return [_read(args[0], v) for v in value]
  if origin is dict and len(args) == 2:
    return {k: _read(args[1], v) for k, v in value.items()}
  if origin in (typing.Union, types.UnionType) and len(args) == 1:
    return _read(args[0], value)
  return value
