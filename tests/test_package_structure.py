"""The package's shape: no subpackage reaches into another's private modules,
and every public ``__all__`` is sorted and complete."""

import ast
import importlib
import pathlib
import pkgutil

import pytest

import dpjax

ROOT = pathlib.Path(dpjax.__file__).parent
SUBPACKAGES = sorted(m.name for m in pkgutil.iter_modules(dpjax.__path__)
                     if m.ispkg)
# Public modules inside a subpackage (a subpackage in parts, e.g.
# dpjax.distributed.protocols): each has its own __all__.
PARTS = sorted(m.name for s in SUBPACKAGES for m in pkgutil.iter_modules(
    [str(ROOT / s)], f'dpjax.{s}.') if not m.name.rsplit('.', 1)[1][0] == '_')


def _imported_modules(tree):
  """(line, dotted module) for every module an import statement binds."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield node.lineno, alias.name
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      for alias in node.names:  # `from dpjax.x import _y` binds module _y
        yield node.lineno, f'{node.module}.{alias.name}'


def cross_private_imports(root=ROOT):
  """Imports of ``dpjax.<other>._private`` from inside ``dpjax.<one>``.

  The root package's own private modules (``dpjax._validate``, ...) are the
  shared internals every subpackage may use; a subpackage's private modules
  are its own.
  """
  found = []
  for path in sorted(root.rglob('*.py')):
    rel = path.relative_to(root).parts
    owner = rel[0] if len(rel) > 1 else None
    for line, name in _imported_modules(ast.parse(path.read_text())):
      parts = name.split('.')
      private = [i for i, p in enumerate(parts) if i >= 2 and p[0] == '_']
      if parts[0] == 'dpjax' and parts[1] != owner and private:
        found.append(
            f'{"/".join(rel)}:{line}: {".".join(parts[:private[0] + 1])}')
  return found


def test_no_subpackage_imports_another_subpackages_private_module():
  assert cross_private_imports() == []


def test_the_check_sees_all_three_import_forms(tmp_path):
  pkg = tmp_path / 'one'
  pkg.mkdir()
  (pkg / '__init__.py').write_text(
      'from dpjax.other._mod import thing\n'
      'from dpjax.other import _mod\n'
      'import dpjax.other._mod\n'
      'from dpjax.one._own import fine\n'
      'from dpjax import _validate\n'
      'from dpjax import other\n')
  assert [f.split(': ')[1] for f in cross_private_imports(tmp_path)] == [
      'dpjax.other._mod', 'dpjax.other._mod', 'dpjax.other._mod']


@pytest.mark.parametrize('name', ['dpjax'] + [f'dpjax.{s}' for s in
                                              SUBPACKAGES] + PARTS)
def test_all_is_sorted_unique_and_resolves(name):
  module = importlib.import_module(name)
  names = module.__all__
  assert names == sorted(names, key=str.lower), name
  assert len(set(names)) == len(names), name
  for public in names:
    assert hasattr(module, public), f'{name}.{public}'


def test_distributed_is_in_two_parts_that_its_namespace_re_exports():
  assert PARTS == ['dpjax.distributed.decentralized',
                   'dpjax.distributed.protocols']
  parts = [importlib.import_module(p) for p in PARTS]
  held = [set(p.__all__) for p in parts]
  assert not held[0] & held[1]
  assert held[0] | held[1] == set(dpjax.distributed.__all__)
  assert {'Protocol', 'cpsgd_protocol', 'client_sum'} <= held[1]
  assert {'gossip', 'qdpsgd1', 'run_agents'} <= held[0]
