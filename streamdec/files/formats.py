"""Output formats of ``streamdec transcribe``: pure functions of results.

- text: the whole final transcript of a file (and a line per keyword heard:
  ``keyword_line``);
- jsonl: one JSON object per partial/final event (and per keyword heard: ``keyword_json``);
Results formatted for people (``Result.display``, see ``streamdec.textfmt``) show their
formatted text and words in text, srt and vtt, and add ``display``/``display_words`` to
jsonl; the others show ``text``.

- srt / vtt: subtitle cues made for reading, as broadcast subtitle guides ask: at most
  ``MAX_LINES`` lines of at most ``MAX_LINE_CHARS`` characters and at most
  ``MAX_CUE_SECONDS`` on screen, split between words by the words' times, never across
  segments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from ..core.results import KeywordEvent, Result, Word

__all__ = ["FORMATS", "Cue", "event_json", "keyword_json", "keyword_line", "shown_text",
           "shown_words", "transcript", "wrap_lines", "cues", "cue_times", "subtitles"]

FORMATS = ("text", "jsonl", "srt", "vtt")

MAX_LINES = 2  # lines of one cue
MAX_LINE_CHARS = 42  # characters of one line (a longer single word gets a line of its own)
MAX_CUE_SECONDS = 7.0  # from a cue's first word's start to the cue's end
MIN_CUE_SECONDS = 1.0  # a short cue stays this long, unless the next cue starts first
CUE_TAIL = 0.4  # a cue stays this long after its last word ends (within the limits above)


def _word_json(words: Sequence[Word]) -> list[dict]:
    return [{"word": w.text, "start": round(w.start, 3), "end": round(w.end, 3),
             "conf": round(w.conf, 4)} for w in words]


def event_json(file: str, result: Result) -> str:
    """One jsonl line: ``timestamps`` are seconds from the segment start, ``start``/``end``
    seconds from the file start; ``words``: ``{"word", "start", "end", "conf"}`` per word,
    times from the file start (``Result.words``); ``stable``: how many leading characters
    of ``text`` will not change any more (a final's: all); a formatted final adds
    ``display`` and ``display_words`` (the same fields); a final of a second pass adds
    ``second_pass`` (done, rejected, skipped) and ``first_pass`` (``text``, ``words``)."""
    event = {
        "file": file, "type": "final" if result.is_final else "partial",
        "segment": result.segment, "text": result.text, "tokens": list(result.tokens),
        "timestamps": [round(t, 3) for t in result.timestamps],
        "log_probs": [round(p, 4) for p in result.log_probs],
        "start": round(result.start_time, 3), "end": round(result.end_time, 3),
        "is_eof": result.is_eof, "stable": result.stable_chars,
        "words": _word_json(result.words)}
    if result.display is not None:
        event.update(display=result.display, display_words=_word_json(result.display_words))
    if result.second_pass:
        first = result.first_pass
        event.update(second_pass=result.second_pass, first_pass={
            "text": first.text, "words": _word_json(first.words)})
    return json.dumps(event, ensure_ascii=False)


def keyword_json(file: str, event: KeywordEvent) -> str:
    """One jsonl line for a keyword heard: ``start``/``end`` seconds from the file start,
    ``score`` the mean probability of its units, ``tokens`` its units."""
    return json.dumps({"file": file, "type": "keyword", "keyword": event.keyword,
                       "start": round(event.start_time, 3), "end": round(event.end_time, 3),
                       "score": round(event.score, 4), "tokens": list(event.tokens)},
                      ensure_ascii=False)


def keyword_line(event: KeywordEvent) -> str:
    """A keyword heard, for the text format: ``keyword ALEXA at 0.96-1.40 s (score 0.52)``."""
    return (f"keyword {event.keyword} at {event.start_time:.2f}-{event.end_time:.2f} s "
            f"(score {event.score:.2f})")


def shown_text(result: Result) -> str:
    """What a person reads of a result: its formatted text when it has one, else ``text``."""
    return result.text if result.display is None else result.display


def shown_words(result: Result) -> tuple[Word, ...]:
    """The words of ``shown_text`` with their times."""
    return result.words if result.display is None else result.display_words


def transcript(finals: Sequence[Result]) -> str:
    """The whole transcript: texts of the final results (formatted ones as formatted), in
    order, joined by a space."""
    return " ".join(shown_text(r) for r in finals if r.is_final and r.text)


@dataclass(frozen=True)
class Cue:
    """One subtitle: shown from ``start`` to ``end`` (seconds from the stream start)."""

    start: float
    end: float
    lines: tuple[str, ...]


def _fill(words: Sequence[str], width: int) -> list[str]:
    """Words as lines of at most ``width`` characters, each line filled before the next."""
    lines = [words[0]]
    for w in words[1:]:
        if len(lines[-1]) + 1 + len(w) <= width:
            lines[-1] += " " + w
        else:
            lines.append(w)
    return lines


def wrap_lines(words: Sequence[str], max_chars: int = MAX_LINE_CHARS,
               max_lines: int = MAX_LINES) -> list[str] | None:
    """``words`` (at least one) as at most ``max_lines`` lines of at most ``max_chars``
    characters, broken between words and as even in length as the fewest lines allow; None
    when they do not fit. A word longer than ``max_chars`` is a line of its own."""
    fewest = len(_fill(words, max_chars))  # filling each line first needs the fewest lines
    if fewest > max_lines:
        return None
    if fewest == 1:
        return [" ".join(words)]
    for width in range(max(map(len, words)), max_chars):  # the narrowest that needs no more
        lines = _fill(words, width)
        if len(lines) == fewest:
            return lines
    return _fill(words, max_chars)


def _untimed_words(result: Result) -> tuple[Word, ...]:
    """Words of a result made without word times, spread over its span by their length."""
    texts = result.text.split()
    span = max(result.end_time - result.start_time, 0.0)
    total = sum(map(len, texts))
    words, done = [], 0
    for text in texts:
        start = result.start_time + span * done / total
        done += len(text)
        words.append(Word(text, start, result.start_time + span * done / total, 0.0))
    return tuple(words)


def cue_times(first: Word, last: Word, next_start: float | None,
              max_seconds: float = MAX_CUE_SECONDS) -> tuple[float, float]:
    """Display times of a cue from its ``first`` word to its ``last``: from the first
    word's start to CUE_TAIL after the last word's end, at least MIN_CUE_SECONDS and at
    most ``max_seconds`` long (never ending before the last word does), and ending no
    later than ``next_start`` (the next cue's start, None for the last cue) when that
    comes after the start."""
    start = first.start
    end = max(last.end + CUE_TAIL, start + MIN_CUE_SECONDS)
    end = min(end, max(start + max_seconds, last.end))
    if next_start is not None and next_start > start:
        end = min(end, next_start)
    return start, end


def cues(finals: Sequence[Result], max_chars: int = MAX_LINE_CHARS, max_lines: int = MAX_LINES,
         max_seconds: float = MAX_CUE_SECONDS) -> list[Cue]:
    """Subtitle cues of the final results with text: each segment's words, in order, go
    into one cue while its lines fit (see ``wrap_lines``) and its words span at most
    ``max_seconds``; then the next cue begins. A cue never holds two segments' words."""
    groups: list[list[Word]] = []
    for r in finals:
        if not (r.is_final and r.text):
            continue
        group: list[Word] = []
        for w in shown_words(r) or _untimed_words(r):
            if group and (w.end - group[0].start > max_seconds or len(
                    _fill([x.text for x in group + [w]], max_chars)) > max_lines):
                groups.append(group)
                group = []
            group.append(w)
        groups.append(group)
    out = []
    for n, group in enumerate(groups):
        next_start = groups[n + 1][0].start if n + 1 < len(groups) else None
        start, end = cue_times(group[0], group[-1], next_start, max_seconds)
        lines = wrap_lines([w.text for w in group], max_chars, max_lines)
        out.append(Cue(start, end, tuple(lines)))
    return out


def _clock(seconds: float, decimal: str) -> str:
    ms = int(round(seconds * 1000))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{decimal}{ms:03d}"


def subtitles(finals: Sequence[Result], fmt: str) -> str:
    """SRT or WebVTT text of ``cues(finals)``; every cue, the last too, ends with a blank
    line."""
    decimal = "," if fmt == "srt" else "."
    blocks = ["WEBVTT\n\n"] if fmt == "vtt" else []
    for n, cue in enumerate(cues(finals), 1):
        number = f"{n}\n" if fmt == "srt" else ""
        blocks.append(f"{number}{_clock(cue.start, decimal)} --> {_clock(cue.end, decimal)}\n"
                      + "".join(line + "\n" for line in cue.lines) + "\n")
    return "".join(blocks)
