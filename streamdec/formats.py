"""Output formats of ``streamdec transcribe``: pure functions of results.

- text: one line per file, the file's whole final transcript;
- jsonl: one JSON object per partial/final event;
- srt / vtt: one subtitle cue per final segment with text.
"""

from __future__ import annotations

import json
from typing import Sequence

from .results import Result

__all__ = ["FORMATS", "event_json", "transcript", "subtitles", "cue_times"]

FORMATS = ("text", "jsonl", "srt", "vtt")

# A cue lasts at least this long after its last token (the token's own duration).
_CUE_TAIL = 0.4


def event_json(file: str, result: Result) -> str:
    """One jsonl line: ``timestamps`` are seconds from the segment start, ``start``/``end``
    seconds from the file start; ``words``: ``{"word", "start", "end", "conf"}`` per word,
    times from the file start (``Result.words``)."""
    return json.dumps({
        "file": file, "type": "final" if result.is_final else "partial",
        "segment": result.segment, "text": result.text, "tokens": list(result.tokens),
        "timestamps": [round(t, 3) for t in result.timestamps],
        "log_probs": [round(p, 4) for p in result.log_probs],
        "start": round(result.start_time, 3), "end": round(result.end_time, 3),
        "is_eof": result.is_eof,
        "words": [{"word": w.text, "start": round(w.start, 3), "end": round(w.end, 3),
                   "conf": round(w.conf, 4)} for w in result.words]}, ensure_ascii=False)


def transcript(finals: Sequence[Result]) -> str:
    """The whole transcript: texts of the final results, in order, joined by a space."""
    return " ".join(r.text for r in finals if r.is_final and r.text)


def cue_times(result: Result) -> tuple[float, float]:
    """Subtitle cue of a segment: from its first token to shortly after its last token."""
    times = result.absolute_timestamps
    if not times:
        return result.start_time, result.end_time
    return times[0], min(max(times[-1] + _CUE_TAIL, times[0]), max(result.end_time, times[0]))


def _clock(seconds: float, decimal: str) -> str:
    ms = int(round(seconds * 1000))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{decimal}{ms:03d}"


def subtitles(finals: Sequence[Result], fmt: str) -> str:
    """SRT or WebVTT text with one cue per final segment that has text."""
    decimal = "," if fmt == "srt" else "."
    lines = [] if fmt == "srt" else ["WEBVTT", ""]
    cues = [r for r in finals if r.is_final and r.text]
    for n, r in enumerate(cues, 1):
        start, end = cue_times(r)
        if fmt == "srt":
            lines.append(str(n))
        lines += [f"{_clock(start, decimal)} --> {_clock(end, decimal)}", r.text, ""]
    return "\n".join(lines)
