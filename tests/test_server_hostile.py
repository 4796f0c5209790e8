"""Clients that misbehave at the HTTP layer, against a real ``streamdec serve`` (raw
sockets: the misbehaviour is ours): a request head sent a byte at a time (slowloris), an
upload body that stops mid-way, one that never ends. Each gets its HTTP status within the
server's ``idle_timeout_seconds`` (``bench/hostile.py`` tries them by the hundred beside
healthy streams)."""

from __future__ import annotations

import base64
import json
import os
import socket
import time

import pytest

from server_utils import ServerProcess, UNIT

IDLE = 1.0 * UNIT  # the server's idle_timeout_seconds
MAX_UPLOAD = 100_000


@pytest.fixture(scope="module")
def server():
    s = ServerProcess("--idle-timeout", str(IDLE), "--max-upload-bytes", str(MAX_UPLOAD))
    yield s
    assert s.stop() == 0
    assert "Traceback" not in "".join(s.log)


def connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30 * UNIT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_response(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a reset after its answer counts as
    its close)."""
    data = b""
    while True:
        try:
            more = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not more:
            return data
        data += more


def status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def events(server, name: str) -> list[dict]:
    return [json.loads(line[line.index("{"):]) for line in list(server.log)
            if f'"event": "{name}"' in line]


def test_a_handshake_sent_a_byte_at_a_time_gets_408_at_the_deadline(server):
    key = base64.b64encode(os.urandom(16)).decode()
    head = (f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: "
            f"Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
    before = len(events(server, "head_timeout"))
    sock = connect(server)
    t0 = time.monotonic()
    sent = 0
    for byte in head[:-1]:  # a byte each 0.1 s: every byte comes well within the timeout
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += 1
        time.sleep(0.1 * UNIT)
        if time.monotonic() - t0 > IDLE + 2 * UNIT:
            break
    response = read_response(sock)
    waited = time.monotonic() - t0
    sock.close()
    assert status(response) == 408, response
    assert sent < len(head) - 1  # closed before the head was whole
    assert IDLE - 0.2 * UNIT <= waited <= IDLE + 2 * UNIT
    assert len(events(server, "head_timeout")) == before + 1


def test_a_whole_handshake_and_a_request_after_a_pause_are_served(server):
    sock = connect(server)
    time.sleep(IDLE / 2)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    response = sock.recv(65536)
    assert status(response) == 200
    time.sleep(IDLE * 0.7)  # the next head's deadline runs from the end of the response
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status(read_response(sock)) == 200
    sock.close()
