"""The metrics/health HTTP server under hostile clients: idle, slow, oversized and too many connections."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gpuslice.node.http_server import HttpLimits
from gpuslice.node.metrics_server import MetricsServer
from gpuslice.plugin.metrics import PluginMetrics

TIMEOUT_S = 0.4
HALF_SENT = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    running = MetricsServer(
        PluginMetrics(),
        0,
        "127.0.0.1",
        limits=HttpLimits(max_connections=8, max_per_client=6, request_timeout_s=TIMEOUT_S),
    )
    running.start()
    yield running
    running.stop()


def connect(server: MetricsServer, data: bytes = HALF_SENT, client: str = "127.0.0.1") -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=10, source_address=(client, 0))
    if data:
        conn.sendall(data)
    return conn


def wait_open(server: MetricsServer, count: int) -> None:
    """Until the server holds `count` connections (it takes them on its own thread): no fixed sleep."""
    deadline = time.monotonic() + 5
    while server.http.open_connections < count and time.monotonic() < deadline:
        time.sleep(0.002)
    assert server.http.open_connections == count


def answer(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    conn.close()
    return b"".join(chunks)


def get(server: MetricsServer, path: str = "/healthz") -> bytes:
    return answer(connect(server, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()))


def test_idle_half_sent_connections_cost_no_threads_and_are_dropped(server: MetricsServer) -> None:
    threads = threading.active_count()
    started = time.monotonic()
    idle = [connect(server, client=f"127.0.0.{2 + n % 2}") for n in range(8)]
    time.sleep(0.1)
    assert threading.active_count() <= threads + 1, "no thread per connection"
    assert server.http.open_connections == 8
    for conn in idle:
        assert answer(conn).startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - started < TIMEOUT_S + 3.0
    assert server.http.timed_out == 8
    assert get(server).startswith(b"HTTP/1.1 200 OK"), "still serving after the attack"


def test_a_client_trickling_bytes_is_dropped_at_the_deadline(server: MetricsServer) -> None:
    conn = connect(server, b"G")
    started = time.monotonic()
    with pytest.raises(OSError):  # the server closes while we keep sending a byte every 50 ms
        for _ in range(200):
            conn.sendall(b"E")
            time.sleep(0.05)
    assert time.monotonic() - started < TIMEOUT_S + 3.0
    conn.close()


def test_connections_over_the_cap_are_refused_at_once(server: MetricsServer) -> None:
    held = [connect(server, client=f"127.0.0.{2 + n % 2}") for n in range(8)]
    wait_open(server, 8)
    started = time.monotonic()
    assert answer(connect(server, b"", client="127.0.0.4")).startswith(b"HTTP/1.1 503 ")
    assert time.monotonic() - started < TIMEOUT_S, "refused, not queued"
    assert server.http.refused == 1
    for conn in held:
        conn.close()


def test_one_client_cannot_take_every_slot(server: MetricsServer) -> None:
    held = [connect(server, client="127.0.0.2") for _ in range(6)]
    wait_open(server, 6)
    assert answer(connect(server, b"", client="127.0.0.2")).startswith(b"HTTP/1.1 503 ")
    reply = answer(connect(server, b"GET /healthz HTTP/1.1\r\n\r\n", client="127.0.0.3"))
    assert reply.startswith(b"HTTP/1.1 200 "), "another client (the kubelet's probe) still gets in"
    for conn in held:
        conn.close()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\n\r\n", b"431"),
        (b"GET /x HTTP/1.1\r\n" + b"X-Pad: " + b"b" * 9000 + b"\r\n\r\n", b"431"),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", b"405"),
        (b"\x00\xff garbage\r\n\r\n", b"400"),
        (b"GET /nothing HTTP/1.1\r\n\r\n", b"404"),
        (b"HEAD /metrics HTTP/1.1\r\n\r\n", b"200"),
    ],
)
def test_bad_requests_get_a_status_and_the_server_keeps_serving(
    server: MetricsServer, request_bytes: bytes, status: bytes
) -> None:
    assert answer(connect(server, request_bytes)).split(b" ")[1] == status
    assert b"gpuslice_plugin" in get(server, "/metrics")
