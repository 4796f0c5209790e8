"""Recognition results: frozen values made once from a hypothesis.

Inside, times are integer encoder frames; this is the one place they become seconds.
Words are grouped from the units (a unit that starts with a word boundary opens a word):
a word starts at its first unit's frame and ends one encoder frame after its last unit's
frame; its confidence is the geometric mean of its units' probabilities,
``exp(mean(log_probs))``, in (0, 1].

Stability: a partial carries how much of it will not change any more within its segment:
``stable_tokens`` leading tokens (the search's rule, ``Search.stable_length``) and
``stable_chars`` leading characters of ``text``: the words made only of stable tokens and
closed by a later stable token that starts a new word (a word still open may grow). A
final is stable whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from ..models.base import ModelMeta
from ..search.base import Hypothesis
from ..tokens import SymbolTable

__all__ = ["Result", "Word", "KeywordEvent", "Event", "make_result", "make_keyword_event",
           "stable_word_count"]


@dataclass(frozen=True)
class Word:
    """One word of a result, times in seconds from the stream start."""

    text: str
    start: float  # the first unit's time
    end: float  # one encoder frame after the last unit's time
    conf: float  # exp(mean per-unit log-prob): geometric mean of the unit probabilities


@dataclass(frozen=True)
class Result:
    """The current (partial) or closed (final) text of one segment of a stream."""

    text: str
    tokens: tuple[str, ...]  # symbols as in tokens.txt
    token_ids: tuple[int, ...]
    timestamps: tuple[float, ...]  # seconds from the segment start, one per token
    log_probs: tuple[float, ...]  # per-token log-probs (confidences)
    segment: int  # segment id within the stream
    start_time: float  # segment start, seconds from the stream start
    end_time: float  # end of the audio decoded in this segment, seconds from the stream start
    is_final: bool  # an endpoint (or the end of the stream) closed this segment
    is_eof: bool = False  # the stream has ended: no more results follow
    score: float = 0.0  # total log-prob of the hypothesis
    words: tuple[Word, ...] = ()  # the text's words with times and confidences
    # finals of a search asked for an n-best list (SearchConfig.nbest > 1): the n-best
    # hypotheses as results, best first (the first is this result itself); else empty
    alternatives: tuple["Result", ...] = ()
    # leading tokens / characters of ``text`` that no later result of the segment changes
    # (a final: all of them)
    stable_tokens: int = 0
    stable_chars: int = 0

    @property
    def stable_text(self) -> str:
        """The part of ``text`` that will not change any more."""
        return self.text[:self.stable_chars]
    # finals formatted for people (streamdec.textfmt; None: not formatted, ``text`` only):
    # punctuated, cased text (and written numbers), and its words with the spoken times
    display: str | None = None
    display_words: tuple[Word, ...] = ()
    # a final with a second pass (streamdec.core.second_pass): "done" (its words), "rejected"
    # (its output failed a check), "skipped" (not run in time); "" where none ran; and the
    # first pass's own final beside it
    second_pass: str = ""
    first_pass: "Result | None" = None

    @property
    def span(self) -> tuple[float, float]:
        """Seconds from the stream start when the result's words begin and end (the
        segment's start and end when it has no words)."""
        if self.words:
            return self.words[0].start, self.words[-1].end
        return self.start_time, self.end_time

    @property
    def absolute_timestamps(self) -> tuple[float, ...]:
        """Token times in seconds from the stream start."""
        return tuple(self.start_time + t for t in self.timestamps)


@dataclass(frozen=True)
class KeywordEvent:
    """A keyword heard in a stream created with keywords (``Recognizer.create_stream``):
    it comes among the stream's results, before the results of the chunk it ended in."""

    keyword: str  # the keyword's text (its ``@TEXT``, or the phrase as written)
    start_time: float  # its first unit's time, seconds from the stream start
    end_time: float  # one encoder frame after its last unit's time
    score: float  # mean probability of its units, in (0, 1]
    tokens: tuple[str, ...]  # its units as in tokens.txt


#: what a stream hands out: results, and keyword events where it spots keywords
Event = Result | KeywordEvent


def make_keyword_event(hit, symbols: SymbolTable, meta: ModelMeta, shift: int = 0
                       ) -> KeywordEvent:
    """The event of a ``search.keywords.KeywordHit`` (frames -> seconds); ``shift``:
    encoder frames of silence a force-final inserted before it (taken out of its times)."""
    seconds = _frame_seconds(meta.encoder_frame_seconds)
    return KeywordEvent(hit.text, seconds(hit.frames[0] - shift),
                        seconds(hit.frames[-1] + 1 - shift), round(hit.score, 6),
                        tuple(symbols.symbols(hit.tokens)))


def make_result(hyp: Hypothesis, symbols: SymbolTable, meta: ModelMeta, *, segment: int,
                segment_start: int, encoder_frame_offset: int, is_final: bool,
                is_eof: bool = False, unknown_words: Sequence[bool] | None = None,
                unknown_text: str | None = None, stable_tokens: int | None = None,
                shift: int = 0, start_time: float | None = None,
                end_limit: float | None = None) -> Result:
    """Result of ``hyp`` for a segment that began at encoder frame ``segment_start`` and has
    been decoded up to ``encoder_frame_offset``.

    ``unknown_words``/``unknown_text`` (grammar mode): per word, whether it is outside the
    grammar; such words are shown as ``unknown_text`` (``[unk]``) in the words and text.
    ``stable_tokens``: leading tokens that will not change (None: all, as for a final).

    Silence inserted into the stream (a force-final pads its last chunk) is taken out of the
    times: ``shift`` encoder frames inserted before this segment; ``start_time`` (seconds)
    where the segment starts on the audio's timeline when that is not ``segment_start``;
    ``end_limit``: the end of the audio (seconds) when the segment's decoded frames run past
    it into inserted silence."""
    sec = meta.encoder_frame_seconds
    seconds = _frame_seconds(sec)
    frames, log_probs = hyp.frames, hyp.log_probs
    spans = symbols.word_spans(hyp.tokens)
    if unknown_words is not None and unknown_text is not None:
        spans = [(unknown_text if unk else text, a, b)
                 for (text, a, b), unk in zip(spans, unknown_words)]
    words = tuple(
        Word(text, start=seconds(frames[a] - shift), end=seconds(frames[b] + 1 - shift),
             conf=round(math.exp(sum(log_probs[a:b + 1]) / (b + 1 - a)), 6))
        for text, a, b in spans)
    text = symbols.text(hyp.tokens) if unknown_words is None else " ".join(w.text for w in words)
    if stable_tokens is None:
        stable_tokens, stable_chars = len(hyp.tokens), len(text)
    else:
        closed = stable_word_count(symbols, hyp.tokens, spans, stable_tokens)
        stable = " ".join(w.text for w in words[:closed])
        stable_chars = len(stable) if text.startswith(stable) else 0
    if start_time is None:
        start = seconds(segment_start - shift)
        timestamps = tuple([seconds(f - segment_start) for f in frames])
    else:
        start = start_time
        timestamps = tuple([round((f - shift) * sec - start, 6) for f in frames])
    end = seconds(encoder_frame_offset - shift)
    if end_limit is not None:
        end = max(start, min(end, end_limit))
    return Result(
        text=text, tokens=tuple(symbols.symbols(hyp.tokens)),
        token_ids=hyp.tokens, timestamps=timestamps,
        log_probs=tuple(hyp.log_probs), segment=segment,
        start_time=start, end_time=end,
        is_final=is_final, is_eof=is_eof, score=hyp.score, words=words,
        stable_tokens=stable_tokens, stable_chars=stable_chars)


#: encoder frame counts below this have their seconds looked up, not computed (a segment's
#: token times; word times in the first ~11 minutes of a stream at 40 ms frames)
_TABLE_FRAMES = 1 << 14
_converters: dict[float, Callable[[int], float]] = {}


def _frame_seconds(sec: float) -> Callable[[int], float]:
    """``frames -> round(frames * sec, 6)`` for one frame length (the same values, from a
    table shared by every stream: rounding each time was a good part of the cost of
    making a partial, whose times are recomputed whole at every chunk)."""
    seconds = _converters.get(sec)
    if seconds is None:
        table = [round(k * sec, 6) for k in range(_TABLE_FRAMES)]

        def seconds(frames: int) -> float:
            return table[frames] if 0 <= frames < _TABLE_FRAMES else round(frames * sec, 6)

        _converters[sec] = seconds
    return seconds


def stable_word_count(symbols: SymbolTable, tokens: Sequence[int],
                      spans: Sequence[tuple[str, int, int]], stable_tokens: int) -> int:
    """How many of the words ``spans`` (of ``tokens``) can no longer change when the first
    ``stable_tokens`` tokens are fixed: a word whose tokens are all stable and that a later
    stable token closes by starting a new word."""
    opener = next((j for j in range(min(stable_tokens, len(tokens)) - 1, -1, -1)
                   if symbols.starts_word(tokens[j])), -1)  # the last stable word start
    return sum(1 for _, _, last in spans if last < opener)
