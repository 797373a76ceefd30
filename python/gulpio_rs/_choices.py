"""The closed string options of the API, as ``Literal`` types: what a type checker holds a
caller to. The values are still checked when the call runs (each where it is used), and the
lists those checks use are read from these types where they live in Python.

The read path's ``colorspace=`` and ``io=`` (``GulpDirectory``, the PyTorch datasets) take
:data:`Colorspace` and :data:`Io`; ``_native.pyi`` uses them for the functions that take
them.
"""

from __future__ import annotations

from typing import Literal

#: How decoded frames come out: RGB (3 channels), gray (1), or, with ``None``, as stored.
#: The Rust core also accepts other cases and ``"GREY"``/``"L"``.
Colorspace = Literal["RGB", "GRAY"]

#: How local ``.gulp`` files are read: positional reads (the default) or memory-mapped.
Io = Literal["pread", "mmap"]

#: Whether ``GulpDirectory`` opens through the dataset manifest (docs/FORMAT.md §7.5): when it
#: is usable, else by listing (``"auto"``); by listing (``"off"``); through it or a
#: ``FormatError`` (``"require"``); through it, then listed and compared (``"verify"``).
ManifestMode = Literal["auto", "off", "require", "verify"]

#: How frames are stored: a JPEG per frame, or each video as AV1 segments.
Encoding = Literal["jpeg", "video"]

#: JPEG chroma subsampling of colour frames, as the command line lists them.
ColonSubsampling = Literal["4:2:0", "4:2:2", "4:4:4", "4:4:0"]
#: The same, or in simplejpeg's spelling without colons.
Subsampling = ColonSubsampling | Literal["420", "422", "444", "440"]

#: The RGB <-> YUV matrix of video segments.
Matrix = Literal["bt601", "bt709"]

#: What ``GulpBucketBatchSampler(by=)`` groups videos by, unless given a callable.
BucketKey = Literal["size", "frames", "aspect"]

#: Where the datasets' clips sit in a video (``offset=``): centred, at the start, or drawn.
OffsetName = Literal["center", "random", "start"]

#: Where a video dataset's clips may start (``clip_align=``): at any frame, or only where one of
#: the video's AV1 segments starts (datasets written with ``encoding="video"``).
ClipAlign = Literal["frame", "segment"]

#: The box the datasets resize to ``size=`` (``crop=``), unless ``None`` (the whole frame).
CropMode = Literal["random-resized", "center", "random"]

#: What the datasets do with a sample that fails to read (``on_error=``).
OnError = Literal["raise", "skip"]

#: The order of a video dataset's clip dimensions (``layout=``).
VideoLayout = Literal["THWC", "TCHW", "CTHW"]

#: The order of an image dataset's image dimensions (``layout=``).
ImageLayout = Literal["HWC", "CHW"]
