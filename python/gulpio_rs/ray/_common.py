"""What the Ray entry points share: connecting, unwrapping task errors, sweeping
temporaries."""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

from .._names import temporary_of
from ..errors import GulpError

if TYPE_CHECKING:
    from ..directory import GulpDirectory

INSTALL_HINT = 'gulpio_rs.ray needs Ray Data: pip install "ray[data]>=2.40"'


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e
    return ray


def connect(address: str | None = None) -> ModuleType:
    """``ray``, connected: to ``address`` when given (``"auto"``: a running cluster,
    ``"ray://..."``, host:port), else to the cluster this process already uses, the running
    one ``ray.init()`` finds (``RAY_ADDRESS``, ``ray start --head`` on this machine), or a
    local one it starts. A cluster that cannot be reached is a :class:`GulpError` that says
    what to do, in gulpio's terms (Ray's own message names a ``--address`` flag gulpio does
    not have)."""
    ray = import_ray()
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False)
        except ConnectionError as e:
            where = f"at {address!r}" if address not in (None, "auto") else "running"
            raise GulpError(
                f"no Ray cluster {where} could be reached ({str(e).splitlines()[0]}). Start "
                "one with `ray start --head` and pass its address (gulpio ingest --ray "
                "HOST:PORT, ray_address=), or give --ray without an address (ray_address=None)"
                " to start a local cluster for this run"
            ) from None
    return ray


def task_error(ray: ModuleType, e: BaseException) -> BaseException:
    """The user-facing exception inside a Ray task failure: a task's ``IngestError`` (any
    ``GulpError``) reaches the caller as itself, not wrapped in ``RayTaskError`` or Ray
    Data's ``UserCodeException``; anything else stays as Ray raised it."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [e]
    while todo and len(seen) < 20:
        x = todo.pop()
        if x is None or any(x is s for s in seen):
            continue
        seen.append(x)
        if isinstance(x, GulpError) and not isinstance(x, ray.exceptions.RayError):
            return x
        todo += [getattr(x, "cause", None), x.__cause__, x.__context__]
    return e


def remove_temporaries(folder: str, numbers: set[int]) -> None:
    """Temporaries of chunks ``numbers`` once every task that writes them has finished: what
    is left belongs to attempts Ray gave up on (a killed worker), on any node, and no reader
    trusts a ``.gulpio-tmp.*`` name, so removing them is only tidying up."""
    for name in os.listdir(folder):
        temp = temporary_of(name)
        if temp and temp[0] in numbers:
            try:
                os.unlink(os.path.join(folder, name))
            except FileNotFoundError:
                pass


_OPEN: dict[tuple[int, str, tuple[tuple[str, str], ...], bytes | None], GulpDirectory] = {}


def open_remote(
    url: str, storage_options: dict[str, str] | None, manifest_state: bytes | None = None
) -> GulpDirectory:
    """The ``GulpDirectory`` of a dataset URL, opened once per worker process (Ray reuses
    workers): opening lists the prefix and fetches every chunk's index front, which one read
    or write task should not repeat for every chunk it handles. With ``manifest_state`` (the
    driver's ``gd.manifest_state``), the state the driver planned from: chunk positions are
    the driver's, whatever was committed since."""
    import warnings

    from ..directory import GulpDirectory
    from ..errors import EmptyDirectoryWarning

    key = (os.getpid(), url, tuple(sorted((storage_options or {}).items())), manifest_state)
    gd = _OPEN.get(key)
    if gd is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyDirectoryWarning)
            gd = _OPEN[key] = GulpDirectory(
                url, storage_options=storage_options, manifest_state=manifest_state
            )
    return gd


def forget_remote(url: str) -> None:
    """Drops the cached directories of ``url`` (its listing changed: chunks were added)."""
    for key in [k for k in _OPEN if k[1] == url]:
        _OPEN.pop(key).close()
