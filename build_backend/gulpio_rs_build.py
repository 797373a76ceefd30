"""PEP 517 build backend: maturin's, plus the choice of the JPEG decoder built into the wheel.

libjpeg-turbo (cargo feature ``turbo``) decodes as fast as simplejpeg per core; zune-jpeg (pure
Rust, always available) about 0.8x of that (docs/DECISIONS.md). Building libjpeg-turbo needs
nasm (its SIMD code is assembly; without SIMD it is slower than zune-jpeg) and cmake, which PyPI
has. So a source install builds the faster decoder wherever it can and still works everywhere:

``GULPIO_JPEG_BACKEND``
    ``auto`` (default): libjpeg-turbo when ``nasm`` is on PATH (cmake comes from PyPI if it is
    missing), else zune-jpeg; if the libjpeg-turbo build fails, the wheel is built again with
    zune-jpeg and a warning says why. ``turbo``: libjpeg-turbo or fail. ``zune``: zune-jpeg.

Features chosen explicitly (``--features`` in ``MATURIN_PEP517_ARGS`` or in the
``maturin.build-args`` / ``build-args`` config settings) are left alone. The wheel reports what
it decodes with in ``gulpio_rs.JPEG_BACKEND``.

This is a thin wrapper, not a fork of maturin: every hook is maturin's own.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from typing import Any

import maturin
from maturin import (  # noqa: F401  (hooks this backend serves unchanged)
    build_sdist,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_wheel,
)

_TURBO_FEATURES = ["--features", "python,turbo"]


def _choice() -> str:
    choice = os.environ.get("GULPIO_JPEG_BACKEND", "auto").strip().lower() or "auto"
    if choice not in ("auto", "turbo", "zune"):
        raise ValueError(f"GULPIO_JPEG_BACKEND must be auto, turbo or zune, not {choice!r}")
    return choice


def _features_given(config_settings: Mapping[str, Any] | None) -> bool:
    if config_settings and any(k in config_settings for k in ("maturin.build-args", "build-args")):
        return True
    args = maturin.get_maturin_pep517_args(config_settings)
    return any(a in ("-F", "--features", "--all-features") or a.startswith("--features=")
               for a in args)  # fmt: skip


def _wants_turbo(config_settings: Mapping[str, Any] | None) -> bool:
    if _features_given(config_settings):
        return False
    choice = _choice()
    return choice == "turbo" or (choice == "auto" and shutil.which("nasm") is not None)


def _with_turbo(config_settings: Mapping[str, Any] | None) -> None:
    args = maturin.get_maturin_pep517_args(config_settings)
    os.environ["MATURIN_PEP517_ARGS"] = shlex.join(args + _TURBO_FEATURES)


def _build(hook, wheel_directory, config_settings, metadata_directory) -> str:
    if not _wants_turbo(config_settings):
        return hook(wheel_directory, config_settings, metadata_directory)
    before = os.environ.get("MATURIN_PEP517_ARGS")
    _with_turbo(config_settings)
    try:
        return hook(wheel_directory, config_settings, metadata_directory)
    except (Exception, SystemExit) as e:  # maturin's hook reports a failed build by sys.exit
        if _choice() == "turbo":
            raise
        sys.stderr.write(
            f"\ngulpio-rs: building with libjpeg-turbo failed ({e!r}); building with zune-jpeg "
            "instead (about 20% slower decoding). Set GULPIO_JPEG_BACKEND=turbo to see the "
            "error, or GULPIO_JPEG_BACKEND=zune to skip the attempt.\n\n"
        )
    finally:
        if before is None:
            os.environ.pop("MATURIN_PEP517_ARGS", None)
        else:
            os.environ["MATURIN_PEP517_ARGS"] = before
    return hook(wheel_directory, config_settings, metadata_directory)


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    requires = maturin.get_requires_for_build_wheel(config_settings)
    if _wants_turbo(config_settings) and shutil.which("cmake") is None:
        requires.append("cmake>=3.16")
    return requires


get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return _build(maturin.build_wheel, wheel_directory, config_settings, metadata_directory)


def build_editable(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return _build(maturin.build_editable, wheel_directory, config_settings, metadata_directory)
