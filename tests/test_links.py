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


@pytest.mark.parametrize('doc', DOCS, ids=_rel)
def test_relative_links_resolve(doc):
  broken = []
  for match in LINK.finditer(doc.read_text()):
    target = match.group(1).split('#')[0]
    if target and not re.match(r'[a-z]+:', target):
      if not (doc.parent / target).exists():
        broken.append(target)
  assert not broken, f'{_rel(doc)} links to missing files: {broken}'


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
