"""Coordination between concurrent writers: the run lock and pid liveness."""

from __future__ import annotations

import os
import stat
from typing import Self

from filelock import FileLock

#: Where a run keeps its plan, chunk records and lock, inside the output folder.
STATE_DIR = ".gulpio-ingest"


def state_folder(folder: str) -> str:
    """``folder/.gulpio-ingest``, created if missing; ``UnsafeFileError`` when it is a symlink
    or not a folder (the run's files would be written outside the dataset)."""
    from ..errors import UnsafeFileError

    path = os.path.join(folder, STATE_DIR)
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    mode = os.lstat(path).st_mode
    if not stat.S_ISDIR(mode):
        what = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
        err = UnsafeFileError(
            f"{path} is {what}; the ingest keeps its plan and records there and never writes "
            "through a symlink: remove it"
        )
        err.path = path
        raise err
    return path


class RunLock:
    """An exclusive lock on ``.gulpio-ingest/lock`` (``flock`` through :mod:`filelock`):
    serialises the short critical sections of concurrent writers (choosing a run's first
    chunk, publishing a chunk). The kernel drops it when the holder dies, even by SIGKILL.

    ``acquire`` while held does nothing more and ``release`` lets go completely, so a caller
    may release in a ``finally`` whether or not it got as far as acquiring.
    """

    def __init__(self, folder: str):
        self.path = os.path.join(folder, STATE_DIR, "lock")
        self._lock = FileLock(self.path, mode=0o644)

    def acquire(self) -> None:
        if not self._lock.is_locked:
            self._lock.acquire()

    def release(self) -> None:
        self._lock.release(force=True)

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def pid_alive(pid: int) -> bool:
    """True if process ``pid`` exists on this machine and is not a zombie (also when it
    belongs to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # A zombie (dead, not yet reaped) still answers kill(pid, 0).
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True
