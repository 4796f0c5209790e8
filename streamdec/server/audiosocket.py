"""Asterisk AudioSocket (plain TCP, ``--audiosocket-port``): the protocol as a state machine
without I/O.

Asterisk connects on ``AudioSocket(<uuid>,<host>:<port>)`` in the dialplan (or
``Dial(AudioSocket/<host>:<port>/<uuid>)``). Every message is a frame: 1 byte type, 2 bytes
payload length (big-endian), the payload. Types, as Asterisk's ``res_audiosocket`` defines
them (``enum ast_audiosocket_msg_kind``):

=========  ===============================================================================
type       payload
=========  ===============================================================================
``0x00``   hangup (no payload; closing the socket means the same)
``0x01``   the call's UUID, 16 bytes binary: the first frame
``0x03``   a DTMF digit, 1 ASCII byte
``0x10``   audio: signed 16-bit little-endian PCM, mono, 8 kHz (the dialplan application)
``0x11``   .. ``0x18``: the same at 12, 16, 24, 32, 44.1, 48, 96, 192 kHz (the channel
           driver with a higher-rate codec; Asterisk 20.X / 21.X / 22.X / 23.X)
``0xff``   an error on Asterisk's side (payload: its code; 0x01 hangup, 0x02 frame
           forwarding, 0x04 memory)
=========  ===============================================================================

A call is one leg, tagged ``"0"`` (the channel's audio). The protocol carries nothing but
the UUID, audio, DTMF, hangup and errors: a call cannot set its endpoint rules or text
format (the server's apply) nor end an utterance early. ``receive_data`` takes bytes as
they arrive (any split); ``receive_eof`` the end of the connection. A bad frame ends the
call: the events of the frames before it come first, then ``CallFailed`` with the error,
and nothing after it counts.
"""

from __future__ import annotations

import uuid

from ..audio.pcm import decode_pcm
from ..errors import AudioInputError, ClientError
from .call_events import (DTMF_DIGITS, CallAudio, CallDtmf, CallEnded, CallEvent,
                          CallFailed, CallStarted)

__all__ = ["AudioSocketProtocol", "KIND_HANGUP", "KIND_UUID", "KIND_DTMF", "KIND_ERROR",
           "AUDIO_RATES", "frame", "LEG"]

KIND_HANGUP, KIND_UUID, KIND_DTMF, KIND_ERROR = 0x00, 0x01, 0x03, 0xFF
AUDIO_RATES = {0x10: 8000, 0x11: 12000, 0x12: 16000, 0x13: 24000, 0x14: 32000,
               0x15: 44100, 0x16: 48000, 0x17: 96000, 0x18: 192000}
ERROR_CODES = {0x01: "hangup", 0x02: "frame forwarding", 0x04: "memory"}
LEG = "0"
HEADER = 3


def frame(kind: int, payload: bytes = b"") -> bytes:
    """One AudioSocket frame (what Asterisk writes)."""
    return bytes([kind]) + len(payload).to_bytes(2, "big") + payload


class AudioSocketProtocol:
    """Bytes in (``receive_data``, ``receive_eof``), the call's events out."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.call_id: str | None = None
        self.rate: int | None = None  # set by the first audio frame
        self.ended = False

    def receive_data(self, data: bytes) -> list[CallEvent]:
        self._buffer += data
        events: list[CallEvent] = []
        while not self.ended and len(self._buffer) >= HEADER:
            length = int.from_bytes(self._buffer[1:3], "big")
            if len(self._buffer) < HEADER + length:
                break
            kind = self._buffer[0]
            payload = bytes(self._buffer[HEADER:HEADER + length])
            del self._buffer[:HEADER + length]
            try:
                events.extend(self._frame(kind, payload))
            except ClientError as e:  # the frames before it stand
                self.ended = True
                events.append(CallFailed(e))
        if self.ended:
            self._buffer.clear()  # nothing after a hangup or error frame counts
        return events

    def receive_eof(self) -> list[CallEvent]:
        """The connection closed: the call ends (Asterisk closes it on hangup), unless it
        closed inside a frame."""
        if self._buffer:
            need = (HEADER + int.from_bytes(self._buffer[1:3], "big")
                    if len(self._buffer) >= HEADER else HEADER)
            raise ClientError("bad_message", f"connection closed inside a frame: it needs "
                                             f"{need} bytes, {len(self._buffer)} arrived")
        if self.ended:
            return []
        self.ended = True
        return [CallEnded("closed")]

    def _frame(self, kind: int, payload: bytes) -> list[CallEvent]:
        if self.call_id is None and kind != KIND_UUID:
            raise ClientError("bad_message", f"frame of type 0x{kind:02x} before the UUID frame")
        if kind == KIND_UUID:
            if self.call_id is not None:
                raise ClientError("bad_message", "a second UUID frame")
            if len(payload) != 16:
                raise ClientError("bad_message", f"UUID frame of {len(payload)} bytes "
                                                 "(expected 16)")
            self.call_id = str(uuid.UUID(bytes=payload))
            return [CallStarted(self.call_id, (LEG,), {})]
        if kind in AUDIO_RATES:
            rate = AUDIO_RATES[kind]
            if self.rate is not None and rate != self.rate:
                raise ClientError("bad_audio", f"audio frame type 0x{kind:02x} ({rate} Hz) "
                                               f"after {self.rate} Hz audio")
            self.rate = rate
            try:
                samples = decode_pcm(payload, "s16le")
            except AudioInputError as e:
                raise ClientError("bad_audio", f"audio frame: {e}") from None
            return [CallAudio(0, rate, samples)]
        if kind == KIND_DTMF:
            digit = payload.decode("ascii", "replace")
            if digit not in DTMF_DIGITS:
                raise ClientError("bad_message", f"DTMF frame with {payload!r} (expected one "
                                                 "of 0-9 * # A-D)")
            return [CallDtmf(digit, 0)]
        if kind == KIND_HANGUP:
            self.ended = True
            return [CallEnded("hangup")]
        if kind == KIND_ERROR:
            self.ended = True
            code = payload[0] if payload else None
            what = ERROR_CODES.get(code, "unknown") if code is not None else "no code"
            return [CallEnded(f"asterisk error {code if code is not None else '-'} ({what})")]
        raise ClientError("bad_message", f"unknown AudioSocket frame type 0x{kind:02x} "
                                         f"({len(payload)} bytes)")
