"""The fused geometry's one private torchvision call (``_resized_output_size`` in
``torch/_geometry.py``) fails with a clear ``ImportError`` when torchvision moves or changes
it, and the torchvision CI tests is the floor ``pyproject.toml`` declares."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

torchvision = pytest.importorskip("torchvision")

from torchvision.transforms import v2  # noqa: E402
from torchvision.transforms.v2.functional import _geometry as tv_geometry  # noqa: E402

from gulpio_rs.torch._geometry import plan_fused  # noqa: E402

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.match(r"\d+(\.\d+)*", text).group(0).split("."))


def test_resize_is_planned_with_torchvisions_own_arithmetic():
    assert plan_fused([v2.Resize(8)], 16, 24) == ((0.0, 0.0, 16.0, 24.0), (8, 12), False)
    assert plan_fused([v2.Resize(8, max_size=10)], 16, 32)[1] == (5, 10)


def test_a_torchvision_without_the_helper_gets_a_clear_error(monkeypatch):
    monkeypatch.delattr(tv_geometry, "_compute_resized_output_size")
    with pytest.raises(ImportError, match="torchvision's private helper") as e:
        plan_fused([v2.Resize(8)], 16, 24)
    assert torchvision.__version__ in str(e.value) and "pyproject.toml" in str(e.value)


def test_a_torchvision_whose_helper_changed_its_parameters_gets_a_clear_error(monkeypatch):
    monkeypatch.setattr(tv_geometry, "_compute_resized_output_size", lambda image_size: image_size)
    with pytest.raises(ImportError, match="does not provide as expected \\(TypeError"):
        plan_fused([v2.Resize(8)], 16, 24)


def test_the_installed_torchvision_is_at_least_the_declared_floor():
    extra = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["torch"]
    floor = next(r for r in extra if r.startswith("torchvision>="))
    assert _version(torchvision.__version__) >= _version(floor.split(">=", 1)[1])
    # What the floor guarantees: the transforms' public make_params (no _get_params branch).
    assert callable(getattr(v2.RandomResizedCrop(4), "make_params", None))
