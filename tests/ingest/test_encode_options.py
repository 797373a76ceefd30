"""One owner of the encode settings: ``_encode_options`` holds the defaults (q90 4:2:0, no
restart markers) and the subsampling choices, and every writer's signature, the command
line's flags and the Rust binding's defaults follow it rather than spelling them again."""

from __future__ import annotations

import inspect

import pytest
from helpers import synthetic_frame

from gulpio_rs import ChunkWriter, GulpIngestor, _encode_options, _native, utils
from gulpio_rs._encode_options import DEFAULT, GULPIO2, RUST_ENCODER, SUBSAMPLINGS, EncodeOptions
from gulpio_rs.cli import gulp2
from gulpio_rs.cli import ingest as cli_ingest
from gulpio_rs.ray import write_gulp

turbo_only = pytest.mark.skipif(
    not RUST_ENCODER, reason="zune-jpeg build: frames are encoded by simplejpeg, not in Rust"
)

SETTINGS = ("quality", "subsampling", "restart_rows")


def _defaults(fn) -> dict:
    params = inspect.signature(fn).parameters
    return {name: params[name].default for name in SETTINGS if name in params}


def test_the_defaults_are_the_ingests_and_gulpio2s():
    assert (DEFAULT.quality, DEFAULT.subsampling, DEFAULT.restart_rows) == (90, "4:2:0", False)
    assert DEFAULT.encoding == "jpeg" and DEFAULT.threads == 1
    assert (GULPIO2.quality, GULPIO2.subsampling) == (90, "4:4:4")
    # ChunkWriter encodes as gulpio2's knob says when it writes (utils._JPEG_WRITE_QUALITY,
    # 90 unless changed): GULPIO2's settings by default.
    assert ChunkWriter(adapter=None).options is None
    assert utils.gulpio2_encoding() == GULPIO2


@pytest.mark.parametrize("fn", [GulpIngestor, write_gulp], ids=lambda f: f.__qualname__)
def test_every_writers_signature_takes_its_defaults_from_the_owner(fn):
    want = {name: getattr(DEFAULT, name) for name in SETTINGS}
    got = _defaults(fn)
    if fn is GulpIngestor:
        # None: "not given", so that gulpio2's quality knob can apply (see its docstring);
        # resolved from DEFAULT otherwise.
        assert got == {**want, "quality": None, "subsampling": None}
        options = GulpIngestor(None, "unused", 1, 1, threads=1).options
        assert options == EncodeOptions(DEFAULT.quality, DEFAULT.subsampling, 1)
    else:
        assert got == want


def test_the_command_lines_defaults_and_choices_are_the_owners():
    from gulpio_rs.adapters import ImageFolderAdapter

    parser = cli_ingest.build_parser(ImageFolderAdapter, "image-folder")
    args = parser.parse_args(["in/", "out/"])
    assert (args.quality, args.subsampling, args.restart_rows) == (
        DEFAULT.quality,
        DEFAULT.subsampling,
        DEFAULT.restart_rows,
    )
    choices = {a.dest: a.choices for a in parser._actions}
    assert tuple(choices["subsampling"]) == SUBSAMPLINGS
    assert "default: 90" in parser.format_help() and "default: 4:2:0" in parser.format_help()

    script = gulp2._parser(gulp2.SCRIPTS["gulp2_image_folder"])
    args = script.parse_args(["in/", "out/"])
    assert (args.quality, args.subsampling) == (DEFAULT.quality, DEFAULT.subsampling)
    assert tuple(next(a for a in script._actions if a.dest == "subsampling").choices) == (
        SUBSAMPLINGS
    )


def test_encode_options_check_every_setting():
    for sub in SUBSAMPLINGS:
        assert EncodeOptions(subsampling=sub).simplejpeg_subsampling == sub.replace(":", "")
        assert EncodeOptions(subsampling=sub.replace(":", "")).subsampling == sub.replace(":", "")
    for bad in ("4:1:1", "4:20", ""):
        with pytest.raises(ValueError, match="subsampling must be one of"):
            EncodeOptions(subsampling=bad)
    with pytest.raises(ValueError, match="quality"):
        EncodeOptions(quality=0)
    with pytest.raises(ValueError, match="threads"):
        EncodeOptions(threads=0)
    # The stored frame's format, and the video encoding's own settings.
    with pytest.raises(ValueError, match="encoding must be one of \\['jpeg', 'video'\\]"):
        EncodeOptions(encoding="h264")  # type: ignore[arg-type]
    assert EncodeOptions(encoding="video").gop == 16
    assert EncodeOptions(encoding="video").preset == 8
    for bad in (
        {"crf": 64},
        {"crf": -1},
        {"gop": 0},
        {"gop": 1025},
        {"preset": -1},
        {"preset": 14},
    ):
        with pytest.raises(ValueError, match="crf|gop|preset"):
            EncodeOptions(encoding="video", **bad)
    with pytest.raises(ValueError, match="restart_rows is a JPEG setting"):
        EncodeOptions(encoding="video", restart_rows=True)


@turbo_only
def test_the_rust_encoder_without_settings_uses_the_owners_defaults(monkeypatch):
    frames = [synthetic_frame(40, 56, seed=s) for s in range(2)]
    assert _native.encode_frames(frames) == _native.encode_frames(frames, 90, "4:2:0")
    # A changed owner changes the binding's defaults too: nothing else spells them.
    monkeypatch.setattr(_encode_options, "DEFAULT", EncodeOptions(quality=50, subsampling="4:4:4"))
    assert _native.encode_frames(frames) == _native.encode_frames(frames, 50, "4:4:4")
    assert _native.encode_frames(frames, 70) == _native.encode_frames(frames, 70, "4:4:4")


@turbo_only
def test_the_rust_encoder_takes_exactly_the_owners_subsampling_choices():
    frame = [synthetic_frame(16, 16, seed=3)]
    for sub in SUBSAMPLINGS:
        assert _native.encode_frames(frame, 90, sub)
        assert _native.encode_frames(frame, 90, sub.replace(":", ""))
    with pytest.raises(ValueError, match="subsampling must be one of") as e:
        _native.encode_frames(frame, 90, "4:1:1")
    listed = str(e.value).split("one of ", 1)[1].split(", not")[0]
    assert sorted(listed.split(", ")) == sorted(SUBSAMPLINGS)
