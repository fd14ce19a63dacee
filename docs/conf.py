"""Sphinx configuration of dpjax's documentation site (``make docs``).

Offline: no intersphinx, no remote theme; the API pages under ``api/`` are
written anew from the installed dpjax by ``apipages.write_pages`` on every
build (the folder is not tracked).
"""

import os
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
os.environ.setdefault('JAX_PLATFORMS', 'cpu')

import apipages  # pylint: disable=wrong-import-position

project = 'dpjax'
author = 'dpjax authors'
copyright = 'dpjax authors'  # pylint: disable=redefined-builtin
extensions = ['sphinx.ext.autodoc', 'sphinx.ext.napoleon', 'myst_parser']
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
root_doc = 'index'
exclude_patterns = ['_build', 'bench/bench.md']
html_theme = 'alabaster'
html_title = 'dpjax'

napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Attributes sections as fields of their class (autodoc documents the
# fields themselves as members).
napoleon_use_ivar = True
autodoc_member_order = 'bysource'
autodoc_typehints = 'signature'
autodoc_preserve_defaults = True
myst_heading_anchors = 3
# Links out of the site (to ../README.md, ../BUILD_NOTES.md, source files)
# are checked by tests/test_docs.py instead.
# A bare word in a Returns type (``epsilon``) may name attributes of several
# classes; it stays plain text.
suppress_warnings = ['myst.xref_missing', 'ref.python']

_INLINE_LITERAL = re.compile(r'(``.*?``)')


def _escape_bars(app, what, name, obj, options, lines):
  """Docstrings write |x| for a norm: not a reST substitution."""
  del app, what, name, obj, options
  for i, line in enumerate(lines):
    if '|' in line and not line.lstrip().startswith(('>>>', '...')):
      parts = _INLINE_LITERAL.split(line)
      lines[i] = ''.join(p if p.startswith('``') else p.replace('|', r'\|')
                         for p in parts)


_SECTION = re.compile(r'^(\s*)(Args|Arguments|Attributes):\s*$')


def _join_shared_args(app, what, name, obj, options, lines):
  """One Args entry may name several parameters over two lines
  (``a, b,`` then ``  c: as f``); napoleon needs them on one line."""
  del app, what, name, obj, options
  indent = None
  i = 0
  while i < len(lines) - 1:
    section = _SECTION.match(lines[i])
    if section:
      indent = len(section.group(1)) + 2
    elif lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) < (
        indent or 0):
      indent = None
    elif (indent is not None and lines[i].rstrip().endswith(',')
          and ':' not in lines[i]
          and len(lines[i]) - len(lines[i].lstrip()) == indent):
      lines[i] = lines[i].rstrip() + ' ' + lines.pop(i + 1).strip()
      continue
    i += 1


def _plural_literals(app, what, name, obj, options, lines):
  """``Event``s: an inline literal followed by a letter needs an escape."""
  del app, what, name, obj, options
  for i, line in enumerate(lines):
    lines[i] = re.sub(r'(``[^`]+``)(?=[A-Za-z])', r'\1\\ ', line)


def setup(app):
  # Before napoleon (priority 500) turns the sections into fields.
  app.connect('autodoc-process-docstring', _join_shared_args, priority=400)
  app.connect('autodoc-process-docstring', _plural_literals, priority=400)
  app.connect('autodoc-process-docstring', _escape_bars)

apipages.write_pages(HERE / apipages.API_DIR)
