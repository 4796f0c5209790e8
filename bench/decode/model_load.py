"""What opening a model costs, with the graph rewrites and without: seconds, and the
process's memory after loading and at its peak.

    python bench/decode/model_load.py --model-dir DIR [--int8] --runs 3 --out load-model.json

Each run loads the model (``Recognizer``: the encoder, decoder and joiner sessions) in a
fresh process with the daemon's allocator settings (``streamdec.allocator``), once with
``model.graph_rewrites`` on and once off, alternated; a process reports the wall seconds
of the load, its RSS after it and its peak RSS (``ru_maxrss``). Medians over ``--runs``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import load_average, machine, print_table, write_report  # noqa: E402
from bench.common.peer import add_model_options, model_files, model_report  # noqa: E402

CHILD = """
import json, resource, sys, time
from streamdec import allocator, Recognizer, RecognizerConfig
from streamdec.models import ModelConfig
allocator.configure()
config = ModelConfig(**json.loads(sys.argv[1]))
t = time.perf_counter()
Recognizer(RecognizerConfig(model=config))
seconds = time.perf_counter() - t
with open("/proc/self/statm") as f:
    rss = int(f.read().split()[1]) * resource.getpagesize()
print(json.dumps({"seconds": seconds, "rss_mb": rss / 2**20,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def load_once(args, graph_rewrites: bool) -> dict:
    config = {"model_dir": args.model_dir, "int8": args.int8, "variant": args.model_variant,
              "graph_rewrites": graph_rewrites}
    run = subprocess.run([sys.executable, "-c", CHILD, json.dumps(config)], check=True,
                         capture_output=True, text=True, cwd=HERE.parent, timeout=600)
    return json.loads(run.stdout.strip().splitlines()[-1])


def measure(args) -> dict:
    load_before = load_average()
    runs: dict[bool, list[dict]] = {True: [], False: []}
    for _ in range(args.runs):
        for setting in (True, False):
            runs[setting].append(load_once(args, setting))
    out = {}
    for setting, got in runs.items():
        out["on" if setting else "off"] = {
            key: round(statistics.median(r[key] for r in got), 2)
            for key in ("seconds", "rss_mb", "peak_rss_mb")}
    print_table(["graph rewrites", "load s", "RSS MB", "peak RSS MB"],
                [[k, v["seconds"], v["rss_mb"], v["peak_rss_mb"]] for k, v in out.items()])
    return {"setup": {"benchmark": "model_load", "runs": args.runs,
                      "model": model_report(model_files(args), args.int8)},
            "graph_rewrites": out, "machine": machine(load_before)}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="JSON report to write")
    p.add_argument("--runs", type=int, default=3, help="loads of each setting, alternated")
    add_model_options(p)
    return p


if __name__ == "__main__":
    a = parser().parse_args()
    write_report(a.out, measure(a))
