"""Real servers for the remote-storage tests and benchmarks, run as processes on 127.0.0.1:
an S3-compatible server (``s3s-fs`` from crates.io, built by ``.ci/install-test-servers``), a
WebDAV/HTTP server with Range support (``wsgidav`` from PyPI), and a fault-injecting proxy
(:mod:`servers.proxy`). Each is a plain class with ``start()``/``stop()``, so benchmarks use
them outside pytest."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from .proxy import FaultProxy, FaultProxyProcess

__all__ = ["FaultProxy", "FaultProxyProcess", "HttpServer", "S3Server", "s3_binary"]

INSTALL_HINT = "run .ci/install-test-servers (it builds s3s-fs with cargo)"


def s3_binary() -> str | None:
    """The S3 server binary: ``$GULPIO_S3_SERVER``, on PATH, or where the install script
    puts it."""
    for candidate in (
        os.environ.get("GULPIO_S3_SERVER"),
        shutil.which("s3s-fs"),
        str(Path.home() / ".cache" / "gulpio-ci" / "bin" / "s3s-fs"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class S3Server:
    """An S3-compatible server over a temporary folder, with random credentials."""

    region = "us-east-1"

    def __init__(self, binary: str | None = None):
        self.binary = binary or s3_binary()
        if self.binary is None:
            raise FileNotFoundError(f"no S3 test server binary: {INSTALL_HINT}")
        self.access_key = "AK" + secrets.token_hex(8).upper()
        self.secret_key = "sk" + secrets.token_hex(20)
        self.root = Path(tempfile.mkdtemp(prefix="gulpio-s3-"))
        self.port = 0
        self._proc: subprocess.Popen | None = None
        self._buckets = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        self.port = _free_port()
        self._proc = subprocess.Popen(
            [
                self.binary,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                f"--access-key={self.access_key}",
                f"--secret-key={self.secret_key}",
                str(self.root),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_listening(self.port, self._proc, "the S3 server")
        return self

    def stop(self) -> None:
        _stop(self._proc)
        self._proc = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def client(self):
        """A boto3 S3 client (an ordinary S3 client, not gulpio-rs)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
        )

    def make_bucket(self) -> str:
        self._buckets += 1
        name = f"bucket-{os.getpid()}-{self._buckets}-{secrets.token_hex(3)}"
        self.client().create_bucket(Bucket=name)
        return name

    def upload_dir(self, local_dir, bucket: str, prefix: str) -> list[str]:
        """Uploads every file directly in ``local_dir`` under ``prefix/``; returns the keys."""
        client = self.client()
        keys = []
        for entry in sorted(Path(local_dir).iterdir()):
            if entry.is_file():
                key = f"{prefix.strip('/')}/{entry.name}" if prefix else entry.name
                client.upload_file(str(entry), bucket, key)
                keys.append(key)
        return keys

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out = []
        for page in (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        ):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a client at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def storage_options(self, endpoint: str | None = None) -> dict[str, str]:
        """The same as ``storage_options`` (the keys polars and object_store accept)."""
        return {
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "aws_region": self.region,
            "aws_endpoint": endpoint or self.endpoint,
            "aws_allow_http": "true",
        }


class HttpServer:
    """A WebDAV server (wsgidav, read-only use) over ``root``: ``GET`` with ``Range``, ``HEAD``
    and ``PROPFIND`` listings, as object_store's HTTP store needs. With ``tls=True`` it serves
    HTTPS with a certificate for 127.0.0.1 signed by a throwaway CA (both made by ``openssl``),
    whose PEM file is :attr:`certificate`: clients trust it through ``SSL_CERT_FILE``."""

    def __init__(self, root, *, tls: bool = False):
        self.root = Path(root)
        self.tls = tls
        self.port = 0
        self.certificate: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._dir: tempfile.TemporaryDirectory | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _tls_config(self) -> Path:
        """A certificate and key for 127.0.0.1, and a wsgidav configuration that serves them
        (its command line has no TLS options)."""
        self._dir = tempfile.TemporaryDirectory(prefix="gulpio-https-")
        where = Path(self._dir.name)
        ca, ca_key = where / "ca.pem", where / "ca-key.pem"
        cert, key, request = where / "cert.pem", where / "key.pem", where / "cert.csr"
        extensions = where / "ext.cnf"
        extensions.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        # A CA and a server certificate it signs: TLS clients refuse a CA certificate used
        # as the server's own (webpki: CaUsedAsEndEntity).
        for command in (
            ["req", "-x509", *ec, "-days", "1", "-subj", "/CN=gulpio test CA",
             "-keyout", ca_key, "-out", ca],
            ["req", *ec, "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", request],
            ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-days", "1", "-extfile", extensions, "-out", cert],
        ):  # fmt: skip
            subprocess.run(["openssl", *map(str, command)], check=True, capture_output=True)
        self.certificate = ca
        config = where / "wsgidav.json"
        config.write_text(
            json.dumps(
                {
                    "host": "127.0.0.1",
                    "port": self.port,
                    "provider_mapping": {"/": str(self.root)},
                    "simple_dc": {"user_mapping": {"*": True}},
                    "ssl_certificate": str(cert),
                    "ssl_private_key": str(key),
                    "ssl_adapter": "builtin",
                    "verbose": 1,
                }
            )
        )
        return config

    def start(self) -> HttpServer:
        self.port = _free_port()
        if self.tls:
            args = ["--config", str(self._tls_config())]
        else:
            args = ["--host", "127.0.0.1", "--port", str(self.port), "--root", str(self.root)]
            args += ["--auth", "anonymous", "--no-config"]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "wsgidav.server.server_cli", *args, "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_listening(self.port, self._proc, "the HTTP server")
        # The socket may accept before the app is ready to answer.
        context = ssl.create_default_context(cafile=self.certificate) if self.tls else None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/", timeout=1, context=context).close()
                break
            except OSError:
                time.sleep(0.05)
        return self

    def stop(self) -> None:
        _stop(self._proc)
        self._proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
