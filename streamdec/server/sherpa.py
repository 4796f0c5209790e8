"""The sherpa-onnx streaming protocol (served at ``/`` and ``/sherpa``).

Client -> server: binary messages of little-endian float32 samples in [-1, 1] (by default;
see ``options``), the text ``Done`` to end the input, the text ``Finalize`` to end the
current utterance now (force-final: all the audio sent so far is decoded, the last chunk
padded with silence, then the segment's final is sent at once, with empty text when it
has none, and the next audio opens a new segment where that audio ended).
Server -> client: after each decoded chunk that changed the text (or its stable part),
and at each endpoint, the open segment as JSON with the fields in
sherpa-onnx's order (``sherpa_message``) and one more at the end, ``stable``: how many
leading characters of ``text`` will not change any more; after ``Done`` the last result
with ``is_final`` and ``is_eof`` true, then the text ``Done!``; the server then closes.
With ``channels=2`` every message also has ``"channel"``, and ``Done!`` follows the last
result of both channels. Finals of a connection with ``text_format`` ``punct``/``full``
also have ``display`` and ``display_words`` (``display.py``), after sherpa-onnx's fields.

With ``keywords=...`` (``options``), each keyword heard is a message of its own
(``keyword_message``), sent before the results of the chunk it ended in: ``"type":
"keyword"`` with the keyword, its times and score, and the fields a sherpa-onnx client
reads repeated from the open segment as last sent (its id, its text or ``""``,
``is_final`` false): a client that reads only those sees the open segment as it was,
never a final.
"""

from __future__ import annotations

import json

import numpy as np

from ..core.results import KeywordEvent, Result
from ..errors import ClientError
from .display import display_fields
from .session import Close, Command, Feed, ForceFinal, InputEnd, Send

__all__ = ["sherpa_message", "keyword_message", "trailing_blanks", "SherpaSession", "DONE",
           "DONE_REPLY", "FINALIZE"]

DONE = "Done"
DONE_REPLY = "Done!"
FINALIZE = "Finalize"


def trailing_blanks(result: Result, frame_seconds: float) -> int:
    """Encoder frames decoded in the segment after its last token (all of them when it has
    none)."""
    if result.timestamps:
        last = result.start_time + result.timestamps[-1]
        return max(0, round((result.end_time - last) / frame_seconds) - 1)
    return max(0, round((result.end_time - result.start_time) / frame_seconds))


def sherpa_message(result: Result, frame_seconds: float, channel: int | None = None) -> str:
    """One result as sherpa-onnx's server writes it (its fields, in its order).
    Tokens show the word-boundary unit ``\u2581`` as a space, as sherpa-onnx does;
    ``lm_probs`` / ``context_scores`` / ``words`` are left empty: per-token LM and hotword
    scores and word ids are not reported (the words are in ``text``)."""
    message = {
        "text": result.text.lstrip(),
        "tokens": [t.replace("\u2581", " ") for t in result.tokens],
        "timestamps": _rounded(result.timestamps, 2),
        "ys_probs": _rounded(result.log_probs, 6),
        "lm_probs": [],
        "context_scores": [],
        "segment": result.segment,
        "words": [],
        "num_trailing_blanks": trailing_blanks(result, frame_seconds),
        "start_time": round(result.start_time, 2),
        "is_final": result.is_final,
        "is_eof": result.is_eof,
        "stable": result.stable_chars,  # not sherpa-onnx's: its clients ignore it
    }
    if channel is not None:
        message["channel"] = channel
    message.update(display_fields([result]))
    return _to_json(message)


def keyword_message(event: KeywordEvent, segment: int, text: str,
                    channel: int | None = None) -> str:
    """A keyword heard, while ``segment`` is open with ``text`` last sent for it: the
    keyword's fields, then sherpa-onnx's ``text``/``segment``/``is_final``/``is_eof`` as
    they stand (a client of results alone sees the open segment as it was)."""
    message = {"type": "keyword", "keyword": event.keyword,
               "start_time": round(event.start_time, 2), "end_time": round(event.end_time, 2),
               "score": round(event.score, 4),
               "tokens": [t.replace("\u2581", " ") for t in event.tokens],
               "text": text, "segment": segment, "is_final": False, "is_eof": False}
    if channel is not None:
        message["channel"] = channel
    return _to_json(message)


_to_json = json.JSONEncoder(ensure_ascii=False).encode


def _rounded(values: tuple[float, ...], digits: int) -> list[float]:
    """``[round(v, digits) for v in values]``, vectorised: a partial's times and
    log-probs are rounded whole at every chunk (numpy rounds by scaling, which can differ
    from ``round``'s exact decimal rounding only for a value within an ulp or so of a
    tie; tested equal on 30,000 token times and 30,000 log-probs)."""
    return np.round(np.asarray(values, dtype=np.float64), digits).tolist() if values else []


class SherpaSession(InputEnd):
    """One sherpa-onnx client, without I/O (``session`` says how it is driven): audio
    until ``Done`` (audio after it is an error), ``Finalize`` to end the utterance now
    (force-final); every result is sent as it comes; when
    every channel has its last result, ``Done!`` and the close. After the drain (the server
    shutting down) the client's audio is ignored: its results are on their way."""

    push_results = True

    def __init__(self, channels: int, frame_seconds: float) -> None:
        self.channels = channels
        self.frame_seconds = frame_seconds
        # per channel: the open segment and its text as last sent (keyword messages)
        self.open = [(0, "")] * channels

    def receive(self, message) -> list[Command]:
        """A client message: bytes, text or ``DRAIN``."""
        ended = self.at_input_end(message, "audio after Done")
        if ended is not None:
            return ended
        if isinstance(message, bytes):
            return [Feed(message)]
        if message == DONE:
            return self.end_input()
        if message == FINALIZE:  # ignored while draining: the last finals are on their way
            if self.draining:
                return []
            if self.finished:
                raise ClientError("bad_message", f"{FINALIZE} after {DONE}")
            return [ForceFinal(FINALIZE)]
        raise ClientError("bad_message", f"expected audio (binary) or the text {DONE!r} "
                                         f"or {FINALIZE!r}, got text {message[:40]!r}")

    @property
    def binary_is_audio(self) -> bool:
        """A binary message now is audio to feed and nothing else (``receive`` gives
        ``[Feed(message)]`` for it): until ``Done`` or the drain."""
        return not self.finished

    def result(self, channel: int, result: Result) -> list[Command]:
        tag = channel if self.channels > 1 else None
        if not result.is_final:
            self.open[channel] = (result.segment, result.text.lstrip())
        else:  # the next segment is open (an empty final keeps its id)
            self.open[channel] = (result.segment + 1 if result.token_ids else result.segment, "")
        return [Send(sherpa_message(result, self.frame_seconds, tag))]

    def keyword(self, channel: int, event: KeywordEvent) -> list[Command]:
        segment, text = self.open[channel]
        return [Send(keyword_message(event, segment, text,
                                     channel if self.channels > 1 else None))]

    def results_ended(self) -> list[Command]:
        return [Send(DONE_REPLY), Close(1000, "done")]
