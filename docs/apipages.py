"""The API reference's pages, one per public subpackage of dpjax.

The subpackages are enumerated at run time (a new one gets its page without
an edit here), and each page lists every name of the subpackage's
``__all__``: functions and classes through Sphinx autodoc (docstrings in
Google style, read by napoleon), constants through the comment above their
assignment. This module imports neither Sphinx nor the docs extra, so the
test suite checks the pages without them (tests/test_docs.py).
"""

import importlib
import inspect
import pathlib
import pkgutil
import re
import types

import dpjax

API_DIR = 'api'


def subpackages():
  """Names of dpjax's public subpackages, found at run time, sorted."""
  return sorted(m.name for m in pkgutil.iter_modules(dpjax.__path__, 'dpjax.')
                if m.ispkg and not m.name.rsplit('.', 1)[1].startswith('_'))


def parts(package_name):
  """Public submodules of a subpackage that have an ``__all__``, sorted.

  A subpackage in parts (``dpjax.distributed.protocols`` and
  ``dpjax.distributed.decentralized``) re-exports every part's names; its
  page documents them once, in one section per part, so the parts are
  folded into the subpackage's page rather than given pages of their own.
  """
  package = importlib.import_module(package_name)
  found = []
  for m in pkgutil.iter_modules(package.__path__, package_name + '.'):
    if not m.name.rsplit('.', 1)[1].startswith('_'):
      if hasattr(importlib.import_module(m.name), '__all__'):
        found.append(m.name)
  return sorted(found)


def public_names(module_name):
  """(name, object) of a module's ``__all__``, in its order."""
  module = importlib.import_module(module_name)
  return [(name, getattr(module, name)) for name in module.__all__]


def kind(obj):
  """The autodoc directive that documents obj."""
  if isinstance(obj, types.ModuleType):
    return 'module'
  if inspect.isclass(obj):
    return 'exception' if issubclass(obj, BaseException) else 'class'
  if callable(obj):
    return 'function'
  return 'data'


def constant_doc(module_name, name):
  """The comment above a constant's assignment in its subpackage's source,
  its parts' folders included.

  A comment may head a group of consecutive assignments (``# Largest ...``
  then ``A = ...`` and ``B = ...``). Returns '' when there is none.
  """
  package = importlib.import_module(module_name)
  assignment = re.compile(rf'^{re.escape(name)}\s*(:[^=]*)?=')
  for path in sorted(pathlib.Path(package.__file__).parent.rglob('*.py')):
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
      if assignment.match(line):
        j = i - 1
        while j >= 0 and re.match(r'^[A-Z_][A-Z0-9_]*\s*(:[^=]*)?=', lines[j]):
          j -= 1  # an assignment of the same group
        comment = []
        while j >= 0 and lines[j].startswith('#'):
          comment.insert(0, lines[j].lstrip('#:').strip())
          j -= 1
        return ' '.join(comment)
  return ''


def undocumented(module_name):
  """Public names of a module that have no documentation of their own."""
  missing = []
  for name, obj in public_names(module_name):
    k = kind(obj)
    if k == 'module':
      doc = obj.__doc__
    elif k == 'data':
      doc = constant_doc(module_name, name)
    else:
      doc = obj.__dict__.get('__doc__') if k != 'function' else obj.__doc__
      # A dataclass without a docstring gets its signature as __doc__.
      if doc and inspect.isclass(obj) and doc.startswith(obj.__name__ + '('):
        doc = None
    if not (doc or '').strip():
      missing.append(name)
  return missing


def _heading(text, char):
  return f'{text}\n{char * len(text)}\n'


def subpackage_page(module_name):
  """reStructuredText of one subpackage's page."""
  out = [_heading(f'``{module_name}``', '='),
         f'.. automodule:: {module_name}\n   :no-members:\n',
         # Full names below: no module context to prefix them with.
         '.. py:currentmodule:: None\n']
  names = public_names(module_name)
  sections = [(part, [(n, o) for n, o in names
                      if n in importlib.import_module(part).__all__])
              for part in parts(module_name)]
  rest = [(n, o) for n, o in names
          if not any(n in dict(held) for _, held in sections)]
  if not sections:
    return '\n'.join(out + _entries(module_name, rest))
  for part, held in sections:
    out += [_heading(f'``{part}``', '-'),
            f'.. automodule:: {part}\n   :no-members:\n',
            '.. py:currentmodule:: None\n', *_entries(module_name, held)]
  if rest:
    out += [_heading('Other names', '-'), *_entries(module_name, rest)]
  return '\n'.join(out)


def _entries(module_name, names):
  """The autodoc directives of (name, object) pairs of a subpackage."""
  out = []
  for name, obj in names:
    full = f'{module_name}.{name}'
    k = kind(obj)
    if k == 'data':
      doc = constant_doc(module_name, name).replace('|', r'\|')
      out.append(f'.. py:data:: {full}\n   :value: {obj!r}\n\n   {doc}\n')
    elif k in ('class', 'exception'):
      out.append(f'.. auto{k}:: {full}\n   :members:\n')
    elif k == 'module':
      out.append(f'.. py:data:: {full}\n\n   The subpackage :doc:`{obj.__name__}`.\n')
    else:
      out.append(f'.. autofunction:: {full}\n')
  return out


def _home(obj, packages):
  """The subpackage whose ``__all__`` holds obj, or None."""
  for package in packages:
    for name, other in public_names(package):
      if other is obj:
        return f'{package}.{name}'
  return None


def top_level_page():
  """The page of the ``dpjax`` namespace: what it re-exports, and where."""
  packages = subpackages()
  out = [_heading('``dpjax``', '='),
         '.. automodule:: dpjax\n   :no-members:\n',
         _heading('Names of the top-level namespace', '-'),
         'Each is documented on the page of the subpackage that holds it.\n',
         '.. list-table::\n   :header-rows: 1\n\n   * - name\n     - documented as\n']
  own = []
  for name, obj in public_names('dpjax'):
    if kind(obj) == 'module':
      out.append(f'   * - ``dpjax.{name}``\n     - :doc:`{obj.__name__}`')
      continue
    home = _home(obj, packages)
    if home is None:
      own.append(name)
      continue
    out.append(f'   * - ``dpjax.{name}``\n     - :py:obj:`{home}`')
  out.append('')
  for name in own:  # held by no subpackage: documented here
    out.append(f'.. auto{kind(getattr(dpjax, name))}:: dpjax.{name}\n')
  return '\n'.join(out)


def index_page():
  """The toctree of the reference's pages."""
  entries = '\n'.join(f'   {p}' for p in ['dpjax'] + subpackages())
  return (_heading('API reference', '=') +
          '\nOne page per subpackage, generated from the docstrings.\n\n'
          f'.. toctree::\n   :maxdepth: 1\n\n{entries}\n')


def write_pages(directory):
  """Writes every page into directory (emptied first); returns their names."""
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  for old in directory.glob('*.rst'):
    old.unlink()
  pages = {'index': index_page(), 'dpjax': top_level_page()}
  pages.update({p: subpackage_page(p) for p in subpackages()})
  for name, text in pages.items():
    (directory / f'{name}.rst').write_text(text)
  return sorted(pages)
