"""A fault-injecting HTTP/1.1 reverse proxy on loopback, for tests and benchmarks.

It forwards requests unchanged (Host header included, so S3 SigV4 signatures still verify)
to one upstream over keep-alive connections, and injects, by a plan that can be changed at
any time from another thread:

- ``latency_ms``: a delay before every request is forwarded;
- ``status`` (503, 429, ...) for the next ``count`` requests, answered by the proxy itself;
- ``reset_mid_body``: the next N responses with a body are cut half-way by a TCP reset;
- ``truncate_body``: the next N responses with a body are closed after half their declared
  ``Content-Length``;
- ``slow_body``: the next N responses with a body send half of it, then stall for
  ``slow_ms`` (longer than the client's ``timeout``) before the rest;
- ``flip_byte``: one byte of the body of the next N ``GET`` responses is inverted (the middle
  one, so every damaged copy of one object is the same, as damage at rest would be; with
  ``flip_random`` a random one, so that every copy differs);
- ``ignore_range``: the next N ``GET`` requests with a ``Range`` header are answered ``200``
  with the whole object, as a server that ignores ``Range`` does. S3 signs the ``Range``
  header, so the proxy cannot drop it: it forwards the request and replaces the partial
  body with the whole object from ``objects(target)`` (the S3 server's files); without
  ``objects`` it drops the header (plain HTTP servers, whose requests are not signed).

Body faults hit ``GET`` and ``PROPFIND`` (a WebDAV listing) responses, and only those whose
request target matches ``only``: ``"listing"`` (S3 ``list-type=``, or ``PROPFIND``), or a
substring of the target such as ``".gidx"``, ``".gmeta"`` or ``".gulp"``; ``""`` matches all.

With ``atomic_conditional_puts=True`` it forwards requests carrying ``If-None-Match`` one at a
time (each until its response is in): s3s-fs checks the condition and then writes, so two
conditional creates of one key at the same moment can both succeed there, where S3, GCS and
Azure decide in one step. Tests of concurrent writers use it to get the real stores' behaviour.

It counts requests and response body bytes (what a client really fetched). Plain class with
``start()``/``stop()`` and ``url``: usable from pytest, from benchmarks and by clients in other
processes (they only see a TCP port). :class:`FaultProxyProcess` runs the same proxy in a
process of its own, for benchmarks: a proxy thread would share the measuring process's GIL
(a DataLoader's main loop, say) and add waits of its own to every request.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass, field

_DEBUG = bool(os.environ.get("GULPIO_PROXY_DEBUG"))


@dataclass
class Faults:
    latency_ms: float = 0.0
    status: int = 0
    count: int = 0
    reset_mid_body: int = 0
    truncate_body: int = 0
    flip_byte: int = 0
    flip_random: bool = False
    slow_body: int = 0
    slow_ms: float = 3000.0
    ignore_range: int = 0
    only: str = ""


@dataclass
class Counters:
    requests: int = 0
    body_bytes: int = 0
    faults: int = 0
    log: list = field(default_factory=list)


_BODY_FAULTS = ("reset_mid_body", "truncate_body", "slow_body", "flip_byte")


def _matches(only: str, method: str, target: str) -> bool:
    if not only:
        return True
    if only == "listing":
        return method == "PROPFIND" or "list-type=" in target
    return only in target.split("?")[0]


class FaultProxy:
    def __init__(self, upstream: str, objects=None, *, atomic_conditional_puts: bool = False):
        """``objects``: ``target -> bytes`` (the whole object a ``GET`` of ``target`` asks
        for), for ``ignore_range`` in front of a server whose requests are signed."""
        if not upstream.startswith("http://"):
            raise ValueError("the proxy forwards plain http only")
        host, _, port = upstream[len("http://") :].rstrip("/").partition(":")
        self.upstream = (host, int(port or 80))
        self.objects = objects
        self._faults = Faults()
        self._flips: dict[str, tuple[int, int]] = {}
        self._counters = Counters()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.atomic_conditional_puts = atomic_conditional_puts
        self._conditional: asyncio.Lock | None = None

    # -- control -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_faults(self, **faults) -> None:
        """Replaces the fault plan (keys of :class:`Faults`; unspecified ones are off)."""
        with self._lock:
            self._faults = Faults(**faults)
            self._flips.clear()

    def _flip_at(self, target: str, size: int) -> int:
        # Random start, then the next byte on each copy of the same object: two random
        # picks can coincide (1 in `size`), and two copies damaged alike read as damage at
        # rest, which is a different test.
        with self._lock:
            key = target.split("?")[0]
            first, n = self._flips.get(key, (random.randrange(size), 0))
            self._flips[key] = (first, n + 1)
        return (first + n) % size

    def reset_counters(self) -> None:
        with self._lock:
            self._counters = Counters()

    @property
    def requests(self) -> int:
        return self._counters.requests

    @property
    def body_bytes(self) -> int:
        return self._counters.body_bytes

    def faults_injected(self) -> int:
        return self._counters.faults

    def log(self) -> list:
        """``(method, target, what)`` of every request, ``what`` naming an injected fault."""
        with self._lock:
            return list(self._counters.log)

    def start(self) -> FaultProxy:
        ready = threading.Event()

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            self._server = loop.run_until_complete(
                asyncio.start_server(self._serve, "127.0.0.1", 0)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            self._server.close()
            loop.run_until_complete(self._server.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fault proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return

        async def shutdown():
            # Open client connections are cancelled, not abandoned with the loop.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- the plan ------------------------------------------------------------------------------
    def _take(self, method: str, target: str, headers: dict) -> str | None:
        """The fault for this request (consuming it from the plan), or None."""
        with self._lock:
            f = self._faults
            if not _matches(f.only, method, target):
                return None
            if f.status and f.count > 0:
                f.count -= 1
                return f"status:{f.status}"
            if method == "GET" and "range" in headers and f.ignore_range > 0:
                f.ignore_range -= 1
                return "ignore_range"
            if method in ("GET", "PROPFIND"):
                for name in _BODY_FAULTS:
                    if getattr(f, name) > 0:
                        setattr(f, name, getattr(f, name) - 1)
                        return name
            return None

    def _untake(self, fault: str) -> None:
        """Gives back a fault that found nothing to damage (a response without a body)."""
        with self._lock:
            setattr(self._faults, fault, getattr(self._faults, fault) + 1)

    def _count(self, method: str, target: str, what: str | None, body: int) -> None:
        with self._lock:
            self._counters.requests += 1
            self._counters.body_bytes += body
            self._counters.faults += what is not None
            self._counters.log.append((method, target, what))

    # -- HTTP plumbing -------------------------------------------------------------------------
    async def _hold_if_conditional(self, headers) -> bool:
        """Waits for the conditional-request lock when this request needs it."""
        if not (self.atomic_conditional_puts and "if-none-match" in headers):
            return False
        if self._conditional is None:
            self._conditional = asyncio.Lock()
        await self._conditional.acquire()
        return True

    def _release(self, held: bool) -> bool:
        if held and self._conditional is not None:
            self._conditional.release()
        return False

    async def _serve(self, creader, cwriter):
        up = None
        held = False
        try:
            while True:
                head = await _read_head(creader)
                if head is None:
                    break
                first, headers = head
                method, target = first.split(" ")[:2]
                body = await _read_body(creader, headers)
                delay = self._faults.latency_ms
                if delay:
                    await asyncio.sleep(delay / 1000)
                fault = self._take(method, target, headers)
                if fault == "ignore_range" and self.objects is None:
                    del headers["range"]
                    headers["__order__"] = [
                        (k, v) for k, v in headers["__order__"] if k.lower() != "range"
                    ]
                if fault and fault.startswith("status:"):
                    code = int(fault.split(":")[1])
                    reason = {503: "Service Unavailable", 429: "Too Many Requests"}.get(code, "X")
                    msg = b"<Error><Code>SlowDown</Code></Error>"
                    # Counted before the answer leaves: a client may act on it at once.
                    self._count(method, target, fault, 0)
                    cwriter.write(
                        f"HTTP/1.1 {code} {reason}\r\nContent-Length: {len(msg)}\r\n"
                        f"Retry-After: 0\r\nContent-Type: application/xml\r\n\r\n".encode()
                        + msg
                    )
                    await cwriter.drain()
                    continue
                if up is None:
                    up = await asyncio.open_connection(*self.upstream)
                ureader, uwriter = up
                held = await self._hold_if_conditional(headers)
                uwriter.write(_encode_head(first, headers) + body)
                await uwriter.drain()
                _quickack(uwriter)
                rhead = await _read_head(ureader)
                if rhead is None:
                    break
                status_line, rheaders = rhead
                if _DEBUG:
                    print("proxy:", first, "->", status_line, rheaders["__order__"], flush=True)
                rbody = await _read_body(ureader, rheaders, response_to=method, ack=uwriter)
                held = self._release(held)
                if rheaders.get("connection", "").lower() == "close":
                    uwriter.close()
                    up = None
                if fault == "ignore_range":
                    if self.objects is not None and status_line.split(" ")[1] == "206":
                        rbody = self.objects(target)
                        status_line = status_line.split(" ")[0] + " 200 OK"
                        rheaders["__order__"] = [
                            (k, v) for k, v in rheaders["__order__"] if k.lower() != "content-range"
                        ]
                        rheaders["__length__"] = str(len(rbody))
                elif fault and rbody:
                    half = len(rbody) // 2
                    if fault == "flip_byte":
                        rbody = bytearray(rbody)
                        at = self._flip_at(target, len(rbody)) if self._faults.flip_random else half
                        rbody[at] ^= 0xFF
                        rbody = bytes(rbody)
                    elif fault == "slow_body":
                        self._count(method, target, fault, len(rbody))
                        cwriter.write(_encode_head(status_line, rheaders) + rbody[:half])
                        await cwriter.drain()
                        await asyncio.sleep(self._faults.slow_ms / 1000)
                        cwriter.write(rbody[half:])
                        await cwriter.drain()
                        continue
                    else:
                        self._count(method, target, fault, half)
                        cwriter.write(_encode_head(status_line, rheaders) + rbody[:half])
                        await cwriter.drain()
                        if fault == "reset_mid_body":
                            sock = cwriter.get_extra_info("socket")
                            sock.setsockopt(
                                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                            )
                        cwriter.close()
                        return
                elif fault and not fault.startswith("status:"):
                    self._untake(fault)  # nothing to damage: the fault stays unused
                    fault = None
                self._count(method, target, fault, len(rbody))
                cwriter.write(_encode_head(status_line, rheaders) + rbody)
                await cwriter.drain()
        except (ConnectionError, asyncio.IncompleteReadError, OSError, asyncio.CancelledError):
            pass
        finally:
            self._release(held)
            if up is not None:
                up[1].close()
            cwriter.close()


def _quickack(writer) -> None:
    """ACK the upstream's next segments at once. s3s-fs (hyper without TCP_NODELAY) sends a
    response's head and body as two writes, and Nagle holds the body until the head is ACKed:
    with delayed ACKs that is a 40 ms stall per request that no real object store has. The
    flag is not sticky, so it is set again before every response."""
    sock = writer.get_extra_info("socket")
    if sock is not None and hasattr(socket, "TCP_QUICKACK"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)


async def _read_head(reader):
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = raw.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    order = []
    for line in lines[1:]:
        if not line:
            continue
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
        order.append((k.strip(), v.strip()))
    headers["__order__"] = order  # type: ignore[assignment]
    return lines[0], headers


def _encode_head(first: str, headers) -> bytes:
    out = [first]
    for k, v in headers["__order__"]:
        if k.lower() == "transfer-encoding":
            continue  # bodies are forwarded de-chunked, with their length
        if k.lower() == "content-length":
            continue
        out.append(f"{k}: {v}")
    length = headers.get("__length__")
    if length is not None:
        out.append(f"Content-Length: {length}")
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")


async def _read_body(reader, headers, response_to: str | None = None, ack=None) -> bytes:
    if response_to == "HEAD":
        headers["__length__"] = headers.get("content-length")
        return b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    else:
        n = int(headers.get("content-length", "0") or 0)
        if ack is None:
            body = await reader.readexactly(n) if n else b""
        else:
            parts, left = [], n
            while left:
                _quickack(ack)
                part = await reader.read(min(left, 1 << 20))
                if not part:
                    raise asyncio.IncompleteReadError(b"".join(parts), n)
                parts.append(part)
                left -= len(part)
            body = b"".join(parts)
    if response_to is None and "content-length" not in headers and not body:
        headers["__length__"] = None
    else:
        headers["__length__"] = str(len(body))
    return body


class FaultProxyProcess:
    """A :class:`FaultProxy` in a child process, driven over its stdin/stdout: the same
    ``url``, ``set_faults``, ``reset_counters``, ``requests``, ``body_bytes``, ``log`` and
    ``start``/``stop``."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self._proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _ask(self, **command) -> dict:
        if self._proc is None or self._proc.stdin is None or self._proc.stdout is None:
            raise RuntimeError("the proxy process is not running")
        self._proc.stdin.write(json.dumps(command) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the proxy process exited")
        return json.loads(line)

    def start(self) -> FaultProxyProcess:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "servers.proxy", self.upstream],
            cwd=here,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        hello = self._proc.stdout.readline()
        if not hello:
            raise RuntimeError("the proxy process did not start")
        self.port = json.loads(hello)["port"]
        return self

    def stop(self) -> None:
        if self._proc is None:
            return
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            self._proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait(10)
        self._proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def set_faults(self, **faults) -> None:
        self._ask(op="faults", **faults)

    def reset_counters(self) -> None:
        self._ask(op="reset")

    @property
    def requests(self) -> int:
        return self._ask(op="counters")["requests"]

    @property
    def body_bytes(self) -> int:
        return self._ask(op="counters")["body_bytes"]

    def log(self) -> list:
        """``(method, target, what)`` of every request since the last reset, as
        :meth:`FaultProxy.log`."""
        return [tuple(entry) for entry in self._ask(op="log")["log"]]


def _serve_commands(upstream: str) -> None:
    """The child of :class:`FaultProxyProcess`: one JSON command per stdin line, one JSON
    answer per stdout line; stops at the end of stdin."""
    with FaultProxy(upstream) as proxy:
        print(json.dumps({"port": proxy.port}), flush=True)
        for line in sys.stdin:
            command = json.loads(line)
            op = command.pop("op")
            answer: dict = {}
            if op == "faults":
                proxy.set_faults(**command)
            elif op == "reset":
                proxy.reset_counters()
            elif op == "counters":
                answer = {"requests": proxy.requests, "body_bytes": proxy.body_bytes}
            elif op == "log":
                answer = {"log": proxy.log()}
            print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    _serve_commands(sys.argv[1])
