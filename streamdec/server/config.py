"""``ServerConfig``: the ``[server]`` table of a config file, validated once.

The engine's settings (``EngineConfig``: ``max_batch``, ``max_wait_ms``, ``workers``,
``max_pending_seconds``) are nested in it as ``engine``; in a file, an environment
variable or a flag they are keys of the ``[server]`` table like the others
(``ServerConfig().updated({"port": 7000, "max_batch": 8})``).

Precedence, lowest first: the defaults below, the config file's ``[server]`` table,
``STREAMDEC_<FIELD>`` environment variables (``STREAMDEC_PORT=7000``,
``STREAMDEC_TOKEN_FILE=/run/secrets/tokens``), command-line flags.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field, replace
from typing import Mapping

from ..engine import EngineConfig
from ..errors import ConfigError
from ..search.keyword_graph import split_keywords
from ..textfmt.format import check_text_format
from ..textfmt.redact import parse_kinds
from ..validation import require_at_least, require_finite, require_positive, unknown_names
from .endpointing import EndpointLimits

__all__ = ["ServerConfig", "ENV_PREFIX", "env_overrides", "SETTINGS", "ENGINE_KEYS"]

ENV_PREFIX = "STREAMDEC_"
EVENT_LOOPS = ("auto", "uvloop", "asyncio")


@dataclass(frozen=True)
class ServerConfig:
    # listeners: the sherpa-onnx protocol at / and /sherpa, Vosk at /vosk, HTTP endpoints;
    # vosk_port: a second listener with the Vosk protocol at its root (2700 by convention)
    host: str = "127.0.0.1"
    port: int = 6006
    vosk_port: int | None = None
    # limits: connections at once (WebSocket clients + transcription requests; beyond it
    # HTTP 503), one WebSocket message, one stream's audio, silence from a client before it
    # is closed (also the deadline of a request head and an upload body's silence, both
    # 408, and how long a peer may read nothing before it is cut off), one uploaded file of
    # the transcription endpoint
    max_connections: int = 200
    # overload: a new connection is refused (HTTP 503, or close 1013 for AudioSocket) while
    # a ready stream has waited longer than this for its decode (``Engine.decode_delay``):
    # the engine is behind its audio and one more stream would make every stream's results
    # later (per worker process); 0: only max_connections refuses
    max_decode_delay_ms: float = 1000.0
    max_message_bytes: int = 1 << 20
    max_stream_seconds: float = 4 * 3600.0
    idle_timeout_seconds: float = 60.0
    max_upload_bytes: int = 100 << 20
    # on SIGTERM/SIGINT: how long in-flight streams may take to get their last results
    drain_timeout_seconds: float = 30.0
    # bearer tokens, one per line (None: no auth); TLS certificate and key (PEM) for wss/https
    token_file: str | None = None
    # tokens that may only read stored transcripts (GET /calls/{id}/transcript,
    # /streams/{id}/transcript, /transcripts), one per line; token_file's may do everything
    read_token_file: str | None = None
    # Twilio's auth token (a file holding it): /twilio then admits a handshake signed with
    # it (X-Twilio-Signature); twilio_stream_url: the <Stream> URL as written in the TwiML
    # (None: the handshake's own wss://HOST/twilio; set it behind a proxy that rewrites them)
    twilio_auth_token_file: str | None = None
    twilio_stream_url: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    # the engine: streams decoded in one batch, how long a ready stream waits for a batch
    # to fill, batches decoded at once (threads), undecoded audio per stream before reads
    # pause (back-pressure); written as keys of the [server] table (ENGINE_KEYS)
    engine: EngineConfig = field(default_factory=EngineConfig)
    # calls from telephony platforms (Twilio at /twilio, audio fork at /audiofork, both on
    # ``port``): Asterisk AudioSocket's TCP port (None: off); a subscriber of /calls/{id}
    # further behind than subscriber_queue messages is dropped; the webhook (None: none)
    # gets each final as a JSON POST, through a queue of webhook_queue messages (then new
    # ones are dropped), each tried webhook_max_attempts times, webhook_backoff_seconds
    # apart at first, doubling. With the transcript store on ([store]) the webhook is an
    # outbox in the store instead (``streamdec.records.delivery``): no queue limit and no
    # attempt limit; each final is tried, across restarts, until the receiver answers 2xx
    # or webhook_retention_seconds have passed (then kept as a dead letter); call_vad: every leg of every call is gated by the voice
    # activity detector (the [vad] table's settings), its model loaded at start
    audiosocket_port: int | None = None
    subscriber_queue: int = 1000
    webhook_url: str | None = None
    webhook_queue: int = 1000
    webhook_timeout_seconds: float = 5.0
    webhook_max_attempts: int = 6
    webhook_backoff_seconds: float = 0.5
    webhook_retention_seconds: float = 86400.0
    # redaction of every result before it leaves the server (streams and calls; stored,
    # sent, partials too): kinds "cards", "ssn" (comma-separated; "all"; "" none) and a
    # file of regular expressions, one per line (``streamdec.textfmt.redact``); a
    # connection (``redact`` option) or a call (``redact`` setting) may add kinds, not
    # remove the server's
    redact: str = ""
    redact_patterns_file: str | None = None
    # bounds on the endpoint rules a client may set per connection (seconds): the trailing
    # silences (ruleN_min_trailing_silence) and the utterance lengths (ruleN_min_utterance_length)
    max_endpoint_silence: float = 30.0
    max_endpoint_utterance: float = 600.0
    # finals for people (raw | punct | full, see streamdec.textfmt): the default of the
    # WebSocket protocols (a connection's ``text_format`` overrides it) and of the
    # transcription endpoint (the form's ``text_format`` overrides it)
    text_format: str = "raw"
    transcription_text_format: str = "full"
    # finals of calls (``/twilio``, ``/audiofork``, AudioSocket): call notes are read by
    # people; a call's own ``text_format`` (Twilio customParameters, audio fork URL or
    # metadata) overrides it
    call_text_format: str = "full"
    # server processes sharing the ports (``streamdec.server.workers``: SO_REUSEPORT, one
    # recognizer and engine each; 1: this process serves)
    processes: int = 1
    call_vad: bool = True
    # keywords spotted on every leg of every call, beside its transcript: keyword lines as
    # in a keywords file (``streamdec.search.keyword_graph``: units or phrases, with
    # ``:boost #threshold @text``): a list in the config file, or one string with ``/``
    # between them (an environment variable); checked against the model when the server
    # starts (a bad line: it does not start, naming the line); a call may add its own
    # (``keywords``, ``call_settings``); empty: none
    call_keywords: tuple[str, ...] = ()
    # the event loop each server process runs: uvloop (libuv: less CPU per WebSocket
    # message), asyncio (the standard library's), auto (uvloop where it is installed)
    event_loop: str = "auto"

    def __post_init__(self) -> None:
        require_finite(self, "server")
        for name in ("port", "vosk_port", "audiosocket_port"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 65535:
                raise ConfigError(f"server.{name} must be in [0, 65535], got {value}")
        require_at_least(self, "server", ("max_connections", "max_message_bytes",
                                          "max_upload_bytes", "processes"), 1)
        if self.max_decode_delay_ms < 0:
            raise ConfigError(f"server.max_decode_delay_ms must be >= 0 (0: off), got "
                              f"{self.max_decode_delay_ms}")
        require_positive(self, "server", ("max_stream_seconds", "idle_timeout_seconds",
                                          "drain_timeout_seconds", "max_endpoint_silence",
                                          "max_endpoint_utterance"))
        require_at_least(self, "server", ("subscriber_queue", "webhook_queue",
                                          "webhook_max_attempts"), 1)
        require_positive(self, "server", ("webhook_timeout_seconds",
                                          "webhook_backoff_seconds",
                                          "webhook_retention_seconds"))
        if self.webhook_url is not None and not self.webhook_url.startswith(("http://",
                                                                             "https://")):
            raise ConfigError(f"server.webhook_url must be an http:// or https:// URL, got "
                              f"{self.webhook_url!r}")
        if self.event_loop not in EVENT_LOOPS:
            raise ConfigError(f"server.event_loop must be one of {', '.join(EVENT_LOOPS)}, "
                              f"got {self.event_loop!r}")
        object.__setattr__(self, "call_keywords", _keyword_lines(self.call_keywords))
        if not isinstance(self.call_vad, bool):
            raise ConfigError(f"server.call_vad must be true or false, got {self.call_vad!r}")
        if self.twilio_stream_url is not None:
            if self.twilio_auth_token_file is None:
                raise ConfigError("server.twilio_stream_url needs server.twilio_auth_token_file "
                                  "(it is the URL whose signature is checked)")
            if not self.twilio_stream_url.startswith(("wss://", "ws://")):
                raise ConfigError(f"server.twilio_stream_url must be a wss:// URL, got "
                                  f"{self.twilio_stream_url!r}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("server.tls_cert and server.tls_key go together")
        if not isinstance(self.engine, EngineConfig):
            raise ConfigError(f"server.engine must be an EngineConfig, got {self.engine!r}")
        check_text_format(self.text_format, "server.text_format")
        check_text_format(self.transcription_text_format, "server.transcription_text_format")
        check_text_format(self.call_text_format, "server.call_text_format")
        parse_kinds(self.redact, "server.redact")

    def updated(self, settings: Mapping[str, object]) -> "ServerConfig":
        """This config with ``[server]`` settings applied (``SETTINGS``: the engine's keys
        go to ``engine``). ConfigError for an unknown key or an invalid value."""
        message = unknown_names(settings, SETTINGS, "key")
        if message:
            raise ConfigError(f"server: {message}")
        engine = {k: v for k, v in settings.items() if k in ENGINE_KEYS}
        changes = {k: v for k, v in settings.items() if k not in ENGINE_KEYS}
        if engine:
            changes["engine"] = replace(self.engine, **engine)
        return replace(self, **changes)

    def endpoint_limits(self) -> EndpointLimits:
        return EndpointLimits(max_silence=self.max_endpoint_silence,
                              max_utterance=self.max_endpoint_utterance)

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


def _keyword_lines(value: object) -> tuple[str, ...]:
    """``call_keywords`` as a tuple of lines: a list's items as they are, one string split at
    ``/`` and newlines (``split_keywords``)."""
    if isinstance(value, str):
        return tuple(split_keywords(value)) if value.strip() else ()
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"server.call_keywords must be a list of keyword lines (text), got "
                      f"{value!r}")


#: the keys of the ``[server]`` table: the server's own fields, then the engine's
ENGINE_KEYS = tuple(f.name for f in dataclasses.fields(EngineConfig))
SETTINGS = tuple(f.name for f in dataclasses.fields(ServerConfig) if f.name != "engine") \
    + ENGINE_KEYS


def _parse(name: str, text: str, kind) -> object:
    """An environment variable's text as the field's type."""
    base = [t for t in typing.get_args(kind) if t is not type(None)] or [kind]
    kind = base[0]
    if kind is bool:
        if text not in ("true", "false"):
            raise ConfigError(f"{ENV_PREFIX}{name.upper()}: expected true or false, "
                              f"got {text!r}")
        return text == "true"
    try:
        return kind(text) if kind in (int, float) else text
    except ValueError:
        raise ConfigError(f"{ENV_PREFIX}{name.upper()}: expected {kind.__name__}, "
                          f"got {text!r}") from None


def env_overrides(environ: Mapping[str, str]) -> dict[str, object]:
    """``STREAMDEC_<KEY>`` variables as ``[server]`` settings (``SETTINGS``)."""
    hints = {**typing.get_type_hints(ServerConfig), **typing.get_type_hints(EngineConfig)}
    return {name: _parse(name, environ[ENV_PREFIX + name.upper()], hints[name])
            for name in SETTINGS if ENV_PREFIX + name.upper() in environ}
