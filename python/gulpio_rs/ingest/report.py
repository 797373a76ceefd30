"""What a run reports: per-chunk results, the run's report, its error and warning."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from .._plural import plural
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
            f"ingest interrupted after {plural(report.chunks_written, 'new chunk')}; rerun the "
            "same ingest to resume"
        )
        self.report = report


class IngestWarning(GulpWarning):
    """Some videos were skipped, or stored shorter than their file declares; the report
    lists them."""


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
    #: Videos stored with fewer frames than their file declares (an item's ``'truncated'``:
    #: a file cut short that still opens), with the reason; stored, not failures.
    truncated: list[tuple[str, str]] = field(default_factory=list)
    #: Videos stored whose file had audio streams (an item's ``'audio_streams'``): only
    #: their video is stored.
    audio_ignored: int = 0


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
    #: Videos stored with fewer frames than their file declares, with the reason (see
    #: ``skip_truncated`` of :class:`~gulpio_rs.GulpIngestor`).
    truncated: list[tuple[str, str]] = field(default_factory=list)
    #: Videos stored whose file had audio streams, which are not stored.
    audio_ignored: int = 0
    #: Videos and bytes written by this call (``videos`` and ``bytes`` also count chunks
    #: finished earlier).
    videos_written: int = 0
    bytes_written: int = 0
    #: How many of ``failures`` and ``truncated`` an earlier run reported (their chunks were
    #: finished before this call).
    failures_before: int = 0
    truncated_before: int = 0

    def add(self, r: ChunkResult) -> None:
        self.videos += r.videos
        self.frames += r.frames
        self.bytes += r.bytes
        self.failures.extend(r.failures)
        self.truncated.extend(r.truncated)
        self.audio_ignored += r.audio_ignored
        self.already_stored += r.already_stored
        if r.resumed:
            self.failures_before += len(r.failures)
            self.truncated_before += len(r.truncated)
        if not r.published:
            return
        if r.resumed:
            self.chunks_resumed += 1
        else:
            self.chunks_written += 1
            self.frames_written += r.frames
            self.videos_written += r.videos
            self.bytes_written += r.bytes

    @property
    def nothing_to_do(self) -> bool:
        """True when this call found the job done: it wrote no chunk and met no video an
        earlier run had not already reported."""
        return (
            self.chunks_written == 0
            and len(self.failures) == self.failures_before
            and len(self.truncated) == self.truncated_before
        )

    @property
    def has_problems(self) -> bool:
        """True when the job skipped videos or stored some cut short, and this call did work
        (a rerun with nothing to do does not report an earlier run's problems again as
        its own): what ``gulpio ingest`` exits with status 3 for."""
        return bool(self.failures or self.truncated) and not self.nothing_to_do

    @property
    def failed_ids(self) -> list[str]:
        return [id_ for id_, _ in self.failures]

    def __iter__(self) -> Iterator[str]:
        # gulpio-rs 0.1 returned the skipped ids; keep `for id in ingestor()` working.
        return iter(self.failed_ids)

    def summary(self) -> str:
        """A few lines for a terminal: what this call wrote (and with the chunks finished
        earlier, the job's totals), then every video skipped or cut short and why."""
        lines = [f"{self._totals()} -> {printable(self.output_folder)}"]
        if self.already_stored:
            lines.append(
                f"{plural(self.already_stored, 'video was', 'videos were')} already in the "
                "dataset and not written again"
            )
        if self.audio_ignored:
            lines.append(
                f"audio streams ignored in {plural(self.audio_ignored, 'file')}: only the "
                "video is stored"
            )
        if self.truncated:
            lines.append(
                f"{plural(len(self.truncated), 'video was', 'videos were')} stored cut short, "
                "with fewer frames than the file declares (skip_truncated=True / "
                "--skip-truncated leaves such files out):"
            )
            lines += _listed(self.truncated)
        if self.failures:
            skipped = plural(len(self.failures), "video")
            lines.append(f"{skipped} skipped" + (" before:" if self.nothing_to_do else ":"))
            lines += _listed(self.failures)
        return "\n".join(lines)

    def _totals(self) -> str:
        held = (
            f"{plural(self.videos, 'video')}, {plural(self.frames, 'frame')}, "
            f"{megabytes(self.bytes)}"
        )
        if self.nothing_to_do:
            done = f": {plural(self.chunks_resumed, 'chunk')} done before hold {held}"
            text = f"nothing to do{done if self.chunks_resumed else ''}"
            if self.failures:
                text += f"; {plural(len(self.failures), 'file was', 'files were')} skipped before"
            if self.truncated:
                cut = plural(len(self.truncated), "file was", "files were")
                text += f"; {cut} stored cut short before"
            return text
        # This call's counts and its rate on one line, the job's totals after them.
        rate = (
            f", {self.frames_written / self.seconds:,.0f} frames/s"
            if self.seconds > 0 and self.frames_written
            else ""
        )
        line = (
            f"{plural(self.videos_written, 'video')}, {plural(self.frames_written, 'frame')}, "
            f"{megabytes(self.bytes_written)} in {plural(self.chunks_written, 'new chunk')} in "
            f"{self.seconds:.1f} s{rate}"
        )
        if self.chunks_resumed:
            line += f"; with the {plural(self.chunks_resumed, 'chunk')} done before: {held}"
        return line


def _listed(pairs: list[tuple[str, str]]) -> list[str]:
    # Ids and reasons come from the input: escaped, so none can forge a line.
    return [f"  {printable(id_)}: {printable(reason)}" for id_, reason in pairs]


def failure_pairs(failures: Iterable[Sequence[str]]) -> list[tuple[str, str]]:
    """``ChunkResult.failures`` as read back from a JSON record (lists): ``(id, message)``."""
    return [(f[0], f[1]) for f in failures]
