"""The package's shape: no subpackage (or part of one) reaches into another's
private modules, no module of a subpackage in parts uses a sibling module's
underscored names, and every public ``__all__`` is sorted and complete."""

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
  """Imports of a private module from outside the package that holds it.

  ``dpjax.<pkg>._private`` may be imported only inside ``dpjax/<pkg>/`` (its
  folders included), so the root package's own private modules
  (``dpjax._validate``, ...) are the shared internals every subpackage may
  use, a subpackage's private modules are its own, and a part's
  (``dpjax.distributed.protocols._cpsgd``) are the part's.
  """
  found = []
  for path in sorted(root.rglob('*.py')):
    rel = path.relative_to(root).parts
    inside = ['dpjax', *rel[:-1]]  # the packages this file is inside
    for line, name in _imported_modules(ast.parse(path.read_text())):
      parts = name.split('.')
      private = [i for i, p in enumerate(parts) if i >= 1 and p[0] == '_']
      if (parts[0] == 'dpjax' and private
          and parts[:private[0]] != inside[:private[0]]):
        found.append(
            f'{"/".join(rel)}:{line}: {".".join(parts[:private[0] + 1])}')
  return found


def test_no_subpackage_imports_another_subpackages_private_module():
  assert cross_private_imports() == []


def test_the_check_keeps_a_parts_private_modules_to_that_part(tmp_path):
  part = tmp_path / 'one' / 'left'
  part.mkdir(parents=True)
  (part / '_mod.py').write_text(
      'from dpjax.one.right import _other\n'
      'from dpjax.one.left import _own\n'
      'from dpjax.one import _shared\n')
  assert [f.split(': ')[1] for f in cross_private_imports(tmp_path)] == [
      'dpjax.one.right._other']


def sibling_private_names(root):
  """Uses of another module's underscored names inside one package tree.

  ``from dpjax.x._mod import _name`` and ``_mod._name`` (``_mod`` imported
  from dpjax): a helper that several modules use belongs in an internal
  module without the underscore, not in another module's private names.
  """
  found = []
  for path in sorted(root.rglob('*.py')):
    rel = '/'.join(path.relative_to(root.parent).parts)
    tree = ast.parse(path.read_text())
    modules = set()
    for node in ast.walk(tree):
      if (isinstance(node, ast.ImportFrom) and node.module
          and node.module.startswith('dpjax')):
        for alias in node.names:
          if alias.name[0] == '_' and '._' in f'.{node.module}':
            found.append(f'{rel}:{node.lineno}: {node.module}.{alias.name}')
          elif alias.name[0] == '_':
            modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
      if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
          and node.value.id in modules and node.attr[0] == '_'
          and not node.attr.startswith('__')):
        found.append(f'{rel}:{node.lineno}: {node.value.id}.{node.attr}')
  return found


@pytest.mark.parametrize('package', ['distributed'])
def test_no_module_uses_a_siblings_private_names(package):
  assert sibling_private_names(ROOT / package) == []


def test_the_sibling_check_sees_both_forms(tmp_path):
  pkg = tmp_path / 'one'
  pkg.mkdir()
  (pkg / '_a.py').write_text(
      'from dpjax.one._b import _helper\n'
      'from dpjax.one._b import shared\n'
      'from dpjax.one import _b\n'
      'x = _b._helper(_b.shared)\n')
  assert [f.split(': ')[1] for f in sibling_private_names(pkg)] == [
      'dpjax.one._b._helper', '_b._helper']


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


EXPERIMENTS = ROOT.parent / 'experiments'
MAX_FUNCTION_LINES = 60


def long_functions(root=EXPERIMENTS, limit=MAX_FUNCTION_LINES):
  """(path, function, lines) of every function under ``root`` longer than
  ``limit`` lines (signature, docstring and body)."""
  out = []
  for path in sorted(root.rglob('*.py')):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        lines = node.end_lineno - node.lineno + 1
        if lines > limit:
          out.append((str(path.relative_to(root.parent)), node.name, lines))
  return out


def test_no_experiment_function_is_longer_than_the_limit():
  assert long_functions() == []


def test_the_length_check_counts_the_whole_function(tmp_path):
  body = '\n'.join(f'  x{i} = {i}' for i in range(59))
  (tmp_path / 'a.py').write_text(f'def short():\n{body}\n')
  assert long_functions(tmp_path) == []
  (tmp_path / 'b.py').write_text(f'def long():\n{body}\n  return 0\n')
  assert long_functions(tmp_path) == [(f'{tmp_path.name}/b.py', 'long', 61)]
