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

With ``--local-agreement``: on the real dev set (bench/accuracy/realvoice.py) with the
``two-pass`` config (Whisper ``--whisper``, tiny.en by default), the first pass's partials
against partials refreshed by local agreement (``[second_pass] local_agreement``, every
``--refresh-ms``), the same audio sent 0.1 s at a time through the synchronous loop (a
refresh runs in place when due: none is skipped). Per mode, besides the counts above:

- ``stable_wer`` / ``partial_wer``: every partial's stable words (its whole text) scored
  against the prefix of the reference that they match best (``prefix_errors``: the fewest
  word edits to any prefix ``ref[:k]``, the longest such prefix on ties), errors summed over
  all partials and divided by the summed prefix lengths; text normalised as whisper_ref
  scores Whisper (numbers and titles as said, then the recipe's normaliser);
- ``stable_latency_s``: per word that a partial shows stable, from the word's end (its own
  time in that partial) to the end of the audio of the first partial that shows it stable
  (audio seconds: median, p90); ``..._with_decode``: plus the wall time of the refresh that
  made it stable (a live stream sees it only once that decode is done; first-pass partials
  add nothing); ``stable_words_share``: of the words of the finals, the share that was
  stable in the segment's last partial;
- ``cpu_per_audio_second``: CPU seconds (``time.process_time``: one CTranslate2 and one
  ONNX Runtime thread) per audio second of the whole decode, finals' second pass included
  in both modes; ``refreshes``: Whisper decodes for partials.

    python bench/accuracy/partial_stability.py --local-agreement --out bench/results/2026-12-07-two-pass/local-agreement.json
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


def prefix_errors(hyp: Sequence[str], ref: Sequence[str]) -> tuple[int, int]:
    """(errors, k): the fewest word edits (substitutions, insertions, deletions) that turn
    ``hyp`` into a prefix ``ref[:k]`` of ``ref``, and the longest such k."""
    row = list(range(len(ref) + 1))  # edits from hyp[:0] to ref[:k]
    for i, word in enumerate(hyp, 1):
        prev, row = row, [i] + [0] * len(ref)
        for k in range(1, len(ref) + 1):
            row[k] = min(prev[k] + 1, row[k - 1] + 1, prev[k - 1] + (word != ref[k - 1]))
    best = min(row)
    return best, max(k for k, e in enumerate(row) if e == best)


def _stable_latencies(events, refresh_wall: dict) -> list[tuple[float, float]]:
    """One segment's partials: per word shown stable, (audio seconds from its end to the
    first partial showing it stable, the same plus the wall time of the refresh that made
    it stable: ``refresh_wall`` by partial index, 0 where none ran)."""
    out, seen = [], 0
    for i, e in enumerate(events):
        stable = len(e.stable_text.split())  # whole words (a first-pass token is a piece)
        for w in e.words[seen:stable]:
            lag = e.end_time - w.end
            out.append((lag, lag + refresh_wall.get(i, 0.0)))
        seen = max(seen, stable)
    return out


def measure_two_pass(rec, utts, agreement: bool) -> dict:
    """One mode of ``--local-agreement``: first-pass partials (False) or refreshed ones."""
    from bench.accuracy.whisper_ref import whisper_text
    from streamdec.core.drive import accept, finish

    walls: list[float] = []  # each partial refresh's wall time
    model = rec.second_pass.model
    agreement_runs = rec.local_agreement.run

    def timed_run(kept, partial):
        t0 = time.perf_counter()
        try:
            return agreement_runs(kept, partial)
        finally:
            walls.append(time.perf_counter() - t0)

    rec.local_agreement.run = timed_run
    totals = {"changed": 0, "steady_changed": 0, "chars": 0, "steady": 0}
    errs = {"stable": [0, 0], "partial": [0, 0]}
    lags: list[tuple[float, float]] = []
    final_words = stable_words = 0
    audio = cpu = 0.0
    partials = 0
    hyps = {}
    try:
        for u in utts:
            audio += u.seconds
            ref = whisper_text(u.text, u.text).split()
            piece = int(u.rate * PIECE_SECONDS)
            c0 = time.process_time()
            s = rec.create_stream(local_agreement=agreement)
            events, wall_of = [], {}
            for i in range(0, len(u.samples), piece):
                before = len(walls)
                new = accept(rec, s, u.rate, u.samples[i:i + piece])
                if len(walls) > before and new:  # the refresh ran for the first new partial
                    wall_of[len(events)] = walls[-1]
                events += new
            events += finish(rec, s)
            cpu += time.process_time() - c0
            by_segment: dict[int, list] = {}
            for k, e in enumerate(events):
                by_segment.setdefault(e.segment, []).append((k, e))
            shown_text = []
            for seg in by_segment.values():
                if not seg[-1][1].is_final:
                    continue
                seg_events = [e for _, e in seg]
                partials += len(seg_events) - 1
                counts = segment_counts([(e.text, e.stable_chars) for e in seg_events])
                totals = {k: totals[k] + counts[k] for k in totals}
                # an utterance's later segments: scored after the finals before them,
                # less what those alone score (each partial's own errors and words)
                before = whisper_text(" ".join(shown_text), u.text).split()
                n0, k0 = prefix_errors(before, ref)
                for _, e in seg[:-1]:
                    for key, text in (("stable", e.stable_text), ("partial", e.text)):
                        n, k = prefix_errors(before + whisper_text(text, u.text).split(), ref)
                        errs[key][0] += max(0, n - n0)
                        errs[key][1] += max(0, k - k0)
                walls_here = {j: wall_of[k] for j, (k, _) in enumerate(seg) if k in wall_of}
                lags += _stable_latencies(seg_events[:-1], walls_here)
                final = seg_events[-1]
                final_words += len(final.words)
                if len(seg_events) > 1:
                    stable_words += min(len(seg_events[-2].stable_text.split()),
                                        len(final.words))
                shown_text.append(final.display or final.text)
            hyps[u.utt] = [e.stable_text for e in events if not e.is_final][-3:]
    finally:
        rec.local_agreement.run = agreement_runs

    def pct(values, q):
        return round(float(np.percentile(values, q)), 3) if values else None

    return {
        "partials": "local agreement" if agreement else "first pass",
        "utterances": len(utts), "audio_seconds": round(audio, 2), "partials_made": partials,
        "stable_wer": round(errs["stable"][0] / max(1, errs["stable"][1]), 4),
        "partial_wer": round(errs["partial"][0] / max(1, errs["partial"][1]), 4),
        "stable_latency_s": {"median": pct([a for a, _ in lags], 50),
                             "p90": pct([a for a, _ in lags], 90), "words": len(lags)},
        "stable_latency_with_decode_s": {"median": pct([b for _, b in lags], 50),
                                         "p90": pct([b for _, b in lags], 90)},
        "stable_words_share": round(stable_words / max(1, final_words), 3),
        "changed_chars_per_s": round(totals["changed"] / audio, 3),
        "steady_share": round(totals["steady"] / max(1, totals["chars"]), 3),
        "cpu_per_audio_second": round(cpu / audio, 4),
        "refreshes": len(walls),
        "refresh_wall_s": {"median": pct(walls, 50), "p95": pct(walls, 95)},
        "whisper": getattr(model, "name", ""),
    }


def local_agreement_report(whisper: str, refresh_ms: int, files: str) -> dict:
    from dataclasses import replace

    from bench.accuracy.realvoice import real_dev_set
    from streamdec.appconfig import load_config
    from streamdec.core.recognizer import Recognizer

    base = load_config("two-pass").recognizer
    rec = Recognizer(replace(base, second_pass=replace(
        base.second_pass, model=whisper, refresh_ms=refresh_ms)))
    utts = real_dev_set(files.split(",") if files else None)
    # alternated, twice each, to even out the shared machine's load; the figures of the
    # second run of each (the first warms the model's caches)
    runs = [measure_two_pass(rec, utts, mode) for mode in (False, True, False, True)]
    return {"set": "real dev set", "whisper": whisper, "refresh_ms": refresh_ms,
            "piece_seconds": PIECE_SECONDS, "results": runs[2:],
            "cpu_per_audio_second_first_runs": [r["cpu_per_audio_second"] for r in runs[:2]]}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", default="espeak", help="dev set (espeak, flite, espeak8k)")
    p.add_argument("--limit", type=int, default=40, help="utterances (0: all)")
    p.add_argument("--search", action="append", help="search method (repeat); default: "
                   + ", ".join(DEFAULT_SEARCHES))
    p.add_argument("--smoke", action="store_true", help="2 utterances: seconds")
    p.add_argument("--out", required=True, help="JSON report")
    p.add_argument("--local-agreement", action="store_true",
                   help="real dev set, two-pass: first-pass partials against local agreement")
    p.add_argument("--whisper", default="tiny.en", help="with --local-agreement: the model")
    p.add_argument("--refresh-ms", type=int, default=1000,
                   help="with --local-agreement: the refresh interval")
    p.add_argument("--files", default="", help="with --local-agreement: comma-separated dev "
                   "ids (part/name); default all")
    args = p.parse_args(argv)
    command = "python bench/accuracy/partial_stability.py " + " ".join(argv or sys.argv[1:])
    if args.local_agreement:
        report = {**local_agreement_report(args.whisper, args.refresh_ms, args.files),
                  "machine": machine(), "command": command}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        for r in report["results"]:
            print(r)
        return 0
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
