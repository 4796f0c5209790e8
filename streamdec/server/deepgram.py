"""Deepgram's live streaming protocol (WebSocket ``/v1/listen``), as Deepgram documents it.

The handshake's query string says what the audio is and what comes back
(``parse_deepgram_query``); the ``Authorization: Token KEY`` header (Deepgram's API key)
is checked as a streamdec token (``access``). Then:

Client -> server: binary messages of raw audio (``encoding``, ``sample_rate``,
``channels``); text messages ``{"type": "KeepAlive"}`` (nothing but the idle timer),
``{"type": "Finalize"}`` (end the open utterance now: its final has ``from_finalize``),
``{"type": "CloseStream"}`` (end of input; an empty binary message, Deepgram's older
signal, means the same).

Server -> client, one JSON text message each:

- ``Results``: ``{"type", "channel_index": [channel, channels], "duration", "start",
  "is_final", "speech_final", "from_finalize", "channel": {"alternatives": [{"transcript",
  "confidence", "words": [{"word", "start", "end", "confidence", "punctuated_word"}]}]},
  "metadata": {"request_id", "model_info": {"name", "version", "arch"}, "model_uuid"}}``;
  a partial (``interim_results=true``) has ``is_final`` false; a final closed by the
  endpoint rules has ``speech_final`` true; one closed by ``Finalize`` has
  ``from_finalize`` true; the last one, after ``CloseStream``, neither;
- ``SpeechStarted`` ``{"type", "channel": [channel, channels], "timestamp"}`` with
  ``vad_events=true``: the first partial of an utterance with a word (``timestamp``: that
  word's start);
- ``UtteranceEnd`` ``{"type", "channel": [channel, channels], "last_word_end"}`` with
  ``utterance_end_ms``: after each final closed by the endpoint rules that has words;
- ``Metadata`` ``{"type", "transaction_key", "request_id", "sha256", "created",
  "duration", "channels"}`` once every channel has its last result, then the close
  (1000).

Times are seconds from the start of the stream. ``transcript`` is the final's raw text,
or its formatted text with ``punctuate`` / ``smart_format`` (``punctuated_word`` then the
formatted word). A protocol error is sent as Deepgram's ``{"type": "Error", "variant",
"description", "message"}`` before the close, with Deepgram's close codes and reasons for
audio it cannot decode (1008 ``DATA-0000``) and a silent client (1011 ``NET-0001``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import uuid
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from ..audio.pcm import sample_size
from ..core.endpoint import EndpointConfig
from ..core.results import Result
from ..errors import ClientError, ConfigError, OptionError
from ..search.config import SearchConfig, with_beam_search
from . import jsontext
from .endpointing import EndpointLimits
from .options import MAX_CHANNELS, StreamOptions, int_option, one_value, validate_rate
from .session import Close, Command, Feed, ForceFinal, InputEnd, Send

__all__ = ["DeepgramSettings", "parse_deepgram_query", "DeepgramSession", "deepgram_parser",
           "ENCODINGS",
           "IGNORED", "REFUSED", "deepgram_error"]

#: Deepgram's raw encodings this server decodes, and their streamdec names
ENCODINGS = {"linear16": "s16le", "mulaw": "mulaw", "alaw": "alaw", "linear32": "f32le"}
#: accepted and without effect here: bookkeeping of Deepgram's service, the choice of a
#: model (this server has the one it was started with), or ``no_delay`` (a result never
#: waits here for the rest of a number or date to be formatted)
IGNORED = ("model", "version", "tag", "extra", "mip_opt_out", "language_hint", "no_delay")
#: features only Deepgram's service has: the handshake is refused (400) when one is on
REFUSED = ("diarize", "diarize_model", "redact", "detect_entities", "search", "replace",
           "callback", "callback_method", "dictation", "profanity_filter", "numerals",
           "filler_words")
_BOOLEAN = ("interim_results", "punctuate", "smart_format", "vad_events", "multichannel")
KNOWN = ("encoding", "sample_rate", "channels", "endpointing", "utterance_end_ms",
         "keywords", "keyterm", "language", "token") + _BOOLEAN + IGNORED + REFUSED
#: languages of the shipped models (English); ``multi`` and the others are refused
LANGUAGES = ("en", "en-US", "en-GB", "en-AU", "en-IN", "en-NZ")
MAX_UTTERANCE_END_MS = 5000
MIN_UTTERANCE_END_MS = 1000


@dataclass(frozen=True)
class DeepgramSettings:
    """What a Deepgram client asked for beyond the stream options."""

    interim_results: bool = False
    vad_events: bool = False
    utterance_end_ms: int | None = None  # None: no UtteranceEnd messages
    model: str = "streamdec"


def _boolean(query: Mapping[str, Sequence[str]], name: str) -> bool | None:
    value = one_value(query, name)
    if value is None:
        return None
    if value.lower() not in ("true", "false"):
        raise OptionError(f"{name} must be true or false, got {value!r}")
    return value.lower() == "true"


def _hotwords(query: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """``keyterm`` phrases as they are; ``keywords`` ``word:intensifier`` as a hotword
    ``word :intensifier`` (a boost; an intensifier <= 0, a suppression, is refused)."""
    phrases = [v.strip() for v in query.get("keyterm") or [] if v.strip()]
    for value in query.get("keywords") or []:
        word, colon, boost = value.rpartition(":")
        if not colon:
            word, boost = value, ""
        word = word.strip()
        if not word:
            raise OptionError(f"keywords must be word or word:intensifier, got {value!r}")
        if boost:
            try:
                score = float(boost)
            except ValueError:
                raise OptionError(f"keywords intensifier must be a number, got {value!r}") \
                    from None
            if not math.isfinite(score) or score <= 0:
                raise OptionError(f"keywords intensifier must be > 0 here (suppression is "
                                  f"not supported), got {value!r}")
            phrases.append(f"{word} :{score:g}")
        else:
            phrases.append(word)
    return tuple(phrases)


def _endpoint(value: str | None, base: EndpointConfig, limits: EndpointLimits
              ) -> EndpointConfig | None:
    """``endpointing``: milliseconds of silence after speech that end an utterance (the
    rule for trailing silence after speech), or ``false``: no rule ends one on silence
    (finals come at ``Finalize`` and at the end); None: the server's rules."""
    if value is None:
        return None
    if value.lower() == "false":
        return replace(base, enabled=False)
    high = round(limits.max_silence * 1000)
    milliseconds = int_option("endpointing", value, 0, high)
    return replace(base, enabled=True,
                   rule2=replace(base.rule2, min_trailing_silence=milliseconds / 1000))


def parse_deepgram_query(query: Mapping[str, Sequence[str]], *, search: SearchConfig,
                         endpoint: EndpointConfig | None = None,
                         endpoint_limits: EndpointLimits | None = None
                         ) -> tuple[StreamOptions, DeepgramSettings]:
    """The stream options and Deepgram settings of a ``/v1/listen`` query (name -> values),
    over the server's ``search`` and ``endpoint`` rules; OptionError (HTTP 400) for a
    value that is invalid, a feature only Deepgram has, or audio this server cannot read
    (containers: the ``encoding`` must name raw audio)."""
    unknown = sorted(set(query) - set(KNOWN))
    if unknown:
        raise OptionError(f"unknown query parameter {unknown[0]!r}")
    for name in REFUSED:
        value = one_value(query, name)
        if value is not None and value.lower() not in ("false", ""):
            raise OptionError(f"{name} is not supported by this server")
    encoding = one_value(query, "encoding")
    if encoding is None:
        raise OptionError("encoding is required: this server reads raw audio only "
                          f"({', '.join(ENCODINGS)}), not containers")
    if encoding not in ENCODINGS:
        raise OptionError(f"unsupported encoding {encoding!r}: supported "
                          f"{', '.join(ENCODINGS)}")
    rate = one_value(query, "sample_rate")
    if rate is None:
        raise OptionError("sample_rate is required with encoding")
    sample_rate = validate_rate(int_option("sample_rate", rate, 1, 10**7))
    channels = one_value(query, "channels")
    channels = 1 if channels is None else int_option("channels", channels, 1, MAX_CHANNELS)
    multichannel = _boolean(query, "multichannel")
    if channels > 1 and not multichannel:
        raise OptionError("channels > 1 needs multichannel=true (mixing channels down is "
                          "not supported)")
    language = one_value(query, "language")
    if language is not None and language not in LANGUAGES:
        raise OptionError(f"language {language!r} is not supported: one of "
                          f"{', '.join(LANGUAGES)}")
    punctuate, smart = _boolean(query, "punctuate"), _boolean(query, "smart_format")
    text_format = "full" if smart else "punct" if punctuate else (
        "raw" if smart is False or punctuate is False else None)
    hotwords = _hotwords(query)
    chosen = with_beam_search(search) if hotwords else search
    try:
        rules = _endpoint(one_value(query, "endpointing"), endpoint or EndpointConfig(),
                          endpoint_limits or EndpointLimits())
    except ConfigError as e:
        raise OptionError(f"endpointing: {e}") from None
    options = StreamOptions(sample_rate, ENCODINGS[encoding], channels,
                            chosen if chosen is not search else None, hotwords,
                            endpoint=rules, text_format=text_format)
    end_ms = one_value(query, "utterance_end_ms")
    settings = DeepgramSettings(
        interim_results=bool(_boolean(query, "interim_results")),
        vad_events=bool(_boolean(query, "vad_events")),
        utterance_end_ms=None if end_ms is None else int_option(
            "utterance_end_ms", end_ms, MIN_UTTERANCE_END_MS, MAX_UTTERANCE_END_MS),
        model=one_value(query, "model") or "streamdec")
    return options, settings


def deepgram_parser(context):
    """The ``/v1/listen`` handshake's reading of its query over a ``ServerContext``: the
    stream options and a new ``DeepgramSession`` (OptionError when refused)."""
    recognizer = context.engine.recognizer

    def parse(query: Mapping[str, Sequence[str]]) -> tuple[StreamOptions, DeepgramSession]:
        options, settings = parse_deepgram_query(
            query, search=recognizer.config.search, endpoint=recognizer.config.endpoint,
            endpoint_limits=context.config.endpoint_limits())
        return options, DeepgramSession(options, settings,
                                        recognizer.meta.encoder_frame_seconds)
    return parse


def deepgram_error(error: ClientError) -> tuple[str, int, str]:
    """The ``Error`` message, close code and close reason Deepgram sends for ``error``."""
    code, reason = error.code, error.kind
    if error.kind == "bad_audio":
        code, reason = 1008, "DATA-0000"
    elif error.kind == "idle_timeout":
        code, reason = 1011, "NET-0001"
    message = {"type": "Error", "variant": error.kind, "description": str(error),
               "message": str(error)}
    return json.dumps(message, ensure_ascii=False), code, reason


def _confidence(result: Result) -> float:
    """The geometric mean of the tokens' probabilities (0 without tokens)."""
    if not result.log_probs:
        return 0.0
    return round(math.exp(sum(result.log_probs) / len(result.log_probs)), 6)


class _Channel:
    """One channel's state: Finalize marks waiting for their final, the utterance."""

    def __init__(self) -> None:
        self.marks: list[float] = []  # seconds of audio when each Finalize came
        self.speaking = False  # SpeechStarted sent for the open utterance


class DeepgramSession(InputEnd):
    """One Deepgram live client, without I/O (``session`` says how it is driven): audio
    until ``CloseStream``; results pushed as they come; ``Metadata`` and the close once
    every channel has its last result."""

    push_results = True

    def __init__(self, options: StreamOptions, settings: DeepgramSettings,
                 frame_seconds: float, request_id: str | None = None) -> None:
        self.options = options
        self.settings = settings
        self.frame_seconds = frame_seconds
        self.request_id = request_id or str(uuid.uuid4())
        self.created = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
        self.fed_bytes = 0
        self.last_end = 0.0  # the latest time a result reached, seconds
        self.channels = [_Channel() for _ in range(options.channels)]
        self._metadata = {"request_id": self.request_id,
                          "model_info": {"name": settings.model, "version": "streamdec",
                                         "arch": "transducer"},
                          "model_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, settings.model))}

    @property
    def audio_seconds(self) -> float:
        """Seconds of audio per channel received so far."""
        frame = sample_size(self.options.encoding) * self.options.channels
        return self.fed_bytes // frame / self.options.sample_rate

    def receive(self, message) -> list[Command]:
        """A client message: bytes, text or ``DRAIN``."""
        ended = self.at_input_end(message, "audio after CloseStream")
        if ended is not None:
            return ended
        if isinstance(message, bytes):
            if not message:  # Deepgram's older end-of-stream signal
                return self.end_input()
            self.fed_bytes += len(message)
            return [Feed(message)]
        try:
            command = jsontext.loads(message)
        except ValueError:
            raise ClientError("bad_json", f"text message is not JSON: {message[:60]!r}") \
                from None
        kind = command.get("type") if isinstance(command, dict) else None
        if kind == "KeepAlive":
            return []
        if kind in ("Finalize", "CloseStream") and self.finished:
            if self.draining:
                return []
            raise ClientError("bad_message", f"{kind} after CloseStream")
        if kind == "Finalize":
            for channel in self.channels:
                channel.marks.append(self.audio_seconds)
            return [ForceFinal("Finalize")]
        if kind == "CloseStream":
            return self.end_input()
        raise ClientError("bad_message", f"unknown message {message[:60]!r}: expected audio "
                                         "(binary), KeepAlive, Finalize or CloseStream")

    def result(self, channel: int, result: Result) -> list[Command]:
        state = self.channels[channel]
        self.last_end = max(self.last_end, result.end_time)
        tag = [channel, len(self.channels)]
        out: list[Command] = []
        if not result.is_final:
            if self.settings.vad_events and result.words and not state.speaking:
                state.speaking = True
                out.append(self._send({"type": "SpeechStarted", "channel": tag,
                                       "timestamp": round(result.words[0].start, 3)}))
            if self.settings.interim_results:
                out.append(self._send(self._results(tag, result, False, False)))
            return out
        state.speaking = False
        # the final of a Finalize ends at (or, padded, after) the audio it was asked at
        forced = bool(state.marks) and result.end_time >= state.marks[0] - self.frame_seconds
        if forced:
            state.marks.pop(0)
        speech_final = not forced and not result.is_eof
        out.append(self._send(self._results(tag, result, speech_final, forced)))
        if speech_final and result.words and self.settings.utterance_end_ms is not None:
            out.append(self._send({"type": "UtteranceEnd", "channel": tag,
                                   "last_word_end": round(result.words[-1].end, 3)}))
        return out

    def results_ended(self) -> list[Command]:
        metadata = {"type": "Metadata", "transaction_key": "deprecated",
                    "request_id": self.request_id,
                    "sha256": hashlib.sha256(self.request_id.encode()).hexdigest(),
                    "created": self.created, "duration": round(self.audio_seconds, 3),
                    "channels": len(self.channels)}
        return [self._send(metadata), Close(1000, "")]

    def error_reply(self, error: ClientError) -> tuple[str, int, str]:
        """The message, close code and reason of ``error`` (``deepgram_error``)."""
        return deepgram_error(error)

    def _results(self, tag: list[int], result: Result, speech_final: bool,
                 from_finalize: bool) -> dict:
        shown = result.display is not None
        words = result.words
        punctuated = result.display_words if shown and len(result.display_words) == len(
            words) else words
        alternative = {
            "transcript": result.display if shown else result.text.strip(),
            "confidence": _confidence(result),
            "words": [{"word": w.text, "start": round(w.start, 3), "end": round(w.end, 3),
                       "confidence": round(w.conf, 6), "punctuated_word": p.text}
                      for w, p in zip(words, punctuated)]}
        return {"type": "Results", "channel_index": tag,
                "duration": round(result.end_time - result.start_time, 3),
                "start": round(result.start_time, 3), "is_final": result.is_final,
                "speech_final": speech_final, "from_finalize": from_finalize,
                "channel": {"alternatives": [alternative]}, "metadata": self._metadata}

    @staticmethod
    def _send(message: dict) -> Send:
        return Send(json.dumps(message, ensure_ascii=False))
