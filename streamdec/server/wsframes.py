"""uvicorn's WebSocket protocol (``websockets-sansio``) with a shorter way in for audio.

A live client sends ten or more binary messages a second, each one whole frame: FIN set,
no extension bits, masked, as RFC 6455 section 5.2 lays out (byte 0 ``0x82``; byte 1 the
mask bit and a length of 7 bits, or 126 / 127 and a 16- / 64-bit length after it; the
4-byte masking key; the payload, XORed with the key). ``FastBinaryProtocol`` reads such
frames itself: it cuts the bytes it receives at frame boundaries, unmasks a whole binary
frame with websockets' own C routine and queues it as the ASGI message uvicorn would
have made, with the same back-pressure (reads pause until the app takes it). That skips
the generator-based parser of websockets, most of the per-message cost of the server's
WebSocket layer. Every other frame (text, ping, pong, close, a fragment, one over the size
limit, one not masked: a protocol error) is handed, whole and in order, to uvicorn's own
handling, which answers, closes or fails exactly as it does without this class.

The short way is taken only on an open connection whose parser holds no bytes (the
handshake done, nothing sent before it); after a fragmented message, a close, or anything
it does not expect it is left for good, so websockets' parser never sees a frame cut in
two.

A whole binary frame can go further still: the app may set ``binary_sink`` (it finds the
protocol in its scope, ``scope["extensions"][DIRECT_AUDIO]``), a callable that takes the
payload at once (True) or declines it (False, and the frame is queued as above). It is
offered a frame only while nothing waits in the queue, so no message overtakes another;
``pause_reads`` / ``resume_reads`` hold the socket's reads for it as the queue's
back-pressure does (a queued message waiting for the app resumes them when the app takes
it, as in uvicorn).

The results go out by a short way too: a text message on an open connection that can be
written to (its transport not paused) and negotiated no extension becomes one unmasked
FIN text frame (byte 0 ``0x81``, the 7-, 16- or 64-bit length, the UTF-8 payload: the
bytes websockets would write) in one ``transport.write``; anything else (binary, close,
a connection closing or whose writes are paused) is uvicorn's ``send``, unchanged.

What uvicorn leaves to the app, for peers that misbehave (``bench/daemon/hostile.py`` tries each):

- a text message that is not UTF-8 closes the connection with 1007, as uvicorn does, but
  without the traceback uvicorn logs for each one;
- a ping flood: a peer may send ``PING_BURST`` pings at once and ``PING_RATE`` a second
  after them (a client's keepalive pings once every few seconds or tens of seconds); one
  that sends more is closed with 1008 ``too many pings``: each ping costs the event loop a
  pass through websockets' parser, and 40 peers sending 20,000 each held it long enough
  to make every healthy stream's results seconds late;
- a peer that reads nothing of what is sent to it: while its writes are paused (the
  transport's buffer over its high-water mark), its pings get no pong (websockets would
  queue one per ping, and a ping flood that never reads grew the server's memory by the
  size of the flood); once paused for ``write_timeout`` seconds (the server's
  ``idle_timeout_seconds``), the connection is cut (TCP reset, logged as
  ``write_stalled``): a send waiting on it would otherwise wait for ever, and a closed
  transport with unsent bytes is never released;
- a closing handshake the peer never completes: uvicorn closes the transport
  ``close_timeout`` seconds after its close frame, which waits for unsent bytes to be
  written; ``write_timeout`` seconds later still open, it is cut as above.
"""

from __future__ import annotations

import json
import logging

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import apply_mask
from websockets.protocol import State

__all__ = ["FastBinaryProtocol", "frame_extent", "text_frame", "DIRECT_AUDIO"]

#: the key of the protocol in its ASGI scope's ``extensions`` (see the module notes)
DIRECT_AUDIO = "streamdec.binary_sink"

_FIN, _RSV, _OPCODE = 0x80, 0x70, 0x0F  # byte 0: final fragment, extension bits, opcode
_FIN_BINARY = _FIN | 0x2
_MASKED = 0x80  # byte 1
_STAY_FAST = (0x1, 0x9, 0xA)  # a whole text frame, a ping, a pong: uvicorn's, then on
_FIN_TEXT = bytes([_FIN | 0x1])

log = logging.getLogger("streamdec.server")

#: pings a peer may send at once, and a second after them (module notes)
PING_BURST, PING_RATE = 100, 10.0
TOO_MANY_PINGS = f"too many pings: over {PING_BURST} at once or {PING_RATE:g} a second"


def text_frame(payload: bytes) -> bytes:
    """A server's (unmasked) FIN text frame of ``payload`` (RFC 6455 section 5.2)."""
    n = len(payload)
    length = (bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big") if n < 1 << 16
              else bytes([127]) + n.to_bytes(8, "big"))
    return _FIN_TEXT + length + payload


def frame_extent(data: bytes | bytearray, pos: int) -> tuple[int, int] | None:
    """(header length, payload length) of the client frame at ``data[pos:]``, or None
    while its header is not all there (the header counts the masking key when the mask
    bit is set)."""
    if len(data) - pos < 2:
        return None
    second = data[pos + 1]
    length, head = second & 0x7F, 2
    if length == 126:
        if len(data) - pos < 4:
            return None
        length, head = int.from_bytes(data[pos + 2:pos + 4], "big"), 4
    elif length == 127:
        if len(data) - pos < 10:
            return None
        length, head = int.from_bytes(data[pos + 2:pos + 10], "big"), 10
    if second & _MASKED:
        head += 4
    if len(data) - pos < head:
        return None
    return head, length


class FastBinaryProtocol(WebSocketsSansIOProtocol):
    """``WebSocketsSansIOProtocol`` that reads whole binary frames itself (module notes)."""

    def __init__(self, *args, write_timeout: float | None = None, **kwargs) -> None:
        """``write_timeout``: cut a peer whose writes stay paused this long (None: never;
        module notes)."""
        super().__init__(*args, **kwargs)
        self.fast: bool | None = None  # None: not decided yet (the handshake is not done)
        self._partial = bytearray()  # the start of a frame not all received yet
        self.binary_sink = None  # the app's taker of whole binary payloads (module notes)
        self.write_timeout = write_timeout
        self._cut_timer = None  # cuts the connection: writes paused, or a close not done
        self._pings = float(PING_BURST)  # pings it may still send now
        self._pinged = 0.0  # when it last sent one (loop time)

    # -- peers that read nothing, or never finish closing (module notes) -----------------------
    def pause_writing(self) -> None:
        super().pause_writing()
        self._cut_after(self.write_timeout, "writes paused")

    def resume_writing(self) -> None:
        if not self.close_sent:
            self._cancel_cut()
        super().resume_writing()

    def connection_lost(self, exc) -> None:
        self._cancel_cut()
        super().connection_lost(exc)

    def _cancel_cut(self) -> None:
        if self._cut_timer is not None:
            self._cut_timer.cancel()
            self._cut_timer = None

    def _cut_after(self, delay: float | None, why: str) -> None:
        if delay is not None and self._cut_timer is None and not self.disconnected:
            self._cut_timer = self.loop.call_later(delay, self._cut, why, delay)

    def _cut(self, why: str, delay: float) -> None:
        self._cut_timer = None
        if self.disconnected:
            return
        client = self.client
        log.warning(json.dumps({"event": "write_stalled", "peer": "%s:%d" % client if client
                                else "-", "why": why, "seconds": delay}))
        self.transport.abort()

    def handle_ping(self) -> None:
        now = self.loop.time()
        self._pings = min(float(PING_BURST), self._pings + (now - self._pinged) * PING_RATE)
        self._pinged = now
        if self._pings < 1.0:  # a flood: closed (module notes)
            self.conn.data_to_send()  # (its pong)
            self._fail(1008, TOO_MANY_PINGS)
            return
        self._pings -= 1.0
        if self.writable.is_set():
            super().handle_ping()
        else:  # the peer reads nothing: no pong to pile up (the flood's size in memory)
            self.conn.data_to_send()

    def _fail(self, code: int, reason: str) -> None:
        """Close for the peer's fault now, as uvicorn closes for a protocol error (the app
        gets the disconnect with this code), unless a close is under way."""
        if self.close_sent or self.conn.state is not State.OPEN:
            return
        self.conn.send_close(code, reason)
        self.handle_parser_exception()
        self._cut_after(self.write_timeout, "close not done")

    def send_receive_event_to_app(self) -> None:
        """uvicorn's, except that a text message that is not UTF-8 closes with 1007
        without a traceback in the log."""
        if self.curr_msg_data_type == "text" and not self.close_sent:
            try:
                b"".join(self.frames).decode()
            except UnicodeDecodeError:
                self.frames = []
                self._fail(1007, "text message is not valid UTF-8")
                return
        super().send_receive_event_to_app()

    def handle_connect(self, event) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:  # the app's scope: where it finds this protocol
            scope.setdefault("extensions", {})[DIRECT_AUDIO] = self

    def pause_reads(self) -> None:
        """Stop reading the socket (the app holds what it took)."""
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def resume_reads(self) -> None:
        """Read the socket again, unless a queued message still waits for the app (taking
        it resumes them, as uvicorn's ``receive`` does) or the connection is closing."""
        if self.read_paused and self.queue.empty() and not self.transport.is_closing():
            self.read_paused = False
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.fast is None and self.handshake_complete:
            self.fast = (self.initial_response is None and self.conn.state is State.OPEN
                         and not self.close_sent and not self.conn.reader.buffer)
        if not self.fast:
            super().data_received(data)
            return
        if self._partial:
            self._partial += data
            data, self._partial = self._partial, bytearray()
        limit = self.config.ws_max_size
        pos, end = 0, len(data)
        while pos < end:
            extent = frame_extent(data, pos)
            if extent is None:
                break
            head, length = extent
            first = data[pos]
            if length > limit or self.close_sent or first & _RSV \
                    or not data[pos + 1] & _MASKED:  # for uvicorn (1009, 1002, ...)
                self._leave(data[pos:])
                return
            if end - pos < head + length:
                break
            if first != _FIN_BINARY:
                super().data_received(bytes(data[pos:pos + head + length]))
                pos += head + length
                if first & _OPCODE not in _STAY_FAST or not first & _FIN:  # a fragment,
                    self._leave(data[pos:])  # a close or a bad opcode: uvicorn from here on
                    return
                continue
            start = pos + head
            payload = apply_mask(memoryview(data)[start:start + length],
                                 bytes(data[start - 4:start]))
            pos = start + length
            sink = self.binary_sink
            if sink is not None and self.queue.empty() and sink(payload):
                continue  # taken by the app at once
            self.queue.put_nowait({"type": "websocket.receive", "bytes": payload})
            self.pause_reads()
        if pos < end:
            self._partial += memoryview(data)[pos:]

    async def send(self, message) -> None:
        text = message.get("text")
        if (text is not None and message["type"] == "websocket.send"
                and message.get("bytes") is None and self.handshake_complete
                and self.initial_response is None and self.writable.is_set()
                and not self.close_sent and not self.disconnected
                and self.conn.state is State.OPEN and not self.conn.extensions):
            self.transport.write(text_frame(text.encode()))
            return
        await super().send(message)
        if message["type"] == "websocket.close" and self.close_sent:
            # uvicorn closes the transport close_timeout after its close frame; a peer
            # that reads nothing keeps a closed transport with unsent bytes open for good
            self._cancel_cut()
            if self.write_timeout is not None:
                self._cut_after(self.close_timeout + self.write_timeout, "close not done")

    def _leave(self, rest: bytes | bytearray) -> None:
        """Hand the rest of the bytes, and all that follow, to uvicorn's own handling."""
        self.fast = False
        if rest:
            super().data_received(bytes(rest))
