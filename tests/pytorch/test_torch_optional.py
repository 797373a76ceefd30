"""torch is an optional dependency: importing gulpio_rs (any module but gulpio_rs.torch) must
never import it. Checked by recording import attempts, so the test means the same whether or
not torch is installed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import importlib, json, pathlib, sys

attempts = []


class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            attempts.append(name)
        return None  # let the real import go on (or fail) as usual


sys.meta_path.insert(0, Recorder())
import gulpio_rs

# Module names from the files: pkgutil.walk_packages would import gulpio_rs.torch itself.
root = pathlib.Path(gulpio_rs.__file__).parent
names = [
    ".".join(("gulpio_rs", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
    for p in sorted(root.rglob("*.py"))
    if p.name != "__main__.py"  # runs the command line
]
for name in sys.argv[1:] or [n for n in names if not n.startswith("gulpio_rs.torch")]:
    try:
        importlib.import_module(name)
    except ImportError:
        pass  # gulpio_rs.torch without torch installed: the attempt is what counts
print(json.dumps({"modules": len(names), "attempts": attempts}))
"""


def probe(*modules: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_no_gulpio_rs_module_imports_torch():
    result = probe()
    assert result["modules"] > 20  # every module was imported, not just the package
    assert result["attempts"] == []


def test_the_probe_sees_a_torch_import():
    # gulpio_rs.torch does import torch: if the probe missed it, the test above proves nothing
    result = probe("gulpio_rs.torch")
    if not result["attempts"]:
        pytest.fail("the import recorder did not see gulpio_rs.torch import torch")
    assert result["attempts"][0] == "torch"
