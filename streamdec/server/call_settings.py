"""What a caller may set for one call, where its platform carries settings: the endpoint
rules (``endpointing.ENDPOINT_KEYS``, within the server's bounds), ``text_format``
(``raw`` | ``punct`` | ``full``), ``redact`` (``cards``, ``ssn``, ``all``: redacted on top
of the server's ``redact``), ``second_pass`` (``true`` | ``false``: the call's finals
decoded again by the server's second pass; on by default where the server has one, and
refused where it has none) and ``keywords`` (keyword lines spotted on the call's legs on
top of the server's ``call_keywords``: ``/`` between lines in text, a string or a list of
strings in JSON; checked against the model by ``call_keywords.call_keyword_lines``).
Pure: no I/O.

====================  ==========================================================================
platform              where the settings come from (later ones win)
====================  ==========================================================================
Twilio                ``start.customParameters`` (TwiML ``<Parameter name=... value=...>``:
                      text values)
audio fork            the URL's query (text values), then the metadata's keys (JSON numbers
                      and strings)
AudioSocket           none (the protocol carries only the call's UUID)
====================  ==========================================================================

Keys other than these are the caller's own data and are left alone (they reach subscribers
in ``call_start``'s ``info``). A bad value is ClientError ``bad_config`` naming where it
came from; that call alone ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..core.endpoint import EndpointConfig
from ..errors import ClientError, ConfigError
from ..search.keyword_graph import split_keywords
from ..textfmt.format import check_text_format
from ..textfmt.redact import parse_kinds
from .endpointing import ENDPOINT_KEYS, EndpointLimits, endpoint_config

__all__ = ["CALL_SETTING_KEYS", "SettingsLayer", "CallSettings", "settings_layer",
           "call_settings"]

CALL_SETTING_KEYS = ENDPOINT_KEYS + ("text_format", "redact", "second_pass", "keywords")


@dataclass(frozen=True)
class SettingsLayer:
    """The settings one source gave (only ``CALL_SETTING_KEYS``): ``where`` names the source
    in errors; ``text``: its values are text (a URL's, TwiML's) rather than JSON."""

    where: str
    values: Mapping[str, Any]
    text: bool


@dataclass(frozen=True)
class CallSettings:
    endpoint: EndpointConfig | None = None  # None: the server's rules
    text_format: str | None = None  # None: the server's call_text_format
    redact: frozenset[str] = frozenset()  # kinds redacted on top of the server's ``redact``
    second_pass: bool | None = None  # the server's second pass on/off (None: its default)
    keywords: tuple[str, ...] = ()  # the call's keyword lines (on top of the server's)
    keywords_from: str = ""  # where they came from (its layer's ``where``), for errors


def settings_layer(where: str, values: Any, text: bool) -> SettingsLayer | None:
    """The settings among ``values`` (any JSON; only an object has any); None when none."""
    if not isinstance(values, Mapping):
        return None
    chosen = {k: values[k] for k in CALL_SETTING_KEYS if k in values}
    return SettingsLayer(where, chosen, text) if chosen else None


def call_settings(layers: Sequence[SettingsLayer], base: EndpointConfig,
                  limits: EndpointLimits) -> CallSettings:
    """The call's settings from its layers, in order (a later layer's key wins): the
    endpoint rules are ``base`` changed within ``limits``. ClientError ``bad_config``."""
    endpoint, text_format, redact, second_pass = None, None, frozenset(), None
    keywords, keywords_from = (), ""
    for layer in layers:
        rules = {k: v for k, v in layer.values.items() if k in ENDPOINT_KEYS}
        try:
            if rules:
                endpoint = endpoint_config(rules, endpoint or base, limits, layer.text)
            if "text_format" in layer.values:
                text_format = check_text_format(layer.values["text_format"], "text_format")
            if "redact" in layer.values:
                value = layer.values["redact"]
                if not isinstance(value, str):
                    raise ConfigError(f"redact must be text (cards,ssn), got {value!r}")
                redact = parse_kinds(value)
            if "second_pass" in layer.values:
                second_pass = _switch(layer.values["second_pass"], layer.text)
            if "keywords" in layer.values:
                keywords = _keyword_lines(layer.values["keywords"], layer.text)
                keywords_from = layer.where
        except ConfigError as e:
            raise ClientError("bad_config", f"{layer.where}: {e}") from None
    return CallSettings(endpoint, text_format, redact, second_pass, keywords, keywords_from)


def _keyword_lines(value: Any, text: bool) -> tuple[str, ...]:
    """Keyword lines: ``/`` (or a newline) between them in text, a string or a list of
    strings in JSON; at least one keyword (the lines themselves are checked against the
    model later)."""
    if isinstance(value, str):
        lines = split_keywords(value)
    elif not text and isinstance(value, list) and all(isinstance(v, str) for v in value):
        lines = list(value)
    else:
        raise ConfigError(f"keywords must be text (keyword lines with / between them)"
                          f"{'' if text else ' or a list of strings'}, got {value!r}")
    if not any(line.strip() for line in lines):
        raise ConfigError("keywords: no keyword given")
    return tuple(lines)


def _switch(value: Any, text: bool) -> bool:
    """A true/false setting: ``"true"`` | ``"false"`` from text, a JSON boolean from JSON
    (also its text form: a metadata value may come as either)."""
    if isinstance(value, bool) and not text:
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ConfigError(f"second_pass must be true or false, got {value!r}")
