"""How much shown partial text changes, before and after stable partials.

Each dev utterance is decoded as a live client sends it (0.1 s of audio at a time) and
every result the core makes is "shown" in turn, within its segment. Counted per second of
audio:

- ``changed_chars_per_s``: characters of the shown text that the next result of the
  segment does not keep (``len(prev) - common_prefix(prev, next)``): the jitter a reader
  sees today, with the whole partial shown alike (before);
- ``steady_changed_chars_per_s``: the same count on the steady part only, the
  ``stable_chars`` that a page or terminal shows in full colour (after). Zero by the rule
  (``tests/test_stable_partials.py`` proves it on every search); measured here too;
- ``steady_share``: of all characters shown in partials, the share shown steady;
- ``stable_lag``: per character of each final, from the first result after which every
  later result of the segment keeps it (when it stopped changing) to the first result
  that calls it stable (audio seconds: median, p90): what waiting for stability costs.

    python bench/accuracy/partial_stability.py --limit 40 --out bench/results/2026-12-01-partial-stability/partial-stability.json
    python bench/accuracy/partial_stability.py --smoke --out /tmp/stability.json   # seconds
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.captions.caption_delay import machine  # noqa: E402
from bench.common.devset import dev_set  # noqa: E402

DEFAULT_SEARCHES = ("greedy", "modified_beam", "alsd")
PIECE_SECONDS = 0.1


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def segment_counts(shown: Sequence[tuple[str, int]]) -> dict:
    """One segment's results in order as (text, stable chars), the last its final:
    characters changed in all the text and in the steady part, characters shown in
    partials and of those shown steady."""
    changed = steady_changed = chars = steady = 0
    for (text, stable), (nxt, _) in zip(shown, shown[1:]):
        keep = common_prefix(text, nxt)
        changed += len(text) - keep
        steady_changed += stable - min(stable, keep)
        chars += len(text)
        steady += stable
    return {"changed": changed, "steady_changed": steady_changed, "chars": chars,
            "steady": steady}


def stable_lags(shown: Sequence[tuple[str, int, float]]) -> list[float]:
    """One segment's results as (text, stable chars, audio time), the last its final: per
    character of the final, from when it stopped changing to when it was called stable."""
    final = shown[-1][0]
    lags = []
    for i in range(len(final)):
        settled = len(shown) - 1  # the first result from which all keep final[:i + 1]
        while settled > 0 and shown[settled - 1][0][:i + 1] == final[:i + 1]:
            settled -= 1
        stable_at = next(k for k, (_, s, _) in enumerate(shown) if s > i)
        lags.append(shown[stable_at][2] - shown[settled][2])
    return lags


def decode_events(rec, utt, search):
    piece = int(utt.rate * PIECE_SECONDS)
    s = rec.create_stream(search=search)
    events = []
    for i in range(0, len(utt.samples), piece):
        s.accept_waveform(utt.rate, utt.samples[i:i + piece])
        while rec.is_ready(s):
            rec.decode([s])
        events += s.pop_events()
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    return events + s.pop_events()


def measure(rec, utts, method: str) -> dict:
    from streamdec.search import SearchConfig

    search = SearchConfig(method=method)
    totals = {"changed": 0, "steady_changed": 0, "chars": 0, "steady": 0}
    lags: list[float] = []
    audio = partials = 0.0
    started = time.perf_counter()
    for u in utts:
        audio += u.seconds
        by_segment: dict[int, list] = {}
        for e in decode_events(rec, u, search):
            by_segment.setdefault(e.segment, []).append(e)
        for events in by_segment.values():
            if not events[-1].is_final:  # closed empty: nothing was shown
                continue
            partials += len(events) - 1
            counts = segment_counts([(e.text, e.stable_chars) for e in events])
            totals = {k: totals[k] + counts[k] for k in totals}
            lags += stable_lags([(e.text, e.stable_chars, e.end_time) for e in events])
    return {
        "search": method, "utterances": len(utts), "audio_seconds": round(audio, 2),
        "partials": int(partials),
        "changed_chars_per_s": round(totals["changed"] / audio, 3),
        "steady_changed_chars_per_s": round(totals["steady_changed"] / audio, 3),
        "steady_share": round(totals["steady"] / max(1, totals["chars"]), 3),
        "stable_lag_s": {"median": round(statistics.median(lags), 3) if lags else None,
                         "p90": round(float(np.percentile(lags, 90)), 3) if lags else None},
        "decode_seconds": round(time.perf_counter() - started, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", default="espeak", help="dev set (espeak, flite, espeak8k)")
    p.add_argument("--limit", type=int, default=40, help="utterances (0: all)")
    p.add_argument("--search", action="append", help="search method (repeat); default: "
                   + ", ".join(DEFAULT_SEARCHES))
    p.add_argument("--smoke", action="store_true", help="2 utterances: seconds")
    p.add_argument("--out", required=True, help="JSON report")
    args = p.parse_args(argv)
    from streamdec import Recognizer

    limit = 2 if args.smoke else args.limit
    utts = dev_set(args.set, limit)
    rec = Recognizer()
    results = [measure(rec, utts, m) for m in (args.search or DEFAULT_SEARCHES)]
    report = {"dev_set": args.set, "piece_seconds": PIECE_SECONDS, "results": results,
              "machine": machine(),
              "command": ("python bench/accuracy/partial_stability.py "
                          + " ".join(argv or sys.argv[1:]))}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    for r in results:
        print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
