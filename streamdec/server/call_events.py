"""What the telephony protocols (``twilio``, ``audiofork``, ``audiosocket``) say about a
call, and the JSON a call's results are written in. Pure: no I/O.

Each protocol is a state machine without I/O: it takes the platform's messages (or bytes)
and returns these events, in order; it raises ``ClientError`` (a kind with its close code)
for bad input, and the call it belongs to ends with that error alone. A protocol that takes
several frames at once (AudioSocket's bytes) returns the events of the frames before a bad
one, then ``CallFailed`` with the error: nothing that came before it is lost.

==================  ==========================================================================
event               meaning
==================  ==========================================================================
``CallStarted``     the call's id, its legs (one stream each: ``inbound``/``outbound``,
                    ``caller``/``callee``, ``mixed`` or a channel number) and what the platform
                    said about it (``info``); ``settings``: what the caller set for this call
                    (``call_settings``: endpoint rules, ``text_format``), in order
``CallAudio``       samples of one leg (float32 in [-1, 1]) at ``sample_rate``
``CallDtmf``        a key pressed (``leg``: the leg it was heard on, None when unknown)
``CallNote``        something the platform sent that is neither audio nor DTMF (a Twilio
                    ``mark``, an audio fork text frame): passed on to subscribers
``CallFinalize``    the platform asked to end each leg's open utterance now (an audio fork's
                    text frame ``Finalize``): their finals follow at once
``CallEnded``       the platform ended the call (``stop``, hangup): each leg's last results
                    follow
``CallFailed``      bad input after the events before it: the call ends with ``error``
==================  ==========================================================================

A call's messages (``call_message``, ``result_message``, ``keyword_message``): every one is
a JSON object with ``type`` and ``call_id``; times are seconds from the call's start (every
leg's stream starts with the call, so its times are on the call's timeline).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.results import KeywordEvent, Result
from ..errors import ClientError
from .call_settings import SettingsLayer

__all__ = ["CallStarted", "CallAudio", "CallDtmf", "CallNote", "CallEnded", "CallFinalize",
           "CallFailed", "CallEvent",
           "result_message", "keyword_message", "call_message", "DTMF_DIGITS"]

#: the keys of a telephone keypad (RFC 4733 events 0-15)
DTMF_DIGITS = frozenset("0123456789*#ABCD")


@dataclass(frozen=True)
class CallStarted:
    call_id: str
    legs: tuple[str, ...]
    info: dict[str, Any] = field(default_factory=dict)
    settings: tuple[SettingsLayer, ...] = ()


@dataclass(frozen=True)
class CallAudio:
    leg: int
    sample_rate: int
    samples: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class CallDtmf:
    digit: str
    leg: int | None = None


@dataclass(frozen=True)
class CallNote:
    kind: str  # "mark", "text"
    data: Any


@dataclass(frozen=True)
class CallFinalize:
    pass


@dataclass(frozen=True)
class CallEnded:
    reason: str


@dataclass(frozen=True)
class CallFailed:
    error: ClientError


CallEvent = (CallStarted | CallAudio | CallDtmf | CallNote | CallFinalize | CallEnded
             | CallFailed)


def call_message(kind: str, call_id: str, /, **fields: Any) -> dict[str, Any]:
    """A call's message: ``{"type": kind, "call_id": call_id, **fields}`` (``fields`` may
    hold a ``kind`` of their own: an error's, in a ``call_end``)."""
    return {"type": kind, "call_id": call_id, **fields}


def result_message(call_id: str, protocol: str, leg: str, channel: int,
                   result: Result) -> dict[str, Any]:
    """One result of one leg of a call (a partial or a final), times from the call's start:
    ``start_time`` / ``end_time`` of the segment, each word's ``start`` / ``end``."""
    return call_message(
        "result", call_id, protocol=protocol, leg=leg, channel=channel,
        segment=result.segment, text=result.text, is_final=result.is_final,
        is_eof=result.is_eof, start_time=round(result.start_time, 3),
        end_time=round(result.end_time, 3), tokens=list(result.tokens),
        words=[{"word": w.text, "start": round(w.start, 3), "end": round(w.end, 3),
                "conf": round(w.conf, 3)} for w in result.words])


def keyword_message(call_id: str, protocol: str, leg: str, channel: int,
                    event: KeywordEvent) -> dict[str, Any]:
    """A keyword heard on one leg of a call: ``keyword`` (its text), ``start_time`` /
    ``end_time`` (seconds from the call's start), ``score`` (the mean probability of its
    units) and ``tokens`` (its units as in tokens.txt)."""
    return call_message(
        "keyword", call_id, protocol=protocol, leg=leg, channel=channel,
        keyword=event.keyword, start_time=round(event.start_time, 3),
        end_time=round(event.end_time, 3), score=round(event.score, 4),
        tokens=list(event.tokens))
