"""Clients that misbehave at the HTTP layer, against a real ``streamdec serve`` (raw
sockets: the misbehaviour is ours): a request head sent a byte at a time (slowloris), an
upload body that stops mid-way, one that never ends. Each gets its HTTP status within the
server's ``idle_timeout_seconds`` (``bench/daemon/hostile.py`` tries them by the hundred beside
healthy streams)."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import time

import pytest

from server_utils import ServerProcess, UNIT, get

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


def errors(server, kind: str) -> int:
    _, text = get(server.http("/metrics"))
    match = re.search(rf'^streamdec_errors_total{{kind="{kind}"}} (\S+)$', text, re.M)
    return int(float(match.group(1))) if match else 0


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


UPLOAD_HEAD = ("POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
               "Content-Type: multipart/form-data; boundary=XX\r\n")
FILE_PART = b'--XX\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'


def test_an_upload_body_that_stops_mid_way_gets_408(server):
    sock = connect(server)
    t0 = time.monotonic()
    sock.sendall((UPLOAD_HEAD + "Content-Length: 50000\r\n\r\n").encode() + FILE_PART + b"RIFF")
    response = read_response(sock)  # held for good before
    waited = time.monotonic() - t0
    sock.close()
    assert status(response) == 408, response
    assert json.loads(response.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "timeout"
    assert IDLE - 0.2 * UNIT <= waited <= IDLE + 2 * UNIT


def test_an_upload_body_that_never_ends_gets_413_once_over_the_limit(server):
    """Chunked: no Content-Length to refuse it by; before, the server spooled it to disk
    for as long as it came (3.4 GB in 15 s)."""
    before = errors(server, "too_big")
    sock = connect(server)
    sock.sendall((UPLOAD_HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode()
                 + b"%x\r\n%s\r\n" % (len(FILE_PART), FILE_PART))
    block = b"x" * 16384
    chunk = b"%x\r\n%s\r\n" % (len(block), block)
    sent = 0
    sock.settimeout(5 * UNIT)
    try:
        while sent < 100 * MAX_UPLOAD:  # never the last chunk
            sock.sendall(chunk)
            sent += len(block)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    sock.settimeout(30 * UNIT)
    try:
        response = read_response(sock)
    except OSError:
        response = b""
    sock.close()
    # the server stopped reading it once over the limit: what was sent beyond is what
    # the sockets' buffers held
    assert sent < 100 * MAX_UPLOAD
    if response:  # (the answer can be lost in the reset of a client still writing)
        assert status(response) == 413, response
    assert errors(server, "too_big") == before + 1  # it was refused as too big
