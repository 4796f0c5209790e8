"""The WebSocket layer's short way in for audio (``streamdec.server.wsframes``): frames cut
anywhere by TCP, fragments, pings, text, frames too big, unmasked or with extension bits,
against a real server on a loopback port, with a client written from RFC 6455 section 5
(raw socket: the cuts are ours); the same transcript as a websockets client's, and each
bad frame its close code (1009, 1002), while a client beside it is undisturbed."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import socket
import time

import numpy as np
import pytest
import websockets

from server_utils import ServerProcess, UNIT, run, sherpa_client, wait_for_logged
from streamdec.server.config import ServerConfig
from streamdec.server.wsframes import frame_extent
from test_builtin_transcribe import speak


# -- a client from RFC 6455 ------------------------------------------------------------------
def frame(opcode: int, payload: bytes, fin: bool = True, mask: bool = True,
          rsv: int = 0) -> bytes:
    """One client frame (section 5.2): masked with a random key unless ``mask`` is false."""
    n = len(payload)
    first = (0x80 if fin else 0) | rsv | opcode
    bit = 0x80 if mask else 0
    if n < 126:
        head = bytes([first, bit | n])
    elif n < 1 << 16:
        head = bytes([first, bit | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([first, bit | 127]) + n.to_bytes(8, "big")
    if not mask:
        return head + payload
    key = os.urandom(4)
    data = np.frombuffer(payload, np.uint8) ^ np.resize(np.frombuffer(key, np.uint8), n)
    return head + key + data.tobytes()


class RawClient:
    """A WebSocket client over a plain socket: the handshake, frames sent as given bytes,
    the server's (unmasked) frames read back."""

    def __init__(self, port: int, path: str = "/") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60 * UNIT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                          "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                          .encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.sock.recv(4096)
        response, self.buf = self.buf.split(b"\r\n\r\n", 1)
        assert response.startswith(b"HTTP/1.1 101"), response

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            more = self.sock.recv(65536)
            if not more:
                raise ConnectionError("closed without a close frame")
            self.buf += more
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def messages(self) -> tuple[list[str], int | None]:
        """Text messages until the server's close frame; (texts, its close code)."""
        texts = []
        while True:
            first, second = self._read(2)
            n = second & 0x7F
            if n == 126:
                n = int.from_bytes(self._read(2), "big")
            elif n == 127:
                n = int.from_bytes(self._read(8), "big")
            payload = self._read(n)
            opcode = first & 0x0F
            if opcode == 0x1:
                texts.append(payload.decode())
            elif opcode == 0x8:
                code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
                return texts, code
            elif opcode == 0xA:
                texts.append("<pong %s>" % payload.decode())

    def close(self) -> None:
        self.sock.close()


def final_keys(results: list[dict]) -> list[tuple]:
    """Each final with text: (text, timestamps, start time)."""
    return [(r["text"], tuple(r["timestamps"]), r["start_time"])
            for r in results if r["is_final"] and r["text"]]


def finals(texts: list[str]) -> list[tuple]:
    """``final_keys`` of the JSON results among received texts."""
    return final_keys([json.loads(t) for t in texts if t.startswith("{")])


@pytest.fixture(scope="module")
def server():
    s = ServerProcess()
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def audio(tmp_path_factory):
    return speak("please call me back tomorrow morning", tmp_path_factory.mktemp("ws") / "call.wav")


@pytest.fixture(scope="module")
def reference(server, audio):
    out = run(sherpa_client(server.url(), audio, 1600))
    assert out["done"] and out["results"]
    return final_keys(out["results"])


# -- the header ------------------------------------------------------------------------------
def test_frame_extent_reads_every_length_form():
    for n, head in ((0, 6), (125, 6), (126, 8), (65535, 8), (65536, 14)):
        data = frame(0x2, b"\0" * n)
        assert frame_extent(data, 0) == (head, n)
        assert frame_extent(b"xx" + data, 2) == (head, n)
        for cut in range(head):  # the header not all there yet
            assert frame_extent(data[:cut], 0) is None
    assert frame_extent(frame(0x2, b"abc", mask=False), 0) == (2, 3)


# -- a real server ---------------------------------------------------------------------------
def test_frames_cut_anywhere_give_the_transcript(server, audio, reference):
    data = audio.astype("<f4").tobytes()
    frames, i, sizes = [], 0, [6400, 4, 8, 1200, 400, 70000]  # whole samples; 7, 16, 64-bit
    while i < len(data):
        frames.append(frame(0x2, data[i:i + sizes[len(frames) % len(sizes)]]))
        i += sizes[(len(frames) - 1) % len(sizes)]
    frames.insert(3, frame(0x9, b"ping!"))  # a ping among the audio: answered, no more
    stream = b"".join(frames)
    rng = random.Random(7)
    client = RawClient(server.port)
    pos = 0
    while pos < len(stream):  # cut at random, down to single bytes within headers
        step = rng.choice([1, 2, 3, 7, 100, 1500, 9000])
        client.sock.sendall(stream[pos:pos + step])
        pos += step
        time.sleep(0.0005)
    client.sock.sendall(frame(0x1, b"Done"))
    texts, code = client.messages()
    client.close()
    assert code == 1000 and texts[-1] == "Done!"
    assert "<pong ping!>" in texts
    assert finals(texts) == reference


def test_whole_frames_in_one_write_and_fragments_give_the_transcript(server, audio,
                                                                     reference):
    data = audio.astype("<f4").tobytes()
    client = RawClient(server.port)
    client.sock.sendall(b"".join(frame(0x2, data[i:i + 3200])
                                 for i in range(0, len(data), 3200)))  # all in one write
    client.sock.sendall(frame(0x1, b"Done"))
    texts, code = client.messages()
    client.close()
    assert code == 1000 and finals(texts) == reference

    async def fragmented():  # websockets sends an iterable as one fragmented message
        async with websockets.connect(server.url(), max_size=None) as ws:
            for i in range(0, len(data), 6400):
                piece = data[i:i + 6400]
                await ws.send([piece[:1000], piece[1000:4000], piece[4000:]])
            await ws.send("Done")
            return [m async for m in ws]

    assert finals(run(fragmented())) == reference


def logged_after(server, before: int, timeout: float = 10.0, peer: str | None = None) -> dict:
    """The connection log line after the first ``before`` ones (once written); with
    ``peer`` ("host:port"), that client's line (another client's may come first)."""
    def mine(lines):
        return [e for e in lines if peer is None or e["peer"] == peer]
    return mine(wait_for_logged(server, before, mine, timeout))[0]


def test_audio_is_fed_as_it_arrives_and_gives_what_the_queue_gives(server, audio, reference):
    """A client's whole binary frames, sent while its session waits for a message, are fed
    by the WebSocket layer at once (``direct_messages`` of its log line): paced 100 ms
    messages, nearly all of them. Frames that take the message queue (after a fragment:
    uvicorn's own handling) give the same finals."""
    data = audio.astype("<f4").tobytes()
    piece = 6400  # 100 ms
    before = len(server.connections_logged())

    peers = []

    async def paced():
        async with websockets.connect(server.url(), max_size=None) as ws:
            peers.append("%s:%d" % ws.local_address[:2])
            for i in range(0, len(data), piece):
                await ws.send(data[i:i + piece])
                await asyncio.sleep(0.1)
            await ws.send("Done")
            return [m async for m in ws]

    assert finals(run(paced())) == reference
    line = logged_after(server, before, peer=peers[-1])
    # most of them: one may come while the session's task is not waiting yet (the first,
    # before it first reads) or is busy with a result
    sent = -(-len(data) // piece)
    assert sent // 2 < line["direct_messages"] <= sent

    async def fragmented_first():  # every message after a fragment takes the queue
        async with websockets.connect(server.url(), max_size=None) as ws:
            peers.append("%s:%d" % ws.local_address[:2])
            await ws.send([data[:1000], data[1000:piece]])
            for i in range(piece, len(data), piece):
                await ws.send(data[i:i + piece])
            await ws.send("Done")
            return [m async for m in ws]

    assert finals(run(fragmented_first())) == reference
    assert logged_after(server, before, peer=peers[-1])["direct_messages"] == 0


def test_audio_fed_as_it_arrives_holds_the_reads_while_the_engine_is_behind(audio):
    """Sent far faster than real time to a server that lets 0.5 s of audio wait undecoded:
    the frames fed at once hold the socket's reads until the engine catches up (paused
    reads in the log line, as the queue's way counts them), and the transcript is the one
    of the queue's way (``--max-pending-seconds`` changes no result)."""
    s = ServerProcess("--max-pending-seconds", "0.5")
    try:
        gap = np.zeros(32000, audio.dtype)  # 2 s of silence: an endpoint after each
        long = np.concatenate([audio, gap] * 4)
        data = long.astype("<f4").tobytes()

        async def client(first_fragmented: bool):
            async with websockets.connect(s.url(), max_size=None) as ws:
                start = 0
                if first_fragmented:
                    await ws.send([data[:1000], data[1000:3200]])
                    start = 3200
                for i in range(start, len(data), 3200):  # 50 ms messages, no pause
                    await ws.send(data[i:i + 3200])
                await ws.send("Done")
                return [m async for m in ws]

        direct = finals(run(client(False)))
        line = logged_after(s, 0)
        queued = finals(run(client(True)))
        queued_line = logged_after(s, 1)
    finally:
        assert s.stop() == 0
    assert direct == queued and len(direct) == 4
    assert line["direct_messages"] > 0 and line["reads_paused"] > 0
    assert line["audio_seconds"] == pytest.approx(len(long) / 16000, abs=1e-3)
    assert queued_line["direct_messages"] == 0 and queued_line["reads_paused"] > 0


@pytest.mark.parametrize("case, code", [
    ("too_big", 1009),  # over ws_max_size: cut off before it is read
    ("unmasked", 1002),  # a client frame must be masked
    ("rsv", 1002),  # no extension was agreed
    ("bad_opcode", 1002),
])
def test_a_bad_frame_gets_its_close_code_and_disturbs_no_other_client(server, audio,
                                                                      reference, case, code):
    limit = 4 * ServerConfig().max_message_bytes
    bad = {"too_big": frame(0x2, b"\0" * (limit + 4))[:200],  # the server stops it here
           "unmasked": frame(0x2, b"\0" * 64, mask=False),
           "rsv": frame(0x2, b"\0" * 64, rsv=0x40),
           "bad_opcode": frame(0x3, b"\0" * 64)}[case]

    async def both():
        healthy = asyncio.ensure_future(sherpa_client(server.url(), audio, 1600))

        def broken():
            client = RawClient(server.port)
            client.sock.sendall(frame(0x2, b"\0" * 6400) + bad)
            try:
                return client.messages()[1]
            finally:
                client.close()

        got = await asyncio.get_running_loop().run_in_executor(None, broken)
        return got, await healthy

    got, healthy = run(both())
    assert got == code
    assert healthy["done"] and final_keys(healthy["results"]) == reference


# -- the class itself, on a transport that records what it is told -----------------------------
class Transport:
    """The socket boundary of an asyncio protocol: writes recorded, reading paused or not."""

    def __init__(self) -> None:
        self.written, self.paused, self.closed, self.aborted = b"", False, False, False

    def write(self, data: bytes) -> None:
        self.written += data

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def get_extra_info(self, name: str, default=None):
        return {"peername": ("127.0.0.1", 5), "sockname": ("127.0.0.1", 6)}.get(name, default)


async def _idle_app(scope, receive, send):  # accepts, then leaves the messages queued
    assert (await receive())["type"] == "websocket.connect"
    await send({"type": "websocket.accept"})
    await asyncio.sleep(3600)


async def handshaken():
    """A FastBinaryProtocol on a recording transport, past a client's handshake (an app
    that accepts and then reads nothing): (protocol, transport)."""
    import uvicorn
    from uvicorn.server import ServerState

    from streamdec.server.wsframes import FastBinaryProtocol

    config = uvicorn.Config(_idle_app, ws=FastBinaryProtocol, ws_max_size=100_000,
                            lifespan="off", log_level="warning", ws_per_message_deflate=False)
    config.load()
    proto = FastBinaryProtocol(config, ServerState(), {})
    transport = Transport()
    proto.connection_made(transport)
    proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                        b"Connection: Upgrade\r\nSec-WebSocket-Key: "
                        b"dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    for _ in range(5):
        await asyncio.sleep(0)
    assert transport.written.startswith(b"HTTP/1.1 101")
    transport.written = b""
    return proto, transport


def stop(proto) -> None:
    for task in list(proto.tasks):
        task.cancel()


def test_whole_binary_frames_take_the_short_way_and_keep_uvicorn_s_messages():
    async def main():
        proto, transport = await handshaken()
        payloads = [os.urandom(n) for n in (0, 1, 125, 126, 5000, 65536)]
        stream = b"".join(frame(0x2, p) for p in payloads) + frame(0x1, "Done".encode())
        for i in range(0, len(stream), 997):
            proto.data_received(stream[i:i + 997])
        assert proto.fast is True and transport.paused
        got = [proto.queue.get_nowait() for _ in range(len(payloads) + 1)]
        assert got == [{"type": "websocket.receive", "bytes": p} for p in payloads] + [
            {"type": "websocket.receive", "text": "Done"}]
        proto.data_received(frame(0x2, b"ab", fin=False) + frame(0x0, b"cd"))  # fragments:
        assert proto.fast is False  # uvicorn's own handling from here on
        assert proto.queue.get_nowait() == {"type": "websocket.receive", "bytes": b"abcd"}
        stop(proto)

    asyncio.run(main())


def test_whole_binary_frames_go_to_the_app_s_sink_while_nothing_waits_in_the_queue():
    from streamdec.server.wsframes import DIRECT_AUDIO

    async def main():
        proto, transport = await handshaken()
        assert proto.scope["extensions"][DIRECT_AUDIO] is proto  # where the app finds it
        offered, answers = [], [True, False, True]
        proto.binary_sink = lambda payload: offered.append(payload) or answers.pop(0)
        one, two, three, four = (os.urandom(n) for n in (8, 9, 10, 11))
        proto.data_received(frame(0x2, one))  # taken: nothing queued, reads go on
        assert offered == [one] and proto.queue.empty() and not transport.paused
        # declined: queued as ever (reads paused); the frames after it are not offered
        # while it waits (no message overtakes another), text never is
        proto.data_received(frame(0x2, two) + frame(0x2, three) + frame(0x1, b"Done"))
        assert offered == [one, two] and transport.paused
        got = [await proto.receive() for _ in range(3)]
        assert got == [{"type": "websocket.receive", "bytes": two},
                       {"type": "websocket.receive", "bytes": three},
                       {"type": "websocket.receive", "text": "Done"}]
        assert not transport.paused  # the app took them all: uvicorn resumed the reads
        proto.data_received(frame(0x2, four))  # the queue empty again: offered, taken
        assert offered == [one, two, four] and proto.queue.empty()
        # the app holds the reads itself (back-pressure of what it took) ...
        proto.pause_reads()
        assert transport.paused
        proto.resume_reads()
        assert not transport.paused
        # ... and does not resume them while a queued message waits for it
        proto.binary_sink = None
        proto.data_received(frame(0x2, one))
        proto.resume_reads()
        assert transport.paused
        assert await proto.receive() == {"type": "websocket.receive", "bytes": one}
        assert not transport.paused
        stop(proto)

    asyncio.run(main())


def test_text_messages_go_out_as_the_frames_websockets_writes():
    from websockets.frames import Frame, Opcode

    from streamdec.server.wsframes import text_frame

    def websockets_frame(text: str) -> bytes:
        return Frame(Opcode.TEXT, text.encode()).serialize(mask=False, extensions=[])

    # every length form (7, 16 and 64 bits) at its edges, multi-byte UTF-8 included
    texts = ["", "x" * 125, "x" * 126, "é" * 63, "é" * 64, "x" * 65535, "x" * 65536,
             json.dumps({"text": "ÉTÉ ☎", "tokens": ["É"]}, ensure_ascii=False)]
    for text in texts:
        assert text_frame(text.encode()) == websockets_frame(text), len(text)

    async def main():
        proto, transport = await handshaken()
        proto.conn.send_text = None  # the short way never reaches websockets' own
        for text in texts:
            await proto.send({"type": "websocket.send", "text": text})
        assert transport.written == b"".join(websockets_frame(t) for t in texts)
        del proto.conn.send_text
        # writes paused (a slow client): uvicorn's send, which waits for them to resume
        transport.written = b""
        proto.writable.clear()
        sending = asyncio.ensure_future(proto.send({"type": "websocket.send", "text": "late"}))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not sending.done() and transport.written == b""
        proto.writable.set()
        await sending
        assert transport.written == websockets_frame("late")
        # a binary message and the close: uvicorn's, unchanged
        transport.written = b""
        await proto.send({"type": "websocket.send", "bytes": b"\x01\x02"})
        assert transport.written == Frame(Opcode.BINARY, b"\x01\x02").serialize(
            mask=False, extensions=[])
        await proto.send({"type": "websocket.close", "code": 1000, "reason": ""})
        assert proto.close_sent
        with pytest.raises(RuntimeError, match="after sending 'websocket.close'"):  # uvicorn's
            await proto.send({"type": "websocket.send", "text": "after"})
        stop(proto)

    asyncio.run(main())


# -- peers that misbehave (bench/daemon/hostile.py tries each against a whole server) ----------------
def close_frame(code: int, reason: str) -> bytes:
    from websockets.frames import Close, Frame, Opcode

    return Frame(Opcode.CLOSE, Close(code, reason).serialize()).serialize(mask=False,
                                                                         extensions=[])


def test_a_text_message_that_is_not_utf8_closes_1007_without_a_traceback(caplog):
    async def main():
        proto, transport = await handshaken()
        with caplog.at_level("INFO"):
            proto.data_received(frame(0x1, b"ok \xff\xfe"))  # uvicorn logged a traceback
        assert transport.written == close_frame(1007, "text message is not valid UTF-8")
        assert transport.closed
        assert proto.queue.get_nowait() == {"type": "websocket.disconnect", "code": 1007,
                                            "reason": "text message is not valid UTF-8"}
        assert [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")] == []
        stop(proto)

    asyncio.run(main())


def test_a_peer_that_reads_nothing_gets_no_pongs_and_is_cut_after_the_write_timeout(caplog):
    async def main():
        proto, transport = await handshaken()
        proto.write_timeout = 0.2 * UNIT
        proto.data_received(frame(0x9, b"p1"))  # writes flow: answered
        assert transport.written.endswith(b"p1") and transport.written[0] == 0x8A
        transport.written = b""
        proto.pause_writing()  # the peer reads nothing: the transport's buffer is full
        proto.data_received(frame(0x9, b"p2") * 50)  # pings: no pong piles up
        assert transport.written == b"" and not transport.closed
        proto.resume_writing()  # it read again in time: not cut
        await asyncio.sleep(0.3 * UNIT)
        assert not transport.aborted
        proto.pause_writing()
        with caplog.at_level("WARNING", logger="streamdec.server"):
            await asyncio.sleep(0.1 * UNIT)
            assert not transport.aborted
            await asyncio.sleep(0.2 * UNIT)
        assert transport.aborted  # paused for write_timeout: cut
        events = [json.loads(r.getMessage()) for r in caplog.records
                  if "write_stalled" in r.getMessage()]
        assert [(e["why"], e["seconds"]) for e in events] == [("writes paused", 0.2 * UNIT)]
        stop(proto)

    asyncio.run(main())


def test_a_close_the_peer_never_completes_is_cut():
    async def main():
        proto, transport = await handshaken()
        proto.write_timeout = 0.1 * UNIT
        proto.close_timeout = 0.1 * UNIT
        await proto.send({"type": "websocket.close", "code": 1008, "reason": "idle"})
        assert transport.written == close_frame(1008, "idle")
        await asyncio.sleep(0.15 * UNIT)  # uvicorn's close_timeout: closed (unsent bytes
        assert transport.closed and not transport.aborted  # would keep it open)
        await asyncio.sleep(0.15 * UNIT)  # and write_timeout after it: cut
        assert transport.aborted
        stop(proto)

    asyncio.run(main())


def test_a_ping_flood_is_closed_with_1008_and_keepalive_pings_are_answered():
    from streamdec.server.wsframes import PING_BURST, PING_RATE, TOO_MANY_PINGS

    def pongs(data: bytes) -> int:
        return data.count(bytes([0x8A, 2]) + b"p1")

    async def main():
        proto, transport = await handshaken()
        proto.data_received(frame(0x9, b"p1") * PING_BURST)  # a burst: every one answered
        assert pongs(transport.written) == PING_BURST and not transport.closed
        await asyncio.sleep(3 / PING_RATE)  # three more may come a second later
        transport.written = b""
        proto.data_received(frame(0x9, b"p1") * 3)
        assert pongs(transport.written) == 3 and not transport.closed
        transport.written = b""
        proto.data_received(frame(0x9, b"p1") * 2 + frame(0x2, b"audio"))  # one too many
        assert transport.written == close_frame(1008, TOO_MANY_PINGS)
        assert transport.closed
        assert proto.queue.get_nowait() == {"type": "websocket.disconnect", "code": 1008,
                                            "reason": TOO_MANY_PINGS}
        assert proto.queue.empty()  # the frames after it are not the app's
        stop(proto)

    asyncio.run(main())
