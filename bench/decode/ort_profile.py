"""ONNX Runtime's own profiler on both peers' encoder calls, operator by operator.

    python bench/decode/ort_profile.py --model-dir DIR --int8 --streams 16 --seconds 60 --out r.json

streamdec and sherpa-onnx decode the same audio K streams at a time (``batch_decode``, as
``throughput.py`` does), alternated over ``--runs``, each with ONNX Runtime's profiler on in
its sessions: streamdec's encoder session is opened by ``open_session(profile=...)``
(otherwise as ``model.*`` configures it; ``--graph-rewrites off``: from the file as it is),
sherpa-onnx's by its provider ``cpu:FILE`` with ``ProfilingFilePrefix`` in FILE (its other
settings unchanged). A profile is written when a session ends, so every run gets its own
sessions, made before the clock starts.

For each peer the report gives the encoder's runs (``model_run`` events: count and total
milliseconds), the kernel time of its nodes by operator (``op_name``) and, matched by node
name, the nodes whose time differs most; each as the median over the runs. Time outside
the nodes (``model_run`` minus the nodes' kernel time) is ONNX Runtime's own: its executor,
allocations and the copies of inputs and outputs. The profiler's own timing slows both
peers alike; compare the two, not with ``throughput.py``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import (alternate, bench_parser, load_average, machine,  # noqa: E402
                                 print_table, main, workload)
from bench.decode.batch_decode import decode_sherpa, decode_streamdec  # noqa: E402
from bench.common.peer import (SHERPA_METHODS, add_graph_rewrites_option,  # noqa: E402
                               batch_fixed_at_one, model_config, model_report,
                               sherpa_recognizer)
from streamdec import EndpointConfig, Recognizer, RecognizerConfig  # noqa: E402
from streamdec.models.onnx_backend import open_session  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402


def encoder_profile(events: list[dict]) -> dict:
    """A profile's runs and node kernel times: ``runs``, ``run_ms`` (sum of ``model_run``),
    ``node_ms`` (sum of the nodes' kernel times), ``ops`` {op_name: ms}, ``nodes``
    {node name: [op_name, ms, count]}."""
    runs, run_us, node_us = 0, 0, 0
    ops: dict[str, float] = defaultdict(float)
    nodes: dict[str, list] = {}
    for e in events:
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            runs += 1
            run_us += e["dur"]
        elif e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            op = e.get("args", {}).get("op_name", "?")
            name = e["name"][:-len("_kernel_time")]
            node_us += e["dur"]
            ops[op] += e["dur"]
            entry = nodes.setdefault(name, [op, 0.0, 0])
            entry[1] += e["dur"]
            entry[2] += 1
    return {"runs": runs, "run_ms": run_us / 1e3, "node_ms": node_us / 1e3,
            "ops": {k: v / 1e3 for k, v in ops.items()},
            "nodes": {k: [op, us / 1e3, n] for k, (op, us, n) in nodes.items()}}


def _load(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, list) else data.get("traceEvents", [])


def run_streamdec(rec, utts, k: int, search, workdir: Path) -> dict:
    model = rec.model
    model.encoder = open_session(rec.model_files.encoder, rec.config.model,
                                 profile=str(workdir / "streamdec"))
    t0 = time.process_time()
    decode_streamdec(rec, utts, k, search)
    cpu = time.process_time() - t0
    path = Path(model.encoder.end_profiling())
    out = encoder_profile(_load(path))
    path.unlink()
    out["cpu_seconds"] = cpu
    return out


def run_sherpa(args, rec, utts, k: int, method: str, workdir: Path) -> dict:
    prefix = workdir / "sherpa"
    cfg = workdir / "sherpa-provider.cfg"
    cfg.write_text(f"ProfilingFilePrefix={prefix}\n", encoding="utf-8")
    meta = rec.meta
    srec = sherpa_recognizer(rec.model_files, meta.model_type, SHERPA_METHODS[method],
                             args.beam, args.threads[0], provider=f"cpu:{cfg}")
    t0 = time.process_time()
    decode_sherpa(srec, utts, k, meta.chunk_frames, meta.encoder_frame_seconds,
                  batch_fixed_at_one(rec.model_files.encoder))
    cpu = time.process_time() - t0
    del srec
    gc.collect()
    profiles = sorted(workdir.glob("sherpa*.json"))
    if not profiles:
        raise SystemExit("sherpa-onnx wrote no profile: does this version read "
                         "ProfilingFilePrefix from a provider config file?")
    # the three sessions' profiles; the encoder's has by far the most node time
    best = max((encoder_profile(_load(p)) for p in profiles), key=lambda r: r["node_ms"])
    for p in profiles:
        p.unlink()
    best["cpu_seconds"] = cpu
    best["profiles_found"] = len(profiles)
    return best


def _median(runs: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 2)


def _median_map(runs: list[dict], key: str) -> dict[str, float]:
    names = set().union(*(r[key] for r in runs))
    return {n: round(statistics.median(r[key].get(n, 0.0) for r in runs), 2) for n in names}


def _median_nodes(runs: list[dict]) -> dict[str, list]:
    names = set().union(*(r["nodes"] for r in runs))
    out = {}
    for n in names:
        got = [r["nodes"][n] for r in runs if n in r["nodes"]]
        out[n] = [got[0][0], round(statistics.median(g[1] for g in got), 3),
                  got[0][2]]
    return out


def summarise(runs: list[dict]) -> dict:
    return {"encoder_runs": runs[0]["runs"], "run_ms": _median(runs, "run_ms"),
            "node_ms": _median(runs, "node_ms"),
            "outside_nodes_ms": round(statistics.median(r["run_ms"] - r["node_ms"]
                                                        for r in runs), 2),
            "cpu_seconds": round(statistics.median(r["cpu_seconds"] for r in runs), 3),
            "ops": dict(sorted(_median_map(runs, "ops").items(), key=lambda kv: -kv[1])),
            "nodes": _median_nodes(runs)}


def measure(args) -> dict:
    utts = workload(args.dev, args.seconds)
    audio = sum(u.seconds for u in utts)
    k = args.streams[0]
    method = args.search[0]
    search = SearchConfig(method=method, beam=args.beam)
    if len(args.graph_rewrites) != 1:
        parser().error("--graph-rewrites: one of on, off")
    rec = Recognizer(RecognizerConfig(
        model=model_config(args, args.threads[0], graph_rewrites=args.graph_rewrites[0]),
        endpoint=EndpointConfig(enabled=False)))
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        decode_streamdec(rec, utts, k, search)  # warms the decoder cache
        ours, theirs = alternate(args.runs,
                                 lambda: run_streamdec(rec, utts, k, search, workdir),
                                 lambda: run_sherpa(args, rec, utts, k, method, workdir))
    mine, peer = summarise(ours), summarise(theirs)
    ops = sorted(set(mine["ops"]) | set(peer["ops"]),
                 key=lambda op: -max(mine["ops"].get(op, 0), peer["ops"].get(op, 0)))
    op_rows = [{"op": op, "streamdec_ms": mine["ops"].get(op, 0.0),
                "sherpa_onnx_ms": peer["ops"].get(op, 0.0)} for op in ops]
    common = set(mine["nodes"]) & set(peer["nodes"])
    diffs = sorted(common, key=lambda n: -abs(mine["nodes"][n][1] - peer["nodes"][n][1]))
    node_rows = [{"node": n, "op": mine["nodes"][n][0], "streamdec_ms": mine["nodes"][n][1],
                  "sherpa_onnx_ms": peer["nodes"][n][1], "calls": [mine["nodes"][n][2],
                                                                    peer["nodes"][n][2]]}
                 for n in diffs[:args.top]]
    only = {"streamdec": sorted(set(mine["nodes"]) - common),
            "sherpa_onnx": sorted(set(peer["nodes"]) - common)}
    print_table(["", "encoder runs", "run ms", "node ms", "outside nodes ms", "CPU s"],
                [[name, r["encoder_runs"], r["run_ms"], r["node_ms"], r["outside_nodes_ms"],
                  r["cpu_seconds"]] for name, r in (("streamdec", mine), ("sherpa-onnx", peer))])
    print_table(["op", "streamdec ms", "sherpa-onnx ms"],
                [[r["op"], r["streamdec_ms"], r["sherpa_onnx_ms"]] for r in op_rows[:args.top]])
    print_table(["node", "op", "streamdec ms", "sherpa-onnx ms"],
                [[r["node"][-60:], r["op"], r["streamdec_ms"], r["sherpa_onnx_ms"]]
                 for r in node_rows])
    for name in mine, peer:
        del name["nodes"]
    return {"setup": {"benchmark": "ort_profile", "dev": args.dev, "utterances": len(utts),
                      "audio_seconds": round(audio, 2), "runs": args.runs, "streams": k,
                      "search": method, "beam": args.beam, "threads": args.threads[0],
                      "graph_rewrites": args.graph_rewrites[0],
                      "model": model_report(rec.model_files, args.int8),
                      "onnxruntime": _ort_version()},
            "streamdec": mine, "sherpa_onnx": peer, "ops": op_rows, "nodes": node_rows,
            "nodes_in_one_only": {k2: len(v) for k2, v in only.items()},
            "nodes_in_one_only_examples": {k2: v[:20] for k2, v in only.items()},
            "machine": machine(load_before)}


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def parser() -> argparse.ArgumentParser:
    p = bench_parser(__doc__, "16", 30.0, 3)
    p.add_argument("--top", type=int, default=15, help="nodes listed (default 15)")
    add_graph_rewrites_option(p)
    return p


if __name__ == "__main__":
    main(parser(), measure)
