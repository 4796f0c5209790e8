"""Twilio Media Streams (WebSocket ``/twilio``): the protocol as a state machine without I/O.

Twilio connects to the server (TwiML ``<Start><Stream url="wss://HOST/twilio"/>`` or
``<Connect><Stream>``) and sends JSON text frames, in order:

- ``connected`` ``{"event", "protocol": "Call", "version"}`` (optional here);
- ``start`` ``{"event", "sequenceNumber", "streamSid", "start": {"streamSid", "accountSid",
  "callSid", "tracks": ["inbound", "outbound"], "customParameters": {...}, "mediaFormat":
  {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}}}``;
- ``media`` ``{"event", "sequenceNumber", "streamSid", "media": {"track", "chunk",
  "timestamp" (ms from the stream's start, a string), "payload" (base64 mu-law)}}``, one
  track per message (``both_tracks`` interleaves ``inbound`` and ``outbound`` messages);
- ``dtmf`` ``{"dtmf": {"track": "inbound_track", "digit": "5"}}``, ``mark`` ``{"mark":
  {"name"}}``, and ``stop`` ``{"stop": {"accountSid", "callSid"}}`` last.

``customParameters`` (TwiML ``<Parameter name="..." value="..."/>``) may set the call's
endpoint rules and ``text_format`` (``call_settings``); the other keys are the caller's.
Twilio sends the server nothing that could end an utterance early (``mark`` and ``dtmf``
are the caller's events): no force-final.

The call's id is the ``callSid``; each track of ``tracks`` is a leg. A track's audio is
placed on the call's timeline by its ``timestamp``: a gap (a lost or late message) is
filled with silence, so both tracks' times stay times from the call's start.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from ..audio.pcm import decode_pcm
from ..errors import ClientError
from . import jsontext
from .call_events import (DTMF_DIGITS, CallAudio, CallDtmf, CallEnded, CallEvent, CallNote,
                          CallStarted)
from .call_settings import settings_layer

__all__ = ["TwilioProtocol", "TWILIO_RATE", "TRACKS", "MAX_GAP_SECONDS"]

TWILIO_RATE = 8000  # Media Streams audio: mu-law, 8 kHz, mono
TRACKS = ("inbound", "outbound")
#: a gap in a track's timestamps up to this long is filled with silence; a longer jump is
#: an error (it would be a bogus timestamp, not lost audio)
MAX_GAP_SECONDS = 60.0
_GAP_TOLERANCE = 160  # samples (one 20 ms message): jitter below this is not a gap


def _field(obj: Any, name: str, kind: type, where: str):
    value = obj.get(name) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ClientError("bad_message", f"{where}: missing or invalid {name!r} "
                                         f"(expected {kind.__name__}, got {value!r})")
    return value


class TwilioProtocol:
    """Feed ``receive(text_or_bytes)``; get the call's events. State: ``started``, ``ended``,
    the tracks and the samples placed per track."""

    def __init__(self) -> None:
        self.call_id: str | None = None
        self.tracks: tuple[str, ...] = ()
        self.placed: list[int] = []  # samples on the timeline per track (audio + gaps)
        self.ended = False

    @property
    def started(self) -> bool:
        return self.call_id is not None

    def receive(self, message: str | bytes) -> list[CallEvent]:
        if isinstance(message, (bytes, bytearray)):
            raise ClientError("bad_message", "Twilio sends JSON text frames; got a binary "
                                             f"frame of {len(message)} bytes")
        try:
            data = jsontext.loads(message)
        except ValueError as e:
            raise ClientError("bad_json", f"not JSON: {e}") from None
        if not isinstance(data, dict) or not isinstance(data.get("event"), str):
            raise ClientError("bad_message", "expected a JSON object with an \"event\"")
        event = data["event"]
        if self.ended:
            raise ClientError("bad_message", f"{event!r} after stop")
        handler = getattr(self, f"_on_{event}", None)
        if handler is None:
            return []  # an event this server does not use (a newer protocol version)
        return handler(data)

    # -- events ------------------------------------------------------------------------------
    def _on_connected(self, data: dict) -> list[CallEvent]:
        if self.started:
            raise ClientError("bad_message", "connected after start")
        return []

    def _on_start(self, data: dict) -> list[CallEvent]:
        if self.started:
            raise ClientError("bad_message", "a second start")
        start = _field(data, "start", dict, "start")
        call_id = _field(start, "callSid", str, "start")
        tracks = start.get("tracks", ["inbound"])
        if (not isinstance(tracks, list) or not tracks or any(t not in TRACKS for t in tracks)
                or len(set(tracks)) != len(tracks)):  # (names only: set() of a list raises)
            raise ClientError("bad_message", f"start: tracks must be a list of "
                                             f"{' / '.join(TRACKS)}, got {tracks!r}")
        media_format = _field(start, "mediaFormat", dict, "start")
        got = (media_format.get("encoding"), media_format.get("sampleRate"),
               media_format.get("channels", 1))
        if got != ("audio/x-mulaw", TWILIO_RATE, 1):
            raise ClientError("unsupported", f"start: mediaFormat {media_format!r} is not "
                                              "audio/x-mulaw at 8000 Hz, 1 channel")
        custom = start.get("customParameters") or {}
        if not isinstance(custom, dict):
            raise ClientError("bad_message", "start: customParameters must be an object")
        self.call_id = call_id
        self.tracks = tuple(tracks)
        self.placed = [0] * len(tracks)
        info = {"streamSid": start.get("streamSid", data.get("streamSid")),
                "accountSid": start.get("accountSid"), "customParameters": custom}
        layer = settings_layer("customParameters", custom, text=True)
        return [CallStarted(call_id, self.tracks, info, (layer,) if layer else ())]

    def _on_media(self, data: dict) -> list[CallEvent]:
        if not self.started:
            raise ClientError("bad_message", "media before start")
        media = _field(data, "media", dict, "media")
        track = media.get("track", self.tracks[0] if len(self.tracks) == 1 else None)
        if track not in self.tracks:
            raise ClientError("bad_message", f"media: unknown track {track!r} (this stream's "
                                             f"tracks: {', '.join(self.tracks)})")
        leg = self.tracks.index(track)
        payload = _field(media, "payload", str, "media")
        try:
            raw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as e:
            raise ClientError("bad_audio", f"media: payload is not base64 ({e})") from None
        samples = decode_pcm(raw, "mulaw")
        events: list[CallEvent] = []
        gap = self._gap(leg, media.get("timestamp"))
        if gap:
            events.append(CallAudio(leg, TWILIO_RATE, np.zeros(gap, np.float32)))
        self.placed[leg] += gap + len(samples)
        events.append(CallAudio(leg, TWILIO_RATE, samples))
        return events

    def _gap(self, leg: int, timestamp: Any) -> int:
        """Samples of silence that put this message at its ``timestamp`` (0: no gap)."""
        if timestamp is None:
            return 0
        try:
            at = int(timestamp) * TWILIO_RATE // 1000
        except (TypeError, ValueError, OverflowError):  # OverflowError: Infinity
            raise ClientError("bad_message", f"media: timestamp must be milliseconds, got "
                                             f"{timestamp!r}") from None
        gap = at - self.placed[leg]
        if gap <= _GAP_TOLERANCE:
            return 0
        if gap > MAX_GAP_SECONDS * TWILIO_RATE:
            raise ClientError("bad_message", f"media: timestamp {timestamp} ms jumps "
                                             f"{gap / TWILIO_RATE:.1f} s ahead of the track")
        return gap

    def _on_dtmf(self, data: dict) -> list[CallEvent]:
        if not self.started:
            raise ClientError("bad_message", "dtmf before start")
        dtmf = _field(data, "dtmf", dict, "dtmf")
        digit = dtmf.get("digit")
        if not isinstance(digit, str) or digit not in DTMF_DIGITS:
            raise ClientError("bad_message", f"dtmf: invalid digit {digit!r}")
        track = str(dtmf.get("track", "")).removesuffix("_track")
        return [CallDtmf(digit, self.tracks.index(track) if track in self.tracks else None)]

    def _on_mark(self, data: dict) -> list[CallEvent]:
        if not self.started:  # (a note of no call: there is no call to publish it on)
            raise ClientError("bad_message", "mark before start")
        mark = data.get("mark") if isinstance(data.get("mark"), dict) else {}
        return [CallNote("mark", mark.get("name"))]

    def _on_stop(self, data: dict) -> list[CallEvent]:
        if not self.started:
            raise ClientError("bad_message", "stop before start")
        self.ended = True
        return [CallEnded("stop")]
