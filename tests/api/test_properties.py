"""Property tests (hypothesis): whatever is written reads back the same: random videos with
any frame counts and sizes, gray and colour, empty videos, unicode and odd ids, nested
metadata; through gulpio_rs and, byte for byte, through the .gmeta gulpio2 would parse."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gulpio_rs import GulpChunk, GulpDirectory
from gulpio_rs.utils import img_to_jpeg_bytes

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
ids = st.text(min_size=1, max_size=24).filter(lambda s: "\x00" not in s)


@st.composite
def frames(draw):
    count = draw(st.integers(0, 4))
    out = []
    for _ in range(count):
        h, w = draw(st.integers(1, 24)), draw(st.integers(1, 24))
        gray = draw(st.booleans())
        value = draw(st.integers(0, 255))
        shape = (h, w) if gray else (h, w, 3)
        out.append(np.full(shape, value, np.uint8))
    return out


videos = st.lists(
    st.tuples(ids, st.dictionaries(st.text(max_size=8), json_values, max_size=4), frames()),
    min_size=1,
    max_size=6,
    unique_by=lambda v: v[0],
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(videos=videos, per_chunk=st.integers(1, 4))
def test_write_read_round_trip(videos, per_chunk):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        encoded = {}
        for c in range(0, len(videos), per_chunk):
            chunk = GulpChunk(root / f"data_{c}.gulp", root / f"meta_{c}.gmeta")
            with chunk.open("wb"):
                for id_, meta, fr in videos[c : c + per_chunk]:
                    jpegs = [img_to_jpeg_bytes(f) for f in fr]
                    encoded[id_] = jpegs
                    chunk.append(id_, meta, jpegs)
        gd = GulpDirectory(root)
        assert gd.keys() == [v[0] for v in videos]
        for id_, meta, fr in videos:
            assert id_ in gd and gd.num_frames(id_) == len(fr)
            got, got_meta = gd[id_]
            assert got_meta == json.loads(json.dumps(meta))
            assert [bytes(b) for b in gd.frame_bytes(id_)] == encoded[id_]
            for g, f in zip(got, fr, strict=True):
                assert g.shape == f.shape
                # Flat frames survive JPEG within a level or two.
                assert np.abs(g.astype(int) - f.astype(int)).max() <= 2
        # The .gmeta is plain gulpio JSON: its frame_info matches the index.
        for c in range(0, len(videos), per_chunk):
            with open(root / f"meta_{c}.gmeta") as f:
                text = json.load(f)
            for id_, entry in text.items():
                assert entry["frame_info"] == gd.merged_meta_dict[id_]["frame_info"]
