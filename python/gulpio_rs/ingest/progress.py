"""The ingest's progress bar: tqdm over videos with frames/s, shared by the process and Ray
executors."""

from __future__ import annotations

import time


class Progress:
    """tqdm over videos, with frames/s in the postfix; silent when disabled."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        self.frames = 0
        self.t0 = time.perf_counter()
        if enabled and total > 0:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit="video", desc="gulping", smoothing=0.1)

    def update(self, videos: int, frames: int) -> None:
        self.frames += frames
        if self.bar is not None:
            self.bar.update(videos)
            dt = time.perf_counter() - self.t0
            if dt > 0:
                self.bar.set_postfix_str(f"{self.frames / dt:,.0f} frames/s", refresh=False)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
