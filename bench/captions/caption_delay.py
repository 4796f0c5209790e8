"""How late captions show words: the arithmetic the caption latency benchmarks share
(``mic_latency.py``: the terminal; ``web_latency.py``: the browser page).

Each benchmark gives its caption events with when they were shown, the finals of
``transcribe`` on the very audio that was captioned (their words' times in the stream), and
``wall``: stream seconds to the clock the events were timed on.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

__all__ = ["shown_times", "word_delays", "utterance_delay", "summary", "machine",
           "write_report"]


def shown_times(events: list[tuple[float, dict]], finals: list) -> list[list[float]]:
    """For each final (segment) with words, when each of its words was first shown whole:
    an event of its segment (``{"type", "segment", "text"}``) holds the final's word at its
    position, or the segment's final is shown."""
    out = []
    for final in finals:
        words = [w.text for w in final.words]
        seen: list[float | None] = [None] * len(words)
        for t, e in events:
            if e["segment"] != final.segment:
                continue
            shown = e["text"].split()
            for j, w in enumerate(words):
                if seen[j] is None and (e["type"] == "final" or
                                        (j < len(shown) and shown[j] == w)):
                    seen[j] = t
        out.append(seen)
    return out


def word_delays(shown: list[list[float]], finals: list,
                wall: Callable[[float], float]) -> list[float]:
    """Per word: from its end (``wall`` of its end time) to its first showing."""
    return [t - wall(w.end) for final, times in zip(finals, shown)
            for w, t in zip(final.words, times)]


def utterance_delay(name: str, acoustic_end: float, finals: list, shown: list[list[float]],
                    wall: Callable[[float], float]) -> dict:
    """One utterance ending at ``acoustic_end`` (stream seconds): the final whose last word
    ends nearest, and from that end to its last word's showing."""
    k = min(range(len(finals)), key=lambda i: abs(finals[i].words[-1].end - acoustic_end))
    return {"file": name, "acoustic_end": round(acoustic_end, 3), "text": finals[k].text,
            "last_word_end": finals[k].words[-1].end,
            "last_word_shown_delay": round(shown[k][-1] - wall(acoustic_end), 3)}


def summary(delays: Sequence[float], utterances: Sequence[dict]) -> dict:
    """``words``, ``word_delay`` (median, p90, max) and the utterances' median delay."""
    return {
        "words": len(delays),
        "word_delay": {"median": round(statistics.median(delays), 3),
                       "p90": round(float(np.percentile(delays, 90)), 3),
                       "max": round(max(delays), 3)},
        "utterance_end_delay_median": round(statistics.median(
            u["last_word_shown_delay"] for u in utterances), 3),
    }


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def write_report(path: str, report: dict) -> None:
    """The JSON report to ``path``; its ``summary`` part to standard output."""
    Path(path).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("words", "word_delay",
                                             "utterance_end_delay_median")}))
