"""The benchmark reports drawn: the pictures the documentation site shows (docs/plots/).

    python bench/plots.py                     # all plots into docs/plots/
    python bench/plots.py --out /tmp/plots    # elsewhere
    python bench/plots.py --only load-vs-streams

Each plot is drawn from the JSON reports named in ``PLOTS`` (paths under bench/results/),
and its footer names them; the page that shows a plot names them in its caption too
(tests/test_docs_site.py checks both). Nothing is measured here: a new report is drawn by
pointing a plot at it and running this again. matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DEFAULT_OUT = ROOT / "docs" / "plots"

STREAMDEC, WORKERS, SHERPA = "#1f5fbf", "#7aa6e6", "#d9731a"
LIMIT_MS = 100.0  # the chunk p95 the capacity figures are held to


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def median(peer: dict, *keys: str) -> float:
    value = peer
    for key in keys:
        value = value[key]
    return float(value["median"])


def load_points(names: list[str], peer: str, search: str = "greedy") -> list[tuple[int, dict]]:
    """(streams, the peer's figures) of every configuration of these load.py reports, by
    stream count (a count measured twice: the first report's)."""
    points: dict[int, dict] = {}
    for name in names:
        for config in load(name)["configurations"]:
            if config["search"] == search and peer in config:
                points.setdefault(config["streams"], config[peer])
    return sorted(points.items())


def footer(fig, sources: list[str]) -> None:
    fig.text(0.01, 0.01, "drawn from bench/results/" + ", ".join(sources), fontsize=7,
             color="#555555", ha="left", va="bottom")


# -- the plots --------------------------------------------------------------------------------
LOAD_REPORTS = ["2026-12-04-stream-buffers/ab-buffers-spread-chunk.json",
                "2026-12-04-stream-buffers/capacity-spread-chunk-320-400.json",
                "2026-12-04-stream-buffers/capacity-spread-chunk.json"]


def against_streams(lines, title: str, cpu_label: str):
    """Two panels against live streams, server CPU and chunk p95 (log, with the 100 ms
    line), one line per (label, the points of load_points, colour)."""
    fig, (cpu, p95) = plt.subplots(1, 2, figsize=(10, 4.2))
    for label, points, colour in lines:
        streams = [n for n, _ in points]
        cpu.plot(streams, [median(p, "server_cpu_percent") for _, p in points], "o-",
                 color=colour, label=label)
        p95.plot(streams, [median(p, "chunk_latency_ms", "p95") for _, p in points], "o-",
                 color=colour, label=label)
    cpu.set(xlabel="live streams", ylabel=cpu_label, title="Server CPU")
    p95.set(xlabel="live streams", ylabel="chunk latency p95 (ms, log scale)", yscale="log",
            title="Chunk latency (p95)")
    p95.axhline(LIMIT_MS, color="#888888", linestyle="--", linewidth=1)
    p95.text(p95.get_xlim()[0], LIMIT_MS * 1.1, f" {LIMIT_MS:.0f} ms", color="#666666",
             fontsize=8)
    for ax in (cpu, p95):
        ax.grid(True, alpha=0.3)
    cpu.legend(fontsize=8, loc="lower right")
    fig.suptitle(title)
    return fig


def load_vs_streams(sources: list[str]):
    """Server CPU and chunk p95 against streams: streamdec (one process, --workers 2) and
    sherpa-onnx's C++ server, spread clients on one 2-core machine."""
    first_b = sources[1:]  # the ab- report's B is the code before a change, not --workers 2
    return against_streams(
        [("streamdec serve", load_points(sources, "streamdec"), STREAMDEC),
         ("streamdec serve --workers 2", load_points(first_b, "streamdec_b"), WORKERS),
         ("sherpa-onnx C++ server", load_points(sources, "sherpa_onnx"), SHERPA)],
        "Greedy search, built-in model, clients spread over a chunk (2-core AMD EPYC)",
        "server CPU (% of one core)")


def capacity_ray(sources: list[str]):
    """Server CPU and chunk p95 against streams: one process, Ray Serve with one and two
    replicas."""
    return against_streams(
        [("streamdec serve", load_points(sources[0:2], "streamdec"), STREAMDEC),
         ("--ray, one replica", load_points(sources[2:4], "streamdec"), SHERPA),
         ("--ray --replicas 2", load_points(sources[4:6], "streamdec"), "#3a9a4a")],
        "What Ray costs on one 2-core machine (greedy, clients in bursts)",
        "server CPU (% of one core; all processes)")


def wer_by_search(sources: list[str]):
    """WER of the built-in model by search: espeak dev set (against sherpa-onnx's two
    searches on the same files) and real speech (words on and off)."""
    search, real = load(sources[0]), load(sources[1])
    fig, (dev, rv) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    names = list(search["searches"])
    wers = [100 * search["searches"][n]["wer"] for n in names]
    bars = dev.bar(names, wers, color=STREAMDEC, label="streamdec")
    dev.bar_label(bars, fmt="%.1f", fontsize=8, label_type="center", color="white")
    for n, theirs in (("greedy", "greedy_search"), ("modified_beam", "modified_beam_search")):
        dev.plot([names.index(n)], [100 * search["sherpa_onnx"][theirs]["wer"]], "D",
                 color=SHERPA, label="sherpa-onnx" if n == "greedy" else None)
    dev.set(ylabel="WER (%)", ylim=(0, 55),
            title=f"espeak dev set ({search['utterances']} utterances)")
    dev.legend(fontsize=8, loc="lower right")
    methods = list(real["methods"])
    labels = ["--config accurate" if m == "accurate" else m for m in methods]
    bars = rv.bar(labels, [100 * real["methods"][m]["wer"]["all"]["wer"] for m in methods],
                  color=[STREAMDEC, STREAMDEC, "#3a9a4a"][:len(methods)])
    rv.bar_label(bars, fmt="%.1f", fontsize=8)
    rv.set(ylabel="WER (%)", ylim=(0, 100), title=f"real speech ({real['files']} files)")
    for ax in (dev, rv):
        ax.grid(True, axis="y", alpha=0.3)
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle("Built-in model: word error rate by search")
    return fig


def cpu_split(sources: list[str]):
    """Where each server's CPU goes at 100 and 160 streams: the main thread (streamdec's
    event loop) and the rest; and the fbank's cost per frame, streamdec's against the
    extractor sherpa-onnx runs."""
    threads, fbank = load(sources[0]), load(sources[1])
    fig, (bars, fb) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    labels, mains, rests = [], [], []
    for config in threads["configurations"]:
        for peer, name in (("streamdec", "streamdec"), ("sherpa_onnx", "sherpa-onnx")):
            total = median(config[peer], "server_cpu_percent")
            main = median(config[peer], "server_main_thread_cpu_percent")
            labels.append(f"{name}\n{config['streams']} streams")
            mains.append(main)
            rests.append(total - main)
    x = range(len(labels))
    bars.bar(x, mains, color="#555599", label="main thread (streamdec: the event loop)")
    bars.bar(x, rests, bottom=mains, color="#a9b8d8",
             label="other threads (decode; sherpa-onnx: features too)")
    for i, (m, r) in enumerate(zip(mains, rests)):
        bars.text(i, m + r + 1.5, f"{m + r:.0f} %", ha="center", fontsize=8)
    bars.set_xticks(list(x), labels, fontsize=8)
    bars.set(ylabel="server CPU (% of one core)", ylim=(0, 110), title="Server CPU by thread")
    bars.legend(fontsize=8, loc="upper left")
    streams = [c["streams"] for c in fbank["configurations"]]
    ours = [c["streamdec"]["median"] for c in fbank["configurations"]]
    theirs = [c["kaldi_native_fbank"]["compute"]["median"] for c in fbank["configurations"]]
    width = 0.38
    xs = range(len(streams))
    fb.bar([i - width / 2 for i in xs], ours, width, color=STREAMDEC, label="streamdec")
    fb.bar([i + width / 2 for i in xs], theirs, width, color=SHERPA, label="kaldi-native-fbank")
    fb.set_xticks(list(xs), [f"{n} stream{'s' if n > 1 else ''}" for n in streams])
    fb.set(ylabel="CPU per feature frame (us)", title="Features (fbank) per frame")
    fb.set_ylim(0, 1.3 * max(ours + theirs))
    fb.legend(fontsize=8, loc="upper left")
    for ax in (bars, fb):
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Where the server's CPU goes (greedy, spread clients, 2-core AMD EPYC)")
    return fig


def throughput(sources: list[str]):
    """Audio seconds decoded per second against streams decoded together, both searches,
    streamdec and sherpa-onnx in the same process on the same files."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for search, style in (("greedy", "o-"), ("modified_beam", "s--")):
        for peer, colour, name in (("streamdec", STREAMDEC, "streamdec"),
                                   ("sherpa_onnx", SHERPA, "sherpa-onnx")):
            points = {}
            for source in sources:
                for c in load(source)["configurations"]:
                    if (c["search"] == search and c["threads"] == 1
                            and c.get("driver", "recognizer") == "recognizer"):
                        points.setdefault(c["streams"], c[peer]["median"])
            ks = sorted(points)
            ax.plot(ks, [points[k] for k in ks], style, color=colour,
                    label=f"{name}, {search.replace('_', ' ')}")
    ax.set(xlabel="streams decoded together (K)", ylabel="audio seconds per second",
           xscale="log", title="Throughput, one thread each (built-in model, espeak dev set)")
    ax.set_xticks([1, 16, 64, 100], ["1", "16", "64", "100"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


@dataclass(frozen=True)
class Plot:
    name: str  # the PNG's stem
    draw: Callable
    sources: list  # report paths under bench/results/


PLOTS = [
    Plot("load-vs-streams", load_vs_streams, LOAD_REPORTS),
    Plot("capacity-ray", capacity_ray, [f"2026-11-30-ray-capacity/{name}.json" for name in
                                        ("single", "single2", "ray1", "ray1b", "ray2", "ray2b")]),
    Plot("wer-by-search", wer_by_search, ["2026-12-07-builtin-model/search-shipped.json",
                                          "2026-12-07-builtin-model/realvoice-shipped.json"]),
    Plot("cpu-split", cpu_split, ["2026-12-04-cpu-split/threads-spread-chunk.json",
                                  "2026-12-04-cpu-split/fbank.json"]),
    Plot("throughput", throughput, ["2026-11-30-decoder-vs-sherpa-onnx/throughput-k1-k100.json",
                                    "2026-11-30-decoder-vs-sherpa-onnx/throughput-k16-k64.json"]),
]


def draw(plot: Plot, out: Path) -> Path:
    fig = plot.draw(plot.sources)
    footer(fig, plot.sources)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    path = out / f"{plot.name}.png"
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Draw the benchmark reports as the site's plots.")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the PNG files")
    p.add_argument("--only", action="append", choices=[plot.name for plot in PLOTS],
                   help="draw only this plot (repeatable)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for plot in PLOTS:
        if not args.only or plot.name in args.only:
            print(draw(plot, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
