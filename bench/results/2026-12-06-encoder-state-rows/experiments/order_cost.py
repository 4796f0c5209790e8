"""Streams encoded in the order their states stack fastest (``StateLayout.order``, on)
against in the order the engine gathered them (off), alternated in one process, through
the asyncio Engine with audio arriving in real time as a daemon's clients send it: K
streams, each the dev utterances joined one after another, sent in messages of
``--message-ms`` paced at real time from one start, every message late by a random 0-5 ms
(a client process and the network: the streams' chunks become ready in a shuffled order).

Per run: process CPU seconds in all, in the encoder (model.encode), in the state handling
(StateLayout.stack + share + order), and the batches (of 2 streams or more) whose states
went back in as the encoder returned them (``fed_back``, no copy) out of all, and a
digest of every stream's final tokens and times (the same in every run of both settings).

    python order_cost.py MODEL_DIR [--int8] --runs 3 --seconds 30 --out FILE.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from abtest import workload  # noqa: E402
from state_cost import Clocked  # noqa: E402
from throughput import make_recognizer  # noqa: E402
from streamdec.engine import Engine, EngineConfig, run_stream  # noqa: E402
from streamdec.models import StateLayout  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402


class InGatheredOrder(StateLayout):
    """The encoder takes the streams in the order they were gathered (before ``order``)."""

    def order(self, per_stream):
        return list(range(len(per_stream)))


def instrument(rec) -> dict:
    model, layout = rec.model, rec.model.state_layout
    clocks = {k: Clocked(getattr(layout, k)) for k in ("stack", "share", "order")}
    clocks["encode"] = Clocked(model.encode)
    counts = {"batches": 0, "fed_back": 0}
    last = [None]
    encode = clocks["encode"]

    def watched(features, states):
        if len(features) > 1:
            counts["batches"] += 1
            counts["fed_back"] += states[0] is last[0]
        out, new = encode(features, states)
        last[0] = new[0]
        return out, new

    model.encode = watched
    for k in ("stack", "share", "order"):  # a frozen dataclass: past its __setattr__
        object.__setattr__(layout, k, clocks[k])
    return {"clocks": clocks, "counts": counts}


def streams_audio(utts, k: int, seconds: float) -> list[np.ndarray]:
    """K streams of ``seconds`` each: the dev utterances one after another, stream n
    starting at utterance n."""
    out = []
    for n in range(k):
        parts, total, i = [], 0, n
        while total < seconds * 16000:
            parts.append(utts[i % len(utts)].samples)
            total += len(parts[-1])
            i += 1
        out.append(np.concatenate(parts)[: int(seconds * 16000)])
    return out


def run_once(rec, audio: list[np.ndarray], message_ms: float, seed: int
             ) -> tuple[float, str]:
    search = SearchConfig(method="greedy")
    step = int(16000 * message_ms / 1000)

    async def paced(samples: np.ndarray, rng: random.Random, t0: float):
        loop = asyncio.get_running_loop()
        for i, start in enumerate(range(0, len(samples), step)):
            delay = t0 + (i + 1) * message_ms / 1000 + rng.uniform(0, 0.005) - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield 16000, samples[start:start + step]

    async def main() -> list:
        async with Engine(rec, EngineConfig(max_batch=len(audio), workers=1)) as engine:
            t0 = asyncio.get_running_loop().time()
            return await asyncio.gather(*(
                run_stream(engine.open(search=search),
                           paced(a, random.Random(seed * 1000 + n), t0))
                for n, a in enumerate(audio)))

    c0 = time.process_time()
    results = asyncio.run(main())
    cpu = time.process_time() - c0
    finals = [[(r.token_ids, r.timestamps) for r in rs if r.is_final] for rs in results]
    return cpu, hashlib.sha256(repr(finals).encode()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--message-ms", type=float, default=100)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    ns = argparse.Namespace(model_dir=args.model_dir, int8=args.int8, model_variant=None,
                            backend="onnx")
    audio = streams_audio(workload("espeak", 0), args.streams, args.seconds)
    recs = {True: make_recognizer(ns, 1, True, True), False: make_recognizer(ns, 1, True, True)}
    recs[False].model.state_layout = InGatheredOrder(recs[False].model.state_layout.specs)
    probes = {s: instrument(r) for s, r in recs.items()}
    runs: dict[bool, list[dict]] = {True: [], False: []}
    for i in range(args.runs):
        for s in ((True, False) if i % 2 == 0 else (False, True)):
            p = probes[s]
            for c in p["clocks"].values():
                c.seconds = 0.0
            p["counts"].update(batches=0, fed_back=0)
            cpu, digest = run_once(recs[s], audio, args.message_ms, seed=i)
            c = p["clocks"]
            runs[s].append({"cpu": round(cpu, 4),
                            **{k: round(v.seconds, 4) for k, v in c.items()},
                            "state_handling": round(sum(c[k].seconds for k in
                                                        ("stack", "share", "order")), 4),
                            **p["counts"], "finals_sha256": digest})
            print("on" if s else "off", runs[s][-1], file=sys.stderr)
    report = {"model_dir": args.model_dir, "int8": args.int8, "streams": args.streams,
              "seconds": args.seconds, "message_ms": args.message_ms, "runs": runs,
              "median": {}}
    for s in (True, False):
        report["median"]["on" if s else "off"] = {
            k: round(statistics.median(r[k] for r in runs[s]), 4) for k in runs[s][0]
            if k != "finals_sha256"}
    report["same_finals"] = len({r["finals_sha256"] for s in runs for r in runs[s]}) == 1
    report["paired_cpu_ratio_off_over_on"] = round(statistics.median(
        off["cpu"] / on["cpu"] for on, off in zip(runs[True], runs[False])), 4)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("median", "paired_cpu_ratio_off_over_on",
                                             "same_finals")},
                     indent=1))


if __name__ == "__main__":
    main()
