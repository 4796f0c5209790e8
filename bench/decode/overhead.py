"""Overhead over bare inference: how close a decode comes to the ONNX Runtime calls it makes.

    python bench/decode/overhead.py --out bench-overhead.json
    python bench/decode/overhead.py --out r.json --streams 64 --search greedy

For each configuration (search, threads, K) streamdec decodes the dev audio K streams at a
time (as ``throughput.py`` does) once while every encoder / decoder / joiner call it makes
is recorded; then three measures are alternated over ``--runs``:

- ``bare``: the recorded calls replayed through the ONNX Runtime sessions alone, in order
  (the physical limit of this decode: the same inference and nothing else);
- ``streamdec``: the decode itself, split by stage: ``features`` (accepting audio: fbank),
  ``encoder`` (time inside the encoder call), ``search`` (inside ``Search.step``, with its
  decoder and joiner calls), ``bookkeeping`` (the rest: batching, states, endpointing,
  results);
- ``sherpa_onnx``: the same audio through sherpa-onnx, K streams at a time.

``overhead`` = decode seconds (features excluded: both peers compute the same fbank when
audio is accepted, and ``features`` reports it) / bare inference seconds. sherpa-onnx's
overhead is measured against the same bare inference (streamdec's calls: sherpa-onnx makes
the same encoder calls and comparable decoder/joiner calls). ``ratio`` = sherpa-onnx
overhead / streamdec overhead (> 1: streamdec has less overhead).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import (alternate, bench_parser, load_average, machine,  # noqa: E402
                                 print_table, ratio, spread, main, workload)
from bench.decode.batch_decode import decode_sherpa, decode_streamdec  # noqa: E402
from bench.common.peer import (SHERPA_METHODS, add_arena_option, model_config,  # noqa: E402
                               batch_fixed_at_one, model_report, sherpa_recognizer)
from streamdec import EndpointConfig, Recognizer, RecognizerConfig  # noqa: E402
from streamdec.models import load_model  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402

KINDS = ("encoder", "decoder", "joiner")


class InstrumentedModel:
    """A TransducerModel that times (and, while ``recording``, records) the calls it passes
    on to an ONNX Runtime model."""

    def __init__(self, model) -> None:
        self.model = model
        self.meta = model.meta
        self.state_layout = model.state_layout
        self.seconds = dict.fromkeys(KINDS, 0.0)
        self.calls: list[tuple[str, list[np.ndarray]]] = []
        self.recording = False

    def _call(self, kind: str, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        self.seconds[kind] += time.perf_counter() - t0
        if self.recording:
            inputs = [args[0], *args[1]] if kind == "encoder" else list(args)
            self.calls.append((kind, [np.array(a, copy=True) for a in inputs]))
        return out

    def encode(self, features, states):
        return self._call("encoder", self.model.encode, features, states)

    def decode(self, contexts):
        return self._call("decoder", self.model.decode, contexts)

    def join(self, encoder_out, decoder_out):
        return self._call("joiner", self.model.join, encoder_out, decoder_out)

    def reset_clock(self) -> None:
        self.seconds = dict.fromkeys(KINDS, 0.0)


def replay(model, calls) -> dict[str, float]:
    """Seconds per kind of running ``calls`` through the model's ONNX Runtime sessions: the
    decoder's and joiner's straight, the encoder's through the model's ``encode``, which
    picks the session a batch runs on (an encoder exported with a batch of 1 runs a batch
    in its batched rewrite, or one call per stream)."""
    sessions = {"decoder": model.decoder, "joiner": model.joiner}
    names = {k: [i.name for i in s.get_inputs()] for k, s in sessions.items()}
    seconds = dict.fromkeys(KINDS, 0.0)
    for kind, inputs in calls:
        t0 = time.perf_counter()
        if kind == "encoder":
            model.encode(inputs[0], inputs[1:])
        else:
            sessions[kind].run(None, dict(zip(names[kind], inputs)))
        seconds[kind] += time.perf_counter() - t0
    return seconds


class TimedStep:
    """Wraps a shared search object's ``step`` to add up the time spent in it."""

    def __init__(self, search) -> None:
        self.seconds = 0.0
        self._step = search.step
        search.step = self

    def __call__(self, states, encoder_out):
        t0 = time.perf_counter()
        out = self._step(states, encoder_out)
        self.seconds += time.perf_counter() - t0
        return out


def measure(args) -> dict:
    utts = workload(args.dev, args.seconds)
    audio = sum(u.seconds for u in utts)
    searches = args.search
    report: dict = {"setup": {
        "benchmark": "overhead", "dev": args.dev, "utterances": len(utts),
        "audio_seconds": round(audio, 2), "runs": args.runs, "beam": args.beam,
        "streams": args.streams, "threads": args.threads, "cpu_arena": args.cpu_arena,
        "endpointing": False,
        "overhead": "decode seconds without features / bare inference seconds"},
        "configurations": []}
    load_before = load_average()
    rows = []
    for cpu_arena, threads in ((a, t) for a in args.cpu_arena for t in args.threads):
        config = RecognizerConfig(model=model_config(args, threads, cpu_arena),
                                  endpoint=EndpointConfig(enabled=False))
        model = InstrumentedModel(load_model(config.model, config.features))
        rec = Recognizer(config, model=model)
        meta = rec.meta
        report["setup"]["model"] = model_report(rec.model_files, args.int8)
        one_each = batch_fixed_at_one(rec.model_files.encoder)  # sherpa-onnx: a call each
        for method in searches:
            search = SearchConfig(method=method, beam=args.beam)
            step = TimedStep(rec.resources.search(search))
            srec = sherpa_recognizer(rec.model_files, meta.model_type,
                                     SHERPA_METHODS[method], args.beam, threads)
            for k in args.streams:
                decode_streamdec(rec, utts, k, search)  # warms the decoder cache
                model.calls, model.recording = [], True
                decode_streamdec(rec, utts, k, search)
                model.recording = False
                calls = model.calls

                def ours():
                    model.reset_clock()
                    step.seconds = 0.0
                    run = decode_streamdec(rec, utts, k, search)
                    decode = run.seconds - run.feature_seconds
                    return {"decode": decode, "features": run.feature_seconds,
                            "encoder": model.seconds["encoder"], "search": step.seconds,
                            "bookkeeping": decode - model.seconds["encoder"] - step.seconds}

                def theirs():
                    run = decode_sherpa(srec, utts, k, meta.chunk_frames,
                                        meta.encoder_frame_seconds, one_each)
                    return {"decode": run.seconds - run.feature_seconds,
                            "features": run.feature_seconds}

                def bare():
                    seconds = replay(model.model, calls)
                    return {**seconds, "total": sum(seconds.values())}

                runs = alternate(args.runs, ours, theirs, bare)
                bare_total = spread([r["total"] for r in runs[2]])["median"]
                conf = {"search": method, "threads": threads, "cpu_arena": cpu_arena,
                        "streams": k,
                        "bare": {**{key: spread([r[key] for r in runs[2]])
                                    for key in (*KINDS, "total")},
                                 "calls": {kind: sum(1 for c, _ in calls if c == kind)
                                           for kind in KINDS}}}
                for peer, peer_runs in (("streamdec", runs[0]), ("sherpa_onnx", runs[1])):
                    conf[peer] = {
                        "overhead": spread([r["decode"] / bare_total for r in peer_runs], 3),
                        "seconds": {key: spread([r[key] for r in peer_runs])
                                    for key in peer_runs[0]}}
                conf["ratio"] = ratio(conf["streamdec"]["overhead"]["median"],
                                      conf["sherpa_onnx"]["overhead"]["median"], False)
                report["configurations"].append(conf)
                stages = conf["streamdec"]["seconds"]
                rows.append([method, threads, "on" if cpu_arena else "off", k,
                             round(bare_total, 3),
                             conf["streamdec"]["overhead"]["median"],
                             conf["sherpa_onnx"]["overhead"]["median"], conf["ratio"],
                             *(stages[s]["median"] for s in
                               ("features", "encoder", "search", "bookkeeping"))])
                print(" ".join(map(str, rows[-1])), file=sys.stderr)
    report["machine"] = machine(load_before)
    print_table(["search", "threads", "arena", "K", "bare s", "streamdec", "sherpa-onnx", "ratio",
                 "features s", "encoder s", "search s", "bookkeeping s"], rows)
    return report


def parser() -> argparse.ArgumentParser:
    ap = bench_parser(__doc__, streams="1,16,64", seconds=300, runs=5)
    add_arena_option(ap)
    return ap


if __name__ == "__main__":
    main(parser(), measure)
