#!/usr/bin/env python3
"""Run the fuzz targets (``fuzz_*.py`` here) under libFuzzer's engine (atheris) and write
a JSON report.

    nice -n 10 python bench/fuzz/run.py --seconds 60 --out report.json
    python bench/fuzz/run.py --seconds 5 --targets vosk twilio --out /tmp/r.json

Each target runs in its own process for ``--seconds``, on a copy-free corpus: the
committed seeds (``corpus/TARGET``, read only) plus a work folder the engine adds the
inputs it finds to, with a per-input time limit (``--timeout``: an input that takes
longer is a hang) and a memory limit (``--rss-mb``: over it is an out-of-memory crash).
A target's ``dicts/TARGET.dict`` (libFuzzer's dictionary format: the tokens of its
format, JSON keys and values, TOML syntax) is given to the engine to splice into inputs.
Whatever input fails is kept under ``--artifacts``/TARGET (``crash-*``, ``timeout-*``,
``oom-*``), to be replayed by a test once fixed (``crashes/``). A target stops at its
first failure (the engine's in-process mode), so a report's figures for a target that
failed cover the inputs before it.

The report, per target: ``inputs`` (executed units), ``cov`` and ``ft`` (the engine's
coverage counters: code edges and features seen), ``corpus`` (inputs kept), ``crashes``,
``hangs``, ``ooms`` (each with its file and the exception's last line), ``peak_rss_mb``,
``seconds``; and the machine, the command and the options.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGETS = tuple(sorted(p.stem.removeprefix("fuzz_") for p in HERE.glob("fuzz_*.py")))
_STATUS = re.compile(r"^#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+)(?: corp: (\d+))?")
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")


def parse_output(text: str) -> dict:
    """The figures in a libFuzzer run's output (its status lines and final stats)."""
    out = {"inputs": 0, "cov": 0, "ft": 0, "corpus": 0, "peak_rss_mb": 0}
    for line in text.splitlines():
        m = _STATUS.match(line)
        if m:
            out["inputs"] = max(out["inputs"], int(m.group(1)))
            out["cov"], out["ft"] = int(m.group(3)), int(m.group(4))
            if m.group(5):
                out["corpus"] = int(m.group(5))
        m = _STAT.match(line)
        if m and m.group(1) == "number_of_executed_units":
            out["inputs"] = max(out["inputs"], int(m.group(2)))
        elif m and m.group(1) == "peak_rss_mb":
            out["peak_rss_mb"] = int(m.group(2))
    return out


def _cause(text: str, kind: str) -> str:
    """What a failure was, from the run's output: the uncaught exception's last line (a
    crash; atheris prints it), the engine's line for a hang or for memory."""
    lines = text.splitlines()
    if kind == "crashes":
        for n, line in enumerate(lines):
            if "Uncaught Python exception" in line and n + 1 < len(lines):
                return lines[n + 1].strip()
    marks = {"hangs": "ALARM: working on the last Unit", "ooms": "out-of-memory"}
    mark = marks.get(kind, "ERROR: libFuzzer")
    return next((x.strip() for x in lines if mark in x), "")


def _failures(text: str) -> dict:
    """crashes / hangs / ooms: each artifact the run wrote, with what it was."""
    found = {"crashes": [], "hangs": [], "ooms": []}
    for path in _ARTIFACT.findall(text):
        name = Path(path).name
        kind = ("hangs" if name.startswith(("timeout-", "slow-unit-")) else
                "ooms" if name.startswith("oom-") else "crashes")
        found[kind].append({"artifact": path, "what": _cause(text, kind)})
    return found


def run_target(name: str, seconds: int, work: Path, artifacts: Path, timeout: int,
               rss_mb: int, max_len: int) -> dict:
    corpus = work / name
    corpus.mkdir(parents=True, exist_ok=True)
    (artifacts / name).mkdir(parents=True, exist_ok=True)
    seeds = HERE / "corpus" / name
    cmd = [sys.executable, str(HERE / f"fuzz_{name}.py"), str(corpus)]
    if seeds.is_dir():
        cmd.append(str(seeds))
    words = HERE / "dicts" / f"{name}.dict"  # tokens the engine splices in (JSON, TOML, ...)
    if words.is_file():
        cmd.append(f"-dict={words}")
    cmd += [f"-max_total_time={seconds}", f"-timeout={timeout}", f"-rss_limit_mb={rss_mb}",
            f"-max_len={max_len}", "-print_final_stats=1",
            f"-artifact_prefix={artifacts / name}/"]
    env = dict(os.environ, STREAMDEC_FUZZING="1", STREAMDEC_FUZZ_SCRATCH=str(work),
               PYTHONHASHSEED="0")
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace",
                              timeout=seconds + 120)
        output, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(
            errors="replace")
        rc = None
    elapsed = time.monotonic() - started
    (artifacts / name / "output.txt").write_text(output[-200_000:])
    result = {"target": name, **parse_output(output), **_failures(output),
              "seconds": round(elapsed, 1), "rc": rc}
    result["inputs_per_second"] = round(result["inputs"] / max(elapsed, 1e-9))
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=60, help="per target")
    p.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--timeout", type=int, default=10, help="seconds one input may take")
    p.add_argument("--rss-mb", type=int, default=2048, help="memory limit of a target")
    p.add_argument("--max-len", type=int, default=16384, help="longest input tried (bytes)")
    p.add_argument("--jobs", type=int, default=1, help="targets run at once (each one core)")
    p.add_argument("--artifacts", type=Path, help="where failing inputs go (default: beside "
                                                  "--out, OUT.artifacts)")
    args = p.parse_args(argv)
    artifacts = args.artifacts or args.out.with_suffix(".artifacts")
    report = {"command": " ".join([Path(sys.argv[0]).name] + (argv or sys.argv[1:])),
              "engine": "atheris (libFuzzer)", "python": platform.python_version(),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "seconds_per_target": args.seconds, "timeout_s": args.timeout,
              "rss_limit_mb": args.rss_mb, "max_len": args.max_len, "jobs": args.jobs,
              "targets": []}
    with tempfile.TemporaryDirectory(prefix="fuzz-work-") as work, \
            ThreadPoolExecutor(args.jobs) as pool:
        runs = [pool.submit(run_target, name, args.seconds, Path(work), artifacts,
                            args.timeout, args.rss_mb, args.max_len) for name in args.targets]
        for run in runs:
            result = run.result()
            report["targets"].append(result)
            failed = len(result["crashes"]) + len(result["hangs"]) + len(result["ooms"])
            print(f"{result['target']:12s} {result['inputs']:>9d} inputs  "
                  f"cov {result['cov']:>5d}  "
                  f"ft {result['ft']:>6d}  failures {failed}  {result['peak_rss_mb']} MB",
                  flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=2) + "\n")
    failed = any(t["crashes"] or t["hangs"] or t["ooms"] for t in report["targets"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
