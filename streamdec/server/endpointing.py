"""Per-connection endpoint rules: the values a client may set, checked against the
server's bounds, on any protocol (sherpa-onnx: URL query parameters; Vosk: config keys).

=================================  =========================================================
key (N = 1, 2, 3)                  meaning (seconds; the rules of ``streamdec.core.endpoint``)
=================================  =========================================================
``ruleN_min_trailing_silence``     rule N fires after this much trailing silence ...
``ruleN_min_utterance_length``     ... once the utterance is at least this long
=================================  =========================================================

A value must be a finite number in ``[0, max_endpoint_silence]`` (silences) or
``[0, max_endpoint_utterance]`` (lengths), the ``[server]`` bounds; the keys a client does
not give keep the server's values. ``endpoint_config`` is pure and raises ``ConfigError``
with the reason (HTTP 400 at a sherpa handshake, ``bad_config`` for a Vosk config).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping

from ..core.endpoint import EndpointConfig
from ..errors import ConfigError

__all__ = ["ENDPOINT_KEYS", "EndpointLimits", "endpoint_config"]

_FIELDS = ("min_trailing_silence", "min_utterance_length")
ENDPOINT_KEYS = tuple(f"rule{n}_{name}" for n in (1, 2, 3) for name in _FIELDS)


@dataclass(frozen=True)
class EndpointLimits:
    """The server's bounds on what a client may set (seconds)."""

    max_silence: float = 30.0
    max_utterance: float = 600.0


def _seconds(key: str, value, high: float, text: bool) -> float:
    """``value`` (a JSON number, or with ``text`` a URL's text) as seconds in [0, high]."""
    if isinstance(value, bool) or isinstance(value, str) != text:
        raise ConfigError(f"{key} must be a number of seconds, got {value!r}")
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float's
        raise ConfigError(f"{key} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or not 0 <= seconds <= high:
        raise ConfigError(f"{key} must be in [0, {high:g}] seconds (the server's limit), "
                          f"got {value!r}")
    return seconds


def endpoint_config(values: Mapping[str, object], base: EndpointConfig,
                    limits: EndpointLimits, text: bool = False) -> EndpointConfig:
    """``base`` with the rules' values given in ``values`` (keys of ``ENDPOINT_KEYS`` only:
    the caller passes just those): numbers, or with ``text`` their text (URL query values).
    ConfigError for a value of another type or outside the limits."""
    rules = {}
    for n in (1, 2, 3):
        changes = {}
        for name in _FIELDS:
            key = f"rule{n}_{name}"
            if key in values:
                high = limits.max_silence if name == _FIELDS[0] else limits.max_utterance
                changes[name] = _seconds(key, values[key], high, text)
        if changes:
            rules[f"rule{n}"] = replace(getattr(base, f"rule{n}"), **changes)
    return replace(base, **rules)
