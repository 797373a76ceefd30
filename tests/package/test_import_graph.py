"""The gulpio_rs modules import each other without a circle.

Every ``import`` counts, also those inside functions (a lazy import still ties the two
modules together), except those under ``if TYPE_CHECKING:``. ``gulpio_rs.fileio`` is a facade:
only the package root may import it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "gulpio_rs"


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file of the package, and for every
    ``.pyi`` stub without one (extension modules such as ``_native``: leaves here)."""
    out = {}
    paths = sorted(root.rglob("*.py"))
    paths += [p for p in sorted(root.rglob("*.pyi")) if not p.with_suffix(".py").exists()]
    for path in paths:
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, type_only: bool = False):
    """Import nodes of ``tree``, leaving out ``if TYPE_CHECKING:`` blocks unless ``type_only``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only:
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(name: str, path: Path, modules: set[str], type_only: bool = False) -> set[str]:
    """The package modules that module ``name`` (at ``path``) imports (with ``type_only``,
    also under ``if TYPE_CHECKING:``)."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    if path.suffix == ".pyi":
        return targets
    for node in _imports(ast.parse(path.read_text(), str(path)), type_only):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # `from .m import x`: x is a submodule of m, or a name defined in m
            candidates = [f"{stem}.{alias.name}" for alias in node.names] + [stem]
            candidates = [c for c in candidates[:-1] if c in modules] or [stem]
        for target in candidates:
            while target and target not in modules:  # `import a.b.c` of an unknown leaf
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return targets


def graph(root: Path = PACKAGE, type_only: bool = False) -> dict[str, set[str]]:
    files = module_files(root)
    return {name: imports_of(name, path, set(files), type_only) for name, path in files.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_checker_finds_circles_and_resolves_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import c\n"
    )
    (pkg / "c.py").write_text("from . import a, _ext\n")
    (pkg / "_ext.pyi").write_text("from . import c\n")  # a stub: no runtime import
    edges = graph(pkg)
    assert edges == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.sub.b"},
        "pkg.sub": set(),
        "pkg.sub.b": set(),
        "pkg.c": {"pkg.a", "pkg._ext"},
        "pkg._ext": set(),
    }
    assert find_cycle(edges) is None
    assert find_cycle(graph(pkg, type_only=True)) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    # the same import outside TYPE_CHECKING closes a circle a -> b -> c -> a
    (pkg / "sub" / "b.py").write_text("from .. import c\n")
    assert find_cycle(graph(pkg)) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]


def test_gulpio_rs_has_no_import_circle():
    edges = graph()
    assert {"gulpio_rs", "gulpio_rs.fileio", "gulpio_rs.adapters.base"} <= set(edges)
    assert find_cycle(edges) is None


def test_only_the_package_root_imports_the_fileio_facade():
    importers = sorted(n for n, targets in graph().items() if "gulpio_rs.fileio" in targets)
    assert importers == ["gulpio_rs"]


def test_gulpio_rs_has_no_circle_even_through_type_only_imports():
    # A circle that only type checking sees still ties two modules together: each needs the
    # other to be read, and the next runtime import along it closes a real one.
    assert find_cycle(graph(type_only=True)) is None


def test_the_ingest_engine_imports_no_facade_or_feature():
    # The ingest is the engine: gulpio2's facades (their rules reach it as EncodeOptions, see
    # _encode_options.unset_settings) and the features (whose executors register themselves
    # in ingest.executors) import it, never the other way round, not even for types.
    engine = {n: t for n, t in graph(type_only=True).items() if n.startswith("gulpio_rs.ingest")}
    outside = ("gulpio_rs.fileio", "gulpio_rs.utils", "gulpio_rs.adapters", "gulpio_rs.ray")
    outside += ("gulpio_rs.torch", "gulpio_rs.cli", "gulpio_rs.sanity_utils")
    reached = {(n, t) for n, targets in engine.items() for t in targets if t.startswith(outside)}
    assert reached == set()
