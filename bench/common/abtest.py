"""A/B measurement shared by the benchmarks that compare streamdec with sherpa-onnx.

Both run in the same process, on the same model files and audio, alternated run by run
(ABAB... with the order swapped every other run, so neither always runs on a warm cache
or right after the other); each figure is reported as the median and the min/max of its
runs. ``ratio`` is always oriented so that > 1 means streamdec is better.

A report is one JSON object: what was run (``setup``), the machine and its load while the
benchmark ran (``machine``), and ``configurations``: one entry per configuration, each
with ``streamdec``, ``sherpa_onnx`` and ``ratio``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Callable, Sequence, TypeVar

HERE = Path(__file__).resolve().parents[1]  # bench/
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from bench.common.devset import Utterance, dev_set  # noqa: E402
from bench.common.peer import SHERPA_METHODS, add_model_options  # noqa: E402

__all__ = ["alternate", "spread", "ratio", "machine", "load_average", "bench_parser",
           "int_list", "workload", "write_report", "print_table", "main"]

T = TypeVar("T")


def alternate(runs: int, *measures: Callable[[], T]) -> list[list[T]]:
    """Run each measure ``runs`` times, interleaved, the order reversed every other run
    (a b c, c b a, a b c, ...); returns the results per measure."""
    out: list[list[T]] = [[] for _ in measures]
    for i in range(runs):
        order = list(enumerate(measures))
        for n, measure in (order if i % 2 == 0 else reversed(order)):
            out[n].append(measure())
    return out


def spread(values: Sequence[float], digits: int = 4) -> dict:
    """{'median', 'min', 'max'} of a list of measurements."""
    return {"median": round(statistics.median(values), digits),
            "min": round(min(values), digits), "max": round(max(values), digits)}


def ratio(ours: float, theirs: float, higher_is_better: bool) -> float:
    """streamdec relative to sherpa-onnx, > 1 when streamdec is better."""
    if higher_is_better:
        return round(ours / theirs, 3) if theirs > 0 else float("inf")
    return round(theirs / ours, 3) if ours > 0 else float("inf")


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


#: the instruction sets ONNX Runtime's kernels choose between (int8: VNNI or not)
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
             "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")


def _cpu_flags() -> list[str]:
    """Which of ``ISA_FLAGS`` the CPU has (Linux: /proc/cpuinfo; elsewhere empty)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return [f for f in ISA_FLAGS if f in have]
    except OSError:
        pass
    return []


def machine(load_before: list[float]) -> dict:
    """The machine and the software the numbers were measured with."""
    import numpy
    import onnxruntime
    import sherpa_onnx

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": _cpu_model(), "cpu_flags": _cpu_flags(), "cores": cores,
            "python": platform.python_version(),
            "numpy": numpy.__version__, "onnxruntime": onnxruntime.__version__,
            "sherpa_onnx": sherpa_onnx.__version__,
            "load_average_before": load_before, "load_average_after": load_average()}


def int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def search_list(text: str) -> list[str]:
    methods = [m for m in text.split(",") if m]
    for m in methods:
        if m not in SHERPA_METHODS:
            raise argparse.ArgumentTypeError(
                f"{m!r}: the searches both peers have are {', '.join(SHERPA_METHODS)}")
    return methods


def bench_parser(doc: str, streams: str, seconds: float, runs: int) -> argparse.ArgumentParser:
    """A benchmark's command line with the options every comparison has."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="JSON report to write")
    ap.add_argument("--streams", type=int_list, default=int_list(streams),
                    help=f"stream counts K, comma-separated (default {streams})")
    ap.add_argument("--seconds", type=float, default=seconds,
                    help=f"audio seconds per run (default {seconds:g}; 0: the whole dev set)")
    ap.add_argument("--search", type=search_list, default=list(SHERPA_METHODS),
                    help="search methods, comma-separated: greedy, modified_beam")
    ap.add_argument("--beam", type=int, default=4, help="modified_beam: max active paths")
    ap.add_argument("--threads", type=int_list, default=[1],
                    help="ONNX Runtime intra-op threads, the same for both; a list measures "
                         "each (default 1)")
    ap.add_argument("--runs", type=int, default=runs,
                    help=f"A/B alternated runs per configuration (default {runs})")
    ap.add_argument("--dev", default="espeak", help="dev set: espeak or flite")
    add_model_options(ap)
    return ap


def main(parser: argparse.ArgumentParser, measure: Callable[[argparse.Namespace], dict],
         argv=None) -> None:
    """Parse the command line, measure, write the report."""
    args = parser.parse_args(argv)
    write_report(args.out, measure(args))


def workload(dev: str, seconds: float) -> list[Utterance]:
    """Dev utterances in order until ``seconds`` of audio (0: all of them)."""
    utts = dev_set(dev)
    if seconds <= 0:
        return utts
    out, total = [], 0.0
    for u in utts:
        if total >= seconds:
            break
        out.append(u)
        total += u.seconds
    return out


def portable(value):
    """``value`` with this machine's paths taken out of its strings, so a report reads the
    same on any machine: the repository's folder becomes relative, this Python ``python3``,
    its installed packages' folder ``site-packages``, a temporary folder a run made (a
    peer's logs and repaired model copy) ``<tmp>``, the home folder ``~``."""
    if isinstance(value, dict):
        return {portable(k): portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(v) for v in value]
    if not isinstance(value, str):
        return value
    for path, short in ((sys.executable, "python3"), (str(HERE.parent) + os.sep, ""),
                        (str(HERE.parent), "."), (sysconfig.get_paths()["purelib"],
                                                  "site-packages")):
        value = value.replace(path, short)
    value = _TEMPORARY.sub("<tmp>", value)
    return value.replace(str(Path.home()), "~")


#: a folder made in the temporary directory (``tempfile.mkdtemp``'s prefix and random part)
_TEMPORARY = re.compile(re.escape(tempfile.gettempdir().rstrip(os.sep)) + r"/[^/\s\"']+")


def write_report(path: Path, report: dict) -> None:
    """``report`` as JSON at ``path``, without this machine's paths (``portable``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(portable(report), indent=2) + "\n", encoding="utf-8")
    print(f"report written to {path}", file=sys.stderr)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain-text table on stdout."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if n == 0:
            print("  ".join("-" * w for w in widths))
