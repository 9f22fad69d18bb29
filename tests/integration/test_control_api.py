"""The control API as a network-facing service (issue 24): the token, the request limits, TLS
with client certificates, and a commit on demand. Real instances (the synthetic source) over
real sockets; raw HTTP where a well-behaved client would never send what is tested."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_cdc.engine.errors import ApiError, ConfigError
from airflow_cdc.engine.server import api as api_module
from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.client import EngineClient, tls_context
from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import ensure_api_token
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.tls import CertificateAuthority

pytestmark = pytest.mark.integration


def synthetic(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": "api-test",
        "connector.class": "synthetic",
        "topic.prefix": "syn",
        "synthetic.rate": 500,
        "state.dir": str(tmp_path / "state"),
        "sink.type": "changelog",
        **extra,
    }


class Running:
    """An instance run in this process (its API on its own thread), stopped on the way out."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.instance = EngineInstance(config)
        self.thread = threading.Thread(target=self.instance.run, daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        wait_until(lambda: self.instance.api_url is not None and self.instance.status()["phase"] == "streaming", 30)
        return self

    @property
    def url(self) -> str:
        assert self.instance.api_url is not None
        return self.instance.api_url

    def __exit__(self, *exc: object) -> None:
        self.instance.request_stop()
        self.thread.join(30)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    with Running(synthetic(tmp_path, **{"api.token": "s3cret", "offset.flush.interval.ms": 600_000})) as r:
        yield r


def raw(url: str, request: bytes, *, wait: float = 5.0) -> bytes:
    """What the server answers to ``request`` sent as it is, on a new connection."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait) as conn:
        conn.sendall(request)
        chunks = []
        try:
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
    return b"".join(chunks)


def test_an_empty_token_file_left_by_a_crash_is_replaced_and_no_empty_bearer_gets_in(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "api.token").write_text("")  # a crash between creating and writing it, once
    with Running(synthetic(tmp_path)) as running:
        token = (state / "api.token").read_text().strip()
        assert len(token) > 20 and (state / "api.token").stat().st_mode & 0o777 == 0o600
        for header in (b"Authorization: Bearer \r\n", b"Authorization: Bearer\r\n", b""):
            answer = raw(running.url, b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + header + b"\r\n")
            assert answer.startswith(b"HTTP/1.1 401") and b"www-authenticate: bearer" in answer.lower()
            assert answer.endswith(b'{"error_code":401,"message":"missing or wrong bearer token"}')
        assert httpx.get(running.url + "/status", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        assert httpx.get(running.url + "/health").json() == {"status": "UP"}  # public
        assert "/offsets/flush" in httpx.get(running.url + "/openapi.json").json()["paths"]  # public, generated
    assert ensure_api_token({"state.dir": str(state)}) == token  # kept across runs


def test_bodies_are_bounded_in_size_and_in_time(running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    auth = b"Authorization: Bearer s3cret\r\n"
    negative = raw(running.url, b"POST /signals HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: -5\r\n\r\n")
    assert negative.startswith(b"HTTP/1.1 400")  # refused by the HTTP layer itself, never read to the end
    big = b"x" * (api_module.MAX_BODY + 1)
    answer = httpx.post(running.url + "/signals", content=big, headers={"Authorization": "Bearer s3cret"})
    assert answer.status_code == 413 and "over 65536 bytes" in answer.json()["message"]

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
        for _ in range(40):
            yield b"y" * 4096

    answer = httpx.post(running.url + "/signals", content=chunked(), headers={"Authorization": "Bearer s3cret"})
    assert answer.status_code == 413
    monkeypatch.setattr(api_module, "BODY_TIMEOUT_S", 1.0)
    started = time.monotonic()
    slow = raw(
        running.url,
        b"POST /signals HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: 100\r\n\r\n{",  # and never the rest
        wait=10,
    )
    assert slow.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 8
    # The instance is still there, answering.
    with EngineClient(running.url, "s3cret") as client:
        assert client.status().phase == "streaming"


def test_a_commit_on_demand_does_not_wait_for_the_flush_interval(running: Running) -> None:
    """offset.flush.interval.ms is ten minutes here: only the flush can have committed."""
    with EngineClient(running.url, "s3cret") as client:
        wait_until(lambda: client.status().tasks[0].polled > 100, 30, "records delivered")
        assert client.offsets() == []  # nothing committed yet
        answer = client.flush()
        assert answer["committed"] is True
        assert client.offsets() and answer["offsets"]


def test_off_loopback_the_api_needs_tls_or_a_proxy(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"api\.host: 0\.0\.0\.0 is reachable from other hosts"):
        EngineInstance(synthetic(tmp_path, **{"api.host": "0.0.0.0"})).run()
    with pytest.raises(ConfigError, match=r"api\.ssl\.certfile and api\.ssl\.keyfile go together"):
        EngineInstance(synthetic(tmp_path, **{"api.ssl.certfile": "/x.crt"})).run()


def test_https_with_client_certificates(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "ca")
    server, client_cert = ca.issue("api", ["127.0.0.1"]), ca.issue("airflow-worker", client=True)
    config = synthetic(
        tmp_path,
        **{
            "api.token": "s3cret",
            "api.host": "0.0.0.0",  # off loopback: allowed with TLS
            "api.ssl.certfile": str(server.cert),
            "api.ssl.keyfile": str(server.key),
            "api.ssl.cafile": str(ca.cert),  # clients need a certificate of this CA
        },
    )
    with Running(config) as running:
        url = running.url.replace("0.0.0.0", "127.0.0.1")
        assert url.startswith("https://")
        trusted = tls_context(str(ca.cert), str(client_cert.cert), str(client_cert.key))
        with EngineClient(url, "s3cret", tls=trusted) as client:
            assert client.status().name == "api-test"
        with pytest.raises(ApiError), EngineClient(url, "s3cret", tls=tls_context(str(ca.cert))) as client:
            client.status()  # no client certificate: the handshake is refused
        with pytest.raises(ApiError), EngineClient(url, "s3cret") as client:
            client.status()  # the system's CAs do not know this one
        plain = raw(url.replace("https://", "http://"), b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b'"status":"UP"' not in plain  # plain HTTP on the TLS port gets no answer
    control.stop({"state.dir": str(tmp_path / "state")}, timeout=30)
