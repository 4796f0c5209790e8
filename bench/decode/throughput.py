"""Decode throughput in process: K streams of dev-set audio decoded together as fast as
possible by streamdec (``Recognizer``) and by sherpa-onnx (``decode_streams``) on the same
model files, with the same search and ONNX Runtime thread count, A/B alternated.

    python bench/decode/throughput.py --out bench-throughput.json
    python bench/decode/throughput.py --out r.json --streams 16,64 --search greedy --threads 1,2

Throughput is audio seconds decoded per wall second (features included: both peers compute
fbank when a stream accepts its audio). Endpointing is off for both (one final result per
utterance), so the transcripts compare one to one: ``identical_transcripts`` counts the
utterances whose symbols and symbol frames are the same in both. ``transcripts_sha256``
identifies streamdec's transcripts, to show that a change to streamdec changed none.

Each configuration (search, threads, K, driver) holds ``streamdec`` and ``sherpa_onnx``
throughput (median, min, max over ``--runs``) and ``ratio`` (streamdec / sherpa-onnx, > 1:
streamdec is faster); ``cpu_throughput`` the same per CPU second of the process (all its
threads): on a machine shared with other work it varies less than wall time, and with one
thread each it measures the same thing. ``--cpu-arena on,off`` decodes with streamdec's
sessions with ONNX Runtime's CPU arena and without it (``model.cpu_arena``), both and
sherpa-onnx alternated in the same runs (one configuration each). ``--shared-states
on,off`` the same with encoder states kept as rows of the batch an encode returned
(``StateLayout.share``, streamdec's way) and split out per stream after each chunk (the
way before it, ``PerStreamStates``). ``--graph-rewrites on,off`` the same with the
sessions' graphs rewritten (``model.graph_rewrites``, streamdec's default) and the files as
they are. ``--drivers recognizer,engine`` also drives streamdec through its asyncio
Engine (features of new streams computed on the loop thread while a worker thread
decodes). ``best`` compares each peer at its best thread count (and streamdec at its best
driver).
A cProfile of streamdec at ``--profile`` streams is saved beside the report
(``REPORT.profile-SEARCH-kK.txt``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import (alternate, bench_parser, load_average, machine,  # noqa: E402
                                 print_table, ratio, spread, main, workload)
from bench.decode.batch_decode import (count_identical, decode_sherpa,  # noqa: E402
                                       decode_streamdec, decode_streamdec_engine, digest)
from bench.common.peer import (SHERPA_METHODS, add_arena_option,  # noqa: E402
                               add_graph_rewrites_option, add_shared_states_option, model_config,
                               batch_fixed_at_one, model_report,
                               sherpa_recognizer)
from streamdec import EndpointConfig, Recognizer, RecognizerConfig  # noqa: E402
from streamdec.models import StateLayout  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402


class PerStreamStates(StateLayout):
    """Encoder states the way before ``StateLayout.share``: split out per stream after each
    chunk (views along axis 0, copies along the others) and concatenated again before the
    next."""

    def share(self, batched, batch_size):
        import numpy as np

        if batch_size == 1:
            return [tuple(batched)]
        out: list[list] = [[] for _ in range(batch_size)]
        for spec, tensor in zip(self.specs, batched):
            for n, piece in enumerate(np.split(tensor, batch_size, axis=spec.batch_axis)):
                out[n].append(np.ascontiguousarray(piece))
        return [tuple(states) for states in out]


def make_recognizer(args, threads: int, cpu_arena: bool = True,
                    shared_states: bool = True, graph_rewrites: bool = True) -> Recognizer:
    rec = Recognizer(RecognizerConfig(model=model_config(args, threads, cpu_arena,
                                                         graph_rewrites),
                                      endpoint=EndpointConfig(enabled=False)))
    if not shared_states:
        rec.model.state_layout = PerStreamStates(rec.model.state_layout.specs)
    return rec


def profile(run, path: Path) -> None:
    """cProfile of one call of ``run``, as text (by own time, then cumulative) in ``path``."""
    prof = cProfile.Profile()
    prof.runcall(run)
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(40)
    stats.sort_stats("cumulative").print_stats(40)
    path.write_text(text.getvalue(), encoding="utf-8")
    print(f"profile written to {path}", file=sys.stderr)


def measure(args) -> dict:
    utts = workload(args.dev, args.seconds)
    audio = sum(u.seconds for u in utts)
    searches = args.search
    for driver in args.drivers:
        if driver not in ("recognizer", "engine"):
            parser().error(f"--drivers: {driver!r}: recognizer or engine")
    report: dict = {"setup": {
        "benchmark": "throughput", "dev": args.dev, "utterances": len(utts),
        "audio_seconds": round(audio, 2), "runs": args.runs, "beam": args.beam,
        "streams": args.streams, "threads": args.threads, "cpu_arena": args.cpu_arena,
        "shared_states": args.shared_states, "graph_rewrites": args.graph_rewrites,
        "endpointing": False, "unit": "audio seconds decoded per wall second"},
        "configurations": []}
    load_before = load_average()
    rows = []
    for threads in args.threads:
        # one recognizer per arena, state and graph setting, alternated in the same runs
        recs = {(a, sh, g): make_recognizer(args, threads, a, sh, g)
                for a in args.cpu_arena for sh in args.shared_states
                for g in args.graph_rewrites}
        rec = next(iter(recs.values()))
        meta = rec.meta
        report["setup"]["model"] = model_report(rec.model_files, args.int8)
        one_each = batch_fixed_at_one(rec.model_files.encoder)  # sherpa-onnx: a call each
        for method in searches:
            search = SearchConfig(method=method, beam=args.beam)
            srec = sherpa_recognizer(rec.model_files, meta.model_type, SHERPA_METHODS[method],
                                     args.beam, threads)
            for k in args.streams:
                for driver in args.drivers:
                    for conf in compare(args, recs, srec, utts, audio, method, threads, k,
                                        driver, one_each):
                        report["configurations"].append(conf)
                        rows.append([method, threads, "on" if conf["cpu_arena"] else "off",
                                     "on" if conf["shared_states"] else "off",
                                     "on" if conf["graph_rewrites"] else "off", k, driver,
                                     conf["streamdec"]["median"], conf["sherpa_onnx"]["median"],
                                     conf["ratio"],
                                     conf["cpu_throughput"]["ratio"],
                                     f"{conf['identical_transcripts']}/{len(utts)}"])
                        print(" ".join(map(str, rows[-1])), file=sys.stderr)
            if args.profile in args.streams and threads == args.threads[0]:
                profile(lambda: decode_streamdec(rec, utts, args.profile, search),
                        args.out.with_name(f"{args.out.stem}.profile-{method}-"
                                           f"k{args.profile}.txt"))
    report["best"] = best_ratios(report["configurations"])
    report["machine"] = machine(load_before)
    print_table(["search", "threads", "arena", "shared", "rewrites", "K", "driver", "streamdec",
                 "sherpa-onnx", "ratio", "CPU ratio", "identical"], rows)
    if len(args.threads) > 1 or len(args.drivers) > 1:
        print_table(["search", "K", "streamdec (threads, driver)", "sherpa-onnx (threads)",
                     "ratio"],
                    [[b["search"], b["streams"],
                      f"{b['streamdec']['median']} ({b['streamdec']['threads']}, "
                      f"{b['streamdec']['driver']})",
                      f"{b['sherpa_onnx']['median']} ({b['sherpa_onnx']['threads']})",
                      b["ratio"]] for b in report["best"]])
    return report


def compare(args, recs: dict, srec, utts, audio: float, method: str, threads: int, k: int,
            driver: str, one_each: bool) -> list[dict]:
    """One configuration per recognizer of ``recs`` (by arena and state setting), all of them and
    sherpa-onnx alternated over ``args.runs``; each compared with sherpa-onnx's runs (one call
    per stream when ``one_each``: a fixed-batch-1 model)."""
    search = SearchConfig(method=method, beam=args.beam)
    meta = next(iter(recs.values())).meta

    def ours(rec):
        return ((lambda: decode_streamdec(rec, utts, k, search)) if driver == "recognizer" else
                (lambda: decode_streamdec_engine(rec, utts, k, search)))

    runs = alternate(args.runs, *[ours(rec) for rec in recs.values()],
                     lambda: decode_sherpa(srec, utts, k, meta.chunk_frames,
                                           meta.encoder_frame_seconds, one_each))
    theirs = runs[-1]
    twall = [audio / r.seconds for r in theirs]
    tcpu = [audio / r.cpu_seconds for r in theirs]
    out = []
    for (cpu_arena, shared_states, graph_rewrites), mine in zip(recs, runs):
        wall = [audio / r.seconds for r in mine]
        cpu = [audio / r.cpu_seconds for r in mine]
        transcripts = mine[0].transcripts
        out.append({
            "search": method, "threads": threads, "streams": k, "driver": driver,
            "cpu_arena": cpu_arena, "shared_states": shared_states,
            "graph_rewrites": graph_rewrites,
            "streamdec": spread(wall, 2), "sherpa_onnx": spread(twall, 2),
            "ratio": ratio(spread(wall)["median"], spread(twall)["median"], True),
            "cpu_throughput": {"streamdec": spread(cpu, 2), "sherpa_onnx": spread(tcpu, 2),
                               "ratio": ratio(spread(cpu)["median"], spread(tcpu)["median"],
                                              True)},
            "identical_transcripts": count_identical(transcripts, theirs[0].transcripts),
            "utterances": len(utts),
            "transcripts_sha256": {"streamdec": digest(transcripts),
                                   "sherpa_onnx": digest(theirs[0].transcripts)},
            "streamdec_runs_agree": all(r.transcripts == transcripts for r in mine),
            "feature_seconds": {"streamdec": spread([r.feature_seconds for r in mine], 3),
                                "sherpa_onnx": spread([r.feature_seconds for r in theirs], 3)}})
    return out


def best_ratios(configurations: list[dict]) -> list[dict]:
    """Per (search, K): each peer at the thread count where its median is best."""
    out = []
    keys = dict.fromkeys((c["search"], c["streams"]) for c in configurations)
    for method, k in keys:
        group = [c for c in configurations if c["search"] == method and c["streams"] == k]
        best = {}
        for peer in ("streamdec", "sherpa_onnx"):
            c = max(group, key=lambda c: c[peer]["median"])
            best[peer] = {"median": c[peer]["median"], "threads": c["threads"]}
            if peer == "streamdec":
                best[peer]["driver"] = c["driver"]
                best[peer]["cpu_arena"] = c.get("cpu_arena", True)
                best[peer]["shared_states"] = c.get("shared_states", True)
                best[peer]["graph_rewrites"] = c.get("graph_rewrites", True)
        out.append({"search": method, "streams": k, **best,
                    "ratio": ratio(best["streamdec"]["median"], best["sherpa_onnx"]["median"],
                                   True)})
    return out


def parser() -> argparse.ArgumentParser:
    ap = bench_parser(__doc__, streams="1,16,64,100", seconds=0, runs=5)
    ap.add_argument("--drivers", default="recognizer", type=lambda t: t.split(","),
                    help="how streamdec is driven, comma-separated: recognizer (decode() "
                         "in this thread), engine (the asyncio Engine: features on the loop "
                         "thread while a worker decodes); default recognizer")
    add_arena_option(ap)
    add_shared_states_option(ap)
    add_graph_rewrites_option(ap)
    ap.add_argument("--profile", type=int, default=64,
                    help="profile streamdec at this K when it is among --streams (0: never)")
    return ap


if __name__ == "__main__":
    main(parser(), measure)
