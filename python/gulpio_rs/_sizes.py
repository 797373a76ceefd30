"""One way to print a byte count, so `gulpio ingest`, `check`, `info`, `ls` and the demo agree
to the last digit for the same bytes."""

from __future__ import annotations


def megabytes(n: int) -> str:
    """``n`` bytes as decimal megabytes with one decimal: ``33.2 MB``."""
    return f"{n / 1e6:,.1f} MB"


def kilobytes(n: int) -> str:
    """``n`` bytes as decimal kilobytes with one decimal (per-video sizes): ``17.6 kB``."""
    return f"{n / 1e3:,.1f} kB"
