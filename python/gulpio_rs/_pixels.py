"""The one place where images and arrays become the pixels a chunk stores.

Every ingest path (adapters reading image files, :class:`~gulpio_rs.ingest.GulpIngestor`'s
frame encoder, :meth:`GulpChunk.append <gulpio_rs.chunk.GulpChunk.append>` through
``utils.img_to_jpeg_bytes``, ``utils.resize_frames`` / ``resize_images``) calls
:func:`to_frame`, so one image gives the same stored pixels whichever way it comes in.

The result is always a C-contiguous uint8 array, ``HxW`` for one-channel images and ``HxWx3``
RGB otherwise:

- ``L``, ``RGB``: as they are. ``1``: black and white as 0 and 255.
- ``LA``/``La``: gray, alpha dropped. ``RGBA``, ``P``/``PA`` (palette), ``CMYK``, ``YCbCr``
  and the other colour modes: RGB through Pillow, alpha dropped (as ``convert('RGB')`` does).
- ``I;16*`` (16-bit gray): scaled by the type's full range, ``round(v * 255 / 65535)``, so
  65535 is white and ``257 * k`` becomes exactly ``k``.
- ``I`` (32-bit int) and ``F`` (32-bit float) carry no range, so the values say which one is
  meant (see docs/DECISIONS.md): ``F`` values all in ``[0, 1]`` are fractions (times 255);
  otherwise values all in ``0..255`` are 8-bit levels kept as they are, values up to 65535
  are 16-bit levels (scaled as ``I;16``), and larger ones are scaled by the 32-bit range.
  Negative values and NaN become 0.

Arrays must already be uint8 (bool is taken as black/white); ``HxWx1`` and ``HxWx2`` (gray +
alpha) become gray and ``HxWx4`` (RGBA) RGB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL import Image

_GRAY = ("1", "LA", "La")
_16BIT = ("I;16", "I;16B", "I;16L", "I;16N")


def _levels(arr: np.ndarray, full_range: float) -> np.ndarray:
    out: np.ndarray = np.rint(np.clip(arr, 0.0, full_range) * (255.0 / full_range))
    return out.astype(np.uint8)


def _unranged(arr: np.ndarray, fractions: bool) -> np.ndarray:
    """Mode ``I``/``F`` values as 8-bit levels, reading the range off the data."""
    arr = np.nan_to_num(arr.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    top = float(arr.max()) if arr.size else 0.0
    if fractions and top <= 1.0:
        return _levels(arr, 1.0)
    if top <= 255.0:
        return _levels(arr, 255.0)
    if top <= 65535.0:
        return _levels(arr, 65535.0)
    return _levels(arr, 2.0**31 - 1)


def pil_to_array(img: Image.Image) -> np.ndarray:
    """A PIL image as an 8-bit gray (``HxW``) or RGB (``HxWx3``) array (rules above)."""
    mode = img.mode
    if mode in ("L", "RGB"):
        arr = np.asarray(img)
    elif mode in _16BIT:
        arr = _levels(np.asarray(img).astype(np.float64), 65535.0)
    elif mode in ("I", "F"):
        arr = _unranged(np.asarray(img), fractions=mode == "F")
    elif mode in _GRAY:
        arr = np.asarray(img.convert("L"))
    else:
        if mode in ("P", "PA"):
            # Via RGBA so Pillow does not warn about palette transparency.
            img = img.convert("RGBA")
        arr = np.asarray(img.convert("RGB"))
    return np.ascontiguousarray(arr)


def array_to_frame(frame: np.ndarray) -> np.ndarray:
    """A uint8 (or bool) array as a C-contiguous ``HxW`` or ``HxWx3`` uint8 array."""
    arr = np.asarray(frame)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8) * 255
    if arr.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 arrays, got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] in (1, 2):  # gray, gray + alpha
        arr = arr[:, :, 0]
    elif arr.ndim == 3 and arr.shape[2] == 4:  # RGBA: drop alpha, as PIL's convert does
        arr = arr[:, :, :3]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] != 3):
        raise ValueError(f"frames must be HxW, HxWx1, HxWx3 or HxWx4 arrays, got {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"frame has an empty shape {arr.shape}")
    return np.ascontiguousarray(arr)


def to_frame(frame: np.ndarray | Image.Image) -> np.ndarray:
    """A PIL image or an array as the uint8 frame a chunk stores."""
    from PIL import Image

    if isinstance(frame, Image.Image):
        frame = pil_to_array(frame)
    return array_to_frame(frame)
