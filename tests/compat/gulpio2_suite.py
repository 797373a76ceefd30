"""gulpio2's own unit tests, unchanged, run against gulpio_rs (and against gulpio2 to compare).

The test files are not in this repository (our rule: no code copied in; gulpio2 is MIT
licensed, but that changes nothing here) and not in gulpio2's sdist either: they are fetched
once from gulpio2's repository, pinned by commit and checked by SHA-256, into a cache
(``$GULPIO2_TESTS_DIR``, default ``~/.cache/gulpio-ci/gulpio2-0.0.4-tests``). ``.ci/run`` does
that with ``python tests/compat/gulpio2_suite.py fetch``.

Used three ways:
- ``python gulpio2_suite.py fetch``: download what is missing into the cache;
- as a pytest plugin (``-p gulpio2_suite``) in the child pytest that runs the suite: with
  ``GULPIO2_SUITE_TARGET=gulpio_rs`` it installs an import alias, so that ``import gulpio2``
  and ``import gulpio2.fileio`` give the ``gulpio_rs`` modules themselves (``mock.patch`` of
  ``gulpio2.fileio.X`` then patches ``gulpio_rs.fileio.X``), and it writes every test's
  outcome to ``GULPIO2_SUITE_REPORT`` as JSON;
- :func:`run_suite` from ``test_gulpio2_unit_tests.py``.

The only change to the tests is where ``gulpio2`` is imported from.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

REPO = "willprice/GulpIO2"
#: file name in the cache -> (commit, path in the repository, SHA-256 of the file). The
#: unit tests of the 0.0.4 tree (test/unit/) and the sanity_utils tests, which live in the
#: older test/unittest/ folder of the same project.
FILES = {
    "fileio_tests.py": (
        "d59aa5650fc92e93df8221feda04452aab15ea2e",
        "test/unit/fileio_tests.py",
        "bcb0b0f650652412cf5d76570243ac691f375007828abb7e3f23382b1ea963a6",
    ),
    "utils_tests.py": (
        "855c2360c21e313ce6ea12435cbcb6b6e0731dbf",
        "test/unit/utils_tests.py",
        "27d9ab729b018aee686b27afd95958023ca4f4f853176e2f818a0d4f99b67d0e",
    ),
    "sanity_utils_tests.py": (
        "cc7b1c4094105860e777de48903866accb67fb8f",
        "test/unittest/sanity_utils_tests.py",
        "bdc582f47f2f6edf4afde06a8bf03091095e5b48b44e1e9c99da71f665822459",
    ),
}

TARGET_ENV = "GULPIO2_SUITE_TARGET"
REPORT_ENV = "GULPIO2_SUITE_REPORT"


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "gulpio-ci" / "gulpio2-0.0.4-tests"
    return Path(os.environ.get("GULPIO2_TESTS_DIR") or default)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def missing() -> list[str]:
    """Names of the suite's files that are not in the cache with the pinned content."""
    root = cache_dir()
    return [
        name
        for name, (_, _, sha) in FILES.items()
        if not (root / name).is_file() or _sha256(root / name) != sha
    ]


def fetch(timeout: float = 30.0) -> Path:
    """Download the files :func:`missing` lists; ``OSError`` if one cannot be had as pinned."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    for name in missing():
        commit, path, sha = FILES[name]
        url = f"https://raw.githubusercontent.com/{REPO}/{commit}/{path}"
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = response.read()
        if hashlib.sha256(data).hexdigest() != sha:
            raise OSError(f"{url}: content differs from the pinned SHA-256 {sha}")
        tmp = root / f".{name}.part"
        tmp.write_bytes(data)
        os.replace(tmp, root / name)
    return root


def run_suite(target: str, workdir: Path, timeout: float = 900) -> dict[str, str]:
    """Run the cached suite in a child pytest against ``target`` (``"gulpio2"`` or
    ``"gulpio_rs"``); returns ``{test id: "passed" | "failed" | "skipped"}``."""
    suite = cache_dir()
    workdir.mkdir(parents=True, exist_ok=True)
    report = workdir / f"outcomes-{target}.json"
    (workdir / "pytest.ini").write_text("[pytest]\npython_files = *_tests.py\n")
    env = dict(os.environ)
    env[TARGET_ENV] = target
    env[REPORT_ENV] = str(report)
    here = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    cmd = [
        sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider",
        "-p", "gulpio2_suite", "-c", str(workdir / "pytest.ini"), "--rootdir", str(suite),
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout
    )
    if not report.exists():
        raise RuntimeError(f"the suite did not run ({target}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(report.read_text())


# ------------------------------------------------------------------------------------------
# the pytest plugin side (in the child)
# ------------------------------------------------------------------------------------------
class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import <alias>[.sub]`` gives the module ``<target>[.sub]`` itself (same object)."""

    def __init__(self, alias: str, target: str):
        self.alias, self.target = alias, target

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.alias or fullname.startswith(self.alias + "."):
            real = importlib.util.find_spec(self.target + fullname[len(self.alias) :])
            if real is None:
                return None
            return importlib.util.spec_from_loader(
                fullname, self, is_package=real.submodule_search_locations is not None
            )
        return None

    def create_module(self, spec):
        return importlib.import_module(self.target + spec.name[len(self.alias) :])

    def exec_module(self, module):
        pass  # imported (and executed) under its own name by create_module


_OUTCOMES: dict[str, str] = {}


def pytest_configure(config):
    if os.environ.get(TARGET_ENV) == "gulpio_rs":
        for name in [m for m in sys.modules if m == "gulpio2" or m.startswith("gulpio2.")]:
            del sys.modules[name]
        sys.meta_path.insert(0, _Alias("gulpio2", "gulpio_rs"))


def pytest_runtest_logreport(report):
    if not os.environ.get(REPORT_ENV):
        return
    previous = _OUTCOMES.get(report.nodeid)
    if report.failed:
        _OUTCOMES[report.nodeid] = "failed"
    elif report.skipped and previous != "failed":
        _OUTCOMES[report.nodeid] = "skipped"
    elif report.when == "call" and previous is None:
        _OUTCOMES[report.nodeid] = "passed"


def pytest_sessionfinish(session):
    path = os.environ.get(REPORT_ENV)
    if path:
        Path(path).write_text(json.dumps(_OUTCOMES, indent=1, sort_keys=True))


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        sys.exit("usage: python tests/compat/gulpio2_suite.py fetch")
    try:
        print(f"gulpio2's unit tests are in {fetch()}")
    except OSError as e:
        sys.exit(f"gulpio2's unit tests cannot be fetched from github.com/{REPO} ({e})")
