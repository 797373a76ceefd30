"""Our packages use each other through named seams, not each other's private members: no
module reaches into another object's underscored attributes (``gd._handle()``,
``gd._chunk(pos)``, ``path._storage_options``...), and the seams ``GulpDirectory`` offers
instead (``native``, ``native_chunk``, ``storage_options``, ``io``) work."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

from gulpio_rs import GulpDirectory, _native

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "gulpio_rs"


def private_reach_ins(root: Path = PACKAGE) -> set[tuple[str, int, str]]:
    """``(file, line, attribute)`` of every ``x._name`` in the package whose ``_name`` the
    file does not define itself (as a function, a class, a module or class attribute, or a
    ``self._name =``), where ``x`` is not a module the file imported (``os._exit``,
    ``_threads.decode_threads``: modules' functions) nor ``super()``, and is not ``self`` (or
    ``cls``) using what the module of one of its package base classes defines (a subclass's
    own inherited members: ``torch/_video.py``'s dataset calls ``_base``'s
    ``self._directory()``)."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        own, imported = _defined(tree)
        inherited = _inherited(root, path, tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            name = node.attr
            if not name.startswith("_") or name.startswith("__") or name in own:
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in imported:
                continue
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls") and name in inherited:
                continue
            if isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "super":
                continue
            found.add((path.relative_to(root).as_posix(), node.lineno, name))
    return found


def _inherited(root: Path, path: Path, tree: ast.AST) -> set[str]:
    """What the package modules that the file's classes inherit from define (and so on, for
    those modules' own package base classes)."""
    bases = {
        b.id
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for b in node.bases
        if isinstance(b, ast.Name)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level or not node.module:
            continue
        if not any((a.asname or a.name) in bases for a in node.names):
            continue
        folder = path.parent
        for _ in range(node.level - 1):
            folder = folder.parent
        module = folder.joinpath(*node.module.split(".")).with_suffix(".py")
        if module.exists() and module.resolve().is_relative_to(root.resolve()):
            base_tree = ast.parse(module.read_text(), str(module))
            names |= _defined(base_tree)[0] | _inherited(root, module, base_tree)
    return names


def _defined(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names a file defines itself, and the names its imports bind."""
    own: set[str] = set()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = list(node.targets if isinstance(node, ast.Assign) else [node.target])
            for t in targets:
                if isinstance(t, (ast.Tuple, ast.List)):
                    targets += t.elts  # a, self._b = ...
                if isinstance(t, ast.Name):
                    own.add(t.id)
                elif (
                    isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and t.value.id in ("self", "cls")
                ):
                    own.add(t.attr)
    return own, imported


#: The modules that may call a third-party library's private API, each behind guarded
#: functions with a fallback (torch's refcounted shared-memory storages have no public API).
THIRD_PARTY_WRAPPERS = {"torch/_shared.py"}


def names_defined_in(root: Path = PACKAGE) -> set[str]:
    """Every name some module of the package defines (see :func:`_defined`)."""
    names: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        names |= _defined(ast.parse(path.read_text(), str(path)))[0]
    return names


def test_no_module_reaches_into_another_objects_private_members():
    ours = names_defined_in()
    found = private_reach_ins()
    unexpected = sorted(
        f"{f}:{line}: .{a}"
        for f, line, a in found
        if a in ours or f not in THIRD_PARTY_WRAPPERS  # a third-party private: only there
    )
    assert not unexpected, "use a named seam instead:\n" + "\n".join(unexpected)


def test_the_check_finds_a_reach_in(tmp_path):
    (tmp_path / "a.py").write_text(
        "import os\n"
        "class A:\n"
        "    def _mine(self, other):\n"
        "        self._x = other._x\n"  # the class's own member, on another instance
        "        other._mine(os._exit)\n"  # its own method; a module's function
        "def f(gd):\n"
        "    gd._handle().read()\n"  # another module's member: a reach-in
        "    gd._tmp = 1\n"  # setting one is a reach-in too
        "    return gd.native\n"
    )
    assert private_reach_ins(tmp_path) == {("a.py", 7, "_handle"), ("a.py", 8, "_tmp")}


def test_a_subclass_may_use_what_its_base_class_defines(tmp_path):
    (tmp_path / "base.py").write_text("class Base:\n    def _helper(self):\n        return 1\n")
    (tmp_path / "sub.py").write_text(
        "from .base import Base\n"
        "class Sub(Base):\n"
        "    def run(self, other):\n"
        "        self._helper()\n"  # inherited: its own member
        "        return other._helper()\n"  # another object's: a reach-in
    )
    assert private_reach_ins(tmp_path) == {("sub.py", 5, "_helper")}


def _gulp(folder: Path) -> None:
    chunk = next(GulpDirectory(folder).new_chunks(1))
    with chunk.open("wb"):
        chunk.append("v", {"k": 1}, [_jpeg()])


def _jpeg() -> bytes:
    import numpy as np
    import simplejpeg

    return simplejpeg.encode_jpeg(np.zeros((8, 8, 3), np.uint8))


def test_the_directorys_seams(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _gulp(tmp_path)
    gd = GulpDirectory(tmp_path, io="pread", storage_options=None)
    assert isinstance(gd.native, _native.NativeDirectory)
    assert gd.native.ids() == ["v"] and gd.native_chunk(0).ids() == ["v"]
    assert gd.io == "pread" and gd.storage_options is None
    assert GulpDirectory(tmp_path).io is None
    gd.close()
    with pytest.raises(ValueError, match="closed"):
        _ = gd.native


def private_imports_across_packages(root: Path = PACKAGE) -> set[tuple[str, int, str]]:
    """``(file, line, name)`` of every ``from m import _name`` where ``m`` is a module of the
    package outside the importing module's own subpackage (``gulpio_rs.adapters.items``
    may use ``adapters.base``'s helpers; ``torch._base`` may not use ``directory``'s).
    Modules are seams whatever their names (``from . import _decoder_notes``), and so is
    ``_native`` (the extension)."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        own_package = rel.parts[0] if len(rel.parts) > 1 else ""
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            # The module imported from, as parts below the package root.
            base = list(rel.parts[:-1])
            if node.level > 1:
                base = base[: len(base) - (node.level - 1)]
            target = base + (node.module.split(".") if node.module else [])
            target_package = target[0] if len(target) > 1 else ""
            if target_package == own_package and own_package:
                continue
            for alias in node.names:
                name = alias.name
                module = root.joinpath(*target, name)
                if module.with_suffix(".py").exists() or (module / "__init__.py").exists():
                    continue  # a module (private or not) is a seam of its own
                if name.startswith("_") and not name.startswith("__") and name != "_native":
                    found.add((rel.as_posix(), node.lineno, name))
    return found


def test_no_module_imports_another_packages_private_names():
    assert private_imports_across_packages() == set()
