"""Command-line flags derived from an experiment's ``Config`` fields.

``python -m experiments run NAME --help`` lists one flag per field, with its
type, help line and the preset values; ``--field-name VALUE`` sets it (a
sequence field takes several values, a bool field is ``--x`` / ``--no-x``,
an optional one takes ``none``, a mapping one takes JSON). A flag the
experiment does not have is refused before any work, naming it; a value of
the wrong type is refused by argparse, one out of range by the ``Config``.

Example:
  >>> import dataclasses
  >>> from experiments.common import config
  >>> @dataclasses.dataclass(frozen=True)
  ... class Demo(config.Config):
  ...   NAME = 'demo'
  ...   epochs: int = config.setting(2, 'training epochs', ge=1)
  >>> parse(Demo, ['--full', '--epochs', '3', '--out', 'o'])
  ('full', {'epochs': 3, 'out': 'o'})
  >>> parse(Demo, ['--epochz', '3'])
  Traceback (most recent call last):
    ...
  ValueError: demo: unknown flag --epochz (run demo --help lists its flags)
"""

import argparse
import dataclasses
import json
import typing
from typing import Any

from experiments.common import config as config_lib

DEFAULT_OUT = 'results'


class _Parser(argparse.ArgumentParser):

  def error(self, message):  # one line, no usage dump
    raise ValueError(message)


def _value_type(base, optional: bool):
  """The argparse ``type`` for one value of a field."""
  def parse(text: str):
    if optional and text.lower() == 'none':
      return None
    if base is bool:
      if text.lower() not in ('true', 'false'):
        raise argparse.ArgumentTypeError(f'invalid bool value: {text!r}')
      return text.lower() == 'true'
    if base is dict:
      try:
        return json.loads(text)
      except ValueError as e:
        raise argparse.ArgumentTypeError(f'invalid JSON: {text!r}') from e
    try:
      return base(text)
    except ValueError as e:
      raise argparse.ArgumentTypeError(
          f'invalid {base.__name__} value: {text!r}') from e
  parse.__name__ = base.__name__
  return parse


def _shown(value: Any) -> str:
  if isinstance(value, tuple):
    return ' '.join(map(str, value))
  return 'none' if value is None else str(value)


def parser(cls: type[config_lib.Config]) -> argparse.ArgumentParser:
  """The argparse parser of ``run NAME``'s flags for ``cls``."""
  p = _Parser(prog=f'python -m experiments run {cls.NAME}',
              description=f'{cls.NAME}: flags (defaults: the quick preset)',
              argument_default=argparse.SUPPRESS, allow_abbrev=False)
  mode = p.add_mutually_exclusive_group()
  for name in cls.PRESETS:
    mode.add_argument(f'--{name}', dest='mode', action='store_const',
                      const=name, help=f'the {name} preset' +
                      (' (default)' if name == 'quick' else ''))
  p.add_argument('--out', help=f'output directory (default {DEFAULT_OUT})')
  p.add_argument('--force', action='store_true',
                 help='rerun even if OUT/NAME/results.json holds the same '
                 'configuration')
  p.add_argument('--no-progress', dest='progress', action='store_false',
                 help='no progress lines')
  hints = typing.get_type_hints(cls)
  full = cls.PRESETS.get('full', {})
  for f in dataclasses.fields(cls):
    if not f.metadata.get('flag', True):
      continue
    base, elem, optional = config_lib.field_type(hints[f.name])
    flag = '--' + f.name.replace('_', '-')
    text = (f"{f.metadata.get('help', '')} "
            f'({config_lib.describe(hints[f.name], article=False)}')
    if f.metadata.get('choices') is not None:
      text += f": {', '.join(map(_shown, f.metadata['choices']))}"
    text += f'; default {_shown(f.default)}'
    if f.name in full and full[f.name] != f.default:
      text += f', full {_shown(full[f.name])}'
    text = text.replace('%', '%%') + ')'
    if base is bool and not optional:
      p.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction,
                     help=text)
    elif base is tuple:
      p.add_argument(flag, dest=f.name, nargs='+', help=text,
                     type=_value_type(elem, False),
                     metavar=elem.__name__.upper())
    else:
      p.add_argument(flag, dest=f.name, help=text,
                     type=_value_type(base, optional),
                     metavar=base.__name__.upper())
  return p


def parse(cls: type[config_lib.Config], argv: list[str]
          ) -> tuple[str, dict[str, Any]]:
  """(mode, given flags) of ``run NAME argv``: only the flags given, by
  field name, plus ``out``, ``force`` and ``progress`` when given."""
  args, unknown = parser(cls).parse_known_args(argv)
  if unknown:
    flags = [a for a in unknown if a.startswith('-')] or unknown
    raise ValueError(f"{cls.NAME}: unknown flag{'s' * (len(flags) > 1)} "
                     f"{', '.join(flags)} (run {cls.NAME} --help lists its "
                     'flags)')
  given = vars(args)
  return given.pop('mode', 'quick'), given
