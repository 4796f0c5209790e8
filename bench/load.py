"""Load generator for a streaming server: N real-time clients on loopback, from a separate
process; latency, lost/late finals, server CPU and memory.

    python bench/load.py --streams 40 --seconds 60 --search greedy --out load.json
    python bench/load.py --streams 40 --seconds 600 --memory-probe 50 --out soak.json
    python bench/load.py --url ws://127.0.0.1:6006/ --pid 1234 ...    # a server already up

By default it starts ``streamdec serve`` (built-in model, ``--search``) on a free port and
stops it at the end; with ``--url``/``--pid`` it measures any server that speaks the
sherpa-onnx protocol (float32 frames, ``Done``, JSON results with ``segment``,
``start_time``, ``timestamps``, ``is_final``, then ``Done!``).

Each client streams the dev-set utterances (espeak, ``bench/devset.py``) one after another,
each followed by ``--gap`` seconds of silence (so an endpoint closes every utterance),
starting at a different utterance, in ``--chunk-ms`` messages paced at real time, for
``--seconds``; then ``Done``. Measured, in the client:

- ``token_latency``: for every token the first time it appears in a result, the time from
  sending the message that holds the token's audio to receiving that result (it includes
  waiting for the rest of the model's chunk: what a user sees);
- ``finals``: utterances sent vs finals with text received; ``lost`` = utterances without a
  final; ``late`` = finals that arrived after the next utterance's audio began;
- ``send_lag``: how far the client's sending fell behind real time (back-pressure: the
  server reading slower than real time);

and from the server process (``/proc``): CPU (% of one core, over the steady part) and RSS
(idle with the model, per second under load). For streamdec the server's own
chunk-to-result histogram (``streamdec_result_latency_seconds`` from ``/metrics``: a
model chunk's last sample accepted -> its results) is reported as ``server_latency``
(percentiles interpolated within its buckets).

``--message-cost M`` first measures the server's CPU per WebSocket message (M empty
messages: the transport alone; M messages of 10 ms audio, decoded). ``--memory-probe K`` first opens K idle connections, then makes them K active streams
(3 s of audio each, left mid-utterance), and reports the RSS added per connection and per
active stream, before the load starts.

A run *sustains* its streams when no final is lost or late and the clients never fell
behind real time by more than one second (``sustained`` in the report).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

RATE = 16000


# -- the server process ---------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_streamdec(search: str, port: int, extra: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "streamdec", "serve", "--port", str(port), "--search", search,
           "--max-connections", "2000", *extra]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=HERE.parent)
    for line in proc.stderr:
        if '"event": "listening"' in line:
            break
    else:
        raise SystemExit(f"server did not start: {' '.join(cmd)}")
    # keep draining its log so it never blocks on a full pipe
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc


def proc_sample(pid: int) -> tuple[float, int]:
    """(CPU seconds used so far, RSS bytes) of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    return cpu, rss


def histogram_buckets(text: str, name: str) -> dict[float, float]:
    """A Prometheus histogram's cumulative bucket counts, by upper bound."""
    return {float("inf") if le == "+Inf" else float(le): float(v) for le, v in
            re.findall(rf'^{name}_bucket{{le="([^"]+)"}} (\S+)$', text, re.M)}


def histogram_percentiles(after: dict, before: dict, qs=(0.5, 0.95, 0.99)) -> dict:
    """Percentiles of what a histogram counted between two scrapes, interpolated linearly
    within its buckets."""
    buckets = sorted((le, n - before.get(le, 0.0)) for le, n in after.items())
    if not buckets or buckets[-1][1] == 0:
        return {}
    total, out = buckets[-1][1], {"count": int(buckets[-1][1])}
    for q in qs:
        rank, prev_le, prev_n = q * total, 0.0, 0.0
        for le, n in buckets:
            if n >= rank:
                value = le if le == float("inf") else prev_le + (le - prev_le) * (
                    (rank - prev_n) / (n - prev_n) if n > prev_n else 1.0)
                out[f"p{int(q * 100)}"] = round(value, 4)
                break
            prev_le, prev_n = le, n
    return out


def scrape(url: str | None) -> str:
    return urllib.request.urlopen(url, timeout=10).read().decode() if url else ""


# -- one client ----------------------------------------------------------------------------------
@dataclass
class ClientStats:
    token_latency: list[float] = field(default_factory=list)
    utterances: int = 0  # utterances whose audio (and gap) was sent completely
    finals: int = 0
    late: int = 0
    max_send_lag: float = 0.0
    error: str | None = None


def build_program(utts, gap: float, start: int, seconds: float):
    """The audio a client sends: utterances from ``start`` on, each + gap of silence, until
    ``seconds``; returns (audio, [(start_sample, end_sample) of each utterance])."""
    pieces, spans, pos, i = [], [], 0, start
    silence = np.zeros(int(gap * RATE), np.float32)
    while pos < seconds * RATE:
        u = utts[i % len(utts)]
        pieces += [u, silence]
        spans.append((pos, pos + len(u)))
        pos += len(u) + len(silence)
        i += 1
    return np.concatenate(pieces), spans


async def run_client(url: str, audio: np.ndarray, spans, chunk: int, t_start: float,
                     stats: ClientStats) -> None:
    import websockets

    sent_at: list[float] = []  # send time of each message
    seen: set[tuple[int, int]] = set()  # (segment, token index) already reported

    def message_time(sample: int) -> float | None:
        k = sample // chunk
        return sent_at[k] if k < len(sent_at) else None

    async with websockets.connect(url, max_size=None, ping_interval=None) as ws:
        async def receive():
            async for msg in ws:
                now = time.monotonic()
                if msg == "Done!":
                    return
                r = json.loads(msg)
                for n, t in enumerate(r.get("timestamps", [])):
                    key = (r["segment"], n)
                    if key in seen:
                        continue
                    seen.add(key)
                    sent = message_time(int((r["start_time"] + t) * RATE))
                    if sent is not None:
                        stats.token_latency.append(now - sent)
                if r.get("is_final") and r.get("text"):
                    stats.finals += 1
                    # late: the next utterance's audio had started being sent
                    end = int((r["start_time"] + (r["timestamps"] or [0])[-1]) * RATE)
                    nxt = next((a for a, _ in spans if a > end), None)
                    if nxt is not None and message_time(nxt) is not None:
                        stats.late += 1

        receiver = asyncio.ensure_future(receive())
        for k in range(0, len(audio), chunk):
            due = t_start + (k // chunk) * chunk / RATE
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                stats.max_send_lag = max(stats.max_send_lag, -delay)
            sent_at.append(time.monotonic())
            await ws.send(audio[k:k + chunk].tobytes())
        await ws.send("Done")
        stats.utterances = len(spans)
        await asyncio.wait_for(receiver, 120)


# -- memory probe ----------------------------------------------------------------------------
async def memory_probe(url: str, pid: int, k: int, utt: np.ndarray) -> dict:
    import websockets

    _, idle = proc_sample(pid)
    conns = [await websockets.connect(url, ping_interval=None) for _ in range(k)]
    await asyncio.sleep(2)
    _, with_conns = proc_sample(pid)
    audio = np.concatenate([utt, utt])[:3 * RATE].astype(np.float32)
    for ws in conns:
        await ws.send(audio.tobytes())
    await asyncio.sleep(max(3.0, k * 0.05))
    _, with_streams = proc_sample(pid)
    for ws in conns:
        await ws.close()
    await asyncio.sleep(2)
    _, after = proc_sample(pid)
    return {"connections": k, "rss_idle_mb": round(idle / 2**20, 2),
            "rss_per_idle_connection_kb": round((with_conns - idle) / k / 1024, 1),
            "rss_per_active_stream_kb": round((with_streams - idle) / k / 1024, 1),
            "rss_after_close_mb": round(after / 2**20, 2)}


# -- per-message cost of the transport -----------------------------------------------------
async def message_cost(url: str, pid: int, count: int) -> dict:
    """Server CPU per WebSocket message: ``count`` empty binary messages (the protocol layer
    alone: uvicorn, Starlette, the connection's inbox; the session ignores empty audio) and
    ``count`` messages of 10 ms of audio (everything: PCM decoding, features, feeding the
    engine and decoding that audio, one stream), each sent by one client as fast as the
    server takes them."""
    import websockets

    out = {}
    ten_ms = np.zeros(RATE // 100, np.float32)
    ten_ms[::7] = 0.01
    for name, payload in (("empty", b""), ("audio_10ms", ten_ms.tobytes())):
        async with websockets.connect(url, ping_interval=None) as ws:
            cpu0, _ = proc_sample(pid)
            t0 = time.monotonic()
            for _ in range(count):
                await ws.send(payload)
            await ws.send("Done")
            async for m in ws:
                if m == "Done!":
                    break
            wall = time.monotonic() - t0
            cpu1, _ = proc_sample(pid)
        out[name] = {"messages": count, "server_cpu_us_per_message":
                     round(1e6 * (cpu1 - cpu0) / count, 1),
                     "messages_per_second": round(count / wall)}
    return out


# -- the run ---------------------------------------------------------------------------------------
async def load(args, url: str, pid: int, utts) -> dict:
    chunk = int(args.chunk_ms * RATE / 1000)
    stats = [ClientStats() for _ in range(args.streams)]
    t0 = time.monotonic() + 1.0
    tasks = []
    for n, s in enumerate(stats):
        audio, spans = build_program(utts, args.gap, n, args.seconds)
        start = t0 + (n % 20) * args.chunk_ms / 1000 / 20  # spread the clients' send times
        tasks.append(asyncio.ensure_future(run_client(url, audio, spans, chunk, start, s)))
    samples = []  # (t, cpu, rss) each second
    async def sampler():
        while True:
            cpu, rss = proc_sample(pid)
            samples.append((time.monotonic() - t0, cpu, rss))
            await asyncio.sleep(1.0)
    sampling = asyncio.ensure_future(sampler())
    results = await asyncio.gather(*tasks, return_exceptions=True)
    sampling.cancel()
    for s, r in zip(stats, results):
        if isinstance(r, BaseException):
            s.error = repr(r)
    lat = np.array([x for s in stats for x in s.token_latency]) if stats else np.zeros(0)
    warm = args.warmup
    steady = [x for x in samples if warm <= x[0] <= args.seconds]
    cpu_pct = (100 * (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])
               if len(steady) > 1 else None)
    rss_steady = [x[2] for x in steady]
    report = {
        "streams": args.streams,
        "token_latency": {f"p{q}": round(float(np.percentile(lat, q)), 4) for q in (50, 95, 99)}
        if len(lat) else {},
        "tokens": int(len(lat)),
        "finals": {"utterances": sum(s.utterances for s in stats),
                   "received": sum(s.finals for s in stats),
                   "lost": sum(max(0, s.utterances - s.finals) for s in stats),
                   "late": sum(s.late for s in stats)},
        "max_send_lag_s": round(max((s.max_send_lag for s in stats), default=0.0), 3),
        "client_errors": [s.error for s in stats if s.error][:5],
        "server_cpu_percent_of_one_core": round(cpu_pct, 1) if cpu_pct is not None else None,
        "server_rss_mb": {"start": round(samples[0][2] / 2**20, 2) if samples else None,
                          "after_warmup": round(rss_steady[0] / 2**20, 2) if rss_steady else None,
                          "end": round(rss_steady[-1] / 2**20, 2) if rss_steady else None,
                          "max": round(max(rss_steady) / 2**20, 2) if rss_steady else None,
                          "growth_after_warmup_percent":
                              round(100 * (rss_steady[-1] - rss_steady[0]) / rss_steady[0], 2)
                              if rss_steady else None},
        "rss_timeline_mb": [(round(t), round(r / 2**20, 1)) for t, _, r in samples[::10]],
    }
    f = report["finals"]
    report["sustained"] = (not report["client_errors"] and f["lost"] == 0 and f["late"] == 0
                           and report["max_send_lag_s"] <= 1.0)
    return report


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="JSON report")
    p.add_argument("--streams", type=int, default=10)
    p.add_argument("--seconds", type=float, default=60.0, help="audio per client")
    p.add_argument("--search", default="greedy", help="search of the streamdec server started")
    p.add_argument("--server-arg", action="append", default=[],
                   help="extra argument for streamdec serve (repeat)")
    p.add_argument("--url", help="a running server (sherpa-onnx protocol); needs --pid")
    p.add_argument("--pid", type=int, help="process id of that server (CPU, RSS)")
    p.add_argument("--chunk-ms", type=float, default=100.0, help="audio per message")
    p.add_argument("--gap", type=float, default=2.5, help="silence after each utterance (s)")
    p.add_argument("--warmup", type=float, default=20.0,
                   help="seconds before CPU/RSS count as steady")
    p.add_argument("--memory-probe", type=int, default=0, metavar="K",
                   help="first measure RSS per idle connection / active stream with K")
    p.add_argument("--utterances", type=int, default=20, help="dev-set utterances to use")
    p.add_argument("--message-cost", type=int, default=0, metavar="M",
                   help="first measure server CPU per message with M messages")
    args = p.parse_args()

    from devset import dev_set

    utts = [u.samples.astype(np.float32) for u in dev_set("espeak", args.utterances)]
    proc = None
    if args.url:
        if args.pid is None:
            p.error("--url needs --pid")
        url, pid, metrics_url = args.url, args.pid, None
    else:
        port = free_port()
        proc = start_streamdec(args.search, port, args.server_arg)
        url, pid = f"ws://127.0.0.1:{port}/", proc.pid
        metrics_url = f"http://127.0.0.1:{port}/metrics"
    try:
        report = {"command": " ".join(sys.argv), "cpus": os.cpu_count(),
                  "server": "streamdec serve" if proc else url, "search": args.search,
                  "seconds": args.seconds, "chunk_ms": args.chunk_ms,
                  "loadavg_before": os.getloadavg()}
        time.sleep(1.0)
        report["server_rss_idle_mb"] = round(proc_sample(pid)[1] / 2**20, 2)
        if args.memory_probe:
            report["memory_probe"] = asyncio.run(memory_probe(url, pid, args.memory_probe,
                                                              utts[0]))
        if args.message_cost:
            report["message_cost"] = asyncio.run(message_cost(url, pid, args.message_cost))
        before = scrape(metrics_url)
        report.update(asyncio.run(load(args, url, pid, utts)))
        after = scrape(metrics_url)
        for key, name in (("server_latency", "streamdec_result_latency_seconds"),
                          ("server_batch_size", "streamdec_decode_batch_size")):
            if after:
                report[key] = histogram_percentiles(histogram_buckets(after, name),
                                                    histogram_buckets(before, name))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                report["server_exit"] = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                report["server_exit"] = "killed"
    report["loadavg_after"] = os.getloadavg()  # other work on the machine, if any
    Path(args.out).write_text(json.dumps(report, indent=1))
    summary = {k: report.get(k) for k in ("streams", "token_latency", "finals", "max_send_lag_s",
                                          "server_cpu_percent_of_one_core", "server_latency",
                                          "sustained")}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
