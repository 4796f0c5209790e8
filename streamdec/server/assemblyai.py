"""AssemblyAI's universal streaming protocol, version 3 (WebSocket ``/v3/ws``), as
AssemblyAI documents it.

The handshake's query string says what the audio is and how turns are made
(``parse_assemblyai_query``: ``KNOWN`` lists what is taken, ``IGNORED`` what is taken
without effect, ``REFUSED`` what is refused with HTTP 400 when on); the API key
(``Authorization: KEY``, as AssemblyAI's SDKs send it, or a temporary token there or in
``?token=``) is checked as a streamdec token (``access``). Then:

Client -> server: binary messages of raw audio (``pcm_s16le`` or ``pcm_mulaw`` at
``sample_rate``); text messages ``{"type": "ForceEndpoint"}`` (end the open turn now),
``{"type": "KeepAlive"}`` (nothing but the idle timer), ``{"type": "UpdateConfiguration",
...}`` (``format_turns`` and ``max_turn_silence`` apply to the audio from then on; the
ignored fields are taken; ``keyterms_prompt`` cannot change the open streams' search: a
``Warning`` says so) and ``{"type": "Terminate"}`` (end of input).

Server -> client, one JSON text message each:

- ``Begin`` ``{"type", "id", "expires_at"}`` at once (``expires_at``: Unix seconds when
  the stream reaches the server's ``max_stream_seconds`` if sent in real time);
- ``Turn`` ``{"type", "turn_order", "turn_is_formatted", "end_of_turn", "transcript",
  "end_of_turn_confidence", "words": [{"start", "end", "confidence", "text",
  "word_is_final"}]}``: each time a turn's words change (``end_of_turn`` false; the
  ``transcript`` is its final words, the ones no later result changes), then once at its
  end (``end_of_turn`` true, every word final), and with ``format_turns`` once more,
  formatted (``turn_is_formatted`` true). Times are integer milliseconds from the start of
  the stream; ``end_of_turn_confidence`` is 1 at a turn's end and 0 before (the turns end
  by the endpoint rules: there is no end-of-turn model to be unsure);
- ``Termination`` ``{"type", "audio_duration_seconds", "session_duration_seconds"}``
  (whole seconds) once the last turn is out after ``Terminate``, then the close (1000);
- ``Warning`` ``{"type", "warning_code", "warning"}`` for an update not applied;
- ``Error`` ``{"type", "error_code", "error"}`` before a close with the same code
  (``assemblyai_error``: AssemblyAI's codes for each kind of error).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from ..audio.pcm import sample_size
from ..core.endpoint import EndpointConfig
from ..core.results import Result, Word
from ..errors import ClientError, ConfigError, OptionError
from ..search.config import SearchConfig, with_beam_search
from . import jsontext
from .endpointing import EndpointLimits, endpoint_config
from .options import StreamOptions, int_option, one_value, validate_rate
from .session import Close, Command, Feed, ForceFinal, InputEnd, Retune, Send

__all__ = ["AssemblyAISettings", "parse_assemblyai_query", "AssemblyAISession",
           "assemblyai_parser", "assemblyai_error", "ENCODINGS", "KNOWN", "IGNORED",
           "REFUSED", "ERROR_CODES"]

#: AssemblyAI's raw encodings this server decodes, and their streamdec names
ENCODINGS = {"pcm_s16le": "s16le", "pcm_mulaw": "mulaw"}
#: taken without effect: the choice of a model (this server has the one it was started
#: with), the tuning of AssemblyAI's end-of-turn model, voice activity and noise models
#: (turns end here by the endpoint rules), prompts (no prompt conditioning in a
#: transducer), partial-turn pacing and session bookkeeping
IGNORED = ("speech_model", "end_of_turn_confidence_threshold",
           "min_end_of_turn_silence_when_confident", "min_turn_silence", "vad_threshold",
           "mode", "interruption_delay", "turn_left_pad_ms", "prompt", "agent_context",
           "continuous_partials", "include_partial_turns", "session_heartbeat",
           "inactivity_timeout", "voice_focus", "voice_focus_threshold",
           "noise_suppression_model", "noise_suppression_threshold",
           "customer_support_audio_capture")
#: features only AssemblyAI's service has: the handshake is refused (400) when one is on
REFUSED = ("speaker_labels", "speaker_labels_revision_interval_ms", "max_speakers",
           "redact_pii", "redact_pii_policies", "redact_pii_sub", "filter_profanity",
           "llm_gateway", "webhook_url", "webhook_auth_header_name",
           "webhook_auth_header_value", "language_detection", "acknowledge_silence",
           "domain")
_TAKEN = ("sample_rate", "encoding", "format_turns", "keyterms_prompt", "max_turn_silence",
          "language_code", "language_codes", "token")
KNOWN = _TAKEN + IGNORED + REFUSED
#: languages of the shipped models (English)
LANGUAGES = ("en",)
MAX_KEYTERMS, MAX_KEYTERM_CHARS = 100, 50  # AssemblyAI's bounds on keyterms_prompt
#: the close code (and ``Error``'s ``error_code``) of each kind of error: 3006 input that
#: is not valid, 3007 audio that breaks the input's rules, 3008 the session over its
#: length, 4031 idle for too long, 3005 the server's own failure
ERROR_CODES = {"bad_json": 3006, "bad_message": 3006, "bad_config": 3006,
               "unsupported": 3006, "bad_audio": 3007, "too_big": 3007, "too_long": 3008,
               "idle_timeout": 4031, "decode_failed": 3005}
UPDATE_NOT_APPLIED = 3006  # the ``warning_code`` of an update that is not applied
_MAX_REASON_BYTES = 123  # a close frame's reason (RFC 6455 section 5.5)


@dataclass(frozen=True)
class AssemblyAISettings:
    """What an AssemblyAI client asked for beyond the stream options."""

    expires_in: float = 4 * 3600.0  # seconds from the start to ``Begin``'s expires_at
    endpoint: EndpointConfig = EndpointConfig()  # the server's rules, which updates change
    endpoint_limits: EndpointLimits = EndpointLimits()  # within the server's bounds


def _boolean(name: str, value) -> bool:
    """A query's ``true`` / ``false`` (any case: the SDK writes Python's ``True``), or a
    JSON boolean of an update."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise OptionError(f"{name} must be true or false, got {value!r}")


def _text_list(name: str, value) -> list:
    """A JSON list (the SDK sends lists JSON-encoded in the query) or an update's list."""
    if isinstance(value, str):
        try:
            value = jsontext.loads(value)
        except ValueError:
            raise OptionError(f"{name} must be a JSON list of strings, got {value[:60]!r}") \
                from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise OptionError(f"{name} must be a list of strings")
    return value


def _keyterms(value) -> tuple[str, ...]:
    terms = [t.strip() for t in _text_list("keyterms_prompt", value) if t.strip()]
    if len(terms) > MAX_KEYTERMS:
        raise OptionError(f"keyterms_prompt holds {len(terms)} terms: at most {MAX_KEYTERMS}")
    long = [t for t in terms if len(t) > MAX_KEYTERM_CHARS]
    if long:
        raise OptionError(f"keyterms_prompt term over {MAX_KEYTERM_CHARS} characters: "
                          f"{long[0][:60]!r}")
    return tuple(terms)


def _language(query: Mapping[str, Sequence[str]]) -> None:
    code = one_value(query, "language_code")
    codes = one_value(query, "language_codes")
    given = ([code] if code is not None else []) + (
        _text_list("language_codes", codes) if codes is not None else [])
    for language in given:
        if language not in LANGUAGES:
            raise OptionError(f"language {language!r} is not supported: "
                              f"{', '.join(LANGUAGES)}")


def _silence(value, base: EndpointConfig, limits: EndpointLimits) -> EndpointConfig:
    """``max_turn_silence``: milliseconds of silence after speech that end a turn (the
    endpoint rule for trailing silence after speech)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise OptionError(f"max_turn_silence must be an integer of milliseconds, got {value!r}")
    milliseconds = int_option("max_turn_silence", str(value), 0,
                              round(limits.max_silence * 1000))
    try:
        rules = endpoint_config({"rule2_min_trailing_silence": milliseconds / 1000}, base,
                                limits)
    except ConfigError as e:
        raise OptionError(f"max_turn_silence: {e}") from None
    return replace(rules, enabled=True)


def _text_format(value) -> str:
    """``format_turns`` as the finals' ``text_format``: punctuated, cased and with numbers
    written (``full``), or the words only (``raw``)."""
    return "full" if _boolean("format_turns", value) else "raw"


def parse_assemblyai_query(query: Mapping[str, Sequence[str]], *, search: SearchConfig,
                           endpoint: EndpointConfig | None = None,
                           endpoint_limits: EndpointLimits | None = None
                           ) -> StreamOptions:
    """The stream options of a ``/v3/ws`` query (name -> values), over the server's
    ``search`` and ``endpoint`` rules; OptionError (HTTP 400) for a value that is invalid,
    a feature only AssemblyAI has, or audio this server cannot read."""
    unknown = sorted(set(query) - set(KNOWN))
    if unknown:
        raise OptionError(f"unknown query parameter {unknown[0]!r}")
    for name in KNOWN:
        one_value(query, name)  # each at most once
    for name in REFUSED:
        value = one_value(query, name)
        if value is not None and value.lower() not in ("false", "", "[]", "null"):
            raise OptionError(f"{name} is not supported by this server")
    encoding = one_value(query, "encoding") or "pcm_s16le"
    if encoding not in ENCODINGS:
        raise OptionError(f"unsupported encoding {encoding!r}: supported "
                          f"{', '.join(ENCODINGS)} (raw audio)")
    rate = one_value(query, "sample_rate")
    if rate is None:
        raise OptionError("sample_rate is required")
    sample_rate = validate_rate(int_option("sample_rate", rate, 1, 10**7))
    _language(query)
    formatting = one_value(query, "format_turns")
    terms = one_value(query, "keyterms_prompt")
    hotwords = _keyterms(terms) if terms is not None else ()
    chosen = with_beam_search(search) if hotwords else search
    silence = one_value(query, "max_turn_silence")
    rules = None if silence is None else _silence(
        silence, endpoint or EndpointConfig(), endpoint_limits or EndpointLimits())
    return StreamOptions(sample_rate, ENCODINGS[encoding], 1,
                         chosen if chosen is not search else None, hotwords, endpoint=rules,
                         text_format=None if formatting is None else _text_format(formatting))


def assemblyai_parser(context):
    """The ``/v3/ws`` handshake's reading of its query over a ``ServerContext``: the stream
    options and a new ``AssemblyAISession`` (OptionError when refused)."""
    recognizer = context.engine.recognizer

    def parse(query: Mapping[str, Sequence[str]]) -> tuple[StreamOptions, AssemblyAISession]:
        options = parse_assemblyai_query(
            query, search=recognizer.config.search, endpoint=recognizer.config.endpoint,
            endpoint_limits=context.config.endpoint_limits())
        settings = AssemblyAISettings(expires_in=context.config.max_stream_seconds,
                                      endpoint=recognizer.config.endpoint,
                                      endpoint_limits=context.config.endpoint_limits())
        return options, AssemblyAISession(options, settings)
    return parse


def assemblyai_error(error: ClientError) -> tuple[str, int, str]:
    """The ``Error`` message, close code and close reason AssemblyAI sends for ``error``
    (the reason: the message, or where it is too long for a close frame, a pointer to it,
    as AssemblyAI does)."""
    code = ERROR_CODES.get(error.kind, error.code)
    text = str(error)
    reason = text if len(text.encode()) <= _MAX_REASON_BYTES else "See Error message for details"
    message = {"type": "Error", "error_code": code, "error": text}
    return json.dumps(message, ensure_ascii=False), code, reason


def _milliseconds(seconds: float) -> int:
    return round(seconds * 1000)


def _final_words(result: Result) -> int:
    """How many of a result's words are final: all of a final's; of a partial, those its
    stable text holds with the space after them (a word at the end may still grow)."""
    if result.is_final:
        return len(result.words)
    stable = result.text[:result.stable_chars]
    lead = len(stable) - len(stable.lstrip())
    done = stable[lead:].count(" ")  # words of the stable text followed by a space
    return min(done, len(result.words))


class AssemblyAISession(InputEnd):
    """One AssemblyAI streaming client, without I/O (``session`` says how it is driven):
    ``Begin``, then audio until ``Terminate``; turns pushed as results come; ``Termination``
    and the close once the last one is out. Every binary message comes through
    ``receive`` (no ``binary_is_audio``): the audio it counts is ``Termination``'s."""

    push_results = True

    def __init__(self, options: StreamOptions, settings: AssemblyAISettings | None = None,
                 session_id: str | None = None, clock=time.time) -> None:
        self.options = options
        self.settings = settings or AssemblyAISettings()
        self.id = session_id or str(uuid.uuid4())
        self._clock = clock
        self.started = clock()
        self.fed_bytes = 0
        self.turn_order = 0
        self._shown: tuple | None = None  # the open turn's words as last sent

    @property
    def audio_seconds(self) -> float:
        """Seconds of audio received so far."""
        return self.fed_bytes // sample_size(self.options.encoding) / self.options.sample_rate

    def opening(self) -> list[Command]:
        """What the session sends first: ``Begin``."""
        return [self._send({"type": "Begin", "id": self.id,
                            "expires_at": int(self.started + self.settings.expires_in)})]

    def receive(self, message) -> list[Command]:
        """A client message: bytes, text or ``DRAIN``."""
        ended = self.at_input_end(message, "Invalid Message: audio after Terminate")
        if ended is not None:
            return ended
        if isinstance(message, bytes):
            if not message:
                return []
            self.fed_bytes += len(message)
            return [Feed(message)]
        try:
            command = jsontext.loads(message)
        except ValueError:
            raise ClientError("bad_json", f"Invalid JSON: {message[:60]!r}") from None
        if not isinstance(command, dict):
            raise ClientError("bad_message", f"Invalid Message: {message[:60]!r}")
        kind = command.get("type")
        if kind not in ("ForceEndpoint", "Terminate", "KeepAlive", "UpdateConfiguration"):
            raise ClientError("bad_message", f"Invalid Message Type: {str(kind)[:60]!r}: "
                                             "expected audio (binary), ForceEndpoint, "
                                             "KeepAlive, UpdateConfiguration or Terminate")
        if self.finished and kind != "KeepAlive":
            if self.draining:
                return []
            raise ClientError("bad_message", f"Invalid Message: {kind} after Terminate")
        if kind == "KeepAlive":
            return []
        if kind == "ForceEndpoint":
            return [ForceFinal("ForceEndpoint")]
        if kind == "Terminate":
            return self.end_input()
        return self._update(command)

    def _update(self, update: dict) -> list[Command]:
        """``UpdateConfiguration``: ``format_turns`` and ``max_turn_silence`` for the audio
        to come; the ignored fields taken; ``keyterms_prompt`` answered with a ``Warning``
        (a search's hotwords are fixed when its stream opens)."""
        fields = {k: v for k, v in update.items() if k != "type"}
        unknown = sorted(set(fields) - set(KNOWN))
        if unknown:
            raise ClientError("bad_config", f"Invalid Message: unknown field {unknown[0]!r}")
        refused = [n for n in REFUSED if fields.get(n) not in (None, False, [])]
        if refused:
            raise ClientError("unsupported", f"{refused[0]} is not supported by this server")
        options = self.options
        try:
            if fields.get("format_turns") is not None:
                options = replace(options, text_format=_text_format(fields["format_turns"]))
            if fields.get("max_turn_silence") is not None:
                options = replace(options, endpoint=_silence(
                    fields["max_turn_silence"], options.endpoint or self.settings.endpoint,
                    self.settings.endpoint_limits))
            if fields.get("keyterms_prompt") is not None:
                _keyterms(fields["keyterms_prompt"])
        except OptionError as e:
            raise ClientError("bad_config", f"Invalid Message: {e}") from None
        out: list[Command] = []
        if options != self.options:
            self.options = options
            out.append(Retune(options))
        if fields.get("keyterms_prompt") is not None:
            out.append(self._send({
                "type": "Warning", "warning_code": UPDATE_NOT_APPLIED,
                "warning": "keyterms_prompt is not applied to an open stream here: give it "
                           "in the connection's query"}))
        return out

    # -- results ---------------------------------------------------------------------------
    def result(self, channel: int, result: Result) -> list[Command]:
        if not result.is_final:
            final = _final_words(result)
            shown = tuple((w.text, w.start) for w in result.words) + (final,)
            if not result.words or shown == self._shown:
                return []
            self._shown = shown
            return [self._send(self._turn(result.words, final, False, False))]
        if not result.words and self._shown is None:
            return []  # a turn without words (silence)
        out = [self._send(self._turn(result.words, len(result.words), True, False))]
        if result.display is not None:
            words = result.display_words or result.words
            out.append(self._send(self._turn(words, len(words), True, True,
                                             result.display.strip())))
        self.turn_order += 1
        self._shown = None
        return out

    def results_ended(self) -> list[Command]:
        termination = {"type": "Termination",
                       "audio_duration_seconds": round(self.audio_seconds),
                       "session_duration_seconds": round(self._clock() - self.started)}
        return [self._send(termination), Close(1000, "")]

    def error_reply(self, error: ClientError) -> tuple[str, int, str]:
        """The message, close code and reason of ``error`` (``assemblyai_error``)."""
        return assemblyai_error(error)

    def _turn(self, words: Sequence[Word], final: int, end: bool, formatted: bool,
              transcript: str | None = None) -> dict:
        """A ``Turn`` of ``words``, the first ``final`` of them final; its ``transcript``
        (default: the final words)."""
        if transcript is None:
            transcript = " ".join(w.text for w in words[:final])
        return {"type": "Turn", "turn_order": self.turn_order, "turn_is_formatted": formatted,
                "end_of_turn": end, "transcript": transcript,
                "end_of_turn_confidence": 1.0 if end else 0.0,
                "words": [{"start": _milliseconds(w.start), "end": _milliseconds(w.end),
                           "confidence": round(w.conf, 6), "text": w.text,
                           "word_is_final": n < final} for n, w in enumerate(words)]}

    @staticmethod
    def _send(message: dict) -> Send:
        return Send(json.dumps(message, ensure_ascii=False))
