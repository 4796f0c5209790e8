"""Where an idle daemon's memory goes: the process's RSS after each step of the server's
start, with ONNX Runtime's CPU arena on (the default) and off.

    python bench/decode/idle_memory.py --model-dir DIR --runs 3 --out idle-memory.json

Each run is a fresh process with the daemon's allocator settings (``streamdec.allocator``)
that reads ``/proc/self/status`` after each step: Python alone; numpy and onnxruntime
imported (the floor of any Python process running ONNX Runtime); the server's imports;
``onnx`` imported (the graph rewrites at load need it); the model loaded (``Recognizer``);
``allocator.trim()``; the engine warmed up as the server does it (``Engine.warm_up``:
``workers`` batches of ``max_batch`` silent streams at once); ``allocator.trim()`` again,
after one turn of the loop; ONNX Runtime's arenas released (``Engine.release_memory``) and
``allocator.trim()`` (what the server does once warmed up, before any client); the
engine stopped (its decode threads end) and ``allocator.trim()``. The two arena settings are
alternated, ``--runs`` each; medians. Without ``--model-dir``: the built-in model.

``server_idle_rss_mb``: the RSS of ``python -m streamdec serve --model DIR --port 0`` (the
default settings) once it logs that it listens (warmed up and trimmed), read from
``/proc/PID/status`` a second later; ``--runs`` servers, one after the other; median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import load_average, machine, print_table, write_report  # noqa: E402
from bench.common.peer import add_model_options, model_files, model_report  # noqa: E402

CHILD = r"""
import json, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
steps = [("python", rss())]
import numpy, onnxruntime
steps.append(("numpy + onnxruntime", rss()))
from streamdec import allocator
allocator.configure()
import streamdec.server.app
steps.append(("server imports", rss()))
import onnx
steps.append(("onnx", rss()))
import asyncio
from streamdec import Recognizer, RecognizerConfig
from streamdec.engine import Engine, EngineConfig
from streamdec.models import ModelConfig
recognizer = Recognizer(RecognizerConfig(model=ModelConfig(**json.loads(sys.argv[1]))))
steps.append(("model loaded", rss()))
allocator.trim()
steps.append(("trim", rss()))
async def warm():
    engine = Engine(recognizer, EngineConfig())
    engine.start()
    await engine.warm_up()
    steps.append(("warmed up", rss()))
    await asyncio.sleep(0)  # as the server does (ServerContext.warm_up), its decode threads
    allocator.trim()        # alive
    steps.append(("warm-up trimmed", rss()))
    await engine.release_memory()
    allocator.trim()
    steps.append(("arenas released, trim (the server, before any client)", rss()))
    sizes = (engine.workers, engine.max_batch)
    await engine.stop()
    allocator.trim()
    steps.append(("engine stopped, trim", rss()))
    return sizes
sizes = asyncio.run(warm())
print(json.dumps({"steps": steps, "workers": sizes[0], "max_batch": sizes[1]}))
"""


def run_once(args, cpu_arena: bool) -> dict:
    config = {"model_dir": args.model_dir, "int8": args.int8, "variant": args.model_variant,
              "cpu_arena": cpu_arena}
    run = subprocess.run([sys.executable, "-c", CHILD, json.dumps(config)], check=True,
                         capture_output=True, text=True, cwd=HERE.parent, timeout=600)
    return json.loads(run.stdout.strip().splitlines()[-1])


def server_idle(args) -> float:
    """The RSS (MB) of a fresh ``streamdec serve`` on the model once it listens."""
    cmd = [sys.executable, "-m", "streamdec", "serve", "--port", "0"]
    if args.model_dir:
        cmd += ["--model", str(args.model_dir)]
    proc = subprocess.Popen(cmd, cwd=HERE.parent, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:
            if '"event": "listening"' in line:
                break
        else:
            raise RuntimeError(f"{' '.join(cmd)}: exited ({proc.wait()}) before listening")
        time.sleep(1)
        with open(f"/proc/{proc.pid}/status") as f:
            return next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmRSS:"))
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def measure(args) -> dict:
    load_before = load_average()
    runs: dict[bool, list[dict]] = {True: [], False: []}
    for _ in range(args.runs):
        for setting in (True, False):
            runs[setting].append(run_once(args, setting))
    out = {}
    for setting, got in runs.items():
        names = [name for name, _ in got[0]["steps"]]
        out["arena on" if setting else "arena off"] = {
            "rss_mb": {name: round(statistics.median(r["steps"][i][1] for r in got), 1)
                       for i, name in enumerate(names)},
            "workers": got[0]["workers"], "max_batch": got[0]["max_batch"]}
    names = list(out["arena on"]["rss_mb"])
    print_table(["step", *out], [[n, *(v["rss_mb"][n] for v in out.values())] for n in names])
    served = [server_idle(args) for _ in range(args.runs)]
    print(f"streamdec serve, idle: {statistics.median(served):.1f} MB (median of {args.runs})")
    model = (model_report(model_files(args), args.int8) if args.model_dir
             else {"model": "built-in"})
    return {"setup": {"benchmark": "idle_memory", "runs": args.runs, "model": model},
            "rss_after_each_step": out,
            "server_idle_rss_mb": {"median": round(statistics.median(served), 1),
                                   "runs": [round(x, 1) for x in served]},
            "machine": machine(load_before)}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="JSON report to write")
    p.add_argument("--runs", type=int, default=3, help="processes of each setting, alternated")
    add_model_options(p)
    return p


if __name__ == "__main__":
    a = parser().parse_args()
    write_report(a.out, measure(a))
