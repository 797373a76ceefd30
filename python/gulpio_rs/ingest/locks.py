"""Coordination between concurrent writers: the run lock and pid liveness."""

from __future__ import annotations

import os

#: Where a run keeps its plan, chunk records and lock, inside the output folder.
STATE_DIR = ".gulpio-ingest"


class _RunLock:
    """An exclusive ``flock`` on ``.gulpio-ingest/lock``: serialises the short critical
    sections of concurrent writers (choosing a run's first chunk, publishing a chunk)."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, STATE_DIR, "lock")
        self.fd: int | None = None

    def acquire(self) -> None:
        if self.fd is None:
            import fcntl

            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


def _pid_alive(pid: int) -> bool:
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
