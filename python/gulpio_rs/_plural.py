"""One way to put a count before a noun, so that no message says "1 new chunks" or "1 videos
skipped" (nor hedges with "chunk(s)")."""

from __future__ import annotations


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` with thousands separators and ``noun``, or its plural ``nouns`` (default
    ``noun + "s"``) unless ``count`` is 1: ``plural(1, "new chunk")`` is ``"1 new chunk"``,
    ``plural(1200, "video")`` is ``"1,200 videos"``. A verb may ride along:
    ``plural(n, "chunk has", "chunks have")``."""
    word = noun if count == 1 else (nouns if nouns is not None else noun + "s")
    return f"{count:,} {word}"
