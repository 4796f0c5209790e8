"""Inverse text normalisation candidates on the call-center list (tests/data/itn_cases.tsv).

Usage: PYTHON bench/text/itn_compare.py CANDIDATE [--repeats N]

CANDIDATE: ``streamdec`` (streamdec.textfmt's InverseNormalizer: WeTextProcessing's grammar
plus streamdec's style layer), ``wetext`` (wetextprocessing alone), ``nemo``
(nemo-text-processing), ``text2num`` (text_to_num.alpha2digit). Each library is measured in
the Python environment that runs this script (one venv per library keeps their
dependencies apart). Prints the exact-match count over the list, the mean and 95th
percentile time per sentence (after a warm-up pass), the mean CPU time of the process per
sentence (less sensitive to a busy machine) and the cases that differ.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

CASES = Path(__file__).resolve().parents[2] / "tests" / "data" / "itn_cases.tsv"


def load_cases() -> list[tuple[str, str]]:
    rows = []
    for line in CASES.read_text().splitlines():
        if line and not line.startswith("#"):
            spoken, written = line.split("\t")
            rows.append((spoken, written))
    return rows


def candidate(name: str):
    if name == "streamdec":
        sys.path.insert(0, str(CASES.parent.parent.parent))
        from streamdec.textfmt.itn import InverseNormalizer
        itn = InverseNormalizer()
        return lambda s: " ".join(t for t, _, _ in itn(s.split()))
    if name == "wetext":
        import tempfile
        from itn.english.inverse_normalizer import InverseNormalizer
        itn = InverseNormalizer(cache_dir=tempfile.mkdtemp())
        return lambda s: itn.normalize(s.lower())
    if name == "nemo":
        import tempfile
        from nemo_text_processing.inverse_text_normalization.inverse_normalize import (
            InverseNormalizer)
        itn = InverseNormalizer(lang="en", cache_dir=tempfile.mkdtemp())
        return lambda s: itn.inverse_normalize(s.lower(), verbose=False)
    if name == "text2num":
        from text_to_num import alpha2digit
        return lambda s: alpha2digit(s.lower(), "en")
    raise SystemExit(f"unknown candidate {name!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("candidate")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    start = time.perf_counter()
    run = candidate(args.candidate)
    load = time.perf_counter() - start
    cases = load_cases()
    outputs = [run(s) for s, _ in cases]  # warm-up, and the outputs scored
    times = []
    cpu = time.process_time()
    for _ in range(args.repeats):
        for s, _ in cases:
            t = time.perf_counter()
            run(s)
            times.append(time.perf_counter() - t)
    cpu = time.process_time() - cpu
    times.sort()
    exact = sum(o == w for o, (_, w) in zip(outputs, cases))
    print(f"{args.candidate}: exact {exact}/{len(cases)} ({100 * exact / len(cases):.1f} %), "
          f"load {load:.2f} s, per sentence mean {1000 * statistics.mean(times):.3f} ms, "
          f"p95 {1000 * times[int(0.95 * len(times))]:.3f} ms, "
          f"CPU per sentence {1000 * cpu / len(times):.3f} ms")
    for o, (s, w) in zip(outputs, cases):
        if o != w:
            print(f"  {s}\n    got  {o}\n    want {w}")


if __name__ == "__main__":
    main()
