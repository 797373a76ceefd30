"""The PEP 517 backend's choice of JPEG decoder (build_backend/gulpio_rs_build.py), with a fake
maturin hook: which features each build asks for, the fallback when libjpeg-turbo fails to
build, the note a zune-jpeg fallback leaves in the wheel and the warning it becomes, and the
build requirements. The real builds run in CI (.ci/run builds both, .ci/build-wheel the
release wheel)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("maturin")

BACKEND = Path(__file__).resolve().parents[2] / "build_backend" / "gulpio_rs_build.py"
if not BACKEND.exists():
    pytest.skip(
        "build_backend/ is not beside the tests (installed tests only)", allow_module_level=True
    )


@pytest.fixture
def backend(monkeypatch):
    spec = importlib.util.spec_from_file_location("gulpio_rs_build_under_test", BACKEND)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv("GULPIO_JPEG_BACKEND", raising=False)
    monkeypatch.delenv("MATURIN_PEP517_ARGS", raising=False)
    return module


def tools(monkeypatch, *present):
    real = shutil.which
    monkeypatch.setattr(
        shutil,
        "which",
        lambda name, *a, **k: (
            f"/usr/bin/{name}"
            if name in present
            else (None if name in ("nasm", "cmake", "meson", "ninja") else real(name, *a, **k))
        ),
    )


WHEEL = "gulpio_rs-0.1.0-cp311-abi3-linux_x86_64.whl"
WHEEL_FILES = {
    "gulpio_rs/__init__.py": b"",
    "gulpio_rs/_native.abi3.so": b"\x7fELF",
    "gulpio_rs-0.1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\n",
}


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


class FakeHook:
    """Records MATURIN_PEP517_ARGS at each call; fails the first ``fail`` calls as maturin
    does (sys.exit); otherwise writes a small wheel as maturin would."""

    def __init__(self, fail: int = 0):
        self.args: list[str | None] = []
        self.paths: list[str] = []
        self.fail = fail

    def __call__(self, wheel_directory, config_settings, metadata_directory):
        self.args.append(os.environ.get("MATURIN_PEP517_ARGS"))
        self.paths.append(os.environ.get("PATH", ""))
        if len(self.args) <= self.fail:
            raise SystemExit(1)
        record = [record_line(n, d) for n, d in WHEEL_FILES.items()]
        record.append("gulpio_rs-0.1.0.dist-info/RECORD,,")
        with zipfile.ZipFile(os.path.join(wheel_directory, WHEEL), "w") as z:
            for name, data in WHEEL_FILES.items():
                z.writestr(name, data)
            z.writestr("gulpio_rs-0.1.0.dist-info/RECORD", "\n".join(record) + "\n")
        return WHEEL


def build_info(wheel_directory) -> dict | None:
    """The wheel's _build_info.json, after checking that the wheel is otherwise unchanged and
    that RECORD lists every file with its hash."""
    with zipfile.ZipFile(os.path.join(wheel_directory, WHEEL)) as z:
        files = {i.filename: z.read(i) for i in z.infolist()}
    record = files.pop("gulpio_rs-0.1.0.dist-info/RECORD").decode().splitlines()
    assert sorted(record) == sorted(
        [record_line(n, d) for n, d in files.items()] + ["gulpio_rs-0.1.0.dist-info/RECORD,,"]
    )
    info = files.pop("gulpio_rs/_build_info.json", None)
    assert files == WHEEL_FILES
    return None if info is None else json.loads(info)


def test_auto_builds_libjpeg_turbo_when_nasm_is_there(backend, monkeypatch, tmp_path):
    tools(monkeypatch, "nasm", "cmake")
    hook = FakeHook()
    assert backend._build(hook, str(tmp_path), None, None) == WHEEL
    assert hook.args == ["--no-default-features --features python,turbo,dav1d"]
    assert "MATURIN_PEP517_ARGS" not in os.environ  # restored
    assert build_info(tmp_path) is None


def test_auto_keeps_the_users_other_maturin_arguments(backend, monkeypatch, tmp_path):
    tools(monkeypatch, "nasm", "cmake")
    monkeypatch.setenv("MATURIN_PEP517_ARGS", "--profile dev")
    hook = FakeHook()
    backend._build(hook, str(tmp_path), None, None)
    assert hook.args == ["--profile dev --no-default-features --features python,turbo,dav1d"]
    assert os.environ["MATURIN_PEP517_ARGS"] == "--profile dev"


def test_auto_builds_zune_without_nasm_and_the_wheel_says_why(backend, monkeypatch, tmp_path):
    tools(monkeypatch, "cmake")
    hook = FakeHook()
    assert backend._build(hook, str(tmp_path), None, None) == WHEEL
    assert hook.args == [None]
    assert build_info(tmp_path) == {"zune_jpeg_because": "nasm was not on PATH"}


@pytest.mark.parametrize(
    "args", ["--features python", "-F python", "--features=python,turbo", "--all-features"]
)
def test_features_given_by_the_user_are_left_alone(backend, monkeypatch, args, tmp_path):
    tools(monkeypatch, "nasm", "cmake")
    monkeypatch.setenv("MATURIN_PEP517_ARGS", args)
    hook = FakeHook()
    backend._build(hook, str(tmp_path), None, None)
    assert hook.args == [args]
    assert build_info(tmp_path) is None


def test_config_settings_build_args_are_left_alone(backend, monkeypatch, tmp_path):
    tools(monkeypatch, "nasm", "cmake")
    hook = FakeHook()
    backend._build(hook, str(tmp_path), {"maturin.build-args": "--features python"}, None)
    assert hook.args == [None]
    assert build_info(tmp_path) is None


def test_zune_is_built_when_asked_even_with_nasm(backend, monkeypatch, tmp_path):
    tools(monkeypatch, "nasm", "cmake")
    monkeypatch.setenv("GULPIO_JPEG_BACKEND", "zune")
    hook = FakeHook()
    backend._build(hook, str(tmp_path), None, None)
    assert hook.args == [None]
    assert build_info(tmp_path) is None  # asked for: nothing to warn about


def test_a_failed_turbo_build_falls_back_to_zune_with_a_warning(
    backend, monkeypatch, capsys, tmp_path
):
    tools(monkeypatch, "nasm", "cmake")
    hook = FakeHook(fail=1)
    assert backend._build(hook, str(tmp_path), None, None) == WHEEL
    assert hook.args == ["--no-default-features --features python,turbo,dav1d", None]
    assert "building with zune-jpeg and rav1d instead" in capsys.readouterr().err
    assert build_info(tmp_path) == {
        "zune_jpeg_because": "building libjpeg-turbo and libdav1d failed (SystemExit(1))"
    }


def test_an_editable_build_gets_no_note(backend, monkeypatch, tmp_path):
    tools(monkeypatch, "cmake")
    hook = FakeHook()
    monkeypatch.setattr(backend.maturin, "build_editable", hook)
    backend.build_editable(str(tmp_path))
    assert build_info(tmp_path) is None


def test_turbo_asked_for_fails_instead_of_falling_back(backend, monkeypatch, tmp_path):
    tools(monkeypatch)
    monkeypatch.setenv("GULPIO_JPEG_BACKEND", "turbo")
    hook = FakeHook(fail=1)
    with pytest.raises(SystemExit):
        backend._build(hook, str(tmp_path), None, None)
    assert hook.args == ["--no-default-features --features python,turbo,dav1d"]


SHIM = BACKEND.parent / "dav1d-meson"


def test_libdav1d_builds_find_the_meson_that_adds_dav1ds_options(backend, monkeypatch, tmp_path):
    tools(monkeypatch, "nasm", "cmake")
    monkeypatch.setenv("PATH", "/usr/bin")
    hook = FakeHook(fail=1)
    backend._build(hook, str(tmp_path), None, None)
    # First on PATH for the libdav1d build; gone for the fallback and after.
    assert hook.paths[0].split(os.pathsep)[0] == str(SHIM)
    assert hook.paths[1] == "/usr/bin"
    assert os.environ["PATH"] == "/usr/bin"


def fake_meson(tmp_path: Path) -> Path:
    """A `meson` that prints its arguments, in a folder of its own."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "meson").write_text('#!/bin/sh\necho "$@"\n')
    (real / "meson").chmod(0o755)
    return real


@pytest.mark.parametrize(
    ("package", "args", "added"),
    [
        ("libdav1d-sys", ["--buildtype", "release", "/tmp/out", "vendor"], True),
        ("libdav1d-sys", ["--version"], False),
        ("other-sys", ["/tmp/out", "vendor"], False),
        (None, ["/tmp/out", "vendor"], False),
    ],
)
def test_the_meson_shim_adds_dav1ds_options_to_libdav1d_sys_only(tmp_path, package, args, added):
    env = {"PATH": f"{SHIM}{os.pathsep}{fake_meson(tmp_path)}"}
    if package:
        env["CARGO_PKG_NAME"] = package
    out = subprocess.run(
        [str(SHIM / "meson"), *args], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    options = ["-Dbitdepths=8", "-Denable_tools=false", "-Denable_tests=false"]
    assert out == args + (options if added else [])


def test_the_meson_shim_says_when_there_is_no_real_meson(tmp_path):
    proc = subprocess.run(
        [str(SHIM / "meson"), "--version"],
        env={"PATH": f"{SHIM}{os.pathsep}{tmp_path}"},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 127 and "no meson on PATH" in proc.stderr


def test_a_failing_zune_build_is_not_retried(backend, monkeypatch, tmp_path):
    tools(monkeypatch)
    hook = FakeHook(fail=1)
    with pytest.raises(SystemExit):
        backend._build(hook, str(tmp_path), None, None)
    assert hook.args == [None]


@pytest.mark.parametrize(
    ("tool", "requirement"),
    [("cmake", "cmake>=3.16"), ("meson", "meson>=1.3,<2"), ("ninja", "ninja>=1.11")],
)
def test_build_tools_come_from_pypi_only_when_needed(backend, monkeypatch, tool, requirement):
    others = [t for t in ("cmake", "meson", "ninja") if t != tool]
    tools(monkeypatch, "nasm", *others)
    assert requirement in backend.get_requires_for_build_wheel(None)
    tools(monkeypatch, "nasm", "cmake", "meson", "ninja")
    assert requirement not in backend.get_requires_for_build_wheel(None)
    tools(monkeypatch)
    assert requirement not in backend.get_requires_for_build_wheel(None)
    tools(monkeypatch, "nasm")
    monkeypatch.setenv("GULPIO_JPEG_BACKEND", "zune")
    assert requirement not in backend.get_requires_for_build_wheel(None)


def test_an_unknown_backend_name_is_refused(backend, monkeypatch):
    monkeypatch.setenv("GULPIO_JPEG_BACKEND", "libjpeg")
    with pytest.raises(ValueError, match="auto, turbo or zune"):
        backend.get_requires_for_build_wheel(None)


def installed_package_copy(tmp_path, build_info_json: str | None) -> Path:
    """A copy of the gulpio_rs package under test, as a wheel with (or without) the backend's
    note would install it."""
    import gulpio_rs

    root = tmp_path / "site"
    shutil.copytree(
        Path(gulpio_rs.__file__).parent,
        root / "gulpio_rs",
        # Nor what an import of it wrote since (the zune-jpeg notice's marker: CI imports a
        # zune-jpeg build in the same virtualenv, and pip's reinstall of the wheel leaves it).
        ignore=shutil.ignore_patterns("__pycache__", "_build_info.json", "_zune_notice"),
    )
    if build_info_json is not None:
        (root / "gulpio_rs" / "_build_info.json").write_text(build_info_json)
    return root


def import_warnings(root: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import gulpio_rs"],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stderr


def test_a_zune_fallback_build_warns_on_import_with_the_reason(tmp_path):
    root = installed_package_copy(
        tmp_path, json.dumps({"zune_jpeg_because": "nasm was not on PATH"})
    )
    err = import_warnings(root)
    assert (
        "GulpWarning: this gulpio-rs build decodes JPEG with zune-jpeg (nasm was not on PATH)"
        in err
    )
    assert "apt-get install nasm" in err


@pytest.mark.parametrize("content", [None, "{not json", "[]"])
def test_no_note_no_warning(tmp_path, content):
    assert import_warnings(installed_package_copy(tmp_path, content)) == ""


def test_the_demo_names_the_decoder_and_the_way_to_the_faster_one(monkeypatch):
    import gulpio_rs

    monkeypatch.setattr(gulpio_rs._decoder_notes, "JPEG_BACKEND", "zune-jpeg")
    note = gulpio_rs._decoder_notes.decoder_note("nasm was not on PATH")
    assert "zune-jpeg (nasm was not on PATH)" in note and "release wheel" in note
    assert "zune-jpeg, about 20% slower" in gulpio_rs._decoder_notes.decoder_note()
    monkeypatch.setattr(gulpio_rs._decoder_notes, "JPEG_BACKEND", "libjpeg-turbo")
    assert gulpio_rs._decoder_notes.decoder_note() is None
