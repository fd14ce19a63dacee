"""The project is self-contained: every link and repository path it cites
resolves (README, BUILD_NOTES, docs, and the docstrings of dpjax and
experiments)."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / 'README.md', ROOT / 'BUILD_NOTES.md',
        *sorted((ROOT / 'docs').rglob('*.md'))]
SOURCES = sorted([*ROOT.glob('dpjax/**/*.py'), *ROOT.glob('experiments/**/*.py')])
LINK = re.compile(r'\]\(([^)\s]+)\)')
# A path inside this repository: starts with one of its top-level folders.
REPO_PATH = re.compile(
    r'(?<![\w/.])((?:dpjax|experiments|tests|docs|\.ci)/[\w./-]*[\w])')
PLACEHOLDERS = ('NAME', 'DIR', 'PATH', '*', 'X/')


def _rel(path):
  return str(path.relative_to(ROOT))


def _anchors(path):
  """GitHub's heading anchors of a Markdown file (duplicates get -1, -2)."""
  seen, anchors = {}, set()
  text = re.sub(r'```.*?```', '', path.read_text(), flags=re.S)
  for heading in re.findall(r'^#{1,6} +(.+?) *#*$', text, re.M):
    slug = re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    anchors.add(f'{slug}-{count}' if count else slug)
  return anchors


def _broken_links(doc):
  """Relative links whose file, or heading anchor in a Markdown file, is
  missing (links inside code blocks are examples, not links)."""
  text = re.sub(r'```.*?```', '', doc.read_text(), flags=re.S)
  broken = []
  for target in LINK.findall(text):
    if re.match(r'[a-z]+:', target):  # https:, mailto:
      continue
    path, _, anchor = target.partition('#')
    file = (doc.parent / path) if path else doc
    if not file.exists():
      broken.append(target)
    elif anchor and file.suffix == '.md' and anchor not in _anchors(file):
      broken.append(target)
  return broken


@pytest.mark.parametrize('doc', DOCS, ids=_rel)
def test_relative_links_resolve(doc):
  broken = _broken_links(doc)
  assert not broken, f'{_rel(doc)} links to missing files or headings: {broken}'


def test_a_broken_link_or_anchor_is_found(tmp_path):
  (tmp_path / 'other.md').write_text('# Other page\n\n## A `code`, part\n')
  doc = tmp_path / 'doc.md'
  doc.write_text('# Top\n[ok](other.md) [ok](other.md#a-code-part) [ok](#top)'
                 ' [web](https://example.org/x.md)\n[no](missing.md) '
                 '[no](other.md#nowhere) [no](#bottom)\n'
                 '```\n[in code](ignored.md)\n```\n')
  assert _broken_links(doc) == ['missing.md', 'other.md#nowhere', '#bottom']


@pytest.mark.parametrize('path', DOCS + SOURCES, ids=_rel)
def test_cited_repository_paths_exist(path):
  missing = sorted({m.group(1) for m in REPO_PATH.finditer(path.read_text())
                    if not any(p in m.group(1) for p in PLACEHOLDERS)
                    and not (ROOT / m.group(1)).exists()})
  assert not missing, f'{_rel(path)} cites missing paths: {missing}'


# Files the CLI writes into a results directory (not part of the repository).
OUTPUTS = {'report.md', 'REPORT.md', 'results.json'}


def test_cited_markdown_files_exist():
  present = {p.name for p in ROOT.rglob('*.md')
             if not {'.venv', 'results'} & set(p.parts)} | OUTPUTS
  cited = {(m.group(1), _rel(path)) for path in DOCS + SOURCES
           for m in re.finditer(r'\b([\w-]+\.md)\b', path.read_text())}
  missing = sorted(c for c in cited if c[0] not in present)
  assert not missing, f'cited but not in the repository: {missing}'
