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
  (the n-best of a beam search; ``confidence`` is the hypothesis' total log-probability).

A connection with ``text_format`` ``punct``/``full`` gets ``display`` and ``display_words``
beside ``text`` (``display.py``; word times as ``result``'s).

After ``{"eof" : 1}`` the last reply is the final result, then the server closes. With
``channels=2`` a message gets one reply per channel, in order, each with ``"channel"``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Sequence

from ..errors import DecodeError, StreamdecError
from ..results import Result
from .connection import DRAIN, ClientError, Connection
from ..endpoint import EndpointConfig
from ..errors import ConfigError
from .endpointing import ENDPOINT_KEYS, EndpointLimits, endpoint_config
from .display import connection_text_format, display_fields, formatted
from .options import MAX_RATE, MIN_RATE, OptionError, validate_rate

__all__ = ["VoskSettings", "parse_vosk_config", "vosk_partial", "vosk_final", "run_vosk",
           "MAX_ALTERNATIVES"]

MAX_ALTERNATIVES = 20
_CONFIG_KEYS = ("sample_rate", "words", "max_alternatives", "phrase_list") + ENDPOINT_KEYS


@dataclass(frozen=True)
class VoskSettings:
    """What a Vosk config message sets."""

    sample_rate: int
    words: bool = True
    max_alternatives: int = 0
    phrases: tuple[str, ...] | None = None  # phrase_list: grammar mode (None: off)
    endpoint: EndpointConfig | None = None  # the endpoint rules set (None: the server's)


def _integer(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
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
    unknown = sorted(set(config) - set(_CONFIG_KEYS))
    if unknown:
        raise ClientError("bad_config", f"unknown config key(s) {', '.join(unknown)}; known: "
                                        f"{', '.join(_CONFIG_KEYS)}")
    changes = {}
    if "sample_rate" in config:
        rate = _integer("sample_rate", config["sample_rate"], MIN_RATE, MAX_RATE)
        try:
            changes["sample_rate"] = validate_rate(rate)
        except OptionError as e:
            raise ClientError("bad_config", str(e)) from None
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


async def run_vosk(conn: Connection) -> None:
    """Serve one Vosk client until ``{"eof" : 1}`` (or an error, or it leaves)."""
    settings = VoskSettings(sample_rate=conn.options.sample_rate)
    channels = [_Channel() for _ in conn.lives]
    tagged = len(conn.lives) > 1
    audio_started = False
    offset = 0.0  # seconds of audio before the last reset
    level = connection_text_format(conn)

    async def reply() -> None:
        """One reply per channel for what its audio so far gave (waits for the decode)."""
        for live in conn.lives:
            await live.wait_decoded()
        for c, (live, state) in enumerate(zip(conn.lives, channels)):
            try:
                state.take(await live.next_results() if live.done else live.pop_results())
            except DecodeError as e:
                raise ClientError("decode_failed", str(e)) from None
            tag = c if tagged else None
            if state.finals:
                finals = [await formatted(r, level) for r in state.finals]
                message = vosk_final(finals, settings, offset, tag)
                state.finals = []
            else:
                message = vosk_partial(state.partial, tag, state.stable)
            await conn.send(json.dumps(message, ensure_ascii=False))

    async def end_utterance() -> None:
        """Finish the streams and reply with their finals."""
        conn.finish()
        await reply()

    try:
        while True:
            try:
                message = await conn.receive()
            except ClientError as e:
                if e.after_results:
                    await end_utterance()
                raise
            if message is DRAIN:
                await end_utterance()
                await conn.close(1000, "server shutting down")
                return
            if isinstance(message, bytes):
                audio_started = True
                try:
                    await conn.feed(message)
                except ClientError as e:
                    if e.after_results:
                        await end_utterance()
                    raise
                await reply()
                continue
            try:
                command = json.loads(message)
            except ValueError:
                raise ClientError("bad_json", f"text message is not JSON: {message[:40]!r}")
            if not isinstance(command, dict):
                raise ClientError("bad_message", f"expected an object, got {message[:40]!r}")
            if "config" in command:
                if audio_started:
                    raise ClientError("bad_config", "config must come before the audio")
                recognizer = conn.context.engine.recognizer
                new = parse_vosk_config(command["config"], settings, recognizer.config.endpoint,
                                        conn.context.config.endpoint_limits())
                if new.endpoint != settings.endpoint:
                    conn.options = replace(conn.options, endpoint=new.endpoint)
                if (new.max_alternatives, new.phrases, new.endpoint) != (
                        settings.max_alternatives, settings.phrases, settings.endpoint):
                    await _reopen(conn, new)
                settings = new
                conn.options = replace(conn.options, sample_rate=settings.sample_rate)
            elif command.get("eof") == 1:
                await end_utterance()
                await conn.close(1000, "eof")
                return
            elif command.get("reset") == 1:
                await end_utterance()
                offset = conn.audio_seconds
                conn.open_streams(conn.options)
                channels = [_Channel() for _ in conn.lives]
            else:
                raise ClientError("bad_message", f"unknown command {message[:60]!r}: expected "
                                                 'config, {"eof" : 1} or {"reset" : 1}')
    except ClientError as e:
        await conn.fail(e)


async def _reopen(conn: Connection, settings: VoskSettings) -> None:
    """Streams whose finals carry up to ``max_alternatives`` alternatives and that follow
    the phrase list (grammar mode) when there is one. ClientError ``bad_config`` when the
    phrases cannot be spelled with the model's units."""
    default = conn.context.engine.recognizer.config.search
    options = conn.options.with_phrases(settings.phrases, default)
    search = options.search or default
    options = replace(options, search=replace(search, nbest=max(1, settings.max_alternatives)))
    try:  # the grammar is built in an executor (not on the loop), then the streams open
        await conn.context.engine.prepare(options.search, options.hotwords, options.phrases)
        conn.open_streams(options)
    except StreamdecError as e:  # TokenizeError / ConfigError
        raise ClientError("bad_config", f"config: {e}") from None
