"""Where the CPU of a K-stream greedy decode goes with encoder states shared as rows of the
batch (on) and split out per stream after each chunk (off), alternated in one process:
per run, process CPU seconds in all, in the encoder (model.encode), and in the state
handling (StateLayout.stack + share). Same workload and driver as bench/throughput.py.

    python state_cost.py MODEL_DIR [--int8] --runs 9 --seconds 60 [--join N] --out FILE.json

``--join N``: each stream decodes N consecutive dev utterances joined into one (long
streams, as calls are: the same streams are batched together for most chunks).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from abtest import workload  # noqa: E402
from batch_decode import decode_streamdec  # noqa: E402
from throughput import make_recognizer  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402


class Clocked:
    """Adds up the process CPU seconds spent in a callable."""

    def __init__(self, fn) -> None:
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *a):
        t0 = time.process_time()
        try:
            return self.fn(*a)
        finally:
            self.seconds += time.process_time() - t0


def instrument(rec):
    model, layout = rec.model, rec.model.state_layout
    clocks = {"encode": Clocked(model.encode), "stack": Clocked(layout.stack),
              "share": Clocked(layout.share)}
    model.encode = clocks["encode"]
    # the layout is a frozen dataclass: set the instance attributes past its __setattr__
    object.__setattr__(layout, "stack", clocks["stack"])
    object.__setattr__(layout, "share", clocks["share"])
    return clocks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--join", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    ns = argparse.Namespace(model_dir=args.model_dir, int8=args.int8, model_variant=None,
                            backend="onnx")
    utts = workload("espeak", args.seconds)
    if args.join > 1:
        utts = [replace(group[0], utt="+".join(u.utt for u in group),
                        samples=np.concatenate([u.samples for u in group]))
                for group in (utts[i:i + args.join] for i in range(0, len(utts), args.join))]
    search = SearchConfig(method="greedy")
    recs = {s: make_recognizer(ns, 1, True, s) for s in (True, False)}
    clocks = {s: instrument(r) for s, r in recs.items()}
    runs: dict[bool, list[dict]] = {True: [], False: []}
    digests = {}
    for i in range(args.runs):
        for s in ((True, False) if i % 2 == 0 else (False, True)):
            for c in clocks[s].values():
                c.seconds = 0.0
            d = decode_streamdec(recs[s], utts, args.streams, search)
            digests.setdefault(s, d.transcripts)
            assert d.transcripts == digests[s]
            runs[s].append({"cpu": d.cpu_seconds, **{k: c.seconds for k, c in clocks[s].items()}})
    assert digests[True] == digests[False], "the two ways gave different transcripts"
    report = {"model_dir": args.model_dir, "int8": args.int8, "streams": args.streams,
              "join": args.join, "utterances": len(utts),
              "audio_seconds": round(sum(u.seconds for u in utts), 2), "runs": runs,
              "median": {}, "paired_cpu_ratio_off_over_on": None}
    for s in (True, False):
        report["median"]["on" if s else "off"] = {
            k: round(statistics.median(r[k] for r in runs[s]), 4) for k in runs[s][0]}
    report["paired_cpu_ratio_off_over_on"] = round(statistics.median(
        off["cpu"] / on["cpu"] for on, off in zip(runs[True], runs[False])), 4)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("median", "paired_cpu_ratio_off_over_on")},
                     indent=1))


if __name__ == "__main__":
    main()
