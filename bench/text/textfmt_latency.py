"""Time to format one final, per level, with the shipped models on one core.

Usage: python bench/text/textfmt_latency.py [--repeats N] [--json OUT]

Finals of 20 words are made from the call-center list (tests/data/itn_cases.tsv: its
spoken sentences joined in order and cut into 20-word pieces); each is formatted at
``punct`` (the ONNX tagger) and ``full`` (tagger + inverse text normalisation) through
``TextFormatter.format``, the path every surface uses. Prints the median and 95th
percentile milliseconds per final (wall clock), and the mean CPU milliseconds of the
process per final (``time.process_time``: the work itself, less what a busy machine's
scheduling adds to the wall clock), after one warm-up pass.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from streamdec.core.results import Word  # noqa: E402
from streamdec.textfmt import TextFormatter  # noqa: E402


def finals(size: int = 20) -> list[list[Word]]:
    words = []
    for line in (ROOT / "tests" / "data" / "itn_cases.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            words += line.split("\t")[0].split()
    pieces = [words[a:a + size] for a in range(0, len(words) - size + 1, size)]
    return [[Word(w, 0.3 * n, 0.3 * n + 0.25, 0.9) for n, w in enumerate(p)] for p in pieces]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import onnxruntime  # noqa: F401  (the tagger's session uses one intra-op thread)
    fmt = TextFormatter()
    report = {}
    cases = finals()
    for level in ("punct", "full"):
        fmt.load(level)
        for f in cases:
            fmt.format(f, level)
        times = []
        cpu = time.process_time()
        for _ in range(args.repeats):
            for f in cases:
                t = time.perf_counter()
                fmt.format(f, level)
                times.append(time.perf_counter() - t)
        cpu = time.process_time() - cpu
        times.sort()
        report[level] = {"finals": len(times), "words": 20,
                         "median_ms": round(1000 * statistics.median(times), 2),
                         "p95_ms": round(1000 * times[int(0.95 * len(times))], 2),
                         "cpu_ms_mean": round(1000 * cpu / len(times), 2)}
    example = fmt.format(cases[0], "full").text
    print(json.dumps({"ms_per_20_word_final": report, "example": example}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
