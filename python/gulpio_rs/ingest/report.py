"""What a run reports: per-chunk results, the run's report, its error and warning."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from .._sizes import megabytes
from .._terminal import printable
from ..errors import GulpError, GulpWarning


class IngestError(GulpError):
    """A video could not be ingested and ``strict=True`` was asked for (or the run cannot
    start). The message names the video id and the reason."""


class NothingToIngestError(IngestError):
    """The adapter has no items: nothing was created. The message says what was expected and
    what was found (``adapter.nothing_found()`` when the adapter has one)."""


class SettingsChangedError(IngestError):
    """The output already holds a run over the same input with other settings (frame size,
    videos per chunk, quality, ...): detected before any work. The message names each
    setting that differs and how to proceed."""


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped :class:`GulpIngestor`: a ``KeyboardInterrupt`` raised once
    the workers have stopped, with the :class:`IngestReport` of what was finished
    (``report``). Nothing half-written is visible; rerunning the same ingest resumes."""

    def __init__(self, report: IngestReport):
        super().__init__(
            f"ingest interrupted after {report.chunks_written} new chunks; rerun the same "
            "ingest to resume"
        )
        self.report = report


class IngestWarning(GulpWarning):
    """Some videos were skipped; the report lists them."""


@dataclass
class ChunkResult:
    """What writing one chunk did."""

    chunk: int
    videos: int = 0
    frames: int = 0
    bytes: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    resumed: bool = False
    #: Videos of the slice not written because the dataset already holds their ids (in a
    #: chunk outside this run): an extension or rerun over a superset, not a failure.
    already_stored: int = 0
    #: False when every video of the chunk was skipped: nothing was published under its
    #: number (an empty chunk would only be noise for readers and tools).
    published: bool = True


@dataclass
class IngestReport:
    """The outcome of a run: totals over every chunk this shard owns (also those finished by an
    earlier, interrupted run), and each video that was skipped with the reason."""

    output_folder: str
    videos: int = 0
    frames: int = 0
    bytes: int = 0
    chunks_written: int = 0
    chunks_resumed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    #: Frames written by this call (``frames`` also counts chunks finished earlier).
    frames_written: int = 0
    #: Items of the adapter not written because the dataset already held their ids when
    #: the run started or when their chunk was written (not failures: exit status 0).
    already_stored: int = 0
    #: How the run ended early, if it did (``"interrupted"``); ``None`` when it finished.
    stopped: str | None = None
    #: Files copied beside the chunks (``gulpio transcode``: ``label2idx.json``, ...).
    sidecars: list[str] = field(default_factory=list)

    def add(self, r: ChunkResult) -> None:
        self.videos += r.videos
        self.frames += r.frames
        self.bytes += r.bytes
        self.failures.extend(r.failures)
        self.already_stored += r.already_stored
        if not r.published:
            return
        if r.resumed:
            self.chunks_resumed += 1
        else:
            self.chunks_written += 1
            self.frames_written += r.frames

    @property
    def failed_ids(self) -> list[str]:
        return [id_ for id_, _ in self.failures]

    def __iter__(self) -> Iterator[str]:
        # gulpio-rs 0.1 returned the skipped ids; keep `for id in ingestor()` working.
        return iter(self.failed_ids)

    def summary(self) -> str:
        """A few lines for a terminal: totals, then every failed video and why."""
        rate = f", {self.frames_written / self.seconds:,.0f} frames/s" if self.seconds > 0 else ""
        lines = [
            f"{self.videos:,} videos, {self.frames:,} frames, {megabytes(self.bytes)} in "
            f"{self.chunks_written} new chunks ({self.chunks_resumed} already done) "
            f"in {self.seconds:.1f} s{rate} -> {printable(self.output_folder)}"
        ]
        if self.already_stored:
            lines.append(
                f"{self.already_stored:,} videos were already in the dataset and were not "
                "written again"
            )
        if self.failures:
            lines.append(f"{len(self.failures)} videos skipped:")
            # Ids and reasons come from the input: escaped, so none can forge a line.
            lines += [f"  {printable(id_)}: {printable(reason)}" for id_, reason in self.failures]
        return "\n".join(lines)


def failure_pairs(failures: Iterable[Sequence[str]]) -> list[tuple[str, str]]:
    """``ChunkResult.failures`` as read back from a JSON record (lists): ``(id, message)``."""
    return [(f[0], f[1]) for f in failures]
