"""torch is an optional dependency: importing gulpio_rs must never import it."""

from __future__ import annotations

import subprocess
import sys


def test_import_gulpio_rs_does_not_import_torch():
    code = (
        "import sys, gulpio_rs, gulpio_rs.fileio, gulpio_rs.utils, gulpio_rs.adapters; "
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
