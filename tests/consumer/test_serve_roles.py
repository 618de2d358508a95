"""`python -m consumer serve` by role and by security setting, as an operator runs it: real
processes on real databases. HTTP ingestion alone needs no broker; an API replica reads and
refuses every write; a Kafka member whose broker is away still serves the API (ingestion is
reported, not a reason to be unready); writes beyond loopback need a token, a placeholder
token is refused, tokens never come from the command line; TLS over a self-signed certificate."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.broker import free_port
from tests.support.events import batch_write, table
from tests.support.paths import PROJECT_ROOT

TOKEN = "0f4c2a9e7b1d6c3a8e5f2b9d4a7c1e6b"
START_LIMIT_SECONDS = 60.0


def _event() -> dict:
    return batch_write("app.insert_into.o", [table("raw", "orders", ["id"])], table("mart", "o", ["id"]))[0]


def _serve_command(store_url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "consumer", "serve", "--store", store_url, *args]


@contextmanager
def serving(
    store_url: str, *args: str, env: dict[str, str] | None = None, scheme: str = "http", **client: object
) -> Iterator[str]:
    """`serve` in a process of its own on a free port; yields its base URL once /healthz answers."""
    port = free_port()
    command = _serve_command(store_url, "--port", str(port), *args)
    # nothing from the test runner's environment decides the role or the tokens
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")} | {
        "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",  # no broker there
        **(env or {}),
    }
    process = subprocess.Popen(
        command, cwd=PROJECT_ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    url = f"{scheme}://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_LIMIT_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"serve exited with {process.returncode}: {process.stderr.read() if process.stderr else ''}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2, **client).status_code == 200:  # type: ignore[arg-type]
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not answer /healthz in time"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def _refused(store_url: str, *args: str, env: dict[str, str] | None = None) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")} | (env or {})
    result = subprocess.run(
        _serve_command(store_url, "--port", str(free_port()), *args),
        cwd=PROJECT_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    return result.stderr


def test_http_role_ingests_over_http_with_no_broker(store_url) -> None:
    with serving(store_url, "--role", "http", env={"LINEAGE_API_TOKEN": TOKEN}) as url:
        ready = httpx.get(f"{url}/readyz", timeout=10)
        assert ready.status_code == 200 and ready.json()["role"] == "http" and "broker" not in ready.json()
        assert httpx.post(f"{url}/api/v1/lineage", json=_event(), timeout=10).status_code == 401
        posted = httpx.post(f"{url}/api/v1/lineage", json=_event(), headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert posted.status_code == 201
        jobs = httpx.get(f"{url}/api/v1/namespaces/spark/jobs", timeout=10).json()["jobs"]
        assert [job["name"] for job in jobs] == ["app.insert_into.o"]


def test_api_role_reads_and_refuses_every_write(store_url) -> None:
    with serving(store_url, "--role", "http", env={"LINEAGE_API_TOKEN": TOKEN}) as writer:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{writer}/api/v1/lineage", json=_event(), headers=headers, timeout=10).status_code == 201
        # beside the writer, on an address of every interface: it writes nothing, so it needs no token
        with serving(store_url, "--role", "api", "--host", "0.0.0.0") as replica:
            ready = httpx.get(f"{replica}/readyz", timeout=10)
            assert ready.status_code == 200 and ready.json() == {"ready": True, "role": "api", "store": "reachable"}
            assert [j["name"] for j in httpx.get(f"{replica}/api/v1/jobs", timeout=10).json()["jobs"]] == ["app.insert_into.o"]
            for method, path in (
                ("POST", "/api/v1/lineage"),
                ("PUT", "/api/v1/tags/pii"),
                ("DELETE", "/api/v1/lineage-store/jobs/spark/app.insert_into.o/table-lineage"),
            ):
                refused = httpx.request(method, f"{replica}{path}", json=_event(), headers=headers, timeout=10)
                assert refused.status_code == 403 and "read-only" in refused.json()["message"], (method, path)


def test_a_kafka_member_without_its_broker_serves_and_reports_ingestion(sqlite_url) -> None:
    with serving(sqlite_url, "--role", "kafka") as url:
        ready = httpx.get(f"{url}/readyz", timeout=10)
        body = ready.json()
        assert ready.status_code == 200 and body["role"] == "kafka" and body["store"] == "reachable"
        assert body["broker"] == "unreachable" and body["consuming"] is False and body["partitions"] == []
        assert httpx.get(f"{url}/api/v1/namespaces", timeout=10).status_code == 200


def test_writes_beyond_loopback_need_a_token(sqlite_url, tmp_path: Path) -> None:
    message = _refused(sqlite_url, "--role", "http", "--host", "0.0.0.0")
    assert "without a write token" in message and "--insecure-no-token" in message
    with serving(sqlite_url, "--role", "http", "--host", "0.0.0.0", "--insecure-no-token") as url:
        assert httpx.post(f"{url}/api/v1/lineage", json=_event(), timeout=10).status_code == 201
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with serving(sqlite_url, "--role", "http", "--host", "0.0.0.0", "--token-file", str(token_file)) as url:
        assert httpx.post(f"{url}/api/v1/lineage", json=_event(), timeout=10).status_code == 401
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{url}/api/v1/lineage", json=_event(), headers=headers, timeout=10).status_code == 201


@pytest.mark.parametrize("placeholder", ["CHANGE-ME", "changeme-changeme", "replace-me", "tiny-9f3"])
def test_placeholder_tokens_are_refused_without_echoing_them(sqlite_url, placeholder: str) -> None:
    message = _refused(sqlite_url, "--role", "http", env={"LINEAGE_API_TOKEN": placeholder})
    assert "write token" in message and placeholder not in message


def test_no_token_on_the_command_line(sqlite_url) -> None:
    message = _refused(sqlite_url, "--role", "http", "--token", TOKEN)
    assert "unrecognized arguments: --token" in message


def test_a_missing_token_file_is_one_line(sqlite_url, tmp_path: Path) -> None:
    message = _refused(sqlite_url, "--role", "http", "--token-file", str(tmp_path / "absent"))
    assert message.startswith("error: cannot read the secret file") and message.count("\n") == 1


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_with_a_self_signed_certificate(sqlite_url, tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    trusting = ssl.create_default_context(cafile=str(cert))
    args = ("--role", "http", "--ssl-certfile", str(cert), "--ssl-keyfile", str(key))
    with serving(sqlite_url, *args, env={"LINEAGE_API_TOKEN": TOKEN}, scheme="https", verify=trusting) as url:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        posted = httpx.post(f"{url}/api/v1/lineage", json=_event(), headers=headers, verify=trusting, timeout=10)
        assert posted.status_code == 201
        assert httpx.get(f"{url}/api/v1/jobs", verify=trusting, timeout=10).json()["jobs"]
        with pytest.raises(httpx.HTTPError):  # the certificate is checked: not one this client trusts
            httpx.get(f"{url}/healthz", timeout=10)
        with pytest.raises(httpx.HTTPError):  # no plain HTTP on that port
            httpx.get(url.replace("https://", "http://") + "/api/v1/jobs", timeout=10).raise_for_status()


def test_sslmode_in_the_store_url_reaches_postgresql(postgres_url) -> None:
    """libpq's parameters pass through the store URL: this server has no TLS, so `require` must fail
    (and say why, without the password) while `disable` works."""
    refused = _refused(f"{postgres_url}&sslmode=require", "--role", "api")
    assert refused.startswith("error: cannot open the lineage store") and "SSL" in refused
    with serving(f"{postgres_url}&sslmode=disable", "--role", "http", env={"LINEAGE_API_TOKEN": TOKEN}) as url:
        assert httpx.get(f"{url}/readyz", timeout=10).json()["store"] == "reachable"


def test_connections_beyond_the_maximum_are_answered_503(sqlite_url) -> None:
    """Idle or slow connections (a header or body trickling in) cannot pile up without bound."""
    with serving(sqlite_url, "--role", "http", "--max-connections", "3") as url:
        address = urlsplit(url)
        idle = [socket.create_connection((address.hostname, address.port), timeout=10) for _ in range(3)]
        try:
            time.sleep(0.2)  # the server has accepted them
            assert httpx.get(f"{url}/api/v1/namespaces", timeout=10).status_code == 503
        finally:
            for connection in idle:
                connection.close()
        answered = 0
        deadline = time.monotonic() + 10
        while answered != 200 and time.monotonic() < deadline:
            answered = httpx.get(f"{url}/api/v1/namespaces", timeout=10).status_code
        assert answered == 200
