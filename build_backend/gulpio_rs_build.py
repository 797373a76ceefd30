"""PEP 517 build backend: maturin's, plus the choice of the decoders built into the wheel.

libjpeg-turbo (cargo feature ``turbo``) decodes as fast as simplejpeg per core; zune-jpeg (pure
Rust, always available) about 0.8x of that (docs/DECISIONS.md). Building libjpeg-turbo needs
nasm (its SIMD code is assembly; without SIMD it is slower than zune-jpeg) and cmake, which PyPI
has. The same toolchain builds libjpeg-turbo's companion for video segments, libdav1d (cargo
feature ``dav1d``: dav1d's C library, 30-36% less CPU per AV1 segment than rav1d, the Rust port
the other builds decode with); it needs nasm too, and meson and ninja, which PyPI has. So a
source install builds the faster decoders wherever it can and still works everywhere:

``GULPIO_JPEG_BACKEND``
    ``auto`` (default): libjpeg-turbo and libdav1d when ``nasm`` is on PATH (cmake, meson and
    ninja come from PyPI if they are missing), else zune-jpeg and rav1d; if that build fails,
    the wheel is built again with zune-jpeg and rav1d and a warning says why. ``turbo``:
    libjpeg-turbo and libdav1d or fail. ``zune``: zune-jpeg and rav1d.

Features chosen explicitly (``--features`` in ``MATURIN_PEP517_ARGS`` or in the
``maturin.build-args`` / ``build-args`` config settings) are left alone. The wheel reports what
it decodes with in ``gulpio_rs.JPEG_BACKEND`` and ``gulpio_rs.AV1_BACKEND``.

pip shows a successful build's output only with ``-v``, so when ``auto`` ends with zune-jpeg the
wheel itself says why: the backend adds ``gulpio_rs/_build_info.json`` (``{"zune_jpeg_because":
...}``) and ``import gulpio_rs`` turns it into a warning. Editable installs get no such file.

This is a thin wrapper, not a fork of maturin: every hook is maturin's own.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import shutil
import sys
import zipfile
from collections.abc import Mapping
from typing import Any

import maturin
from maturin import (  # noqa: F401  (hooks this backend serves unchanged)
    build_sdist,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_wheel,
)

# rav1d is the default AV1 decoder; it and libdav1d export the same C symbols, so a build with
# libdav1d turns the default off.
_TURBO_FEATURES = ["--no-default-features", "--features", "python,turbo,dav1d"]
# A `meson` that adds dav1d's own build options (8-bit only, no tools or tests) for
# libdav1d-sys, which cannot pass them (the script says why); first on PATH for those builds.
_DAV1D_MESON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dav1d-meson")
_BUILD_INFO = "gulpio_rs/_build_info.json"


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
    os.environ["PATH"] = os.pathsep.join([_DAV1D_MESON, os.environ.get("PATH", "")])


def _build(hook, wheel_directory, config_settings, metadata_directory) -> str:
    if not _wants_turbo(config_settings):
        name = hook(wheel_directory, config_settings, metadata_directory)
        if not _features_given(config_settings) and _choice() == "auto":
            _note_zune(hook, wheel_directory, name, "nasm was not on PATH")
        return name
    before = os.environ.get("MATURIN_PEP517_ARGS")
    path_before = os.environ.get("PATH")
    _with_turbo(config_settings)
    try:
        return hook(wheel_directory, config_settings, metadata_directory)
    except (Exception, SystemExit) as e:  # maturin's hook reports a failed build by sys.exit
        if _choice() == "turbo":
            raise
        failure = repr(e)
        sys.stderr.write(
            f"\ngulpio-rs: building with libjpeg-turbo and libdav1d failed ({failure}); "
            "building with zune-jpeg and rav1d instead (about 20% slower JPEG decoding, 30% more "
            "CPU per video segment). Set GULPIO_JPEG_BACKEND=turbo to see the error, or "
            "GULPIO_JPEG_BACKEND=zune to skip the attempt.\n\n"
        )
    finally:
        for key, value in (("MATURIN_PEP517_ARGS", before), ("PATH", path_before)):
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    name = hook(wheel_directory, config_settings, metadata_directory)
    because = f"building libjpeg-turbo and libdav1d failed ({failure})"
    _note_zune(hook, wheel_directory, name, because)
    return name


def _note_zune(hook, wheel_directory: str, name: str, because: str) -> None:
    if hook is not maturin.build_editable:
        _add_file(os.path.join(wheel_directory, name), _BUILD_INFO,
                  json.dumps({"zune_jpeg_because": because}).encode())  # fmt: skip


def _add_file(wheel_path: str, arcname: str, data: bytes) -> None:
    """Adds a file to a built wheel and to its RECORD. The wheel is copied: a zip entry (RECORD)
    cannot be replaced in place."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    tmp = wheel_path + ".tmp"
    with zipfile.ZipFile(wheel_path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for item in src.infolist():
            body = src.read(item)
            if item.filename.endswith(".dist-info/RECORD"):
                dst.writestr(arcname, data, zipfile.ZIP_DEFLATED)
                line = f"{arcname},sha256={digest},{len(data)}\n".encode()
                body = body + (b"" if body.endswith(b"\n") or not body else b"\n") + line
            dst.writestr(item, body)
    os.replace(tmp, wheel_path)


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    requires = maturin.get_requires_for_build_wheel(config_settings)
    if _wants_turbo(config_settings):
        # Pinned as CI builds with them (.ci/run, .ci/build-wheel): libdav1d-sys runs both.
        for tool, requirement in (
            ("cmake", "cmake>=3.16"),
            ("meson", "meson>=1.3,<2"),
            ("ninja", "ninja>=1.11"),
        ):
            if shutil.which(tool) is None:
                requires.append(requirement)
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
