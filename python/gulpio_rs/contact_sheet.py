"""Contact sheets: a grid of a video's frames with frame numbers and a caption, as a PNG, so a
user can look at stored data instead of reading numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont


def contact_sheet(
    frames: Sequence[np.ndarray],
    frame_numbers: Sequence[int],
    caption: str,
    *,
    columns: int | None = None,
    thumb_height: int = 96,
) -> Image.Image:
    """Lay out ``frames`` (HxWx3 or HxW uint8) in a grid under a one-line ``caption``."""
    if len(frames) != len(frame_numbers):
        raise ValueError("frames and frame_numbers differ in length")
    columns = columns or max(1, min(len(frames), math.ceil(math.sqrt(len(frames) * 1.5))))
    rows = max(1, math.ceil(len(frames) / columns))
    thumbs = [_thumbnail(f, thumb_height) for f in frames]
    cell_w = max((t.width for t in thumbs), default=thumb_height)
    font = ImageFont.load_default()
    pad, caption_h, label_h = 4, 20, 14
    sheet = Image.new(
        "RGB",
        (columns * (cell_w + pad) + pad, caption_h + rows * (thumb_height + label_h + pad) + pad),
        (24, 24, 24),
    )
    draw = ImageDraw.Draw(sheet)
    draw.text((pad, 4), caption, fill=(240, 240, 240), font=font)
    for i, (thumb, number) in enumerate(zip(thumbs, frame_numbers, strict=True)):
        r, c = divmod(i, columns)
        x = pad + c * (cell_w + pad)
        y = caption_h + r * (thumb_height + label_h + pad)
        sheet.paste(thumb, (x, y))
        draw.text((x + 2, y + thumb_height + 1), f"#{number}", fill=(200, 200, 200), font=font)
    return sheet


def _thumbnail(frame: np.ndarray, height: int) -> Image.Image:
    arr = np.asarray(frame)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    img = Image.fromarray(arr).convert("RGB")
    width = max(1, round(img.width * height / max(1, img.height)))
    return img.resize((width, height), Image.Resampling.BILINEAR)
