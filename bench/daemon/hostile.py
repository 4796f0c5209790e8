"""Hostile clients beside healthy streams: a real ``streamdec serve`` on a loopback port,
``--healthy`` real-time clients streaming the dev set's speech (``bench/daemon/load.py``'s
clients), first alone (the quiet run), then again with hundreds of connections that each
misbehave in one way (the hostile run); a JSON report and its verdicts.

    python bench/daemon/hostile.py --healthy 50 --seconds 60 --per-kind 40 --subscribers 2000 \\
        --out bench/results/2026-12-04-hostile-clients-and-fuzzing/hostile.json
    python bench/daemon/hostile.py --healthy 5 --seconds 10 --per-kind 3 --subscribers 20 \\
        --idle-timeout 2 --settle 10 --out /tmp/hostile.json     # the CI smoke's size

The misbehaviours (``KINDS``; ``--per-kind`` connections of each, started spread over the
hostile run's first part, after ``--subscribers`` subscribers; all from a process of their
own, so that their work does not stall the healthy clients' event loop), and what each
must end with (``expected()``, within its limit in seconds from its start; ``T``: the server's
``idle_timeout_seconds``, set by ``--idle-timeout``; ``C``: uvicorn's 10 s for a client to
answer a close frame):

=====================  =====================================================  ===========
kind                   what the client does                                   must end
=====================  =====================================================  ===========
``slowloris``          sends a WebSocket handshake a byte each ``--slowloris-  HTTP 408,
                       interval`` seconds                                     T + 2 s
``never_reads``        streams speech (sherpa protocol) as fast as it is      close 1008
                       taken, a small receive buffer, then sends nothing and  or a reset,
                       never reads (the server's FIN is seen by poll, the     T+C+T+2 s
                       close code read afterwards)
``big_frame``          a binary frame that says 10 MB (the server's WebSocket  close 1009
                       layer stops at 4 x ``max_message_bytes``)              (or reset), 3 s
``ping_flood``         ``--pings`` pings in bursts of 1000, unread, then      close 1008
                       reads                                                  (too many
                                                                              pings), 3 s
``bad_utf8``           a text frame that is not UTF-8                         close 1007, 3 s
``cut_header``         half a frame header, then a TCP reset                  the server logs
                                                                              the end, 3 s
``audiosocket_long``   AudioSocket: the UUID, then an audio frame whose       TCP close
                       length says 60000 bytes and 320 follow                 (idle), T+2 s
``audiosocket_short``  AudioSocket: an audio frame whose length says 10       TCP close,
                       bytes and 320 follow (the rest reads as frames: a bad  T + 2 s
                       type, a hangup, or a length that waits for more)
``twilio_early``       Twilio ``media`` before ``start``                      close 1003, 3 s
``deepgram_bad_audio`` Deepgram (``/v1/listen``, linear16): half a sample     close 1008
                       as its audio                                           (DATA-0000), 3 s
``assemblyai_bad_      AssemblyAI (``/v3/ws``, pcm_s16le): half a sample as    close 3007
audio``                its audio                                              (its Error
                                                                              first), 3 s
``realtime_bad_then_   OpenAI Realtime (``/v1/realtime``): an append that is   close 1008
silent``               not base64 (answered by an error event, the session    (idle),
                       goes on), then nothing                                 T + 2 s
``upload_stall``       a multipart upload whose body stops mid-way             HTTP 408, T+2 s
``upload_endless``     a chunked multipart upload that never ends             HTTP 413 or a
                                                                              reset, 10 s
``subscriber``         ``/calls/{id}`` for a call that never comes            waits (no
                       (``--subscribers`` of them, each its own id)           message) until
                                                                              it leaves
=====================  =====================================================  ===========

Every hostile client replies to the server's close frame (it misbehaves in one way only),
so its time to close is the close frame's; its end is also found in the server's log (its
``connection`` / ``call`` line, by peer address). Measured and asserted (``verdicts``):

- ``healthy``: every healthy client's finals (utterance, text) identical in the two runs,
  none lost, none late (a final after the next utterance's audio began), every client
  finished;
- ``rss``: the server's RSS (sampled every 0.25 s) stays within ``bound``: the quiet run's
  peak + ``RSS_PER_CONNECTION`` for each hostile connection open at once (its transport
  buffers, at most 64 KiB each way, and its objects) + ``RSS_PER_SUBSCRIBER`` for each
  waiting subscriber (no buffer; its objects measured ~45 KiB) + ``RSS_SLACK``: a server
  that buffers what a peer sends or fails to read (a ping flood's pongs were +325 MB)
  goes over it;
- ``fds``: the server's open descriptors (``/proc/PID/fd``) back at the idle baseline once
  every hostile client has gone (waited for at most ``--settle`` seconds);
- ``kinds``: every hostile connection ended as ``EXPECTED`` within its limit;
- ``server``: no traceback in its log, exit status 0 on SIGTERM.

Loopback only; every loop is bounded in count and time: the run stops by itself (the
clients still running at ``--seconds`` + their limits are cancelled and count as failures).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing
import os
import resource
import select
import socket
import sys
import time
import uuid
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import load_average, machine, write_report  # noqa: E402
from bench.decode.latency import Pacing  # noqa: E402
from bench.daemon.load import (RATE, SLOW_MS, ClientStats, Timeline, build_programs,  # noqa: E402
                  latency_ms, log_events, run_client, server_events, watch_loop)
from bench.daemon.servers import free_port, proc_sample, serve_streamdec  # noqa: E402

HOST = "127.0.0.1"
CLOSE_TIMEOUT = 10.0  # uvicorn's wait for a client's answer to a close frame
RSS_PER_CONNECTION = 256 * 1024  # bytes allowed per hostile connection open at once
RSS_PER_SUBSCRIBER = 64 * 1024  # and per waiting subscriber (no buffer: its objects)
RSS_SLACK = 32 * 2**20  # and in all (allocator growth, the log, metrics)
SAMPLE_SECONDS = 0.25
KINDS = ("slowloris", "never_reads", "big_frame", "ping_flood", "bad_utf8", "cut_header",
         "audiosocket_long", "audiosocket_short", "twilio_early", "deepgram_bad_audio",
         "assemblyai_bad_audio", "realtime_bad_then_silent", "upload_stall", "upload_endless")


def expected(kind: str, idle: float) -> tuple[set, float]:
    """(the ends allowed, as (how, code); seconds from its start) of a hostile kind."""
    T, C = idle, CLOSE_TIMEOUT
    return {"slowloris": ({("http", 408)}, T + 2),
            "never_reads": ({("close", 1008), ("reset", None)}, T + C + T + 2),
            "big_frame": ({("close", 1009), ("reset", None)}, 3.0),
            "ping_flood": ({("close", 1008), ("reset", None)}, 3.0),
            "bad_utf8": ({("close", 1007)}, 3.0),
            "cut_header": ({("logged", 1005), ("logged", 1006)}, 3.0),
            "audiosocket_long": ({("eof", None)}, T + 2),
            "audiosocket_short": ({("eof", None)}, T + 2),
            "twilio_early": ({("close", 1003)}, 3.0),
            "deepgram_bad_audio": ({("close", 1008)}, 3.0),
            "assemblyai_bad_audio": ({("close", 3007)}, 3.0),
            "realtime_bad_then_silent": ({("close", 1008)}, T + 2),
            "upload_stall": ({("http", 408)}, T + 2),
            "upload_endless": ({("http", 413), ("reset", None)}, 10.0)}[kind]


# -- raw WebSocket and HTTP, written from RFC 6455 (the misbehaviour is ours) ----------------
def handshake(path: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode()


def frame(opcode: int, payload: bytes, length: int | None = None) -> bytes:
    """A masked client frame; ``length``: the length its header says (a lie if given)."""
    n = len(payload) if length is None else length
    first = 0x80 | opcode
    if n < 126:
        head = bytes([first, 0x80 | n])
    elif n < 1 << 16:
        head = bytes([first, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([first, 0x80 | 127]) + n.to_bytes(8, "big")
    key = os.urandom(4)
    data = np.frombuffer(payload, np.uint8) ^ np.resize(np.frombuffer(key, np.uint8),
                                                         len(payload))
    return head + key + data.tobytes()


def server_frames(data: bytes) -> list[tuple[int, bytes]]:
    """The whole (unmasked) server frames in ``data``: (opcode, payload)."""
    out, pos = [], 0
    while len(data) - pos >= 2:
        n, head = data[pos + 1] & 0x7F, 2
        if n == 126:
            n, head = int.from_bytes(data[pos + 2:pos + 4], "big"), 4
        elif n == 127:
            n, head = int.from_bytes(data[pos + 2:pos + 10], "big"), 10
        if len(data) - pos < head + n:
            break
        out.append((data[pos] & 0x0F, data[pos + head:pos + head + n]))
        pos += head + n
    return out


def close_code(payload: bytes) -> int | None:
    return int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None


async def ws_open(port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(handshake(path))
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        writer.close()
        first = head.split(b"\r\n", 1)[0]
        raise ConnectionError(f"handshake refused: {first!r}")
    return reader, writer


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    first, second = await reader.readexactly(2)
    n = second & 0x7F
    if n == 126:
        n = int.from_bytes(await reader.readexactly(2), "big")
    elif n == 127:
        n = int.from_bytes(await reader.readexactly(8), "big")
    return first & 0x0F, await reader.readexactly(n)


async def until_closed(reader, writer, t0: float, limit: float, counts: dict | None = None
                       ) -> dict:
    """Read the server's frames until its close frame (answered, as a client should), its
    EOF or a reset, at most until ``t0 + limit`` (+ 2 s: an end seen late is reported
    late, not missed)."""
    loop = asyncio.get_running_loop()
    try:
        while True:
            left = t0 + limit + 2.0 - loop.time()
            opcode, payload = await asyncio.wait_for(read_frame(reader), max(left, 0.01))
            if counts is not None:
                counts[opcode] = counts.get(opcode, 0) + 1
            if opcode == 0x9:  # the server's keepalive ping: answered, as clients do
                writer.write(frame(0xA, payload))
            if opcode == 0x8:
                seconds = loop.time() - t0
                try:
                    writer.write(frame(0x8, payload[:2]))
                except (ConnectionError, RuntimeError):
                    pass
                return {"how": "close", "code": close_code(payload), "seconds": seconds,
                        "reason": payload[2:].decode("utf-8", "replace")[:80]}
    except asyncio.TimeoutError:
        return {"how": "open", "code": None, "seconds": loop.time() - t0}
    except asyncio.IncompleteReadError:
        return {"how": "eof", "code": None, "seconds": loop.time() - t0}
    except ConnectionError:
        return {"how": "reset", "code": None, "seconds": loop.time() - t0}


async def http_answer(reader, t0: float, limit: float) -> dict:
    """The status of the server's HTTP answer (or its EOF / reset / nothing in time)."""
    loop = asyncio.get_running_loop()
    try:
        line = await asyncio.wait_for(reader.readline(), t0 + limit + 2.0 - loop.time())
    except asyncio.TimeoutError:
        return {"how": "open", "code": None, "seconds": loop.time() - t0}
    except ConnectionError:
        return {"how": "reset", "code": None, "seconds": loop.time() - t0}
    if not line:
        return {"how": "eof", "code": None, "seconds": loop.time() - t0}
    return {"how": "http", "code": int(line.split(b" ", 2)[1]), "seconds": loop.time() - t0}


def local_peer(writer_or_sock) -> str:
    name = (writer_or_sock.getsockname() if isinstance(writer_or_sock, socket.socket)
            else writer_or_sock.get_extra_info("sockname"))
    return f"{name[0]}:{name[1]}"


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    writer.transport.abort()


# -- the hostile clients: each returns its end ({"how", "code", "seconds", "peer"}) ----------
class Hostile:
    def __init__(self, args, port: int, audiosocket_port: int, speech: np.ndarray) -> None:
        self.args, self.port, self.audiosocket_port = args, port, audiosocket_port
        self.speech = speech  # float32 16 kHz
        self.idle = args.idle_timeout

    async def run(self, kind: str, start: float) -> dict:
        """One client of ``kind``, started ``start`` seconds into the hostile phase."""
        t0 = asyncio.get_running_loop().time()
        limit = expected(kind, self.idle)[1]
        try:
            out = await asyncio.wait_for(getattr(self, kind)(t0, limit), limit + 15.0)
        except asyncio.TimeoutError:
            out = {"how": "stuck", "code": None}
        except (ConnectionError, OSError) as e:
            out = {"how": "error", "code": None, "error": repr(e)[:120]}
        out.setdefault("seconds", asyncio.get_running_loop().time() - t0)
        out.update(kind=kind, start=round(start, 2))
        return out

    async def slowloris(self, t0, limit):
        reader, writer = await asyncio.open_connection(HOST, self.port)
        peer = local_peer(writer)
        answer = asyncio.ensure_future(http_answer(reader, t0, limit))
        for byte in handshake("/")[:-1]:  # never whole
            if answer.done():
                break
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except ConnectionError:
                break
            await asyncio.wait([answer], timeout=self.args.slowloris_interval)
        out = await answer
        writer.close()
        return {**out, "peer": peer}

    async def never_reads(self, t0, limit):
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, (HOST, self.port))
            peer = local_peer(sock)
            await loop.sock_sendall(sock, handshake("/"))
            head = b""
            while b"\r\n\r\n" not in head:  # the handshake's answer, byte by byte
                head += await loop.sock_recv(sock, 1)
            audio = self.speech
            piece = RATE // 10
            for k in range(0, len(audio), piece):  # as fast as it is taken
                try:
                    await asyncio.wait_for(loop.sock_sendall(
                        sock, frame(0x2, audio[k:k + piece].tobytes())), limit)
                except (asyncio.TimeoutError, ConnectionError):
                    break
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLRDHUP | select.POLLHUP | select.POLLERR)
            while loop.time() - t0 < limit + 2.0:  # the server's FIN or reset, unread
                if poller.poll(0):
                    break
                await asyncio.sleep(0.1)
            else:
                return {"how": "open", "code": None, "peer": peer}
            seconds = loop.time() - t0
            data = b""
            try:
                while True:  # now read what it sent: its close frame comes last
                    more = sock.recv(1 << 20)
                    if not more:
                        break
                    data += more
            except BlockingIOError:
                pass
            except ConnectionError:
                return {"how": "reset", "code": None, "seconds": seconds, "peer": peer}
            closes = [p for op, p in server_frames(data) if op == 0x8]
            if closes:
                return {"how": "close", "code": close_code(closes[-1]), "seconds": seconds,
                        "peer": peer, "reason": closes[-1][2:].decode("utf-8", "replace")[:80]}
            return {"how": "eof", "code": None, "seconds": seconds, "peer": peer}
        finally:
            sock.close()

    async def big_frame(self, t0, limit):
        reader, writer = await ws_open(self.port, "/")
        peer = local_peer(writer)
        ending = asyncio.ensure_future(until_closed(reader, writer, t0, limit))
        writer.write(frame(0x2, b"", length=10 << 20))  # the header, no payload yet
        block = bytes(65536)
        for _ in range(160):  # the 10 MB, unless the server stops it first
            if ending.done():
                break
            try:
                writer.write(block)
                await asyncio.wait_for(writer.drain(), 2.0)
            except (ConnectionError, asyncio.TimeoutError):
                break
        out = await ending
        writer.close()
        return {**out, "peer": peer}

    async def ping_flood(self, t0, limit):
        reader, writer = await ws_open(self.port, "/")
        peer = local_peer(writer)
        ping = frame(0x9, b"p" * 125)
        for _ in range(self.args.pings // 1000):
            writer.write(ping * 1000)
            try:
                await asyncio.wait_for(writer.drain(), 2.0)
            except (ConnectionError, asyncio.TimeoutError):
                break
        counts: dict = {}
        out = await until_closed(reader, writer, t0, limit, counts)
        writer.close()
        return {**out, "peer": peer, "pongs": counts.get(0xA, 0)}

    async def bad_utf8(self, t0, limit):
        reader, writer = await ws_open(self.port, "/")
        peer = local_peer(writer)
        writer.write(frame(0x1, b"Done \xff\xfe"))
        out = await until_closed(reader, writer, t0, limit)
        writer.close()
        return {**out, "peer": peer}

    async def cut_header(self, t0, limit):
        reader, writer = await ws_open(self.port, "/")
        peer = local_peer(writer)
        writer.write(frame(0x2, bytes(4000))[:3])  # 0x82, 126, half of the 16-bit length
        await writer.drain()
        await asyncio.sleep(0.2)
        reset(writer)
        return {"how": "reset_by_client", "code": None, "peer": peer}

    async def _audiosocket(self, t0, limit, said: int):
        reader, writer = await asyncio.open_connection(HOST, self.audiosocket_port)
        peer = local_peer(writer)
        middle = len(self.speech) // 2  # speech, not the leading silence (whose zeros
        pcm = (self.speech[middle:middle + 160] * 32767).astype("<i2").tobytes()  # read as
        # frames would be hangups); 320 bytes: 20 ms
        writer.write(bytes([0x01]) + (16).to_bytes(2, "big") + uuid.uuid4().bytes
                     + bytes([0x10]) + said.to_bytes(2, "big") + pcm)
        await writer.drain()
        loop = asyncio.get_running_loop()
        try:
            data = await asyncio.wait_for(reader.read(), t0 + limit + 2.0 - loop.time())
            out = {"how": "eof", "code": None, "bytes": len(data)}
        except asyncio.TimeoutError:
            out = {"how": "open", "code": None}
        except ConnectionError:
            out = {"how": "reset", "code": None}
        writer.close()
        return {**out, "peer": peer}

    async def audiosocket_long(self, t0, limit):
        return await self._audiosocket(t0, limit, 60000)

    async def audiosocket_short(self, t0, limit):
        return await self._audiosocket(t0, limit, 10)

    async def twilio_early(self, t0, limit):
        reader, writer = await ws_open(self.port, "/twilio")
        peer = local_peer(writer)
        writer.write(frame(0x1, json.dumps({"event": "media", "media": {
            "track": "inbound", "chunk": "1", "timestamp": "0",
            "payload": base64.b64encode(bytes(160)).decode()}}).encode()))
        out = await until_closed(reader, writer, t0, limit)
        writer.close()
        return {**out, "peer": peer}

    async def _half_a_sample(self, t0, limit, path: str):
        """Half a 16-bit sample as the audio of a vendor protocol at ``path``."""
        reader, writer = await ws_open(self.port, path)
        peer = local_peer(writer)
        writer.write(frame(0x2, b"\x00\x00\x00"))
        out = await until_closed(reader, writer, t0, limit)
        writer.close()
        return {**out, "peer": peer}

    async def deepgram_bad_audio(self, t0, limit):
        return await self._half_a_sample(t0, limit,
                                         "/v1/listen?encoding=linear16&sample_rate=16000")

    async def assemblyai_bad_audio(self, t0, limit):
        return await self._half_a_sample(t0, limit, "/v3/ws?sample_rate=16000")

    async def realtime_bad_then_silent(self, t0, limit):
        reader, writer = await ws_open(self.port, "/v1/realtime?intent=transcription")
        peer = local_peer(writer)
        writer.write(frame(0x1, b'{"type": "input_audio_buffer.append", "audio": "%%%"}'))
        out = await until_closed(reader, writer, t0, limit)
        writer.close()
        return {**out, "peer": peer}

    def _upload_head(self, extra: str) -> bytes:
        return (f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: {HOST}\r\n"
                f"Content-Type: multipart/form-data; boundary=XX\r\n{extra}\r\n").encode()

    FILE_PART = b'--XX\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'

    async def upload_stall(self, t0, limit):
        reader, writer = await asyncio.open_connection(HOST, self.port)
        peer = local_peer(writer)
        writer.write(self._upload_head("Content-Length: 200000\r\n") + self.FILE_PART + b"RIFF")
        out = await http_answer(reader, t0, limit)
        writer.close()
        return {**out, "peer": peer}

    async def upload_endless(self, t0, limit):
        reader, writer = await asyncio.open_connection(HOST, self.port)
        peer = local_peer(writer)
        answer = asyncio.ensure_future(http_answer(reader, t0, limit))
        writer.write(self._upload_head("Transfer-Encoding: chunked\r\n")
                     + b"%x\r\n%s\r\n" % (len(self.FILE_PART), self.FILE_PART))
        block = bytes(65536)
        chunk = b"%x\r\n%s\r\n" % (len(block), block)
        sent = 0
        while not answer.done() and sent < 20 * self.args.max_upload_bytes:  # never ends
            try:
                writer.write(chunk)
                await asyncio.wait_for(writer.drain(), 2.0)
            except (ConnectionError, asyncio.TimeoutError):
                break
            sent += len(block)
        out = await answer
        writer.close()
        return {**out, "peer": peer, "sent_mb": round(sent / 2**20, 1)}


async def subscriber(port: int, t0: float, released: asyncio.Event, opened: list) -> dict:
    """A subscriber of a call that never comes: it must wait, untouched, until it leaves."""
    loop = asyncio.get_running_loop()
    try:
        reader, writer = await asyncio.wait_for(
            ws_open(port, f"/calls/never-{uuid.uuid4()}"), 60.0)
    except (ConnectionError, OSError, asyncio.TimeoutError) as e:
        return {"kind": "subscriber", "how": "refused", "code": None, "error": repr(e)[:120],
                "seconds": loop.time() - t0}
    opened.append(loop.time() - t0)
    peer = local_peer(writer)
    leaving = asyncio.ensure_future(released.wait())
    while True:
        reading = asyncio.ensure_future(read_frame(reader))
        await asyncio.wait({reading, leaving}, return_when=asyncio.FIRST_COMPLETED)
        if not reading.done() or reading.exception() is not None:
            break
        opcode, payload = reading.result()
        if opcode != 0x9:
            break
        writer.write(frame(0xA, payload))  # the server's keepalive ping: answered
    if reading.done():  # a message or a close before it left
        leaving.cancel()
        try:
            opcode, payload = reading.result()
            out = {"how": "close" if opcode == 0x8 else "message",
                   "code": close_code(payload) if opcode == 0x8 else None}
        except (asyncio.IncompleteReadError, ConnectionError):
            out = {"how": "eof", "code": None}
    else:
        reading.cancel()
        out = {"how": "waited", "code": None}
        writer.write(frame(0x8, (1000).to_bytes(2, "big")))  # it leaves, as a client does
    writer.close()
    return {"kind": "subscriber", **out, "peer": peer, "seconds": loop.time() - t0}


# -- the server ---------------------------------------------------------------------------------
def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Sampler:
    """The server's RSS and open descriptors every ``SAMPLE_SECONDS``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, int, int]] = []  # (t, rss, fds)

    async def run(self, t0: float) -> None:
        while True:
            try:
                self.samples.append((time.monotonic() - t0, proc_sample(self.pid)[1],
                                     fd_count(self.pid)))
            except OSError:
                return
            await asyncio.sleep(SAMPLE_SECONDS)


def server_ends(lines: list[tuple[float, str]]) -> dict[str, dict]:
    """The server's log line of each connection and call that ended, by peer address."""
    out = {}
    for _, event in log_events(lines):
        if event.get("event") in ("connection", "call", "head_timeout", "write_stalled"):
            out.setdefault(event.get("peer", "-"), {})[event["event"]] = {
                k: event.get(k) for k in ("close_code", "close_reason", "reason", "why")
                if k in event}
    return out


# -- the runs -----------------------------------------------------------------------------------
async def hostile_phase(args, port: int, audiosocket_port: int, speech: np.ndarray,
                        start_at: float, release) -> dict:
    """The hostile clients (in their own process: their work does not stall the healthy
    clients' loop): from ``start_at`` (monotonic), the subscribers at
    ``--subscriber-rate`` a second until all are in, then ``--per-kind`` of each kind,
    spread over a window; the subscribers leave once ``release`` (a process Event) is set
    or every kind has ended and ``--seconds`` have passed."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    t0 = loop.time()
    released = asyncio.Event()
    opened: list[float] = []
    subscribers = []
    for n in range(args.subscribers):
        subscribers.append(asyncio.ensure_future(subscriber(port, loop.time(), released,
                                                            opened)))
        if n % 20 == 19:
            await asyncio.sleep(20 / args.subscriber_rate)
    while (len(opened) < len(subscribers) and not all(s.done() for s in subscribers)
           and loop.time() - t0 < 60.0):  # every subscriber in (or refused)
        await asyncio.sleep(0.1)
    subscribers_in = loop.time() - t0
    hostile = Hostile(args, port, audiosocket_port, speech)
    kinds = [k for _ in range(args.per_kind) for k in KINDS]
    window = max(1.0, args.seconds * 0.4 - subscribers_in)  # within the healthy run
    tasks, open_peak = [], 0
    for kind in kinds:
        tasks.append(asyncio.ensure_future(hostile.run(kind, loop.time() - t0)))
        open_peak = max(open_peak, sum(not t.done() for t in tasks))
        await asyncio.sleep(window / len(kinds))
    ends = await asyncio.gather(*tasks, return_exceptions=True)
    await loop.run_in_executor(None, release.wait, 1.0 + args.seconds + 60.0)
    released.set()
    subs = await asyncio.gather(*subscribers, return_exceptions=True)
    return {"hostile": [e if isinstance(e, dict) else
                        {"kind": "?", "how": "error", "error": repr(e)} for e in ends],
            "subscribers": [x if isinstance(x, dict) else
                            {"kind": "subscriber", "how": "error", "error": repr(x)}
                            for x in subs],
            "subscribers_in_seconds": round(subscribers_in, 2),
            "hostile_open_peak": open_peak}


def hostile_process(out, *args) -> None:
    out.put(asyncio.run(hostile_phase(*args)))


async def healthy_run(args, port: int, programs, pacing, sampler: Sampler,
                      hostile: tuple | None = None) -> dict:
    """The healthy clients (``load.run_client``), and with ``hostile`` (the AudioSocket
    port and the speech) the hostile clients beside them, from a process of their own."""
    chunk = pacing.piece
    stats = [ClientStats() for _ in programs]
    t0 = time.monotonic() + 1.0
    url = f"ws://{HOST}:{port}/"
    timeline = Timeline(t0)
    sampling = asyncio.ensure_future(sampler.run(t0))
    client_lags: list = []  # this process's own stalls (a late client is not the server)
    watching = asyncio.ensure_future(watch_loop(t0, client_lags))
    tasks = [asyncio.ensure_future(run_client(url, p, chunk, pacing, t0 + (n % 20) * 0.005, s,
                                              timeline))
             for n, (p, s) in enumerate(zip(programs, stats))]
    child = None
    if hostile is not None:
        context = multiprocessing.get_context("spawn")
        out, release = context.Queue(), context.Event()
        child = context.Process(target=hostile_process, args=(
            out, args, port, *hostile, t0 + 1.0, release), daemon=True)
        child.start()
    limit = 1.0 + args.seconds + 60.0  # audio, then its last finals
    _, pending = await asyncio.wait(tasks, timeout=limit)
    for task in pending:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    found: dict = {"hostile": [], "subscribers": [], "hostile_open_peak": 0}
    if child is not None:
        release.set()
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, out.get, True, 120.0)
        child.join(10)
    sampling.cancel()
    watching.cancel()
    for s, r in zip(stats, results):
        if isinstance(r, BaseException):
            s.error = repr(r)[:200]
    return {"stats": stats, **found, "timeline": timeline.report(),
            "client_loop_lag": sorted(client_lags, key=lambda x: -x[1])[:20]}


def healthy_report(stats: list[ClientStats]) -> dict:
    return {"clients": len(stats),
            "utterances": sum(s.utterances for s in stats),
            "finals": sum(len(s.final_utterances) for s in stats),
            "lost": sum(s.lost for s in stats), "late": sum(s.late for s in stats),
            "unfinished": sum(not s.finished for s in stats),
            "errors": [s.error for s in stats if s.error][:5],
            "chunk_latency_ms": latency_ms([x for s in stats for x in s.chunk_latency])}


def kind_report(ends: list[dict], allowed: set, limit: float) -> dict:
    seen: dict[str, int] = {}
    codes: dict[str, int] = {}
    for e in ends:
        how = e["how"] if e.get("code") is None else f"{e['how']} {e['code']}"
        seen[how] = seen.get(how, 0) + 1
        if e.get("code") is not None:
            codes[str(e["code"])] = codes.get(str(e["code"]), 0) + 1
    times = sorted(e["seconds"] for e in ends)
    ok = [e for e in ends if (e["how"], e.get("code")) in allowed and e["seconds"] <= limit]
    return {"count": len(ends), "ended": seen, "close_codes": codes,
            "expected": sorted(f"{h} {c}" if c is not None else h for h, c in allowed),
            "limit_seconds": round(limit, 1),
            "seconds_to_close": {"median": round(times[len(times) // 2], 3),
                                 "max": round(times[-1], 3)} if times else None,
            "as_expected": len(ok), "unexpected": [e for e in ends if e not in ok][:5]}


async def settle(pid: int, baseline: int, seconds: float) -> tuple[int, float]:
    """Wait until the server's descriptors are back at ``baseline`` (at most ``seconds``):
    (the count, seconds waited)."""
    t0 = time.monotonic()
    while True:
        n = fd_count(pid)
        if n <= baseline or time.monotonic() - t0 > seconds:
            return n, round(time.monotonic() - t0, 2)
        await asyncio.sleep(0.2)


def measure(args) -> dict:
    from bench.common.devset import dev_set
    from streamdec import Recognizer, RecognizerConfig
    from streamdec.search.config import with_method

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # the subscribers' sockets
    need = args.subscribers + 60 * len(KINDS) + args.healthy + 1024
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    utts = [u.samples.astype(np.float32) for u in dev_set("espeak", args.utterances)]
    # the server's search and the healthy finals' reference search: the same (--search)
    rec = Recognizer(RecognizerConfig(search=with_method(RecognizerConfig().search, args.search)))
    pacing = Pacing(0.0, int(args.chunk_ms * RATE / 1000), rec.meta, rec.config.features)
    programs = build_programs(utts, args.gap, args.seconds, args.healthy)
    port, audiosocket_port = free_port(), free_port()
    server_args = ["--search", args.search, "--audiosocket-port", str(audiosocket_port),
                   "--idle-timeout", str(args.idle_timeout),
                   "--max-upload-bytes", str(args.max_upload_bytes),
                   "--max-connections", str(args.subscribers + 100 * len(KINDS)
                                            + args.healthy + 100)]
    load_before = load_average()
    proc, log = serve_streamdec(port, server_args)
    report: dict = {"setup": {
        "benchmark": "hostile", "command": " ".join(sys.argv), "server": " ".join(proc.args),
        "healthy": args.healthy, "seconds": args.seconds, "chunk_ms": args.chunk_ms,
        "gap": args.gap, "per_kind": args.per_kind, "subscribers": args.subscribers,
        "pings": args.pings, "slowloris_interval": args.slowloris_interval,
        "idle_timeout_seconds": args.idle_timeout, "max_upload_bytes": args.max_upload_bytes}}
    try:
        time.sleep(1.0)
        fds_idle = fd_count(proc.pid)
        rss_idle = proc_sample(proc.pid)[1]
        quiet_sampler = Sampler(proc.pid)
        t_quiet = time.monotonic()
        quiet = asyncio.run(healthy_run(args, port, programs, pacing, quiet_sampler))
        quiet_events = server_events(log.since(t_quiet), t_quiet)
        fds_after_quiet, _ = asyncio.run(settle(proc.pid, fds_idle, args.settle))
        sampler = Sampler(proc.pid)
        t_hostile = time.monotonic()
        loud = asyncio.run(healthy_run(args, port, programs, pacing, sampler,
                                       (audiosocket_port, utts[0])))
        fds_after, settled = asyncio.run(settle(proc.pid, fds_idle, args.settle))
        ends = server_ends(log.since(t_hostile))
        loud_events = server_events(log.since(t_hostile), t_hostile)
    finally:
        proc.send_signal(15)
        try:
            status = proc.wait(timeout=60)
        except Exception:
            proc.kill()
            status = "killed"
    time.sleep(0.5)  # the log reader's last lines
    lines = [line for _, line in log.lines]
    tracebacks = sum("Traceback" in line for line in lines)

    # healthy: identical finals, on time
    same = [a.texts == b.texts for a, b in zip(quiet["stats"], loud["stats"])]
    quiet_h, loud_h = healthy_report(quiet["stats"]), healthy_report(loud["stats"])
    healthy_ok = (all(same) and all(h["lost"] == 0 and h["late"] == 0 and h["unfinished"] == 0
                                    and not h["errors"] for h in (quiet_h, loud_h)))
    report["healthy"] = {"finals_identical": all(same),
                         "clients_with_different_finals": same.count(False),
                         "quiet": quiet_h, "hostile": loud_h,
                         "late": quiet_h["late"] + loud_h["late"]}

    # hostile kinds: how each ended, from the client and from the server's log
    kinds = {}
    by_kind: dict[str, list[dict]] = {}
    for e in loud["hostile"]:
        by_kind.setdefault(e["kind"], []).append(e)
    for kind in KINDS:
        allowed, limit = expected(kind, args.idle_timeout)
        got = by_kind.get(kind, [])
        for e in got:
            server = ends.get(e.get("peer"), {})
            e["server"] = server
            if kind == "cut_header":  # the client left: its end is the server's line
                code = server.get("connection", {}).get("close_code")
                e.update(how="logged" if "connection" in server else "not_logged", code=code)
        kinds[kind] = kind_report(got, allowed, limit)
        kinds[kind]["server_logged"] = sum(1 for e in got if e["server"])
    subs = loud["subscribers"]
    kinds["subscriber"] = {"count": len(subs),
                           "ended": {h: sum(1 for s in subs if s["how"] == h)
                                     for h in sorted({s["how"] for s in subs})},
                           "expected": ["waited"], "as_expected":
                               sum(1 for s in subs if s["how"] == "waited")}
    report["hostile"] = kinds

    # RSS and descriptors
    quiet_peak = max((r for _, r, _ in quiet_sampler.samples), default=rss_idle)
    peak = max((r for _, r, _ in sampler.samples), default=rss_idle)
    waiting = sum(1 for x in loud["subscribers"] if x["how"] == "waited")
    bound = (quiet_peak + RSS_PER_CONNECTION * loud["hostile_open_peak"]
             + RSS_PER_SUBSCRIBER * waiting + RSS_SLACK)
    mb = lambda b: round(b / 2**20, 1)  # noqa: E731
    report["rss_mb"] = {"idle": mb(rss_idle), "quiet_peak": mb(quiet_peak),
                        "hostile_peak": mb(peak), "bound": mb(bound),
                        "bound_rule": f"quiet peak + {RSS_PER_CONNECTION // 1024} KiB x "
                                      f"{loud['hostile_open_peak']} hostile connections open "
                                      f"at once + {RSS_PER_SUBSCRIBER // 1024} KiB x "
                                      f"{waiting} subscribers + {RSS_SLACK >> 20} MiB",
                        "timeline": [(round(t), mb(r)) for t, r, _ in sampler.samples[::8]]}
    report["fds"] = {"baseline": fds_idle, "after_quiet": fds_after_quiet,
                     "hostile_peak": max((f for _, _, f in sampler.samples), default=None),
                     "after": fds_after, "seconds_to_baseline": settled,
                     "timeline": [(round(t), f) for t, _, f in sampler.samples[::8]]}
    report["server"] = {"exit_status": status, "tracebacks": tracebacks,
                        "log_lines": len(lines)}
    report["verdicts"] = {
        "healthy": healthy_ok,
        "rss": peak <= bound,
        "fds": fds_after <= fds_idle,
        "kinds": all(v["as_expected"] == v["count"] and v["count"] > 0
                     for v in kinds.values()),
        "server": status == 0 and tracebacks == 0}
    report["passed"] = all(report["verdicts"].values())
    report["diagnostics"] = {  # where the healthy streams' latency went, if it did
        "quiet": {"server_events": quiet_events, "client_loop_lag": quiet["client_loop_lag"],
                  "healthy_timeline": quiet["timeline"]},
        "hostile": {"server_events": loud_events, "client_loop_lag": loud["client_loop_lag"],
                    "healthy_timeline": loud["timeline"],
                    "subscribers_in_seconds": loud.get("subscribers_in_seconds")},
        "timeline_columns": ["window start s", "results", f"over {SLOW_MS:g} ms",
                             "max chunk latency ms", "max send lag s"]}
    report["machine"] = machine(load_before)
    return report


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--out", type=Path, required=True, help="JSON report")
    p.add_argument("--healthy", type=int, default=50, help="healthy real-time clients")
    p.add_argument("--search", default="greedy", help="the server's search (default greedy, "
                   "the cheap one: what is measured is the hostile clients' effect)")
    p.add_argument("--seconds", type=float, default=60.0, help="audio per healthy client")
    p.add_argument("--per-kind", type=int, default=40, help="hostile connections per kind")
    p.add_argument("--subscribers", type=int, default=2000,
                   help="/calls/{id} subscribers of calls that never come")
    p.add_argument("--subscriber-rate", type=float, default=200.0,
                   help="subscribers connecting a second (they all come before the rest)")
    p.add_argument("--pings", type=int, default=20000, help="pings per ping flood")
    p.add_argument("--slowloris-interval", type=float, default=1.0,
                   help="seconds between a slowloris handshake's bytes")
    p.add_argument("--idle-timeout", type=float, default=10.0,
                   help="the server's idle_timeout_seconds (the hostile kinds' deadlines)")
    p.add_argument("--max-upload-bytes", type=int, default=1 << 20,
                   help="the server's max_upload_bytes")
    p.add_argument("--chunk-ms", type=float, default=100.0, help="audio per healthy message")
    p.add_argument("--gap", type=float, default=2.5, help="silence after each utterance (s)")
    p.add_argument("--utterances", type=int, default=20, help="dev-set utterances used")
    p.add_argument("--settle", type=float, default=30.0,
                   help="most seconds to wait for the descriptors to return to baseline")
    args = p.parse_args()
    report = measure(args)
    write_report(args.out, report)
    print(json.dumps({"passed": report["passed"], "verdicts": report["verdicts"]}))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
