"""What to tell a user whose build decodes JPEG with zune-jpeg (a source build without nasm,
which also decodes video segments with rav1d): why, how to get libjpeg-turbo and libdav1d, and
whether this installation has said so already. The package's import (a warning, once per
installation) and `gulpio demo` (every time) say it."""

from __future__ import annotations

from typing import overload

from ._native import JPEG_BACKEND, __version__


@overload
def decoder_note(because: str) -> str: ...
@overload
def decoder_note(because: None = None) -> str | None: ...
def decoder_note(because: str | None = None) -> str | None:
    """How to get the faster decoder, when this build decodes with zune-jpeg (``because``: why a
    source build fell back to it, which implies it)."""
    if JPEG_BACKEND != "zune-jpeg" and because is None:
        return None
    why = f" ({because})" if because else ""
    return (
        f"this gulpio-rs build decodes JPEG with zune-jpeg{why}, about 20% slower than "
        "libjpeg-turbo, and AV1 video segments with rav1d, about 1.5x libdav1d's CPU. For "
        "libjpeg-turbo and libdav1d, install a gulpio-rs release wheel (pip install "
        "gulpio_rs-*.whl), or install nasm (apt-get install nasm) and reinstall from the "
        "source checkout: pip install --force-reinstall --no-deps . (said once per "
        "installation; `gulpio demo` repeats it; GULPIO_JPEG_BACKEND=zune at install time "
        "keeps zune-jpeg and this quiet)"
    )


def zune_fallback_reason() -> str | None:
    """Why a source build fell back to zune-jpeg: pip hides a successful build's output, so the
    build backend (build_backend/gulpio_rs_build.py) records it in the wheel."""
    import json
    from importlib import resources

    try:
        info = json.loads(
            (resources.files(__package__ or "gulpio_rs") / "_build_info.json").read_text()
        )
    except (OSError, ValueError):
        return None
    return info.get("zune_jpeg_because") if isinstance(info, dict) else None


def first_notice(because: str, folder: str | None = None) -> bool:
    """True the first time this installation tells about its zune-jpeg fallback: a marker
    file beside the package's modules records it (per installation, not per import: the
    warning on every command was noise). False when the marker exists or cannot be written
    (a read-only installation: `gulpio demo` still says it)."""
    import os

    path = os.path.join(folder or os.path.dirname(__file__), "_zune_notice")
    stamp = f"{__version__}: {because}\n"
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == stamp:
                return False
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        return False
    try:
        # Another build's marker (a reinstall leaves files pip did not install) is replaced.
        with open(path, "w", encoding="utf-8") as f:
            f.write(stamp)
    except OSError:
        return False
    return True
