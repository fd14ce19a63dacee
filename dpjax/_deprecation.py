"""Deprecated aliases: an old public name that warns and forwards to the new.

A subpackage that renamed or moved a public name keeps the old one for one
release with ``__getattr__ = deprecated_aliases(__name__, {old: new})``, where
``new`` is the dotted path of the name's home, or a pair ``(path, advice)``
when the old name has no one-to-one successor (the warning then says
``advice``, and the old name serves the object at ``path``). The old name is
not in the module's ``__all__`` (and so not in its reference page).

Example:
  >>> get = deprecated_aliases('mymod', {'old': 'math.sqrt'})
  >>> import warnings
  >>> with warnings.catch_warnings(record=True) as w:
  ...   warnings.simplefilter('always')
  ...   get('old')(4.0), 'math.sqrt' in str(w[0].message)
  (2.0, True)
"""

import importlib
from typing import Any, Callable
import warnings


def resolve(path: str) -> Any:
  """The object at dotted ``path`` (module attributes, possibly nested).

  Example:
    >>> resolve('math.pi') > 3
    True
  """
  parts = path.split('.')
  for i in range(len(parts) - 1, 0, -1):
    try:
      obj = importlib.import_module('.'.join(parts[:i]))
    except ImportError:
      continue
    for attr in parts[i:]:
      obj = getattr(obj, attr)
    return obj
  raise ImportError(f'Cannot resolve {path!r}.')


def deprecated_aliases(
    module: str,
    aliases: dict[str, str | tuple[str, str]]) -> Callable[[str], Any]:
  """A module ``__getattr__`` serving ``aliases`` (old name -> new path, or
  -> ``(path, advice)``).

  Each access warns with a ``DeprecationWarning`` naming the new path (or
  giving the advice).

  Example:
    >>> with warnings.catch_warnings(record=True) as caught:
    ...   warnings.simplefilter('always')
    ...   deprecated_aliases('m', {'tau': 'math.tau'})('tau') > 6
    True
    >>> caught[0].category.__name__
    'DeprecationWarning'
    >>> with warnings.catch_warnings(record=True) as caught:
    ...   warnings.simplefilter('always')
    ...   _ = deprecated_aliases('m', {'e': ('math.e', 'use exp(1)')})('e')
    >>> str(caught[0].message)
    'm.e is deprecated; use exp(1).'
  """
  def getattr_(name: str) -> Any:
    if name in aliases:
      target = aliases[name]
      path, advice = (target, f'use {target}') if isinstance(target, str) \
          else target
      warnings.warn(f'{module}.{name} is deprecated; {advice}.',
                    DeprecationWarning, stacklevel=2)
      return resolve(path)
    raise AttributeError(f'module {module!r} has no attribute {name!r}')

  return getattr_


def renamed_argument(function: str, old: str, old_value: Any, new: str,
                     new_value: Any) -> Any:
  """The value of argument ``new``, accepting its old keyword ``old`` for one
  release (with a ``DeprecationWarning``); both at once is a ValueError.

  Example:
    >>> renamed_argument('f', 'sigma', None, 'stddev', 2.0)
    2.0
  """
  if old_value is None:
    return new_value
  if new_value is not None:
    raise ValueError(f'{function}: pass {new}= only ({old}= is its '
                     'deprecated name).')
  warnings.warn(f'{function}({old}=...) is deprecated; use {new}=.',
                DeprecationWarning, stacklevel=3)
  return old_value
