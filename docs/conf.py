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
# bench.md is the benchmark's own output, shown inside bench/index.md (the
# GPU run's copy is linked from bench/gpu.md).
exclude_patterns = ['_build', 'bench/bench.md', 'bench/gpu/bench.md']
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
# are checked by tests/test_links.py instead. A bare word in a Returns type
# (``epsilon``) may name attributes of several classes; it stays plain text.
suppress_warnings = ['myst.xref_missing', 'ref.python']

_INLINE_LITERAL = re.compile(r'``.+?``', re.S)
# A doctest: its >>> line and the lines after it up to a blank one.
_DOCTEST = re.compile(r'^[ \t]*>>>[^\n]*(\n[ \t]*\S[^\n]*)*', re.M)
_SECTION = re.compile(r'^(\s*)(Args|Arguments|Attributes):\s*$')


def _fix_inline_markup(app, what, name, obj, options, lines):
  """Plain-text habits of the docstrings that reST reads otherwise.

  ``|x|`` (a norm) is not a substitution reference, and ``Event``s (an inline
  literal followed by a letter) needs an escape. Literals may span lines, so
  the docstring is scanned whole; doctests are left as they are.
  """
  del app, what, name, obj, options
  text = '\n'.join(lines)
  doctest = [m.span() for m in _DOCTEST.finditer(text)]
  out, pos = [], 0

  def plain(start, end):
    for i in range(start, end):
      bar = text[i] == '|' and not any(a <= i < b for a, b in doctest)
      out.append('\\|' if bar else text[i])

  for literal in _INLINE_LITERAL.finditer(text):  # left to right, paired
    plain(pos, literal.start())
    out.append(literal.group())
    pos = literal.end()
    if text[pos:pos + 1].isalpha():
      out.append('\\ ')
  plain(pos, len(text))
  lines[:] = ''.join(out).split('\n')


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


def setup(app):
  # Before napoleon (priority 500) turns the sections into fields.
  app.connect('autodoc-process-docstring', _join_shared_args, priority=400)
  app.connect('autodoc-process-docstring', _fix_inline_markup, priority=400)


apipages.write_pages(HERE / apipages.API_DIR)
