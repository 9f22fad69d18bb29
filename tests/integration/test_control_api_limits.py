"""The control API's limits on what a client sends (issue 26): a read deadline per request that
cuts slow and silent clients without holding up others, Content-Lengths that are not lengths,
headers and bodies over their caps - chunked bodies too. A real instance (the synthetic source)
over raw sockets, since no well-behaved client sends any of this."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.server.api import MAX_BODY
from airflow_cdc.engine.server.instance import EngineInstance
from tests.integration.test_control_api import Running, synthetic

pytestmark = pytest.mark.integration

READ_TIMEOUT_MS = 2000
AUTH = b"Authorization: Bearer s3cret\r\n"


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    config = {"api.token": "s3cret", "api.read.timeout.ms": READ_TIMEOUT_MS, "offset.flush.interval.ms": 600_000}
    with Running(synthetic(tmp_path, **config)) as r:
        yield r


def connect(url: str, timeout: float = 10.0) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def answer_and_close(conn: socket.socket, within: float) -> tuple[bytes, float]:
    """Everything the server writes until it closes the connection, and when it closed (s since
    the call); AssertionError if it is still open after ``within`` s."""
    started, deadline, chunks = time.monotonic(), time.monotonic() + within, []
    while (left := deadline - time.monotonic()) > 0:
        conn.settimeout(left)
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return b"".join(chunks), time.monotonic() - started
        chunks.append(chunk)
    raise AssertionError(f"the server kept the connection open for {within}s; it wrote {b''.join(chunks)[:200]!r}")


def error_of(answer: bytes) -> tuple[int, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    document = orjson.loads(body)
    assert int(head.split()[1]) == document["error_code"]
    return document["error_code"], document["message"]


class Trickler:
    """A client that sends ``head`` at once, then ``trickle`` one byte per tick, ``padding``
    after it for ever: it never completes its request."""

    def __init__(self, url: str, head: bytes, trickle: bytes, padding: bytes) -> None:
        self.conn, self.opened = connect(url), time.monotonic()
        self.conn.sendall(head)
        self.conn.setblocking(False)
        self.trickle, self.padding = trickle, padding
        self.sent, self.received = 0, b""
        self.closed_after: float | None = None

    def tick(self) -> None:
        if self.closed_after is not None:
            return
        if self.sent >= len(self.trickle):
            self.trickle += self.padding
        with contextlib.suppress(OSError):  # cut off: what it was told is read below
            self.sent += self.conn.send(self.trickle[self.sent : self.sent + 1])
        self.read()

    def read(self) -> None:
        try:
            while chunk := self.conn.recv(65536):
                self.received += chunk
        except BlockingIOError:
            return
        except ConnectionResetError:
            pass
        self.closed_after = time.monotonic() - self.opened


def test_slow_and_silent_clients_are_cut_off_and_others_are_answered_meanwhile(running: Running) -> None:
    silent = connect(running.url)
    opened = time.monotonic()
    tricklers = [  # its request line and headers byte by byte; its body byte by byte
        Trickler(running.url, b"", b"GET /status HTTP/1.1\r\nHost: x\r\n" + AUTH, b"X-Slow: 1\r\n"),
        Trickler(
            running.url, b"POST /signals HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: 5000\r\n\r\n", b"", b"{"
        ),
    ]
    deadline = opened + READ_TIMEOUT_MS / 1000 + 10
    answered_meanwhile = False
    while any(t.closed_after is None for t in tricklers) and time.monotonic() < deadline:
        select.select([t.conn for t in tricklers if t.closed_after is None], [], [], 0.05)  # the trickle's pace
        for trickler in tricklers:
            trickler.tick()
        if not answered_meanwhile and min(t.sent for t in tricklers) > 5:
            # Another client is served at once while the slow ones hold their connections.
            started = time.monotonic()
            assert httpx.get(running.url + "/health", timeout=READ_TIMEOUT_MS / 1000).json() == {"status": "UP"}
            status = httpx.get(running.url + "/status", headers={"Authorization": "Bearer s3cret"})
            assert status.status_code == 200 and time.monotonic() - started < READ_TIMEOUT_MS / 1000
            assert all(t.closed_after is None for t in tricklers)
            answered_meanwhile = True
    assert answered_meanwhile
    for trickler in tricklers:
        assert trickler.closed_after is not None, f"still open after {trickler.sent} bytes trickled"
        assert READ_TIMEOUT_MS / 1000 * 0.9 < trickler.closed_after < READ_TIMEOUT_MS / 1000 + 5
        status, message = error_of(trickler.received)
        assert status == 408 and f"within {READ_TIMEOUT_MS} ms (api.read.timeout.ms)" in message
    # A connection that never says anything is closed too, quietly: no request, no answer.
    nothing, _ = answer_and_close(silent, within=READ_TIMEOUT_MS / 1000 + 5 - (time.monotonic() - opened))
    assert nothing == b""
    assert httpx.get(running.url + "/health").status_code == 200


def test_the_deadline_is_per_request_on_a_kept_alive_connection(running: Running) -> None:
    """Three requests on one connection over more than the timeout: each had its own."""
    with connect(running.url) as conn:
        for _ in range(3):
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(b'{"status":"UP"}'):
                chunk = conn.recv(65536)
                assert chunk, f"the connection was closed after {answer!r}"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200")
            select.select([conn], [], [], READ_TIMEOUT_MS / 1000 * 0.6)  # idle, within the keep-alive


@pytest.mark.parametrize(
    ("length", "reason"),
    [
        (b"-1", "bad Content-Length"),
        (b"abc", "bad Content-Length"),
        (b"1e3", "bad Content-Length"),
        (b"123456789012345678901234567890", "bad Content-Length"),
        (b"5\r\nContent-Length: 70000", "conflicting Content-Length headers"),
    ],
)
def test_a_content_length_that_is_not_a_length_is_refused_before_any_body(
    running: Running, length: bytes, reason: str
) -> None:
    with connect(running.url) as conn:
        conn.sendall(b"POST /signals HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: " + length + b"\r\n\r\n")
        answer, _ = answer_and_close(conn, within=5)
    assert answer.startswith(b"HTTP/1.1 400") and b"connection: close" in answer
    assert error_of(answer) == (400, f"not a valid HTTP/1.1 request: {reason}")


@pytest.mark.parametrize(
    "framing",
    [b"Transfer-Encoding: chunked", b"Content-Length: 1000000000000"],
    ids=["chunked", "oversized-content-length"],
)
def test_a_body_over_the_cap_gets_413_and_no_more_of_it_is_read(running: Running, framing: bytes) -> None:
    chunked = framing.startswith(b"Transfer")
    piece = (b"10000\r\n" + b"z" * 0x10000 + b"\r\n") if chunked else b"z" * 0x10000
    with connect(running.url, timeout=10) as conn:
        conn.sendall(b"POST /signals HTTP/1.1\r\nHost: x\r\n" + AUTH + framing + b"\r\n\r\n")
        answer, sent = b"", 0
        while not answer.endswith(b"}"):
            # A Content-Length over the cap is answered before any of the body; a chunked body
            # once the cap is passed, not at its end.
            if select.select([conn], [], [], 0 if chunked else 5)[0]:
                answer += conn.recv(65536)
                continue
            assert chunked, "no answer to a Content-Length over the cap"
            assert sent < 64 * MAX_BODY, f"no answer after {sent} bytes of body"
            try:
                conn.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):  # answered and closed meanwhile
                answer += answer_and_close(conn, within=5)[0]
                break
            sent += len(piece)
        assert error_of(answer) == (413, f"the body is over {MAX_BODY} bytes")
        # The client goes on sending: the server does not read it all, it closes the connection.
        budget, more, closed = 512 * MAX_BODY, 0, False
        try:
            while more < budget:
                conn.sendall(piece)
                more += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        assert closed, f"the server read {more} more bytes past its 413"


def test_a_client_that_sent_a_little_too_much_keeps_its_connection(running: Running) -> None:
    """What follows an early 413 is read and dropped up to a bound, so the next request works."""
    with connect(running.url) as conn:
        conn.sendall(b"POST /signals HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: 70000\r\n\r\n")
        conn.sendall(b"z" * 70000)
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answers = b""
        while not answers.endswith(b'{"status":"UP"}'):
            chunk = conn.recv(65536)
            assert chunk, f"the connection was closed after {answers!r}"
            answers += chunk
    assert answers.startswith(b"HTTP/1.1 413") and b"HTTP/1.1 200" in answers


def test_headers_over_64_kib_are_refused(running: Running) -> None:
    with connect(running.url) as conn:
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        sent = 0
        try:
            while sent < 64 * MAX_BODY:
                conn.sendall(b"X-Pad: " + b"a" * 1000 + b"\r\n")
                sent += 1009
        except OSError:
            pass  # refused and closed while they were still coming
        answer, _ = answer_and_close(conn, within=5)
    assert error_of(answer) == (431, "the request line and headers are over 65536 bytes")


def test_the_read_timeout_is_a_validated_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"api\.read\.timeout\.ms.*'soon' is not an integer"):
        EngineInstance(synthetic(tmp_path, **{"api.read.timeout.ms": "soon"}))
    with pytest.raises(ConfigError, match=r"api\.read\.timeout\.ms.*below the minimum 1"):
        EngineInstance(synthetic(tmp_path, **{"api.read.timeout.ms": 0}))
