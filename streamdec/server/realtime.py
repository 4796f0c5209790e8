"""OpenAI's Realtime transcription sessions (WebSocket ``/v1/realtime?intent=transcription``),
as OpenAI documents them.

Client -> server: JSON text events.

- ``session.update`` ``{"session": {"type": "transcription", "audio": {"input": {"format",
  "transcription", "turn_detection", "noise_reduction"}}, "include"}}`` (and the older
  ``transcription_session.update`` ``{"session": {"input_audio_format",
  "input_audio_transcription", "turn_detection", ...}}``): the audio format
  (``audio/pcm`` at 24000 Hz / ``pcm16``, ``audio/pcmu`` / ``g711_ulaw`` and ``audio/pcma``
  / ``g711_alaw`` at 8000 Hz), the turn detection (``server_vad``: the endpoint rules end
  each utterance, ``silence_duration_ms`` their silence after speech; ``null``: only
  ``commit`` ends one), ``language`` (English only). ``prompt``, ``model``,
  ``noise_reduction``, ``include``, ``threshold`` and ``prefix_padding_ms`` are taken and
  ignored (one model; no prompt conditioning in a transducer). Format and turn detection
  change only before the audio.
- ``input_audio_buffer.append`` ``{"audio": base64}``; ``.commit`` ends the open utterance
  now; ``.clear`` ends it and drops its transcript.

Server -> client: ``session.created`` at the start; ``session.updated`` (or
``transcription_session.updated``) after an update; per utterance (an ``item_id``):
``input_audio_buffer.speech_started`` (``audio_start_ms``: its first word) with its first
partial that has a word; ``conversation.item.input_audio_transcription.delta`` each time
the stable part of the partial grows (the deltas joined are a prefix of the final
transcript: they are never taken back); at its end ``input_audio_buffer.speech_stopped``
(``audio_end_ms``: its last word's end; server VAD only), ``input_audio_buffer.committed``
and ``conversation.item.input_audio_transcription.completed`` (``transcript``, ``usage``
in seconds of audio); ``input_audio_buffer.cleared`` after a clear. A bad event is
answered with OpenAI's ``error`` event (``{"type": "error", "error": {"type":
"invalid_request_error", "code", "message", "param", "event_id"}}``) and the session goes
on, as OpenAI's does; only the server's limits (message size, stream length, idle time)
end it, with an ``error`` event first.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from dataclasses import replace
from typing import Mapping, Sequence

from ..audio.pcm import sample_size
from ..core.endpoint import EndpointConfig
from ..core.results import Result
from ..errors import ClientError, EventRefused, OptionError
from . import jsontext
from .endpointing import EndpointLimits
from .options import StreamOptions
from .session import DRAIN, Close, Command, Feed, Finish, ForceFinal, Reopen, Reply, Retune, Send

__all__ = ["RealtimeSession", "parse_realtime_query", "realtime_parser", "realtime_error",
           "PCM_RATE", "FORMATS"]

PCM_RATE = 24000  # OpenAI's pcm16: 24 kHz, mono, little-endian
#: input formats (GA ``type`` / older names) -> (streamdec encoding, rate)
FORMATS = {"audio/pcm": ("s16le", PCM_RATE), "pcm16": ("s16le", PCM_RATE),
           "audio/pcmu": ("mulaw", 8000), "g711_ulaw": ("mulaw", 8000),
           "audio/pcma": ("alaw", 8000), "g711_alaw": ("alaw", 8000)}
#: streamdec encoding -> the GA format object a session reports
_SESSION_FORMATS = {"s16le": {"type": "audio/pcm", "rate": PCM_RATE},
                    "mulaw": {"type": "audio/pcmu"}, "alaw": {"type": "audio/pcma"}}
LANGUAGES = ("en",)
_QUERY = ("intent", "model", "token")


def parse_realtime_query(query: Mapping[str, Sequence[str]]) -> str:
    """The model named in the handshake's query (echoed back; the server has one).
    OptionError (400) for an intent other than ``transcription`` (a conversation needs a
    language model this server does not have) and unknown parameters."""
    unknown = sorted(set(query) - set(_QUERY))
    if unknown:
        raise OptionError(f"unknown query parameter {unknown[0]!r}")
    intent = (query.get("intent") or [None])[-1]
    if intent != "transcription":
        raise OptionError("only transcription sessions are served: connect with "
                          f"?intent=transcription (got intent={intent!r})")
    return (query.get("model") or ["streamdec"])[-1]


def realtime_parser(context):
    """The ``/v1/realtime`` handshake's reading of its query over a ``ServerContext``: the
    stream options (pcm16 at 24 kHz until a session update) and a new ``RealtimeSession``
    (OptionError when refused)."""
    def parse(query: Mapping[str, Sequence[str]]) -> tuple[StreamOptions, "RealtimeSession"]:
        model = parse_realtime_query(query)
        options = StreamOptions(PCM_RATE, "s16le", 1)
        return options, RealtimeSession(options, context.engine.recognizer.config.endpoint,
                                        context.config.endpoint_limits(), model)
    return parse


def realtime_error(error: ClientError) -> tuple[str, int, str]:
    """The ``error`` event, close code and reason for an error that ends the session."""
    event = {"type": "error", "event_id": "event_error", "error": {
        "type": "invalid_request_error", "code": error.kind, "message": str(error),
        "param": None, "event_id": None}}
    return json.dumps(event, ensure_ascii=False), error.code, error.kind


class RealtimeSession:
    """One OpenAI Realtime transcription client, without I/O (``session`` says how it is
    driven): every audio event gets its results once its audio is decoded (``Reply``);
    ``options``: the connection's; ``endpoint``: the server's rules (within ``limits``)."""

    push_results = False

    def __init__(self, options: StreamOptions, endpoint: EndpointConfig,
                 limits: EndpointLimits | None = None, model: str = "streamdec") -> None:
        self.options = replace(options, sample_rate=PCM_RATE, encoding="s16le", channels=1)
        self.endpoint = endpoint
        self.limits = limits or EndpointLimits()
        self.model = model
        self.format = "audio/pcm"
        self.turn_detection: dict | None = {"type": "server_vad"}
        self.audio_started = False
        self.fed_bytes = 0
        self._events = itertools.count(1)
        self._items = itertools.count(1)
        self.item: str | None = None  # the open utterance's item
        self.previous: str | None = None  # the last committed item
        self.sent_chars = 0  # of the open utterance's text, sent as deltas
        self.speaking = False
        self._ends: list[str] = []  # what each forced final is for: "commit" / "clear"

    # -- client events ---------------------------------------------------------------------
    def opening(self) -> list[Command]:
        """What the session sends first: ``session.created``."""
        return [self._event("session.created", session=self._session())]

    def receive(self, message) -> list[Command]:
        """A client message: bytes, text or ``DRAIN``."""
        if message is DRAIN:
            return [Finish(), Reply(), Close(1000, "server shutting down")]
        client_event = None
        try:
            if isinstance(message, bytes):
                raise EventRefused("invalid_request", "binary messages are not events: send "
                               "input_audio_buffer.append with base64 audio")
            try:
                event = jsontext.loads(message)
            except ValueError:
                raise EventRefused("invalid_json", f"event is not JSON: {message[:60]!r}") \
                    from None
            if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                raise EventRefused("invalid_request", "an event is an object with a \"type\"")
            client_event = event.get("event_id") if isinstance(event.get("event_id"),
                                                               str) else None
            kind = event["type"]
            if kind in ("session.update", "transcription_session.update"):
                return self._update(event, kind)
            if kind == "input_audio_buffer.append":
                return self._append(event)
            if kind == "input_audio_buffer.commit":
                self._ends.append("commit")
                return [ForceFinal(kind), Reply()]
            if kind == "input_audio_buffer.clear":
                self._ends.append("clear")
                return [ForceFinal(kind), Reply()]
            raise EventRefused("invalid_request", f"unsupported event type {kind[:60]!r}",
                           "type")
        except EventRefused as e:
            return [self._event("error", error={
                "type": "invalid_request_error", "code": e.code, "message": str(e),
                "param": e.param, "event_id": client_event})]

    def _append(self, event: dict) -> list[Command]:
        audio = event.get("audio")
        if not isinstance(audio, str):
            raise EventRefused("invalid_request", "append needs \"audio\": base64", "audio")
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            raise EventRefused("invalid_audio", "audio is not base64", "audio") from None
        size = sample_size(self.options.encoding)
        if len(data) % size:
            raise EventRefused("invalid_audio", f"{len(data)} bytes is not a whole number of "
                           f"{self.format} samples", "audio")
        self.audio_started = True
        self.fed_bytes += len(data)
        return [Feed(data), Reply()]

    def _update(self, event: dict, kind: str) -> list[Command]:
        session = event.get("session")
        if not isinstance(session, dict):
            raise EventRefused("invalid_request", "update needs a \"session\" object", "session")
        if kind == "session.update":
            if session.get("type", "transcription") != "transcription":
                raise EventRefused("invalid_request", "only transcription sessions are served",
                               "session.type")
            audio = session.get("audio") or {}
            given = (audio.get("input") or {}) if isinstance(audio, dict) else None
            if not isinstance(given, dict):
                raise EventRefused("invalid_request", "session.audio.input must be an object",
                               "session.audio")
            fmt = given.get("format")
            if isinstance(fmt, dict):
                if fmt.get("type") == "audio/pcm" and fmt.get("rate", PCM_RATE) != PCM_RATE:
                    raise EventRefused("invalid_value", "audio/pcm is 24000 Hz",
                                   "session.audio.input.format.rate")
                fmt = fmt.get("type")
            transcription = given.get("transcription")
            turn = given.get("turn_detection", ...)
        else:
            fmt = session.get("input_audio_format")
            transcription = session.get("input_audio_transcription")
            turn = session.get("turn_detection", ...)
        out: list[Command] = []
        if fmt is not None and fmt != self.format:
            if not isinstance(fmt, str) or fmt not in FORMATS:
                raise EventRefused("invalid_value", f"unsupported input audio format {fmt!r}: "
                               f"one of {', '.join(FORMATS)}", "format")
            if self.audio_started:
                raise EventRefused("invalid_request", "the audio format changes only before "
                               "the audio", "format")
            encoding, rate = FORMATS[fmt]
            self.format = fmt
            self.options = replace(self.options, encoding=encoding, sample_rate=rate)
            out.append(Retune(self.options))
        if isinstance(transcription, dict):
            language = transcription.get("language")
            if language not in (None, "", *LANGUAGES):
                raise EventRefused("invalid_value", f"language {language!r} is not supported: "
                               "en", "language")
        if turn is not ...:
            endpoint = self._endpoint(turn)
            if endpoint != (self.options.endpoint or self.endpoint):
                if self.audio_started:
                    raise EventRefused("invalid_request", "turn_detection changes only before "
                                   "the audio", "turn_detection")
                self.options = replace(self.options, endpoint=endpoint)
                out.insert(0, Reopen(self.options))
            self.turn_detection = turn
        updated = "session.updated" if kind == "session.update" else \
            "transcription_session.updated"
        return out + [self._event(updated, session=self._session())]

    def _endpoint(self, turn) -> EndpointConfig:
        if turn is None:
            return replace(self.endpoint, enabled=False)
        if not isinstance(turn, dict) or turn.get("type") != "server_vad":
            raise EventRefused("invalid_value", "turn_detection must be null or "
                           "{\"type\": \"server_vad\"} (semantic_vad is not supported)",
                           "turn_detection")
        silence = turn.get("silence_duration_ms")
        if silence is None:
            return replace(self.endpoint, enabled=True)
        if (isinstance(silence, bool) or not isinstance(silence, int)
                or not 0 <= silence <= self.limits.max_silence * 1000):
            raise EventRefused("invalid_value", f"silence_duration_ms must be an integer in "
                           f"[0, {self.limits.max_silence * 1000:g}]",
                           "turn_detection.silence_duration_ms")
        return replace(self.endpoint, enabled=True, rule2=replace(
            self.endpoint.rule2, min_trailing_silence=silence / 1000))

    # -- results ---------------------------------------------------------------------------
    def reply(self, channel: int, results: Sequence[Result],
              audio_seconds: float) -> list[Command]:
        """The events for what the audio so far gave (one channel)."""
        out: list[Command] = []
        finals = [n for n, r in enumerate(results) if r.is_final]
        end = self._ends.pop() if self._ends else None  # the last final's, when forced
        for n, r in enumerate(results):
            if not r.is_final:
                out += self._partial(r)
            else:
                out += self._final(r, end if n == finals[-1] else None)
        return out

    def _open_item(self) -> str:
        if self.item is None:
            self.item = f"item_{next(self._items):06d}"
        return self.item

    def _partial(self, r: Result) -> list[Command]:
        out: list[Command] = []
        if r.words and not self.speaking:
            self.speaking = True
            out.append(self._event("input_audio_buffer.speech_started",
                                   audio_start_ms=round(r.words[0].start * 1000),
                                   item_id=self._open_item()))
        lead = len(r.text) - len(r.text.lstrip())
        stable = r.text[lead:max(lead, r.stable_chars)]
        if len(stable) > self.sent_chars:
            out.append(self._event("conversation.item.input_audio_transcription.delta",
                                   item_id=self._open_item(), content_index=0,
                                   delta=stable[self.sent_chars:]))
            self.sent_chars = len(stable)
        return out

    def _final(self, r: Result, end: str | None) -> list[Command]:
        """The end of an utterance: by the endpoint rules (``end`` None), a commit or a
        clear."""
        out: list[Command] = []
        text = (r.display if r.display is not None else r.text).strip()
        if end == "clear":
            out.append(self._event("input_audio_buffer.cleared"))
        elif text or end == "commit":
            item = self._open_item()
            if end is None and r.words:
                out.append(self._event("input_audio_buffer.speech_stopped",
                                       audio_end_ms=round(r.words[-1].end * 1000),
                                       item_id=item))
            out.append(self._event("input_audio_buffer.committed",
                                   previous_item_id=self.previous, item_id=item))
            out.append(self._event("conversation.item.input_audio_transcription.completed",
                                   item_id=item, content_index=0, transcript=text,
                                   usage={"type": "duration", "seconds": round(
                                       r.end_time - r.start_time, 3)}))
            self.previous = item
        self.item, self.sent_chars, self.speaking = None, 0, False
        return out

    def error_reply(self, error: ClientError) -> tuple[str, int, str]:
        return realtime_error(error)

    # -- messages out ----------------------------------------------------------------------
    def _session(self) -> dict:
        return {"type": "transcription", "object": "realtime.transcription_session",
                "audio": {"input": {
                    "format": dict(_SESSION_FORMATS[FORMATS[self.format][0]]),
                    "transcription": {"model": self.model, "language": "en"},
                    "turn_detection": self.turn_detection, "noise_reduction": None}}}

    def _event(self, kind: str, **fields) -> Send:
        event = {"type": kind, "event_id": f"event_{next(self._events):06d}", **fields}
        return Send(json.dumps(event, ensure_ascii=False))
