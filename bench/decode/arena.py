"""ONNX Runtime's memory settings on a model's encoder alone: CPU and page faults per chunk,
and the memory a process keeps under batches of changing size.

    python bench/decode/arena.py --model-dir DIR [--int8] --out arena.json
    python bench/decode/arena.py --model-dir DIR --streams 16 --chunks 8 --runs 5 --calls 100 --out r.json

Three settings of the encoder session, made as ``open_session`` makes them:

- ``arena`` (``model.cpu_arena = true``, streamdec's default): the CPU arena, memory
  patterns off;
- ``malloc`` (``model.cpu_arena = false``): no arena (tensors from malloc), memory patterns on;
- ``arena+patterns``: both on, ONNX Runtime's defaults and sherpa-onnx's settings.

``speed``: K streams' encoder calls chunk after chunk, each call's output states fed back
(random features, seeded), the settings alternated over ``--runs`` in one process; CPU
seconds of the process and minor page faults per chunk, after ``--warm`` chunks. The
encoder outputs are the same in every setting (``outputs_equal``). ``ratio``: ``malloc``'s
CPU per chunk / the setting's (> 1: less CPU than without the arena).

``memory``: one process per setting, with the daemon's allocator settings
(``streamdec.allocator``): one call at ``--max-batch`` streams (as the engine's warm-up
does), then ``--calls`` calls at batch sizes drawn from 1 to ``--max-batch`` (seeded, the
same for every setting); RSS when loaded, after the warm-up, at the end and at most.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import (alternate, load_average, machine, print_table, ratio,  # noqa: E402
                                 spread, write_report)
from bench.common.peer import (add_model_options, model_config, model_files,  # noqa: E402
                               model_report)
from bench.daemon.servers import proc_sample  # noqa: E402
from streamdec.models.onnx_backend import open_session  # noqa: E402

#: setting -> (ModelConfig.cpu_arena, memory patterns forced on)
SETTINGS = {"arena": (True, False), "malloc": (False, False), "arena+patterns": (True, True)}


def session(args, setting: str):
    """The encoder session of ``setting``: open_session's, with patterns forced on for
    ``arena+patterns``."""
    cpu_arena, patterns = SETTINGS[setting]
    config = model_config(args, 1, cpu_arena)
    if not patterns:
        return open_session(model_files(args).encoder, config)
    import onnxruntime as ort

    made = open_session(model_files(args).encoder, config)
    opts = made.get_session_options()
    opts.enable_mem_pattern = True
    return ort.InferenceSession(str(model_files(args).encoder), sess_options=opts,
                                providers=["CPUExecutionProvider"])


def feeds_for(sess, k: int, rng) -> list[np.ndarray]:
    """Random features and zero states for a batch of k (every symbolic axis is the batch)."""
    out = []
    for i, inp in enumerate(sess.get_inputs()):
        shape = [d if isinstance(d, int) else k for d in inp.shape]
        dtype = np.float32 if inp.type == "tensor(float)" else np.int64
        out.append(rng.standard_normal(shape).astype(dtype) if i == 0 else
                   np.zeros(shape, dtype))
    return out


def speed(args) -> dict:
    sessions = {name: session(args, name) for name in SETTINGS}
    names = [i.name for i in next(iter(sessions.values())).get_inputs()]
    rng = np.random.default_rng(0)
    first = feeds_for(sessions["arena"], args.streams, rng)
    features = [first[0]] + [feeds_for(sessions["arena"], args.streams, rng)[0]
                             for _ in range(args.warm + args.chunks - 1)]
    outputs: dict[str, list[np.ndarray]] = {}

    def loop(name: str):
        sess, states = sessions[name], first[1:]

        def run(f):
            nonlocal states
            out = sess.run(None, dict(zip(names, [f, *states])))
            states = out[1:]
            return out

        for f in features[:args.warm]:
            run(f)
        c0, r0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for f in features[args.warm:]:
            out = run(f)
        cpu = time.process_time() - c0
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0
        outputs[name] = out
        return {"cpu": cpu / args.chunks, "faults": faults / args.chunks}

    runs = dict(zip(SETTINGS, alternate(args.runs, *[lambda n=n: loop(n) for n in SETTINGS])))
    ref = outputs["malloc"]
    result = {"outputs_equal": all(
        all(np.array_equal(a, b) for a, b in zip(ref, outputs[n])) for n in SETTINGS)}
    malloc_cpu = spread([r["cpu"] for r in runs["malloc"]])["median"]
    for name, setting_runs in runs.items():
        cpu = spread([r["cpu"] for r in setting_runs])
        result[name] = {"cpu_seconds_per_chunk": cpu,
                        "minor_faults_per_chunk": spread([r["faults"] for r in setting_runs], 1),
                        "ratio": ratio(cpu["median"], malloc_cpu, False)}
    return result


def memory_child(args) -> dict:
    """In a process of its own: RSS of one setting's encoder under changing batch sizes."""
    from streamdec import allocator

    allocator.configure()
    loaded = _rss()
    sess = session(args, args.memory_child)
    names = [i.name for i in sess.get_inputs()]
    rng = np.random.default_rng(1)
    after_load = _rss()
    sess.run(None, dict(zip(names, feeds_for(sess, args.max_batch, rng))))
    warm = _rss()
    series = []
    for k in rng.integers(1, args.max_batch + 1, args.calls):
        sess.run(None, dict(zip(names, feeds_for(sess, int(k), rng))))
        series.append(_rss())
    return {"rss_mb": {"before_load": loaded, "loaded": after_load, "after_warmup": warm,
                       "end": series[-1], "max": max(series)},
            "growth_after_warmup_mb": series[-1] - warm}


def _rss() -> float:
    """This process's RSS in MB (servers.proc_sample's reading of /proc)."""
    return round(proc_sample(os.getpid())[1] / 2**20, 1)


def memory(args, argv: list[str]) -> dict:
    out = {}
    for name in SETTINGS:
        done = subprocess.run([sys.executable, __file__, *argv, "--memory-child", name],
                              check=True, capture_output=True, text=True)
        out[name] = json.loads(done.stdout)
    return out


def measure(args, argv: list[str]) -> dict:
    load_before = load_average()
    report = {"setup": {"benchmark": "arena", "streams": args.streams, "chunks": args.chunks,
                        "warm": args.warm, "runs": args.runs, "max_batch": args.max_batch,
                        "calls": args.calls, "threads": 1,
                        "settings": {n: {"cpu_arena": a, "memory_patterns": p or not a}
                                     for n, (a, p) in SETTINGS.items()},
                        "model": model_report(model_files(args), args.int8)}}
    report["speed"] = speed(args)
    report["memory"] = memory(args, argv)
    report["machine"] = machine(load_before)
    rows = [[n, report["speed"][n]["cpu_seconds_per_chunk"]["median"],
             report["speed"][n]["minor_faults_per_chunk"]["median"], report["speed"][n]["ratio"],
             report["memory"][n]["rss_mb"]["after_warmup"], report["memory"][n]["rss_mb"]["end"],
             report["memory"][n]["rss_mb"]["max"]] for n in SETTINGS]
    print_table(["setting", "CPU s/chunk", "faults/chunk", "ratio", "RSS MB warm", "RSS end",
                 "RSS max"], rows)
    return report


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="JSON report to write")
    ap.add_argument("--streams", type=int, default=16, help="batch of the speed part (K)")
    ap.add_argument("--chunks", type=int, default=8, help="timed chunks per run")
    ap.add_argument("--warm", type=int, default=2, help="untimed chunks before them")
    ap.add_argument("--runs", type=int, default=5, help="alternated runs per setting")
    ap.add_argument("--max-batch", type=int, default=32,
                    help="memory part: the warm-up's batch and the largest drawn")
    ap.add_argument("--calls", type=int, default=100, help="memory part: calls after warm-up")
    ap.add_argument("--memory-child", choices=list(SETTINGS), help=argparse.SUPPRESS)
    add_model_options(ap)
    return ap


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    if args.memory_child:
        print(json.dumps(memory_child(args)))
        return
    if args.out is None:
        parser().error("--out is required")
    write_report(args.out, measure(args, argv))


if __name__ == "__main__":
    main()
