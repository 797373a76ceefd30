"""``_native.pyi`` must describe the built extension: the same public names, the same classes
with the same methods and properties, and the same parameters and defaults.

CI checks the stub twice, for different things. ``python -m mypy.stubtest gulpio_rs._native
--allowlist .ci/stubtest-allowlist.txt`` (.ci/run, right after the build is installed) reads
the stub as a type checker does and compares it with the extension: names, signatures,
runtime values of constants, with the differences allowlisted there. This test is a small
AST-against-``inspect`` comparison without mypy, so it runs wherever the tests run (the
release wheel in its bare venv too): names, members, parameters and defaults, not types.
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

from gulpio_rs import _native

STUB = Path(_native.__file__).with_name("_native.pyi")
if not STUB.exists():  # an installed wheel may not ship the stub next to the module
    STUB = Path(__file__).resolve().parents[2] / "python" / "gulpio_rs" / "_native.pyi"

# Slots that exist on the class only from some Python version on (PEP 688 added ``__buffer__``
# as a Python-level method in 3.12); on older ones the stub keeps them for type checkers.
VERSION_DEPENDENT = {"__buffer__"} if sys.version_info < (3, 12) else set()


def _params(fn: ast.FunctionDef, drop_first: bool) -> list[tuple[str, object]]:
    """``[(name, default or inspect.Parameter.empty), ...]`` of a stub function."""
    args = fn.args.posonlyargs + fn.args.args
    defaults = [inspect.Parameter.empty] * (len(args) - len(fn.args.defaults)) + [
        ast.literal_eval(d) for d in fn.args.defaults
    ]
    out = list(zip((a.arg for a in args), defaults, strict=True))
    out = out[1:] if drop_first else out
    # Keyword-only parameters: ``kw_defaults`` holds None for those without a default.
    for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True):
        out.append((a.arg, inspect.Parameter.empty if d is None else ast.literal_eval(d)))
    return out


def _runtime_params(obj, drop_first: bool) -> list[tuple[str, object]]:
    params = list(inspect.signature(obj).parameters.values())
    if drop_first and params and params[0].name in ("self", "$self", "cls"):
        params = params[1:]
    return [(p.name, p.default) for p in params]


def _decorators(fn: ast.FunctionDef) -> set[str]:
    return {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}


def compare(stub_source: str, module) -> list[str]:
    """Every difference between a stub and a module, as messages (empty when they agree)."""
    tree = ast.parse(stub_source)
    problems: list[str] = []
    stub_names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stub_names.add(node.target.id)
        elif isinstance(node, ast.FunctionDef):
            stub_names.add(node.name)
            fn = getattr(module, node.name, None)
            if fn is None:
                continue
            want, got = _params(node, False), _runtime_params(fn, False)
            if want != got:
                problems.append(f"{node.name}: stub {want} != module {got}")
        elif isinstance(node, ast.ClassDef):
            if node.name.startswith("_") and any(
                isinstance(b, ast.Name) and b.id in ("Protocol", "TypedDict") for b in node.bases
            ):
                # A private Protocol (what the stub asks of an argument) or TypedDict (the
                # keys of a dict it returns): typing only.
                continue
            stub_names.add(node.name)
            cls = getattr(module, node.name, None)
            if cls is not None:
                problems += _compare_class(node, cls)
    module_names = {n for n in dir(module) if not n.startswith("_")} | {
        n for n in ("__version__",) if hasattr(module, n)
    }
    for name in sorted(module_names - stub_names):
        problems.append(f"{name}: in the module, not in the stub")
    for name in sorted(stub_names - module_names):
        problems.append(f"{name}: in the stub, not in the module")
    return problems


def _compare_class(node: ast.ClassDef, cls) -> list[str]:
    problems = []
    stub_members = set()
    for item in node.body:
        if not isinstance(item, ast.FunctionDef):
            continue
        name = f"{node.name}.{item.name}"
        stub_members.add(item.name)
        if item.name in VERSION_DEPENDENT:
            continue
        # pyo3 makes a #[new] constructor `__new__`; stubs spell it `__init__`.
        attr = cls.__dict__.get("__new__" if item.name == "__init__" else item.name)
        if attr is None:
            problems.append(f"{name}: in the stub, not in the module")
            continue
        decorators = _decorators(item)
        if "property" in decorators:
            if not inspect.isgetsetdescriptor(attr) and not isinstance(attr, property):
                problems.append(f"{name}: a property in the stub, not in the module")
            continue
        if inspect.isgetsetdescriptor(attr):
            problems.append(f"{name}: a method in the stub, a property in the module")
            continue
        if item.name.startswith("__") and item.name != "__init__":
            continue  # slot wrappers: their signatures are fixed by Python
        static = "staticmethod" in decorators
        if static != isinstance(attr, staticmethod):
            problems.append(f"{name}: staticmethod in only one of stub and module")
        target = cls if item.name == "__init__" else getattr(cls, item.name)
        want = _params(item, drop_first=not static)
        got = _runtime_params(target, drop_first=not static and target is not cls)
        if want != got:
            problems.append(f"{name}: stub {want} != module {got}")
    public = {
        n
        for n, v in cls.__dict__.items()
        if not n.startswith("_") and (callable(v) or inspect.isgetsetdescriptor(v))
    }
    for member in sorted(public - stub_members):
        problems.append(f"{node.name}.{member}: in the module, not in the stub")
    return problems


def test_stub_matches_the_built_module():
    assert compare(STUB.read_text(), _native) == []


def test_the_comparison_finds_differences():
    """The check above must be able to fail: a stub with a missing function, an extra name,
    a wrong default and a property spelled as a method is reported on every count."""
    source = STUB.read_text()
    for old, new in [
        ("def pooled_bytes() -> int:", "def pooled_bytes_gone() -> int:"),
        ("threads: int = 1\n) -> list", "threads: int = 2\n) -> list"),
        ("    @property\n    def indexed(self)", "    def indexed(self)"),
        ("    def ids(self) -> list[str]: ...\n", ""),
    ]:
        assert old in source, old
        source = source.replace(old, new, 1)
    problems = compare(source, _native)
    assert any(p.startswith("pooled_bytes: in the module") for p in problems), problems
    assert any(p.startswith("pooled_bytes_gone: in the stub") for p in problems), problems
    assert any(p.startswith("resize_frames: stub") for p in problems), problems
    assert any(p.startswith("Chunk.indexed: a method in the stub") for p in problems), problems
    assert any(p.startswith("Chunk.ids: in the module") for p in problems), problems
