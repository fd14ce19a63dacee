"""Experiment configurations: typed, frozen, validated before any work.

An experiment declares its settings as a frozen dataclass derived from
``Config`` (as jax_privacy's ``configs/`` do). Every field is a ``setting``:
a default, a help line and, where it has one, a range. The field defaults are
the quick preset; ``PRESETS['full']`` lists what the paper-scale run changes.
Building a config checks every field's type (from its annotation) and range,
then the experiment's ``validate`` hook, so an unknown key, a wrong type or an
out-of-range value is refused, naming it, before anything runs:

  >>> import dataclasses
  >>> @dataclasses.dataclass(frozen=True)
  ... class Demo(Config):
  ...   NAME = 'demo'
  ...   PRESETS = {'quick': {}, 'full': dict(epochs=10)}
  ...   epochs: int = setting(2, 'training epochs', ge=1)
  ...   epsilons: tuple[float, ...] = setting((1.0, 8.0), 'target epsilons',
  ...                                         gt=0)
  >>> cfg = Demo.preset('full', epsilons=[3])
  >>> cfg.epochs, cfg.epsilons, cfg.mode, cfg.seeds
  (10, (3.0,), 'full', [0])
  >>> cfg.replace(epochz=3)  # doctest: +ELLIPSIS
  Traceback (most recent call last):
    ...
  ValueError: demo: unknown setting epochz (known: epochs, epsilons, ...)
  >>> Demo(epochs=0)
  Traceback (most recent call last):
    ...
  ValueError: Expected epochs=0 >= 1.
"""

import dataclasses
import math
import numbers
import types
import typing
from typing import Any, ClassVar, Mapping

def setting(default: Any, help: str, *,  # pylint: disable=redefined-builtin
            ge=None, gt=None, le=None, lt=None, choices=None,
            min_len: int = 1, flag: bool = True) -> Any:
  """A ``Config`` field: its default, help line and range.

  Args:
    default: the quick preset's value (a tuple for a sequence field).
    help: one line for ``run NAME --help``.
    ge, gt, le, lt: bounds (of every element of a sequence field).
    choices: the allowed values (of every element).
    min_len: the fewest elements a sequence field may hold.
    flag: whether the command line may set it.

  Returns:
    a ``dataclasses.field``.
  """
  return dataclasses.field(default=default, metadata=dict(
      help=help, ge=ge, gt=gt, le=le, lt=lt, choices=choices,
      min_len=min_len, flag=flag))


def field_type(tp):
  """(base type, element type or None, whether None is allowed)."""
  args = typing.get_args(tp)
  optional = False
  if typing.get_origin(tp) in (typing.Union, types.UnionType):
    rest = [a for a in args if a is not type(None)]
    optional, tp = len(rest) < len(args), rest[0]
    args = typing.get_args(tp)
  if typing.get_origin(tp) is tuple:
    return tuple, args[0], optional
  return typing.get_origin(tp) or tp, None, optional


def describe(tp, article: bool = True) -> str:
  """'a float', 'a list of int', 'an int or None', ... (for messages)."""
  base, elem, optional = field_type(tp)
  text = (f'list of {elem.__name__}' if base is tuple else
          'mapping' if base is dict else base.__name__)
  if article:
    text = ('an ' if text[0] in 'aeiou' else 'a ') + text
  return text + (' or None' if optional else '')


def _scalar(name: str, value: Any, tp: type, want: str) -> Any:
  ok = {bool: isinstance(value, bool),
        int: isinstance(value, numbers.Integral) and not isinstance(
            value, bool),
        float: isinstance(value, numbers.Real) and not isinstance(
            value, bool),
        str: isinstance(value, str),
        dict: isinstance(value, Mapping)}.get(tp, isinstance(value, tp))
  if not ok:
    raise ValueError(f'Expected {name}={value!r} to be {want}.')
  if tp is float and not math.isfinite(value):
    raise ValueError(f'Expected {name}={value!r} to be finite.')
  return tp(value)


def _in_range(name: str, value: Any, meta: Mapping[str, Any]) -> None:
  choices = meta.get('choices')
  if choices is not None and value not in choices:
    raise ValueError(f'Expected {name}={value!r} in '
                     f"{', '.join(map(repr, choices))}.")
  gt, lt = meta.get('gt'), meta.get('lt')
  lo = ('(', gt) if gt is not None else ('[', meta.get('ge'))
  hi = (')', lt) if lt is not None else (']', meta.get('le'))
  if lo[1] is None and hi[1] is None:
    return
  ok = ((lo[1] is None or (value > lo[1] if lo[0] == '(' else value >= lo[1]))
        and (hi[1] is None or (value < hi[1] if hi[0] == ')'
                               else value <= hi[1])))
  if ok:
    return
  if hi[1] is None:
    bound = f"{'>' if lo[0] == '(' else '>='} {lo[1]}"
  elif lo[1] is None:
    bound = f"{'<' if hi[0] == ')' else '<='} {hi[1]}"
  else:
    bound = f'in {lo[0]}{lo[1]}, {hi[1]}{hi[0]}'
  raise ValueError(f'Expected {name}={value!r} {bound}.')


def check_field(field: dataclasses.Field, tp, value: Any) -> Any:
  """``value`` coerced to the field's type (int -> float, list -> tuple),
  after checking its type and range; raises ValueError naming the field."""
  base, elem, optional = field_type(tp)
  name, meta = field.name, field.metadata
  if value is None and optional:
    return None
  want = describe(tp)
  if base is tuple:
    if isinstance(value, (str, Mapping)) or not isinstance(
        value, (list, tuple)):
      raise ValueError(f'Expected {name}={value!r} to be {want}.')
    if len(value) < meta.get('min_len', 1):
      raise ValueError(f'Expected {name} to hold at least '
                       f"{meta.get('min_len', 1)} value(s), got {len(value)}.")
    out = tuple(_scalar(f'{name}[{i}]', v, elem, describe(elem))
                for i, v in enumerate(value))
    for i, v in enumerate(out):
      _in_range(f'{name}[{i}]', v, meta)
    return out
  out = _scalar(name, value, base, want)
  _in_range(name, out, meta)
  return out


@dataclasses.dataclass(frozen=True)
class Config:
  """Base of an experiment's settings.

  A subclass sets ``NAME`` (the experiment's name, for messages), declares
  its fields with ``setting`` (defaults = the quick preset) and
  ``PRESETS['full']`` (the changes for the paper-scale run). It may
  override ``normalize`` (canonical values, e.g. sorted lists, returned as
  a dict of changes) and ``validate`` (checks across fields). Every
  experiment has ``seed`` and ``num_seeds``: its seeds are
  ``seed .. seed + num_seeds - 1``, run as one vmapped program.
  """
  NAME: ClassVar[str] = 'experiment'
  PRESETS: ClassVar[dict[str, dict[str, Any]]] = {'quick': {}, 'full': {}}

  mode: str = setting('quick', 'the preset these settings start from',
                      flag=False)
  seed: int = setting(0, 'first seed', ge=0)
  num_seeds: int = setting(1, 'seeds, run as one vmapped program', ge=1)

  def __post_init__(self):
    hints = typing.get_type_hints(type(self))
    for f in dataclasses.fields(self):
      object.__setattr__(self, f.name, check_field(f, hints[f.name],
                                                   getattr(self, f.name)))
    if self.mode not in self.PRESETS:
      raise ValueError(f"Expected mode={self.mode!r} in "
                       f"{', '.join(map(repr, self.PRESETS))}.")
    for name, value in self.normalize().items():
      object.__setattr__(self, name, value)
    self.validate()

  def normalize(self) -> dict[str, Any]:
    """Fields to rewrite into their canonical form (none by default)."""
    return {}

  def validate(self) -> None:
    """Checks across fields; raises ValueError naming the value."""

  @classmethod
  def field_names(cls) -> list[str]:
    return sorted(f.name for f in dataclasses.fields(cls))

  @classmethod
  def _known(cls, overrides: Mapping[str, Any]) -> None:
    unknown = sorted(set(overrides) - set(cls.field_names()))
    if unknown:
      raise ValueError(f"{cls.NAME}: unknown setting{'s' * (len(unknown) > 1)}"
                       f" {', '.join(unknown)} (known: "
                       f"{', '.join(cls.field_names())})")

  @classmethod
  def preset(cls, mode: str = 'quick', **overrides: Any) -> 'Config':
    """The ``mode`` preset ('quick' or 'full') with ``overrides``."""
    if mode not in cls.PRESETS:
      raise ValueError(f"unknown mode {mode!r}; known: "
                       f"{', '.join(cls.PRESETS)}")
    cls._known(overrides)
    return cls(**dict(cls.PRESETS[mode], mode=mode, **overrides))

  def replace(self, **overrides: Any) -> 'Config':
    """A copy with ``overrides``, refusing unknown names."""
    self._known(overrides)
    return dataclasses.replace(self, **overrides)

  def to_dict(self) -> dict[str, Any]:
    """The settings as stored in results.json (tuples become lists there)."""
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

  @property
  def seeds(self) -> list[int]:
    return list(range(self.seed, self.seed + self.num_seeds))

  def target_epsilons(self) -> list[float]:
    """The epsilons the run is calibrated to: ``epsilons`` or ``epsilon``."""
    if hasattr(self, 'epsilons'):
      return sorted(self.epsilons)
    return [self.epsilon] if hasattr(self, 'epsilon') else []

