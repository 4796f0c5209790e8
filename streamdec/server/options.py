"""Per-connection options: query parameters of the WebSocket URL, on either protocol.

===================  ==========================================================  ============
parameter            meaning                                                     default
===================  ==========================================================  ============
``sample_rate``      rate of the audio the client sends (8000..96000)            per protocol
``encoding``         ``f32le`` | ``s16le`` | ``mulaw`` | ``alaw``                per protocol
``channels``         1, or 2: a stereo call, one stream (and result tag) each    1
``search``           search method (``greedy``, ``modified_beam``, ...)          the server's
``beam``             beam size of a beam search                                  the server's
``hotwords``         phrases to bias (``phrase`` or ``phrase :score``), comma-   none
                     separated; may repeat; needs a beam search
``keywords``         keywords to spot beside the transcript (sherpa-onnx's       none
                     format, ``/``-separated; may repeat; the sherpa-onnx
                     protocol only: its events are JSON messages of their own)
``vad``              ``true`` | ``false``: skip silence with the voice activity  the server's
                     detector (``[vad] enabled``)
``second_pass``      ``true`` | ``false``: finals decoded again by the server's   on where the
                     second pass (``[second_pass]``; true without one: refused)  server has one
``local_agreement``  ``true`` | ``false``: partials refreshed by local agreement  the server's
                     with the second pass's model (true without one: refused)    (off)
``text_format``      finals for people: ``raw`` | ``punct`` | ``full``; a final   the server's
                     then also has ``display`` and ``display_words``
``redact``           ``cards``, ``ssn`` (comma-separated) or ``all``: redacted    the server's
                     in this connection's results, on top of the server's
                     ``redact`` (which a connection cannot turn off)
``token``            bearer token, for clients that cannot set a header          -
``ruleN_...``        the endpoint rules (``endpointing.ENDPOINT_KEYS``: seconds   the server's
                     of trailing silence / utterance length, within the
                     server's bounds)
===================  ==========================================================  ============

``parse_options`` is pure: it validates everything once and raises ``OptionError`` with the
reason, which the server returns as HTTP 400 at the handshake.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from ..audio.pcm import ENCODINGS
from ..core.endpoint import EndpointConfig
from ..errors import ConfigError, OptionError
from ..search.config import (SEARCH_METHODS, SearchConfig, require_beam_search,
                             with_beam_search, with_method)
from ..search.keyword_graph import split_keywords
from ..textfmt.format import check_text_format
from ..textfmt.redact import parse_kinds
from ..validation import unknown_names
from .endpointing import ENDPOINT_KEYS, EndpointLimits, endpoint_config

__all__ = ["StreamOptions", "OptionError", "parse_options", "validate_rate", "MIN_RATE",
           "MAX_RATE", "MAX_CHANNELS", "KNOWN", "one_value", "int_option"]

MIN_RATE, MAX_RATE = 8000, 96000
MAX_CHANNELS = 2
MAX_BEAM = 64
KNOWN = ("sample_rate", "encoding", "channels", "search", "beam", "hotwords", "phrases",
         "token", "vad", "text_format", "second_pass", "local_agreement",
         "redact", "keywords") + ENDPOINT_KEYS


@dataclass(frozen=True)
class StreamOptions:
    """What one connection's audio is and how its streams are decoded."""

    sample_rate: int
    encoding: str
    channels: int = 1
    search: SearchConfig | None = None  # None: the server's search config
    hotwords: tuple[str, ...] = ()
    phrases: tuple[str, ...] | None = None  # grammar mode: only these phrases (or [unk])
    vad: bool | None = None  # voice activity detection on/off (None: the server's default)
    endpoint: EndpointConfig | None = None  # this connection's endpoint rules (None: the server's)
    text_format: str | None = None  # raw | punct | full; None: the server's text_format
    second_pass: bool | None = None  # the server's second pass on/off (None: its default)
    # partials refreshed by local agreement on/off (None: the server's ``[second_pass]``)
    local_agreement: bool | None = None
    redact: frozenset[str] = frozenset()  # kinds redacted on top of the server's
    keywords: tuple[str, ...] | None = None  # keyword lines spotted (None: no spotting)

    def describe(self) -> dict:
        """For the connection log line."""
        out = {"sample_rate": self.sample_rate, "encoding": self.encoding,
               "channels": self.channels}
        if self.search is not None:
            out.update(search=self.search.method, beam=self.search.beam)
        if self.hotwords:
            out["hotwords"] = len(self.hotwords)
        if self.phrases is not None:
            out["phrases"] = len(self.phrases)
        if self.vad is not None:
            out["vad"] = self.vad
        if self.endpoint is not None:
            out["endpoint"] = [[r.min_trailing_silence, r.min_utterance_length]
                               for r in self.endpoint.rules]
        if self.text_format is not None:
            out["text_format"] = self.text_format
        if self.second_pass is not None:
            out["second_pass"] = self.second_pass
        if self.local_agreement is not None:
            out["local_agreement"] = self.local_agreement
        if self.keywords is not None:
            out["keywords"] = len(self.keywords)
        return out

    def with_phrases(self, phrases: Sequence[str] | None, default: SearchConfig
                     ) -> "StreamOptions":
        """Grammar mode on (or off, with None): a greedy search (this connection's or the
        server's ``default``) becomes ``search.config.DEFAULT_BEAM_SEARCH``, which grammars
        need (a Vosk client cannot name a search)."""
        if phrases is None:
            return replace(self, phrases=None)
        search = with_beam_search(self.search or default)
        return replace(self, phrases=tuple(phrases),
                       search=search if search is not default else self.search)


def one_value(query: Mapping[str, Sequence[str]], name: str) -> str | None:
    """The query's one value of ``name`` (None: absent; OptionError: given twice or more)."""
    values = query.get(name) or []
    if len(values) > 1:
        raise OptionError(f"{name} given {len(values)} times")
    return values[0] if values else None


def int_option(name: str, text: str, low: int, high: int) -> int:
    """``text`` as an integer in [low, high], else OptionError naming the option."""
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"{name} must be an integer, got {text!r}") from None
    if not low <= value <= high:
        raise OptionError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def validate_rate(rate: int) -> int:
    """Raises OptionError for a rate outside [MIN_RATE, MAX_RATE]."""
    if not MIN_RATE <= rate <= MAX_RATE:
        raise OptionError(f"unsupported sample_rate {rate}: supported {MIN_RATE}..{MAX_RATE} Hz")
    return rate


def _require_beam_search(method: str, what: str) -> None:
    try:
        require_beam_search(method, what)
    except ConfigError as e:
        raise OptionError(str(e)) from None


def parse_options(query: Mapping[str, Sequence[str]], *, sample_rate: int, encoding: str,
                  search: SearchConfig, endpoint: EndpointConfig | None = None,
                  endpoint_limits: EndpointLimits | None = None) -> StreamOptions:
    """Options from ``query`` (name -> values, as parsed from a URL) over the protocol's
    defaults ``sample_rate`` / ``encoding``, the server's ``search`` config and its
    ``endpoint`` rules (which the ``ruleN_...`` parameters change within
    ``endpoint_limits``)."""
    message = unknown_names(query, KNOWN, "option")
    if message:
        raise OptionError(message)
    rate = one_value(query, "sample_rate")
    if rate is not None:
        sample_rate = int_option("sample_rate", rate, 1, 10**7)
    validate_rate(sample_rate)
    enc = one_value(query, "encoding")
    if enc is not None:
        if enc not in ENCODINGS:
            raise OptionError(f"unsupported encoding {enc!r}: supported {', '.join(ENCODINGS)}")
        encoding = enc
    channels = one_value(query, "channels")
    channels = 1 if channels is None else int_option("channels", channels, 1, MAX_CHANNELS)
    chosen = search
    method = one_value(query, "search")
    if method is not None:
        if method not in SEARCH_METHODS:
            raise OptionError(f"unknown search {method!r}: one of {', '.join(SEARCH_METHODS)}")
        chosen = with_method(chosen, method)  # greedy over a words default: plain greedy
    beam = one_value(query, "beam")
    if beam is not None:
        chosen = replace(chosen, beam=int_option("beam", beam, 1, MAX_BEAM))
    changed = method is not None or beam is not None
    hotwords = tuple(p.strip() for value in query.get("hotwords") or []
                     for p in value.split(",") if p.strip())
    if beam is not None:
        _require_beam_search(chosen.method, "beam needs")
    if hotwords:
        _require_beam_search(chosen.method, "hotwords need")
    text_format = one_value(query, "text_format")
    if text_format is not None:
        try:
            check_text_format(text_format)
        except ConfigError as e:
            raise OptionError(str(e)) from None
    options = StreamOptions(sample_rate, encoding, channels, chosen if changed else None, hotwords,
                            text_format=text_format)
    phrases = [p.strip() for value in query.get("phrases") or [] for p in value.split(",")]
    if "phrases" in query:
        if not all(phrases):
            raise OptionError("phrases must be comma-separated, non-empty phrases")
        if method is not None:  # the server's greedy default is switched (with_phrases)
            _require_beam_search(method, "phrases (grammar mode) need")
        options = options.with_phrases(phrases, search)
    redact = one_value(query, "redact")
    if redact is not None:
        try:
            options = replace(options, redact=parse_kinds(redact))
        except ConfigError as e:
            raise OptionError(str(e)) from None
    vad = one_value(query, "vad")
    if vad is not None:
        if vad not in ("true", "false"):
            raise OptionError(f"vad must be true or false, got {vad!r}")
        options = replace(options, vad=vad == "true")
    for name in ("second_pass", "local_agreement"):
        value = one_value(query, name)
        if value is not None:
            if value not in ("true", "false"):
                raise OptionError(f"{name} must be true or false, got {value!r}")
            options = replace(options, **{name: value == "true"})
    if "keywords" in query:  # checked against the model when the streams open
        options = replace(options, keywords=tuple(
            line for value in query["keywords"] for line in split_keywords(value)))
    rules = _endpoint(query, endpoint or EndpointConfig(), endpoint_limits or EndpointLimits())
    return replace(options, endpoint=rules) if rules is not None else options


def _endpoint(query: Mapping[str, Sequence[str]], base: EndpointConfig,
              limits: EndpointLimits) -> EndpointConfig | None:
    """The connection's endpoint rules when the query sets any (None: the server's)."""
    values = {key: one_value(query, key) for key in ENDPOINT_KEYS if key in query}
    if not values:
        return None
    try:
        return endpoint_config(values, base, limits, text=True)
    except ConfigError as e:
        raise OptionError(str(e)) from None
