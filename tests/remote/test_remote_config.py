"""Configuration of remote datasets that must never panic, hang or leak: control characters
and odd values in every storage option and environment variable the remote layer reads (a
typed ``RemoteConfigError`` naming the setting, never its value), credentials in URLs
(refused, and never printed: reprs, messages, the command line), and thread counts of the
I/O runtime."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import arrays_dataset

import gulpio_rs
from gulpio_rs import GulpDirectory
from gulpio_rs.errors import GulpError, RemoteConfigError

# Every key object_store 0.14 accepts for each cloud (its `FromStr` of the config keys), and
# the client options every store takes; gulpio-rs' own keys are added below.
S3_KEYS = """aws_access_key_id access_key_id aws_secret_access_key secret_access_key
aws_default_region default_region aws_region region aws_bucket aws_bucket_name bucket_name
bucket aws_endpoint_url aws_endpoint endpoint_url endpoint aws_endpoint_url_s3
aws_session_token aws_token session_token token aws_virtual_hosted_style_request
virtual_hosted_style_request aws_s3_express s3_express aws_imdsv1_fallback imdsv1_fallback
aws_metadata_endpoint metadata_endpoint aws_unsigned_payload unsigned_payload
aws_checksum_algorithm checksum_algorithm aws_container_credentials_relative_uri
container_credentials_relative_uri aws_container_credentials_full_uri
container_credentials_full_uri aws_container_authorization_token_file
container_authorization_token_file aws_web_identity_token_file web_identity_token_file
aws_role_arn role_arn aws_role_session_name role_session_name aws_endpoint_url_sts
endpoint_url_sts aws_skip_signature skip_signature aws_copy_if_not_exists
copy_if_not_exists aws_conditional_put conditional_put aws_disable_tagging disable_tagging
aws_disable_bulk_delete disable_bulk_delete aws_request_payer request_payer aws_allow_http
aws_server_side_encryption server_side_encryption aws_sse_kms_key_id sse_kms_key_id
aws_sse_bucket_key_enabled sse_bucket_key_enabled aws_sse_customer_key_base64
sse_customer_key_base64""".split()
CLIENT_KEYS = """allow_http allow_invalid_certificates connect_timeout default_content_type
http1_only http2_only http2_keep_alive_interval http2_keep_alive_timeout
http2_keep_alive_while_idle http2_max_frame_size pool_idle_timeout pool_max_idle_per_host
proxy_url proxy_ca_certificate proxy_excludes randomize_addresses read_timeout timeout
user_agent""".split()
OURS = """concurrency max_retries retry_timeout readahead aws_profile cache_dir cache_size
cache_block_size""".split()
GCS_KEYS = """google_service_account service_account google_service_account_path
google_service_account_key google_bucket google_base_url google_application_credentials
google_bearer_token google_skip_signature""".split()
AZURE_KEYS = """azure_storage_account_key azure_storage_account_name azure_client_id
azure_client_secret azure_tenant_id azure_authority_host azure_storage_sas_key
azure_storage_token azure_storage_use_emulator azure_endpoint azure_msi_endpoint
azure_object_id azure_msi_resource_id azure_federated_token_file azure_use_fabric_endpoint
azure_skip_signature azure_fabric_token_service_url azure_fabric_session_token
azure_storage_encryption_key azure_allow_http""".split()

CONTROL = ["\r", "\n", "\x00", "\x1b[31m", "\t", "\x7f", "\x0b"]
SECRET = "sUpErSeCrEt-9f8e7d"


def _no_panic(call, *args, **kwargs):
    """Runs ``call``; any exception is returned, but a PanicException (a BaseException that
    ``except Exception`` does not catch) fails the test, and so does a panic the I/O layer's
    backstop caught (an internal error): the input that caused it must be refused."""
    try:
        call(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - PanicException is what is looked for
        if type(e).__name__ == "PanicException":
            pytest.fail(f"panic crossed into Python: {e}")
        if "panicked" in str(e):
            pytest.fail(f"a panic reached the backstop: {e}")
        if not isinstance(e, Exception):
            raise
        return e
    return None


@pytest.mark.parametrize("char", CONTROL, ids=[f"U+{ord(c[0]):04X}" for c in CONTROL])
def test_a_control_character_in_the_region_is_a_config_error(s3_server, char):
    options = dict(s3_server.storage_options(), aws_region=f"us-east-1{char}")
    with pytest.raises(RemoteConfigError, match="aws_region") as info:
        GulpDirectory("s3://bucket/ds", storage_options=options)
    assert "U+" in str(info.value)


def test_a_control_character_in_aws_region_env_is_a_config_error(s3_server, monkeypatch):
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_REGION", "us-east-1\r")
    with pytest.raises(RemoteConfigError, match="AWS_REGION"):
        GulpDirectory("s3://bucket/ds")


@pytest.mark.parametrize(
    ("scheme", "keys"),
    [
        ("s3://bucket/ds", S3_KEYS + CLIENT_KEYS + ["aws_" + k for k in CLIENT_KEYS] + OURS),
        ("gs://bucket/ds", GCS_KEYS + CLIENT_KEYS),
        ("az://container/ds", AZURE_KEYS + CLIENT_KEYS),
        ("http://127.0.0.1:9/ds", CLIENT_KEYS),
    ],
    ids=["s3", "gs", "az", "http"],
)
def test_control_characters_in_every_option_are_named_config_errors(scheme, keys):
    """Every key, every control character: a RemoteConfigError that names the key and never
    shows the value (which may be a secret)."""
    for key in keys:
        for char in CONTROL:
            if char in "\t\n\r" and key == "google_service_account_key":
                continue  # a JSON document: line breaks are fine (and the JSON is invalid)
            options = {"timeout": "1", "max_retries": "0", key: f"{SECRET}{char}x"}
            e = _no_panic(GulpDirectory, scheme, storage_options=options)
            assert isinstance(e, RemoteConfigError), (key, char, e)
            assert key in str(e), (key, str(e))
            assert SECRET not in str(e), (key, str(e))


@pytest.mark.parametrize(
    ("scheme", "prefix", "keys"),
    [
        ("s3://bucket/ds", "AWS_", S3_KEYS),
        ("gs://bucket/ds", "GOOGLE_", GCS_KEYS),
        ("az://container/ds", "AZURE_", AZURE_KEYS),
    ],
    ids=["s3", "gs", "az"],
)
def test_control_characters_in_every_environment_variable_are_named(
    scheme, prefix, keys, monkeypatch
):
    """The variables object_store reads (``AWS_*`` and friends whose name is a key, plus the
    credential providers' own): in a child, so no variable leaks into other tests."""
    # (A service account key is a JSON document, where line breaks are fine.)
    names = sorted(
        {k.upper() for k in keys if k.upper().startswith(prefix) and not k.endswith("account_key")}
    )
    names += {"gs": ["SERVICE_ACCOUNT", "GCE_METADATA_HOST"], "az": ["IDENTITY_HEADER"]}.get(
        scheme[:2], []
    )
    script = f"""
import os, sys
from gulpio_rs import GulpDirectory
from gulpio_rs.adapters import AbstractDatasetAdapter
from gulpio_rs.errors import RemoteConfigError
bad = []
for name in {names!r}:
    os.environ[name] = {SECRET!r} + "\\r"
    try:
        GulpDirectory({scheme!r}, storage_options={{"timeout": "1", "max_retries": "0"}})
        bad.append((name, "no error"))
    except RemoteConfigError as e:
        if name not in str(e) or {SECRET!r} in str(e):
            bad.append((name, str(e)))
    except BaseException as e:
        bad.append((name, type(e).__name__ + ": " + str(e)))
    del os.environ[name]
print(bad)
"""
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RUST_BACKTRACE": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout


@pytest.mark.parametrize(
    "value",
    ["é-region", " ", "", "x" * 10_000, "us-east-1 ", "\u202e", "\ud7ff", "a b"],
    ids=["non-ascii", "space", "empty", "long", "trailing-space", "bidi", "hangul", "inner"],
)
def test_odd_values_in_every_setting_never_panic(s3_server, value):
    """Odd but printable values reach the request stack: an error or a listing, no panic.
    GCS and Azure get static credentials and a closed local endpoint, so nothing leaves the
    machine."""
    closed = "http://127.0.0.1:9"
    stores = [
        ("s3://bucket/ds", s3_server.storage_options(), S3_KEYS + CLIENT_KEYS),
        (
            "gs://bucket/ds",
            {"google_base_url": closed, "google_bearer_token": "t"},
            GCS_KEYS + CLIENT_KEYS,
        ),
        (
            "az://container/ds",
            {
                "azure_storage_account_name": "acct",
                "azure_endpoint": closed,
                "azure_allow_http": "true",
                "azure_storage_token": "t",
            },
            AZURE_KEYS + CLIENT_KEYS,
        ),
    ]
    for url, base, keys in stores:
        for key in keys:
            options = {**base, "timeout": "2", "max_retries": "0", key: value}
            _no_panic(GulpDirectory, url, storage_options=options)


# -- credentials in URLs -------------------------------------------------------------------------


URLS = [
    f"s3://AKIDEXAMPLE:{SECRET}@bucket/ds",
    f"s3://{SECRET}@bucket/ds",
    f"https://user:{SECRET}@example.com/ds",
    f"https://acct.blob.core.windows.net/c/ds?sv=2022&sig={SECRET}",
    f"https://b.s3.amazonaws.com/ds?X-Amz-Signature={SECRET}&X-Amz-Credential=AK",
    f"az://container/ds?sig={SECRET}",
]


@pytest.mark.parametrize("url", URLS)
def test_credentials_in_urls_are_refused_without_being_printed(url):
    e = _no_panic(GulpDirectory, url)
    assert isinstance(e, RemoteConfigError), e
    assert SECRET not in str(e) and SECRET not in repr(e), str(e)
    assert "refused" in str(e)
    assert SECRET not in str(e.path)


def test_redaction_is_one_rule_for_every_url_form():
    redact = gulpio_rs._native.redact_url
    for url in URLS:
        assert SECRET not in redact(url), redact(url)
        assert SECRET not in redact(f"error in {url}: more"), redact(url)
    assert redact("abfss://container@acct.dfs.core.windows.net/ds") == (
        "abfss://container@acct.dfs.core.windows.net/ds"
    )
    assert redact("/local/dir") == "/local/dir"


def test_chunk_repr_hides_credentials_in_urls():
    chunk = gulpio_rs.GulpChunk(
        f"s3://K:{SECRET}@b/ds/data_0.gulp", f"s3://K:{SECRET}@b/ds/meta_0.gmeta"
    )
    assert SECRET not in repr(chunk)


def test_storage_options_repr_hides_every_secret_key(s3_server):
    options = dict(
        s3_server.storage_options(),
        aws_session_token=SECRET + "1",
        aws_sse_customer_key_base64=SECRET + "2",
        azure_storage_access_key=SECRET + "3",
        azure_storage_master_key=SECRET + "4",
    )
    shown = repr(gulpio_rs.directory.StorageOptions(options))
    assert SECRET not in shown and s3_server.secret_key not in shown, shown
    assert s3_server.access_key in shown  # identifiers are not secrets


@pytest.mark.parametrize("command", ["info", "ls", "check", "repair", "index"])
def test_cli_never_prints_credentials_from_urls(command, capsys):
    from gulpio_rs.cli import main

    code = main([command, URLS[0]])
    out, err = capsys.readouterr()
    assert code != 0
    assert SECRET not in out + err, out + err


def test_ingest_refuses_credentials_in_urls_without_printing_them(tmp_path, capsys):
    e = _no_panic(
        gulpio_rs.GulpIngestor(
            arrays_dataset(1, fill=0),
            URLS[0],
            1,
            1,
            staging_dir=str(tmp_path / "stage"),
            progress=False,
        )
    )
    out, err = capsys.readouterr()
    assert isinstance(e, RemoteConfigError), e
    assert SECRET not in str(e) + out + err, str(e) + out + err


def test_datasets_refuse_credentials_in_urls():
    torch_datasets = pytest.importorskip("gulpio_rs.torch")
    e = _no_panic(torch_datasets.GulpVideoDataset, URLS[0], frames=4)
    assert isinstance(e, GulpError) and SECRET not in str(e), e


# -- I/O threads -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["100000", "-3", "0", "many"])
def test_io_threads_are_validated(s3_server, value):
    """GULPIO_IO_THREADS is read when the process's I/O runtime starts: in a child."""
    script = f"""
from gulpio_rs import GulpDirectory
from gulpio_rs.adapters import AbstractDatasetAdapter
try:
    GulpDirectory("s3://bucket/ds", storage_options={s3_server.storage_options()!r})
    print("opened")
except ValueError as e:
    print("ValueError", e)
"""
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GULPIO_IO_THREADS": value},
    )
    assert proc.stdout.startswith("ValueError"), proc.stdout + proc.stderr[-1000:]
    assert "GULPIO_IO_THREADS" in proc.stdout
