"""A real ``streamdec serve`` process on a free loopback port, and small real clients of
its protocols (the ``websockets`` client library, urllib for HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import websockets

REPO = Path(__file__).resolve().parents[1]
# every wait in these tests is a multiple of this (raise it on a slow machine)
UNIT = float(os.environ.get("STREAMDEC_TEST_TIMEOUT_UNIT", "1.0"))


class ServerProcess:
    """``python -m streamdec serve ARGS --port 0``; the ports come from its log. ``launcher``:
    what runs the command line instead of ``-m streamdec`` (a script and its arguments)."""

    def __init__(self, *args: str, env: dict | None = None, start_timeout: float = 60,
                 launcher: tuple[str, ...] = ("-m", "streamdec")) -> None:
        cmd = [sys.executable, *launcher, "serve", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        self.log: list[str] = []
        self.ports: list[int] = []
        self.scheme = "http"
        expected = 1 + ("--vosk-port" in args) + ("--audiosocket-port" in args)
        deadline = time.monotonic() + start_timeout * UNIT
        for line in self.proc.stderr:
            self.log.append(line)
            if '"event": "listening"' in line:
                event = json.loads(line[line.index("{"):])
                self.ports.append(event["port"])
                self.scheme = event["url"].split(":")[0]
                if len(self.ports) == expected:
                    break
            if time.monotonic() > deadline:
                break
        if len(self.ports) != expected:
            self.proc.kill()
            raise RuntimeError("server did not start:\n" + "".join(self.log))
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()

    def _read_log(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)

    @property
    def port(self) -> int:
        return self.ports[0]

    def url(self, path: str = "/", port: int | None = None) -> str:
        ws = "wss" if self.scheme == "https" else "ws"
        return f"{ws}://127.0.0.1:{port or self.port}{path}"

    def http(self, path: str) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def connections_logged(self) -> list[dict]:
        return [json.loads(line[line.index("{"):]) for line in list(self.log)
                if '"event": "connection"' in line]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=30 * UNIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def token_server(folder: Path, key: str):
    """A server (a generator for a fixture to yield from) whose one token is ``key``, as a
    vendor's client sends it; stopped cleanly at the end."""
    tokens = folder / "tokens"
    tokens.write_text(key + "\n")
    server = ServerProcess("--token-file", str(tokens))
    yield server
    assert server.stop() == 0


def get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10 * UNIT, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_for_logged(server: ServerProcess, before: int, ready, timeout: float = 10.0
                    ) -> list[dict]:
    """The connection log lines after the first ``before`` once ``ready(lines)`` holds (a
    line is written when its connection is closed, shortly after the client leaves)."""
    deadline = time.monotonic() + timeout * UNIT
    while True:
        lines = server.connections_logged()[before:]
        if ready(lines):
            return lines
        assert time.monotonic() < deadline, f"connection lines not there: {lines}"
        time.sleep(0.02)


def wait_for_idle(server: ServerProcess, timeout: float = 10.0) -> dict:
    """/health once no stream and no connection is open (the server frees them shortly
    after a client leaves)."""
    deadline = time.monotonic() + timeout * UNIT
    while True:
        status, body = get(server.http("/health"))
        health = json.loads(body)
        if health.get("active_streams") == 0 and health.get("connections") == 0:
            return health
        if time.monotonic() > deadline:
            return health
        time.sleep(0.05)


async def messages_until_closed(ws) -> list:
    """Every message until the server closes (JSON parsed; ``Done!`` kept as text), for
    any close code."""
    messages = []
    try:
        async for m in ws:
            messages.append(m if m == "Done!" else json.loads(m))
    except websockets.ConnectionClosedError:  # a close code other than 1000
        pass
    return messages


# -- clients -----------------------------------------------------------------------------------
async def connect_on(url: str, worker: str, **connect):
    """A WebSocket connection (``websockets.connect(url, **connect)``) that reached
    ``worker`` of a ``serve --workers`` server, e.g. ``worker-0`` (the kernel picks: the
    others are closed before sending anything, and it tries again)."""
    for _ in range(100):
        ws = await websockets.connect(url, **connect)
        if ws.response.headers["x-streamdec-replica"] == worker:
            return ws
        await ws.close()
    raise AssertionError(f"no connection reached {worker}")


def pieces(data: bytes, size: int):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def read_sherpa_results(ws, out: dict) -> asyncio.Future:
    """A task that reads a sherpa-protocol connection to its end: each JSON result into
    ``out["results"]``, ``out["done"]`` set by ``Done!``."""
    async def read():
        async for message in ws:
            if message == "Done!":
                out["done"] = True
            else:
                out["results"].append(json.loads(message))

    return asyncio.ensure_future(read())


async def sherpa_client(url: str, audio: np.ndarray, piece: int, **connect) -> dict:
    """Stream float32 ``audio`` in pieces of ``piece`` samples, then ``Done``; returns
    {"results": [...], "done": bool, "close": code, "error": message or None, "replica":
    the X-Streamdec-Replica header (Ray Serve) or None}."""
    data = audio.astype("<f4").tobytes()
    out = {"results": [], "done": False, "close": None, "error": None}
    async with websockets.connect(url, max_size=None, **connect) as ws:
        out["replica"] = ws.response.headers.get("x-streamdec-replica")
        reader = read_sherpa_results(ws, out)
        for part in pieces(data, piece * 4):
            await ws.send(part)
        await ws.send("Done")
        await asyncio.wait_for(reader, 60 * UNIT)
    out["close"] = ws.close_code
    return out


async def vosk_client(url: str, pcm16: np.ndarray, piece: int, config: dict | None = None,
                      commands: dict[int, str] | None = None, pipelined: bool = False,
                      **connect) -> dict:
    """Stream int16 ``pcm16`` in pieces of ``piece`` samples, then ``{"eof" : 1}``.
    Lockstep (each reply awaited before the next message, as Vosk's clients do) or
    ``pipelined`` (all sent, the replies read meanwhile). ``commands``: text messages sent
    before piece n (each gets a reply too). Returns {"replies": [...], "messages": count
    of messages that need a reply, "close": code, "replica": the X-Streamdec-Replica
    header}."""
    replies: list[dict] = []
    messages = []
    for n, part in enumerate(pieces(pcm16.astype("<i2").tobytes(), piece * 2)):
        if commands and n in commands:
            messages.append(commands[n])
        messages.append(part)
    messages.append('{"eof" : 1}')
    async with websockets.connect(url, max_size=None, **connect) as ws:
        replica = ws.response.headers.get("x-streamdec-replica")
        if config is not None:
            await ws.send(json.dumps({"config": config}))

        async def read_all():
            async for message in ws:
                replies.append(json.loads(message))

        if pipelined:
            reader = asyncio.ensure_future(read_all())
            for m in messages:
                await ws.send(m)
            await asyncio.wait_for(reader, 60 * UNIT)
        else:
            for m in messages:
                await ws.send(m)
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), 30 * UNIT)))
            await asyncio.wait_for(read_all(), 10 * UNIT)  # nothing more, then the close
    return {"replies": replies, "messages": len(messages), "close": ws.close_code,
            "replica": replica}


def sherpa_text(results: list[dict]) -> str:
    """The transcript of sherpa messages: finals' texts joined."""
    return " ".join(r["text"] for r in results if r["is_final"] and r["text"])


def vosk_text(replies: list[dict]) -> str:
    return " ".join(r["text"] for r in replies if r.get("text"))


def run(coro):
    return asyncio.run(coro)
