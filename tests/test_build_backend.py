"""The PEP 517 backend's choice of JPEG decoder (build_backend/gulpio_rs_build.py), with a fake
maturin hook: which features each build asks for, the fallback when libjpeg-turbo fails to
build, and the build requirements. The real builds run in CI (.ci/run builds both)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("maturin")

BACKEND = Path(__file__).resolve().parents[1] / "build_backend" / "gulpio_rs_build.py"
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
            else (None if name in ("nasm", "cmake") else real(name, *a, **k))
        ),
    )


class FakeHook:
    """Records MATURIN_PEP517_ARGS at each call; fails the first ``fail`` calls as maturin
    does (sys.exit)."""

    def __init__(self, fail: int = 0):
        self.args: list[str | None] = []
        self.fail = fail

    def __call__(self, wheel_directory, config_settings, metadata_directory):
        self.args.append(os.environ.get("MATURIN_PEP517_ARGS"))
        if len(self.args) <= self.fail:
            raise SystemExit(1)
        return "gulpio_rs-0.1.0-cp311-abi3-linux_x86_64.whl"


def test_auto_builds_libjpeg_turbo_when_nasm_is_there(backend, monkeypatch):
    tools(monkeypatch, "nasm", "cmake")
    hook = FakeHook()
    assert backend._build(hook, "dist", None, None).endswith(".whl")
    assert hook.args == ["--features python,turbo"]
    assert "MATURIN_PEP517_ARGS" not in os.environ  # restored


def test_auto_keeps_the_users_other_maturin_arguments(backend, monkeypatch):
    tools(monkeypatch, "nasm", "cmake")
    monkeypatch.setenv("MATURIN_PEP517_ARGS", "--profile dev")
    hook = FakeHook()
    backend._build(hook, "dist", None, None)
    assert hook.args == ["--profile dev --features python,turbo"]
    assert os.environ["MATURIN_PEP517_ARGS"] == "--profile dev"


def test_auto_builds_zune_without_nasm(backend, monkeypatch):
    tools(monkeypatch, "cmake")
    hook = FakeHook()
    backend._build(hook, "dist", None, None)
    assert hook.args == [None]


@pytest.mark.parametrize(
    "args", ["--features python", "-F python", "--features=python,turbo", "--all-features"]
)
def test_features_given_by_the_user_are_left_alone(backend, monkeypatch, args):
    tools(monkeypatch, "nasm", "cmake")
    monkeypatch.setenv("MATURIN_PEP517_ARGS", args)
    hook = FakeHook()
    backend._build(hook, "dist", None, None)
    assert hook.args == [args]


def test_config_settings_build_args_are_left_alone(backend, monkeypatch):
    tools(monkeypatch, "nasm", "cmake")
    hook = FakeHook()
    backend._build(hook, "dist", {"maturin.build-args": "--features python"}, None)
    assert hook.args == [None]


def test_zune_is_built_when_asked_even_with_nasm(backend, monkeypatch):
    tools(monkeypatch, "nasm", "cmake")
    monkeypatch.setenv("GULPIO_JPEG_BACKEND", "zune")
    hook = FakeHook()
    backend._build(hook, "dist", None, None)
    assert hook.args == [None]


def test_a_failed_turbo_build_falls_back_to_zune_with_a_warning(backend, monkeypatch, capsys):
    tools(monkeypatch, "nasm", "cmake")
    hook = FakeHook(fail=1)
    assert backend._build(hook, "dist", None, None).endswith(".whl")
    assert hook.args == ["--features python,turbo", None]
    assert "building with zune-jpeg instead" in capsys.readouterr().err


def test_turbo_asked_for_fails_instead_of_falling_back(backend, monkeypatch):
    tools(monkeypatch)
    monkeypatch.setenv("GULPIO_JPEG_BACKEND", "turbo")
    hook = FakeHook(fail=1)
    with pytest.raises(SystemExit):
        backend._build(hook, "dist", None, None)
    assert hook.args == ["--features python,turbo"]


def test_a_failing_zune_build_is_not_retried(backend, monkeypatch):
    tools(monkeypatch)
    hook = FakeHook(fail=1)
    with pytest.raises(SystemExit):
        backend._build(hook, "dist", None, None)
    assert hook.args == [None]


def test_cmake_comes_from_pypi_only_when_needed(backend, monkeypatch):
    tools(monkeypatch, "nasm")
    assert "cmake>=3.16" in backend.get_requires_for_build_wheel(None)
    tools(monkeypatch, "nasm", "cmake")
    assert "cmake>=3.16" not in backend.get_requires_for_build_wheel(None)
    tools(monkeypatch)
    assert "cmake>=3.16" not in backend.get_requires_for_build_wheel(None)
    tools(monkeypatch, "nasm")
    monkeypatch.setenv("GULPIO_JPEG_BACKEND", "zune")
    assert "cmake>=3.16" not in backend.get_requires_for_build_wheel(None)


def test_an_unknown_backend_name_is_refused(backend, monkeypatch):
    monkeypatch.setenv("GULPIO_JPEG_BACKEND", "libjpeg")
    with pytest.raises(ValueError, match="auto, turbo or zune"):
        backend.get_requires_for_build_wheel(None)
