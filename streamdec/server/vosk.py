"""The Vosk server protocol (served at ``/vosk``, and at ``/`` of ``--vosk-port``).

Client -> server: optionally first the text ``{"config": {"sample_rate": 8000, "words": 1,
"max_alternatives": 0, "phrase_list": [...]}}`` (no reply, as Vosk; streamdec also takes
the endpoint rules' keys ``ruleN_min_trailing_silence`` / ``ruleN_min_utterance_length``,
see ``endpointing``); then binary messages
of int16 little-endian PCM (8 kHz unless the config or the URL says otherwise);
``{"eof" : 1}`` ends the stream, ``{"reset" : 1}`` ends the current utterance and goes on.

Server -> client: exactly one text reply per message (config excepted), sent once every
whole chunk of that message's audio is decoded:

- ``{"partial": "...", "stable": n}`` while an utterance is open (``stable``, not Vosk's:
  how many leading characters of ``partial`` will not change any more);
- ``{"text": "...", "result": [{"word", "start", "end", "conf"}, ...]}`` when one (or,
  for a message long enough to hold several, more than one, merged) ended; ``result`` when
  words are on (the default) and there are words; times in seconds from the stream start;
- with ``max_alternatives`` > 0, ``{"alternatives": [{"text", "confidence", "result"}]}``
  (the n-best of a beam search; ``confidence`` is the hypothesis' total log-probability;
  on a second-pass final, Whisper's n-best and its length-normalised log-probability, the
  alternatives after the first without ``result`` words: docs/two-pass.md).

A connection with ``text_format`` ``punct``/``full`` gets ``display`` and ``display_words``
beside ``text`` (``display.py``; word times as ``result``'s).

After ``{"eof" : 1}`` the last reply is the final result, then the server closes. With
``channels=2`` a message gets one reply per channel, in order, each with ``"channel"``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Sequence

from ..core.endpoint import EndpointConfig
from ..core.results import Result
from ..errors import ClientError, ConfigError
from ..search.config import SearchConfig
from ..validation import unknown_names
from . import jsontext
from .display import display_fields
from .endpointing import ENDPOINT_KEYS, EndpointLimits, endpoint_config
from .options import MAX_RATE, MIN_RATE, StreamOptions
from .session import DRAIN, Close, Command, Feed, Finish, Reopen, Reply, Retune, Send

__all__ = ["VoskSettings", "parse_vosk_config", "vosk_partial", "vosk_final", "VoskSession",
           "MAX_ALTERNATIVES"]

MAX_ALTERNATIVES = 20
_CONFIG_KEYS = ("sample_rate", "words", "max_alternatives", "phrase_list",
                "second_pass") + ENDPOINT_KEYS


@dataclass(frozen=True)
class VoskSettings:
    """What a Vosk config message sets."""

    sample_rate: int
    words: bool = True
    max_alternatives: int = 0
    phrases: tuple[str, ...] | None = None  # phrase_list: grammar mode (None: off)
    endpoint: EndpointConfig | None = None  # the endpoint rules set (None: the server's)
    second_pass: bool | None = None  # the server's second pass on/off (None: as the URL says)


def _integer(name: str, value, low: int, high: int) -> int:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or isinstance(value, float) and not math.isfinite(value)  # JSON NaN, Infinity
            or value != int(value)):
        raise ClientError("bad_config", f"config {name} must be an integer, got {value!r}")
    if not low <= int(value) <= high:
        raise ClientError("bad_config", f"config {name} must be in [{low}, {high}], got {value}")
    return int(value)


def parse_vosk_config(config, current: VoskSettings, endpoint: EndpointConfig | None = None,
                      limits: EndpointLimits | None = None) -> VoskSettings:
    """The settings after a config message's ``config`` object (ClientError when invalid).
    Endpoint keys change ``current.endpoint`` or else the server's rules ``endpoint``,
    within ``limits``.
    A non-empty ``phrase_list`` turns grammar mode on: the stream recognises only those
    phrases, one or more in a row; ``"[unk]"`` in the list lets anything else through as
    ``[unk]``."""
    if not isinstance(config, dict):
        raise ClientError("bad_config", f"config must be an object, got {config!r}")
    message = unknown_names(config, _CONFIG_KEYS, "config key")
    if message:
        raise ClientError("bad_config", message)
    changes = {}
    if "sample_rate" in config:
        changes["sample_rate"] = _integer("sample_rate", config["sample_rate"], MIN_RATE,
                                          MAX_RATE)
    if "words" in config:
        if not isinstance(config["words"], (bool, int)) or config["words"] not in (0, 1):
            raise ClientError("bad_config", f"config words must be 0/1 or a boolean, got "
                                            f"{config['words']!r}")
        changes["words"] = bool(config["words"])
    if "max_alternatives" in config:
        changes["max_alternatives"] = _integer("max_alternatives", config["max_alternatives"],
                                               0, MAX_ALTERNATIVES)
    if "phrase_list" in config:
        phrases = config["phrase_list"]
        if not isinstance(phrases, list) or not all(isinstance(p, str) and p.strip()
                                                    for p in phrases):
            raise ClientError("bad_config", "config phrase_list must be a list of non-empty "
                                            "strings")
        changes["phrases"] = tuple(p.strip() for p in phrases) or None
    if "second_pass" in config:
        if not isinstance(config["second_pass"], bool):
            raise ClientError("bad_config", f"config second_pass must be a boolean, got "
                                            f"{config['second_pass']!r}")
        changes["second_pass"] = config["second_pass"]
    rules = {key: config[key] for key in ENDPOINT_KEYS if key in config}
    if rules:
        try:
            changes["endpoint"] = endpoint_config(rules, current.endpoint or endpoint
                                                  or EndpointConfig(), limits or EndpointLimits())
        except ConfigError as e:
            raise ClientError("bad_config", f"config {e}") from None
    return replace(current, **changes)


def _words(result: Result, offset: float) -> list[dict]:
    return [{"word": w.text, "start": round(w.start + offset, 6),
             "end": round(w.end + offset, 6), "conf": w.conf} for w in result.words]


def vosk_partial(text: str, channel: int | None = None, stable: int | None = None) -> dict:
    """A partial reply; ``stable``: leading characters of ``text`` that will not change."""
    reply: dict = {"partial": text}
    if stable is not None:
        reply["stable"] = stable
    if channel is not None:
        reply["channel"] = channel
    return reply


def vosk_final(finals: Sequence[Result], settings: VoskSettings, offset: float = 0.0,
               channel: int | None = None) -> dict:
    """The reply for utterances that ended (several are merged into one reply, their
    alternatives rank by rank). ``offset``: seconds to add to word times (the stream
    restarts at a reset)."""
    spoken = [r for r in finals if r.text] or list(finals[-1:])
    if settings.max_alternatives > 0:
        ranked = [(r.alternatives or (r,))[:settings.max_alternatives] for r in spoken]
        reply: dict = {"alternatives": []}
        for rank in range(max((len(a) for a in ranked), default=0)):
            picks = [a[min(rank, len(a) - 1)] for a in ranked]
            alternative = {"text": " ".join(p.text for p in picks if p.text),
                           "confidence": round(sum(p.score for p in picks), 6)}
            if settings.words:
                alternative["result"] = [w for p in picks for w in _words(p, offset)]
            reply["alternatives"].append(alternative)
    else:
        reply = {"text": " ".join(r.text for r in spoken if r.text)}
        words = [w for r in spoken for w in _words(r, offset)]
        if settings.words and words:
            reply["result"] = words
        reply.update(display_fields(spoken, offset))
    if channel is not None:
        reply["channel"] = channel
    return reply


class _Channel:
    """Results of one channel not yet replied: finals waiting and the open partial."""

    def __init__(self) -> None:
        self.finals: list[Result] = []
        self.partial = ""
        self.stable = 0  # leading characters of ``partial`` that will not change

    def take(self, results: Sequence[Result]) -> None:
        for r in results:
            if r.is_final:
                self.finals.append(r)
                self.partial, self.stable = "", 0
            else:
                self.partial, self.stable = r.text, r.stable_chars


class VoskSession:
    """One Vosk client, without I/O (``session`` says how it is driven): every audio
    message gets one reply per channel once its audio is decoded; a config message (before
    the audio) changes the settings and, for alternatives or a phrase list, the streams;
    ``{"eof" : 1}`` and the drain end the utterance, reply and close; ``{"reset" : 1}``
    ends the utterance, replies and goes on with new streams (word times go on from the
    audio so far). ``options``: the connection's; ``default_search``: the server's."""

    push_results = False

    def __init__(self, options: StreamOptions, default_search: SearchConfig,
                 default_endpoint: EndpointConfig | None = None,
                 endpoint_limits: EndpointLimits | None = None) -> None:
        self.options = options
        self.default_search = default_search
        self.default_endpoint = default_endpoint  # the server's rules
        self.endpoint_limits = endpoint_limits
        self.settings = VoskSettings(sample_rate=options.sample_rate)
        self.channels = [_Channel() for _ in range(options.channels)]
        self.audio_started = False
        self.offset = 0.0  # seconds of audio before the last reset
        self._resetting = False

    def receive(self, message) -> list[Command]:
        """A client message: bytes, text or ``DRAIN``."""
        if message is DRAIN:
            return [Finish(), Reply(), Close(1000, "server shutting down")]
        if isinstance(message, bytes):
            self.audio_started = True
            return [Feed(message), Reply()]
        try:
            command = jsontext.loads(message)
        except ValueError as e:
            raise ClientError("bad_json", f"text message is not JSON ({e}): "
                                          f"{message[:40]!r}") from None
        if not isinstance(command, dict):
            raise ClientError("bad_message", f"expected an object, got {message[:40]!r}")
        if "config" in command:
            if self.audio_started:
                raise ClientError("bad_config", "config must come before the audio")
            new = parse_vosk_config(command["config"], self.settings, self.default_endpoint,
                                    self.endpoint_limits)
            if new.endpoint != self.settings.endpoint:
                self.options = replace(self.options, endpoint=new.endpoint)
            out: list[Command] = []
            if (new.max_alternatives, new.phrases, new.endpoint, new.second_pass) != (
                    self.settings.max_alternatives, self.settings.phrases,
                    self.settings.endpoint, self.settings.second_pass):
                self.options = self._stream_options(new)
                out.append(Reopen(self.options))
            self.settings = new
            self.options = replace(self.options, sample_rate=new.sample_rate)
            return out + [Retune(self.options)]
        if command.get("eof") == 1:
            return [Finish(), Reply(), Close(1000, "eof")]
        if command.get("reset") == 1:
            self._resetting = True
            return [Finish(), Reply(), Reopen(self.options)]
        raise ClientError("bad_message", f"unknown command {message[:60]!r}: expected "
                                         'config, {"eof" : 1} or {"reset" : 1}')

    def reply(self, channel: int, results: Sequence[Result],
              audio_seconds: float) -> list[Command]:
        """The reply of one channel for what its audio so far gave (``audio_seconds``: of
        the whole connection, per channel)."""
        state = self.channels[channel]
        state.take(results)
        tag = channel if len(self.channels) > 1 else None
        if state.finals:
            message = vosk_final(state.finals, self.settings, self.offset, tag)
            state.finals = []
        else:
            message = vosk_partial(state.partial, tag, state.stable)
        if self._resetting and channel == len(self.channels) - 1:  # the streams restart
            self._resetting = False
            self.offset = audio_seconds
            self.channels = [_Channel() for _ in self.channels]
        return [Send(json.dumps(message, ensure_ascii=False))]

    def _stream_options(self, settings: VoskSettings) -> StreamOptions:
        """Options whose streams' finals carry up to ``max_alternatives`` alternatives and
        that follow the phrase list (grammar mode) when there is one."""
        options = self.options.with_phrases(settings.phrases, self.default_search)
        search = options.search or self.default_search
        if settings.second_pass is not None:
            options = replace(options, second_pass=settings.second_pass)
        return replace(options, search=replace(search, nbest=max(1, settings.max_alternatives)))
