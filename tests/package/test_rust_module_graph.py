"""The Rust modules under ``src/`` use each other without a circle.

A file depends on the file of every module its ``use crate::…``, ``use super::…``,
``use self::…`` / ``use child::…`` and inline ``crate::a::b``, ``super::x`` paths name (the
deepest module that exists: ``a.rs`` or ``a/mod.rs``), and, when the name is re-exported there
(``pub use b::Item``, or a private ``use`` a child can reach), on the file it comes from. Edges
from a module to its own descendants (``mod b;``, ``pub use b::X``) are not dependencies but
structure, so they are left out; so is everything under ``#[cfg(test)]``, including test-only
module files such as ``video/tests.rs``. Comments and string literals are blanked first, so a
doc link or a message naming ``crate::x`` ties nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_CHAR = re.compile(r"'(?:\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'")
_RAW = re.compile(r'b?r(#*)"')


def blank(text: str) -> str:
    """``text`` as spaces, its newlines kept (so line numbers stay)."""
    return "".join(c if c == "\n" else " " for c in text)


def strip_comments_and_strings(text: str) -> str:
    """``text`` with comments, string and char literals replaced by spaces (newlines kept), so
    only code is left to scan."""
    out: list[str] = []
    i, n = 0, len(text)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (m := _RAW.match(text, i)) and (i == 0 or not re.match(r"\w", text[i - 1])):
            end = text.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(blank(text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i : j + 1]))
            i = j + 1
        elif c == "'" and (m := _CHAR.match(text, i)):
            out.append(blank(m.group(0)))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


_CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
_ATTR = re.compile(r"\s*#\s*\[")


def _skip_attr(code: str, i: int) -> int:
    """The index just past the attribute ``#[...]`` that starts at ``code[i]``."""
    j = code.index("[", i)
    depth = 0
    while j < len(code):
        if code[j] == "[":
            depth += 1
        elif code[j] == "]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return j


def strip_cfg_test(code: str) -> tuple[str, set[str]]:
    """``code`` (already stripped) without the items under ``#[cfg(test)]``, and the names of
    the test-only modules it declares in files of their own (``#[cfg(test)] mod tests;``)."""
    test_mods: set[str] = set()
    while m := _CFG_TEST.search(code):
        i = m.end()
        while am := _ATTR.match(code, i):  # further attributes on the same item
            i = _skip_attr(code, am.start())
        decl = re.match(rf"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*;", code[i:])
        if decl:
            test_mods.add(decl.group(1))
        j, depth = i, 0
        while j < len(code):  # the item ends at a `;` outside braces or its closing brace
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            elif code[j] == ";" and depth == 0:
                j += 1
                break
            j += 1
        code = code[: m.start()] + blank(code[m.start() : j]) + code[j:]
    return code, test_mods


def module_files(src: Path = SRC) -> dict[tuple[str, ...], Path]:
    """``{module path: file}`` for every ``.rs`` file under ``src``: ``("crate", "a", "b")`` for
    ``a/b.rs`` or ``a/b/mod.rs``."""
    out = {}
    for path in sorted(src.rglob("*.rs")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("mod", "lib") or (len(parts) == 1 and parts[0] == "main"):
            parts = parts[:-1]
        out[("crate", *parts)] = path
    return out


def _use_trees(code: str):
    """The body of every ``use`` declaration in ``code``, and ``code`` with them blanked."""
    bodies = []
    pattern = re.compile(r"\b(?:pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]+);")
    for m in pattern.finditer(code):
        bodies.append(m.group(1))
    return bodies, pattern.sub(lambda m: blank(m.group(0)), code)


def expand_use(body: str) -> list[tuple[list[str], str | None]]:
    """``a::{b, c::d as e, self}`` -> ``[(["a", "b"], "b"), (["a", "c", "d"], "e"), (["a"], "a")]``
    (the path and the name it binds; ``None`` for a glob)."""
    tokens = re.findall(rf"::|[{{}},*]|{IDENT}", body)
    pos = 0

    def tree(prefix: list[str]) -> list[tuple[list[str], str | None]]:
        nonlocal pos
        path = list(prefix)
        while pos < len(tokens):
            tok = tokens[pos]
            if tok in (",", "}"):
                break
            pos += 1
            if tok == "{":
                found = []
                while pos < len(tokens) and tokens[pos] != "}":
                    if tokens[pos] == ",":
                        pos += 1
                    else:
                        found += tree(path)
                pos += 1  # the closing brace
                return found
            if tok == "*":
                return [(path, None)]
            if tok == "as":
                pos += 1
                return [(path, tokens[pos - 1] if pos <= len(tokens) else None)]
            if tok == "self" and path:  # `a::{self}` binds `a` itself
                continue
            if tok != "::":
                path.append(tok)
        return [(path, path[-1] if path else None)]

    out = []
    while pos < len(tokens):
        if tokens[pos] == ",":
            pos += 1
        else:
            out += tree([])
    return out


class Crate:
    """The module tree of one crate: files, their test-free code and what each ``use`` binds."""

    def __init__(self, src: Path = SRC):
        self.src = src
        self.files = module_files(src)
        self.code: dict[tuple[str, ...], str] = {}
        self.uses: dict[tuple[str, ...], list[tuple[list[str], str | None]]] = {}
        test_only: set[tuple[str, ...]] = set()
        for mod, path in self.files.items():
            code, test_mods = strip_cfg_test(strip_comments_and_strings(path.read_text()))
            test_only |= {(*mod, name) for name in test_mods}
            bodies, rest = _use_trees(code)
            self.code[mod] = rest
            self.uses[mod] = [u for body in bodies for u in expand_use(body)]
        # a test-only module, and everything under it
        self.test_only = {m for m in self.files if any(m[: len(t)] == t for t in test_only)}

    def absolute(self, mod: tuple[str, ...], path: list[str]) -> list[str] | None:
        """``path`` as written in module ``mod``, from the crate root; ``None`` outside the crate
        (another crate, or a name that is no module path)."""
        if not path:
            return None
        head, rest = path[0], path[1:]
        if head == "crate":
            return ["crate", *rest]
        if head in ("self", "super"):
            base = list(mod)
            while path and path[0] in ("self", "super"):
                if path[0] == "super":
                    if len(base) < 2:
                        return None
                    base.pop()
                path = path[1:]
            return base + path
        if (*mod, head) in self.files:  # a child module, named from its parent
            return [*mod, *path]
        return None

    def resolve(self, path: list[str], depth: int = 0) -> set[Path]:
        """The files an absolute ``path`` depends on: the deepest module it names, and, when the
        next name is one that module imports, where that comes from."""
        for cut in range(len(path), 0, -1):
            mod = tuple(path[:cut])
            if mod in self.files:
                break
        else:
            return set()
        found = {self.files[mod]}
        rest = path[cut:]
        if rest and depth < 16:
            for target, alias in self.uses[mod]:
                if alias == rest[0]:
                    full = self.absolute(mod, target)
                    if full is not None:
                        found |= self.resolve(full + rest[1:], depth + 1)
        return found

    def dependencies(self, mod: tuple[str, ...]) -> set[Path]:
        """The files module ``mod`` depends on, less itself, its descendants and test modules."""
        paths: list[list[str]] = []
        aliases: dict[str, list[str]] = {}
        for target, alias in self.uses[mod]:
            full = self.absolute(mod, target)
            if full is None:
                continue
            paths.append(full)
            if alias and tuple(full) in self.files:  # a module brought into scope by name
                aliases[alias] = full
        code = self.code[mod]
        segment = rf"\s*::\s*{IDENT}"
        for m in re.finditer(rf"(?<![\w:])((?:crate|self|super)(?:{segment})+)", code):
            full = self.absolute(mod, re.split(r"\s*::\s*", m.group(1)))
            if full is not None:
                paths.append(full)
        for alias, full in aliases.items():
            for m in re.finditer(rf"(?<![\w:$]){re.escape(alias)}((?:{segment})+)", code):
                paths.append(full + re.split(r"\s*::\s*", m.group(1))[1:])
        own = self.files[mod]
        descendants = {p for m, p in self.files.items() if m[: len(mod)] == mod}
        tests = {self.files[m] for m in self.test_only}
        out: set[Path] = set()
        for full in paths:
            out |= self.resolve(full)
        return out - descendants - tests - {own}


def graph(src: Path = SRC) -> dict[str, set[str]]:
    """``{file: files it depends on}``, paths relative to ``src``."""
    crate = Crate(src)

    def rel(p: Path) -> str:
        return p.relative_to(src).as_posix()

    return {
        rel(path): {rel(d) for d in crate.dependencies(mod)}
        for mod, path in crate.files.items()
        if mod not in crate.test_only
    }


def cycles(edges: dict[str, set[str]], limit: int = 200) -> list[list[str]]:
    """Every elementary circle as ``[a, b, ..., a]``, each once, starting from its smallest
    file (at most ``limit`` of them)."""
    found: list[list[str]] = []

    def visit(start: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(path[-1], ())):
            if len(found) >= limit:
                return
            if nxt == start:
                found.append(path + [start])
            elif nxt > start and nxt not in path:
                visit(start, path + [nxt])

    for start in sorted(edges):
        visit(start, [start])
    return found


def test_the_checker_resolves_paths_and_finds_circles(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "lib.rs").write_text("pub mod a;\npub mod b;\npub mod c;\npub use a::Thing;\n")
    (src / "a" / "mod.rs").write_text(
        "mod inner;\npub mod tests_only;\npub use inner::Thing;\n"
        "#[cfg(test)]\nmod tests;\n"
        '// crate::c is only named in a comment\nconst S: &str = "crate::c::X";\n'
    )
    (src / "a" / "inner.rs").write_text(
        "use super::super::b::{self, B as Bee};\npub struct Thing;\n"
    )
    (src / "a" / "tests.rs").write_text("use crate::c::C;\n")
    (src / "a" / "tests_only.rs").write_text(
        "pub fn f() {}\n#[cfg(test)]\nmod tests {\n"
        "    use crate::c::C;\n    fn g() { let _ = '}'; }\n}\n"
    )
    (src / "b.rs").write_text("pub struct B;\nfn f() -> usize { crate::c::size() }\n")
    (src / "c.rs").write_text("pub fn size() -> usize { 1 }\n")
    edges = graph(src)
    assert edges == {
        "lib.rs": set(),
        "a/mod.rs": set(),
        "a/inner.rs": {"b.rs"},
        "a/tests_only.rs": set(),
        "b.rs": {"c.rs"},
        "c.rs": set(),
    }
    assert cycles(edges) == []
    # c reaches `Thing` through the facade a/mod.rs, which takes it from a/inner.rs, which uses b
    (src / "c.rs").write_text("use crate::a::Thing;\npub fn size() -> usize { 1 }\n")
    assert cycles(graph(src)) == [["a/inner.rs", "b.rs", "c.rs", "a/inner.rs"]]
    # an inline path through a module imported by name counts too
    (src / "c.rs").write_text("use crate::a;\npub fn size() -> usize { let _ = a::Thing; 1 }\n")
    assert graph(src)["c.rs"] == {"a/mod.rs", "a/inner.rs"}


def test_use_trees_expand_to_paths_and_bound_names():
    assert expand_use("crate::a::{self, b, c::{d as e, f}}") == [
        (["crate", "a"], "a"),
        (["crate", "a", "b"], "b"),
        (["crate", "a", "c", "d"], "e"),
        (["crate", "a", "c", "f"], "f"),
    ]
    assert expand_use("super::*") == [(["super"], None)]


def test_src_has_no_module_circle():
    edges = graph()
    assert {"lib.rs", "error.rs", "format/index.rs"} <= set(edges)
    assert "video/tests.rs" not in edges
    found = cycles(edges)
    assert not found, "module circles in src/:\n" + "\n".join(" -> ".join(c) for c in found)


def test_error_depends_on_nothing_else_in_the_crate():
    # every module reports through error.rs; a dependency back from it would close a circle
    assert graph()["error.rs"] == set()
