"""Load generator for streaming servers: N real-time WebSocket clients on loopback, from a
separate process; latency, lost/late finals, server CPU and memory; ``streamdec serve``
against sherpa-onnx's C++ server on the same model files, A/B alternated.

    python bench/daemon/load.py --streams 10,50,100,200 --seconds 60 --out load.json
    python bench/daemon/load.py --streams 60 --seconds 600 --warmup 60 --out soak.json
    python bench/daemon/load.py --streams 10 --memory-probe 50 --message-cost 2000 --out mem.json
    python bench/daemon/load.py --peer streamdec --streams 40 --out one.json    # one server
    python bench/daemon/load.py --url ws://127.0.0.1:6006/ --pid 1234 ...       # a server already up
    python bench/daemon/load.py --peer streamdec --b-arg=--event-loop --b-arg=asyncio \
        --streams 100 --runs 3 --out ab.json     # A/B of a streamdec setting
    git worktree add /tmp/before HEAD~1
    python bench/daemon/load.py --peer streamdec --b-tree /tmp/before --streams 100 --runs 3 \
        --out ab.json                            # A/B of a code change
    python bench/daemon/load.py --peer streamdec --server-arg=--ray --server-arg=--config \
        --server-arg=bench/daemon/ray.toml --streams 40 --out ray.json          # streamdec serve --ray

``--peer`` (default both, ``streamdec,sherpa-onnx``) names the servers to start
(``bench/daemon/servers.py``): ``streamdec serve`` and ``sherpa-onnx-online-websocket-server``
(package ``sherpa-onnx-bin``), each on a free port, on the same model (``--model-dir``,
default the built-in one), search (``--search``), ONNX Runtime threads (``--threads``) and
batch size (``--max-batch``; by default streamdec's engine chooses it by the model and the
C++ server gets 32); every other setting is each server's own default. Each run
starts a fresh server and stops it afterwards; with two peers the runs alternate (A B, B A,
... ``--runs`` of each) and every configuration holds ``streamdec`` and ``sherpa_onnx``
(medians and min/max over the runs) and ``ratio``: sherpa-onnx's p95 chunk latency /
streamdec's (> 1: streamdec answers sooner); ``ratios`` adds server CPU and peak RSS
(sherpa-onnx / streamdec, > 1: streamdec uses less). With ``--url``/``--pid`` it measures
one server that is already running and speaks the sherpa-onnx protocol (float32 frames,
``Done``, JSON results with ``segment``, ``start_time``, ``timestamps``, ``is_final``, then
``Done!``).

Each client streams the dev-set utterances (espeak, ``bench/common/devset.py``; ``--speech
real``: the real dev set's 16 kHz recordings) one after another,
each followed by ``--gap`` seconds of silence (so an endpoint closes every utterance),
starting at a different utterance, in ``--chunk-ms`` messages paced at real time, for
``--seconds``; then ``Done``. A run ends when every client has its ``Done!``, or at
``--grace`` seconds after the audio's end, when the clients still running are stopped
(``unfinished``). Measured in the client, the same way for every server:

- ``chunk_latency_ms``: for every token the first time it appears in a result, the time from
  sending the message that completed the model chunk holding the token (the last sample
  that chunk's feature frames need, plus the frames a server waits for beyond them: one
  for sherpa-onnx) to receiving that result: the server's queueing and decoding time;
- ``token_latency_ms``: the same results timed from the message that holds the token's own
  audio (it includes waiting for the rest of the model's chunk: what a user sees);
- ``finals``: utterances whose audio and gap were sent, the utterances that got a final
  with text, ``lost`` = sent utterances without one, ``late`` = finals that arrived after
  the next utterance's audio began, ``split`` = extra finals within one utterance;
- ``final_delay_ms``: for each final, the time from sending the message that holds its
  utterance's last speech sample to receiving the final: the endpoint's trailing silence
  (the endpoint rules) plus the server's work on the final (a second pass's included);
- ``finals_wer``: the WER of every completely sent utterance's finals (none: all its
  words deleted) against its transcript. At one stream count every peer and run gets the
  same utterances (client n starts at utterance n): compare them there;
- ``max_send_lag_s``: how far the client's sending fell behind real time (back-pressure:
  the server reading slower than real time);

and from the server's processes (``/proc``: the process started or given by ``--pid`` and
every process below it, summed; under ``--ray`` its Ray instance and replicas): CPU (% of one core, over the steady part after
``--warmup``; ``server_main_thread_cpu_percent`` the share of it in each process's main
thread: streamdec's event loop, the rest its decode threads; under ``--ray`` every Ray
process's main thread), RSS (idle with the model, per second under load, growth after warm-up); the
load generator's own CPU (``client_cpu_percent``); the load average before and after each
run. For streamdec the server's own chunk-to-result histogram
(``streamdec_result_latency_seconds`` from ``/metrics``, summed over the replicas' labels
under Ray: a model chunk's last sample accepted -> its results) is reported as ``server_latency`` (percentiles interpolated within
its buckets).

Where a run's latency goes wrong, ``diagnostics`` says when and on which side:
``timeline`` (per ``TIMELINE_SECONDS`` window from the start: results, results over
``SLOW_MS``, the largest chunk latency and send lag), ``client_loop_lag`` (times the load
generator's own event loop ran a ``LAG_TICK`` timer ``LAG_LOG`` s late or more: a stalled
client, not server), ``steal`` (the machine's CPU time stolen by the hypervisor and its busy
share, per second from ``/proc/stat``: a stalled VM stalls both sides) and
``server_events`` (the server's own log events during the run, counted by name, its
``loop_lag`` and ``reads_paused`` lines with their times: streamdec's stall diagnostics).

``--b-arg`` (repeat) adds a third server, ``streamdec_b``: ``streamdec serve`` with these
arguments after ``--server-arg``'s, alternated with the others: every configuration then
holds ``b_ratios`` (the same figures as ``ratios``, streamdec / streamdec_b: > 1 when B is
better), the A/B of one setting measured under the same load in the same run.
``--b-tree DIR`` serves ``streamdec_b`` from another checkout (e.g. a ``git worktree`` of
the commit before a change), with the same arguments unless ``--b-arg`` adds some.

``--message-cost M`` measures, on a fresh server of each peer, the server's CPU per
WebSocket message (M empty messages: the transport alone; M messages of 10 ms audio,
decoded). ``--memory-probe K`` measures, on a fresh server of each peer, the RSS with the
model loaded, then opens K idle connections, then makes them K active streams (3 s of audio
each, left mid-utterance), and reports the RSS added per connection and per active stream
(``memory``; its ``ratio``: sherpa-onnx's RSS per active stream / streamdec's).

A run *sustains* its streams when every client finished, no final is lost or late and the
clients never fell behind real time by more than one second (``sustained``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import dataclasses
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import (alternate, int_list, load_average, machine,  # noqa: E402
                                 print_table, ratio, search_list, spread, write_report)
from bench.decode.latency import Pacing, percentiles, sherpa_extra_frames  # noqa: E402
from bench.common.peer import (add_model_options, model_config, model_report,  # noqa: E402
                               serve_model_args)
from bench.daemon.servers import PEERS, REPORT_KEYS, Settings, Target, proc_sample  # noqa: E402

RATE = 16000
B_KEY = "streamdec_b"  # the report key of --b-arg's server
TIMELINE_SECONDS = 10.0  # the diagnostics' timeline window
SLOW_MS = 250.0  # a chunk latency counted as slow in the timeline
LAG_TICK = 0.05  # the load generator's loop watch: its timer period
LAG_LOG = 0.1  # and the lateness it records


# -- the server process ---------------------------------------------------------------------
def histogram_buckets(text: str, name: str) -> dict[float, float]:
    """A Prometheus histogram's cumulative bucket counts, by upper bound, summed over its
    other labels (the replicas of ``streamdec serve --ray``)."""
    out: dict[float, float] = {}
    for labels, value in re.findall(rf"^{name}_bucket{{([^}}]*)}} (\S+)$", text, re.M):
        le = re.search(r'le="([^"]+)"', labels).group(1)
        bound = float("inf") if le == "+Inf" else float(le)
        out[bound] = out.get(bound, 0.0) + float(value)
    return out


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
    """The server's Prometheus metrics ("" when it has none: sherpa-onnx's server)."""
    if not url:
        return ""
    try:
        return urllib.request.urlopen(url, timeout=10).read().decode()
    except OSError as e:  # a server given by --url without /metrics
        print(f"no metrics from {url}: {e}", file=sys.stderr)
        return ""


# -- diagnostics ---------------------------------------------------------------------------------
class Timeline:
    """Per-window figures of a run, to see when latency went wrong: for each
    ``TIMELINE_SECONDS`` window from ``t0``, [results, results over ``SLOW_MS``, largest
    chunk latency ms, largest send lag s]."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.windows: dict[int, list] = {}

    def _row(self, now: float) -> list:
        return self.windows.setdefault(int(max(0.0, now - self.t0) // TIMELINE_SECONDS),
                                       [0, 0, 0.0, 0.0])

    def latency(self, now: float, seconds: float) -> None:
        row = self._row(now)
        row[0] += 1
        row[1] += seconds * 1000 > SLOW_MS
        row[2] = max(row[2], seconds * 1000)

    def send_lag(self, now: float, seconds: float) -> None:
        row = self._row(now)
        row[3] = max(row[3], seconds)

    def report(self) -> list[list]:
        """[window start s, results, slow, max ms, max send lag s] per window."""
        return [[round(k * TIMELINE_SECONDS), n, slow, round(worst, 1), round(lag, 3)]
                for k, (n, slow, worst, lag) in sorted(self.windows.items())]


async def watch_loop(t0: float, out: list) -> None:
    """Record when this process's event loop ran a timer ``LAG_LOG`` s late or more:
    (seconds since t0, lateness)."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + LAG_TICK
        await asyncio.sleep(LAG_TICK)
        lag = loop.time() - due
        if lag >= LAG_LOG:
            out.append((round(loop.time() - t0, 2), round(lag, 3)))


def cpu_times() -> tuple[int, int]:
    """(total, steal) jiffies of the whole machine so far (``/proc/stat``)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return sum(fields[:8]), fields[7] if len(fields) > 7 else 0


def steal_report(samples: list[tuple[float, int, int]]) -> dict:
    """The stolen share of the machine's CPU time per second: its largest and the seconds
    with 10 % or more (t, percent)."""
    shares = []
    for (t, total0, steal0), (_, total1, steal1) in zip(samples, samples[1:]):
        if total1 > total0:
            shares.append((round(t), round(100 * (steal1 - steal0) / (total1 - total0), 1)))
    return {"max_percent": max((x for _, x in shares), default=0.0),
            "seconds_over_10_percent": [x for x in shares if x[1] >= 10][:40]}


def log_events(lines: list[tuple[float, str]]) -> list[tuple[float, dict]]:
    """The server's JSON log events (``{"event": ...}``) among its log lines, with their
    times."""
    out = []
    for t, line in lines:
        start = line.find('{"event"')
        if start < 0:
            continue
        try:
            out.append((t, json.loads(line[start:])))
        except ValueError:
            continue
    return out


def server_events(lines: list[tuple[float, str]], t0: float) -> dict:
    """The server's JSON log events (``{"event": ...}``): counts by name, and its stall
    events (``loop_lag``, ``reads_paused``) with their time since ``t0``, the longest 40."""
    counts: dict[str, int] = {}
    stalls = []
    for t, event in log_events(lines):
        name = event.pop("event", "?")
        counts[name] = counts.get(name, 0) + 1
        if name in ("loop_lag", "reads_paused"):
            stalls.append({"t": round(t - t0, 2), "event": name, **event})
    stalls.sort(key=lambda e: -e.get("seconds", 0))
    return {"counts": counts, "stalls": sorted(stalls[:40], key=lambda e: e["t"])}


async def connections_logged(server: Target, since: float, count: int,
                             wait: float = 5.0) -> None:
    """Wait until streamdec has logged ``count`` ``connection`` events since ``since`` (it
    logs one when a connection's resources are released, just after its close, so the
    last ones can follow the clients' end), at most ``wait`` seconds; other servers log no
    such events."""
    if server.log is None or not server.name.startswith("streamdec"):
        return
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        logged = sum(e.get("event") == "connection" for _, e in log_events(server.log.since(since)))
        if logged >= count:
            return
        await asyncio.sleep(0.05)


# -- one client ----------------------------------------------------------------------------------
@dataclass
class Program:
    """The audio a client sends: utterances, each followed by a gap of silence."""
    audio: np.ndarray
    starts: list[int]  # first sample of each utterance
    ends: list[int]  # sample after each utterance's gap (its endpoint needs the gap)
    speech_ends: list[int]  # sample after each utterance's speech (its gap begins there)


def build_programs(utts, gap: float, seconds: float, count: int) -> list[Program]:
    """``count`` programs: client n sends the utterances from utterance n on (cycling),
    each + ``gap`` seconds of silence, until ``seconds``. Their audio is views of one
    array of the cycle repeated (100 clients of 10 minutes would otherwise hold 4 GB, and
    building it took seconds)."""
    silence = np.zeros(int(gap * RATE), np.float32)
    cycle = np.concatenate([x for u in utts for x in (u, silence)])
    offsets = np.cumsum([0] + [len(u) + len(silence) for u in utts])  # each utterance's
    repeats = int(np.ceil((seconds * RATE + 2 * len(cycle)) / len(cycle)))
    tiled = np.tile(cycle, repeats)
    programs = []
    for n in range(count):
        starts, ends, speech_ends, pos, i = [], [], [], 0, n
        while pos < seconds * RATE:
            starts.append(pos)
            speech_ends.append(pos + len(utts[i % len(utts)]))
            pos += len(utts[i % len(utts)]) + len(silence)
            ends.append(pos)
            i += 1
        first = int(offsets[n % len(utts)])
        programs.append(Program(tiled[first:first + pos], starts, ends, speech_ends))
    return programs


@dataclass
class ClientStats:
    token_latency: list[float] = field(default_factory=list)
    chunk_latency: list[float] = field(default_factory=list)
    unmatched: int = 0  # tokens in a result before the client had sent their chunk
    utterances: int = 0  # utterances whose audio and gap were sent completely
    final_utterances: set[int] = field(default_factory=set)  # utterances with a final
    late: int = 0
    split: int = 0  # finals beyond the first within one utterance
    final_delay: list[float] = field(default_factory=list)  # utterance's last sample -> final
    max_send_lag: float = 0.0
    finished: bool = False
    error: str | None = None
    texts: list[tuple[int, str]] = field(default_factory=list)  # (utterance, text) per final

    @property
    def lost(self) -> int:
        return sum(1 for i in range(self.utterances) if i not in self.final_utterances)


#: the protocols a client may speak (``--protocol``): the path it connects to
PROTOCOL_PATHS = {"sherpa": "", "deepgram": "v1/listen?encoding=linear32&sample_rate=16000"
                  "&interim_results=true", "realtime": "v1/realtime?intent=transcription",
                  "assemblyai": "v3/ws?sample_rate=16000&encoding=pcm_s16le"}
#: the text each protocol's client sends after its audio
_END_OF_AUDIO = {"sherpa": "Done", "deepgram": '{"type": "CloseStream"}',
                 "realtime": '{"type": "input_audio_buffer.commit"}',
                 "assemblyai": '{"type": "Terminate"}'}
_REALTIME_END = "end-of-audio"  # the event_id of the realtime client's last event


def protocol_url(url: str, protocol: str) -> str:
    """``url`` (a server's WebSocket root) for ``protocol``."""
    return url.rstrip("/") + "/" + PROTOCOL_PATHS[protocol] if PROTOCOL_PATHS[protocol] \
        else url


class VendorResults:
    """A cloud vendor protocol's messages as the sherpa-onnx results the client times:
    Deepgram's ``Results`` (word starts as the token times; its end: ``Metadata``);
    AssemblyAI's unformatted ``Turn``s (word starts in milliseconds as the token times; its
    end: ``Termination``); OpenAI Realtime's ``completed`` (no times: finals only, placed
    at ``speech_stopped``'s end; its end: the error event answering the client's last,
    unknown event)."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.stopped = 0.0  # seconds: the end of the last realtime utterance

    def convert(self, message: str) -> dict | None | bool:
        """The result in sherpa-onnx's shape; None: nothing to time; True: the end."""
        m = json.loads(message)
        kind = m.get("type")
        if self.protocol == "deepgram":
            if kind == "Metadata":
                return True
            if kind != "Results":
                return None
            alternative = m["channel"]["alternatives"][0]
            return {"segment": round(m["start"] * 1000), "start_time": m["start"],
                    "timestamps": [w["start"] - m["start"] for w in alternative["words"]],
                    "is_final": m["is_final"], "text": alternative["transcript"]}
        if self.protocol == "assemblyai":
            if kind == "Termination":
                return True
            if kind != "Turn" or m["turn_is_formatted"]:
                return None
            return {"segment": m["turn_order"], "start_time": 0.0,
                    "timestamps": [w["start"] / 1000 for w in m["words"]],
                    "is_final": m["end_of_turn"], "text": m["transcript"]}
        if kind == "error" and m["error"].get("event_id") == _REALTIME_END:
            return True
        if kind == "input_audio_buffer.speech_stopped":
            self.stopped = m["audio_end_ms"] / 1000
        if kind != "conversation.item.input_audio_transcription.completed":
            return None
        return {"segment": m["item_id"], "start_time": 0.0, "timestamps": [],
                "end_time": self.stopped, "is_final": True, "text": m["transcript"]}


def _pcm16(samples: np.ndarray) -> bytes:
    """Float samples as pcm_s16le."""
    return np.clip(np.round(samples * 32767), -32768, 32767).astype("<i2").tobytes()


def _realtime_append(samples: np.ndarray) -> str:
    """16 kHz float samples as a realtime append: pcm16 at 24 kHz (linear interpolation)."""
    n = len(samples) * 3 // 2
    resampled = np.interp(np.arange(n) * (2 / 3), np.arange(len(samples)), samples)
    return json.dumps({"type": "input_audio_buffer.append",
                       "audio": base64.b64encode(_pcm16(resampled)).decode()})


async def run_client(url: str, program: Program, chunk: int, pacing: Pacing, t_start: float,
                     stats: ClientStats, timeline: Timeline | None = None,
                     protocol: str = "sherpa") -> None:
    """Send ``program`` in ``chunk``-sample messages paced at real time from ``t_start``,
    then ``Done``; time every token's first appearance (``pacing``: which message completed
    the model chunk of an encoder frame) and check the finals. ``protocol``: the one the
    client speaks (``PROTOCOL_PATHS``)."""
    import websockets

    vendor = VendorResults(protocol) if protocol != "sherpa" else None
    url = protocol_url(url, protocol)

    sent_at: list[float] = []  # send time of each message
    seen: set[tuple[int, int]] = set()  # (segment, token index) already reported
    frame_seconds = pacing.meta.encoder_frame_seconds
    frames_per_chunk = pacing.meta.encoder_frames_per_chunk

    def sent(message: int) -> float | None:
        return sent_at[message] if message < len(sent_at) else None

    def on_result(r: dict, now: float) -> None:
        for n, t in enumerate(r.get("timestamps", [])):
            key = (r["segment"], n)
            if key in seen:
                continue
            seen.add(key)
            at = r["start_time"] + t
            own = sent(int(at * RATE) // chunk)
            if own is not None:
                stats.token_latency.append(now - own)
            chunks = round(at / frame_seconds) // frames_per_chunk + 1
            completed = sent(pacing.last_piece(chunks))
            if completed is None:
                stats.unmatched += 1
            else:
                stats.chunk_latency.append(now - completed)
                if timeline is not None:
                    timeline.latency(now, now - completed)
        if r.get("is_final") and r.get("text"):
            end = int((r["end_time"] if "end_time" in r else
                       r["start_time"] + (r["timestamps"] or [0])[-1]) * RATE)
            i = bisect.bisect_right(program.starts, end) - 1
            stats.texts.append((i, r["text"]))
            if i in stats.final_utterances:
                stats.split += 1
                return
            stats.final_utterances.add(i)
            last = (sent((program.speech_ends[i] - 1) // chunk)
                    if i < len(program.speech_ends) else None)
            if last is not None:
                stats.final_delay.append(now - last)
            # late: the next utterance's audio had started being sent
            if (i + 1 < len(program.starts)
                    and sent(program.starts[i + 1] // chunk) is not None):
                stats.late += 1

    async with websockets.connect(url, max_size=None, ping_interval=None,
                                  open_timeout=60) as ws:
        async def receive():
            async for msg in ws:
                now = time.monotonic()
                if msg == "Done!":
                    return
                r = json.loads(msg) if vendor is None else vendor.convert(msg)
                if r is True:
                    return
                if r is not None:
                    on_result(r, now)

        receiver = asyncio.ensure_future(receive())
        try:
            audio = program.audio
            for k in range(0, len(audio), chunk):
                due = t_start + (k // chunk) * chunk / RATE
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    stats.max_send_lag = max(stats.max_send_lag, -delay)
                    if timeline is not None:
                        timeline.send_lag(time.monotonic(), -delay)
                sent_at.append(time.monotonic())
                piece = audio[k:k + chunk]
                await ws.send(_realtime_append(piece) if protocol == "realtime"
                              else _pcm16(piece) if protocol == "assemblyai"
                              else piece.tobytes())
                while (stats.utterances < len(program.ends)
                       and program.ends[stats.utterances] <= k + chunk):
                    stats.utterances += 1
            await ws.send(_END_OF_AUDIO[protocol])
            if protocol == "realtime":
                await ws.send(json.dumps({"type": "end", "event_id": _REALTIME_END}))
            stats.utterances = len(program.ends)
            await receiver
            stats.finished = True
        finally:
            receiver.cancel()


# -- memory probe ----------------------------------------------------------------------------
async def memory_probe(url: str, server: Target, k: int, utt: np.ndarray) -> dict:
    import websockets

    _, idle = server.sample()
    conns = [await websockets.connect(url, ping_interval=None) for _ in range(k)]
    await asyncio.sleep(2)
    _, with_conns = server.sample()
    audio = np.concatenate([utt, utt])[:3 * RATE].astype(np.float32)
    for ws in conns:
        await ws.send(audio.tobytes())
    await asyncio.sleep(max(3.0, k * 0.05))
    _, with_streams = server.sample()
    for ws in conns:
        await ws.close()
    await asyncio.sleep(2)
    _, after = server.sample()
    return {"connections": k, "rss_idle_mb": round(idle / 2**20, 2),
            "rss_per_idle_connection_kb": round((with_conns - idle) / k / 1024, 1),
            "rss_per_active_stream_kb": round((with_streams - idle) / k / 1024, 1),
            "rss_after_close_mb": round(after / 2**20, 2)}


# -- per-message cost of the transport -----------------------------------------------------
async def message_cost(url: str, server: Target, count: int) -> dict:
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
            cpu0, _ = server.sample()
            t0 = time.monotonic()
            for _ in range(count):
                await ws.send(payload)
            await ws.send("Done")
            async for m in ws:
                if m == "Done!":
                    break
            wall = time.monotonic() - t0
            cpu1, _ = server.sample()
        out[name] = {"messages": count, "server_cpu_us_per_message":
                     round(1e6 * (cpu1 - cpu0) / count, 1),
                     "messages_per_second": round(count / wall)}
    return out


# -- one run -----------------------------------------------------------------------------------
def latency_ms(values: list[float]) -> dict:
    if not values:
        return {"results": 0}
    return {k: round(v, 1) if isinstance(v, float) else v
            for k, v in percentiles(values).items()}


def client_offset(spread: str, n: int, count: int, message_seconds: float,
                  chunk_seconds: float) -> float:
    """When client ``n`` of ``count`` starts, after the run's start: ``message`` spreads
    the clients over 20 send times within one message (every client's chunks become whole
    in the same message of its own, so the chunks of all clients arrive in a burst once per
    model chunk: a worst case); ``chunk`` spreads them evenly over one model chunk (as
    calls that begin independently do: chunks made whole at an even rate)."""
    if spread == "chunk":
        return n * chunk_seconds / count
    return (n % 20) * message_seconds / 20


async def load(args, streams: int, server: Target, utts, pacing: Pacing,
               refs: list[str] | None = None) -> dict:
    """``streams`` clients against ``server``, bounded by ``--seconds`` + ``--grace``;
    ``refs``: the utterances' transcripts (the finals' WER)."""
    chunk = pacing.piece
    stats = [ClientStats() for _ in range(streams)]
    programs = build_programs(utts, args.gap, args.seconds, streams)
    t0 = time.monotonic() + 1.0  # after the programs are built: the clients start on time
    timeline = Timeline(t0)
    tasks = []
    for n, (s, program) in enumerate(zip(stats, programs)):
        start = t0 + client_offset(args.spread, n, streams, args.chunk_ms / 1000,
                                   pacing.meta.chunk_shift * pacing.shift / RATE)
        tasks.append(asyncio.ensure_future(run_client(server.url, program, chunk, pacing,
                                                      start, s, timeline, args.protocol)))
    samples = []  # (t, cpu, rss) each second
    machine_cpu = []  # (t, total jiffies, steal jiffies) each second
    client_lags: list = []

    async def sampler():
        while True:
            samples.append((time.monotonic() - t0, *server.sample_threads()))
            machine_cpu.append((time.monotonic() - t0, *cpu_times()))
            await asyncio.sleep(1.0)

    sampling = asyncio.ensure_future(sampler())
    watching = asyncio.ensure_future(watch_loop(t0, client_lags))
    client_cpu0 = proc_sample(os.getpid())[0]
    _, pending = await asyncio.wait(tasks, timeout=1.0 + args.seconds + args.grace)
    client_cpu = 100 * (proc_sample(os.getpid())[0] - client_cpu0) / (time.monotonic() - t0
                                                                        + 1.0)
    for task in pending:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    await connections_logged(server, t0 - 1.0, streams)
    sampling.cancel()
    watching.cancel()
    for s, r in zip(stats, results):
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            s.error = repr(r)
    steady = [x for x in samples if args.warmup <= x[0] <= args.seconds]
    cpu_pct = (100 * (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])
               if len(steady) > 1 else None)
    main_pct = (100 * (steady[-1][3] - steady[0][3]) / (steady[-1][0] - steady[0][0])
                if len(steady) > 1 else None)
    rss_steady = [x[2] for x in steady]
    mb = lambda b: round(b / 2**20, 2)  # noqa: E731
    report = {
        "chunk_latency_ms": latency_ms([x for s in stats for x in s.chunk_latency]),
        "token_latency_ms": latency_ms([x for s in stats for x in s.token_latency]),
        "final_delay_ms": latency_ms([x for s in stats for x in s.final_delay]),
        "unmatched_tokens": sum(s.unmatched for s in stats),
        "finals": {"utterances": sum(s.utterances for s in stats),
                   "received": sum(len(s.final_utterances) for s in stats),
                   "lost": sum(s.lost for s in stats),
                   "late": sum(s.late for s in stats),
                   "split": sum(s.split for s in stats)},
        "finals_wer": finals_wer(stats, refs) if refs else None,
        "unfinished": sum(not s.finished for s in stats),
        "max_send_lag_s": round(max((s.max_send_lag for s in stats), default=0.0), 3),
        "client_errors": [s.error for s in stats if s.error][:5],
        "server_cpu_percent": round(cpu_pct, 1) if cpu_pct is not None else None,
        "server_main_thread_cpu_percent": round(main_pct, 1) if main_pct is not None else None,
        "client_cpu_percent": round(client_cpu, 1),
        "server_rss_mb": {"start": mb(samples[0][2]) if samples else None,
                          "after_warmup": mb(rss_steady[0]) if rss_steady else None,
                          "end": mb(rss_steady[-1]) if rss_steady else None,
                          "max": mb(max(rss_steady)) if rss_steady else None,
                          "growth_after_warmup_percent":
                              round(100 * (rss_steady[-1] - rss_steady[0]) / rss_steady[0], 2)
                              if rss_steady else None},
        "rss_timeline_mb": [(round(t), round(r / 2**20, 1)) for t, _, r, _ in samples[::10]],
        "diagnostics": {
            "timeline": timeline.report(),
            "client_loop_lag": sorted(client_lags, key=lambda x: -x[1])[:40],
            "steal": steal_report(machine_cpu),
            "server_events": server_events(server.log.since(t0 - 1.0), t0)
            if server.log is not None else None},
    }
    f = report["finals"]
    report["sustained"] = (not report["client_errors"] and report["unfinished"] == 0
                           and f["lost"] == 0 and f["late"] == 0
                           and report["max_send_lag_s"] <= 1.0)
    return report


def finals_wer(stats: list[ClientStats], refs: list[str]) -> float:
    """WER of every completely sent utterance's finals (joined; none: all words deleted)
    against its transcript; client n's utterance i is ``refs[(n + i) % len(refs)]`` (see
    ``build_programs``)."""
    from bench.common.devset import error_rates

    want, got = {}, {}
    for n, s in enumerate(stats):
        texts: dict[int, list[str]] = {}
        for i, text in s.texts:
            texts.setdefault(i, []).append(text)
        for i in range(s.utterances):
            want[f"{n}/{i}"] = refs[(n + i) % len(refs)]
            got[f"{n}/{i}"] = " ".join(texts.get(i, []))
    return round(error_rates(want, got)["wer"], 4) if want else None


def measure_load(args, streams: int, server: Target, utts, pacing: Pacing,
                 refs: list[str] | None = None) -> dict:
    """One run of the load against one server."""
    run = {"load_average_before": load_average()}
    time.sleep(1.0)
    run["server_rss_idle_mb"] = round(server.sample()[1] / 2**20, 2)
    before = scrape(server.metrics_url)
    run.update(asyncio.run(load(args, streams, server, utts, pacing, refs)))
    after = scrape(server.metrics_url)
    for key, name in (("server_latency", "streamdec_result_latency_seconds"),
                      ("server_batch_size", "streamdec_decode_batch_size")):
        if after:
            run[key] = histogram_percentiles(histogram_buckets(after, name),
                                             histogram_buckets(before, name))
    run["load_average_after"] = load_average()
    return run


# -- the comparison ------------------------------------------------------------------------------
def summarise(runs: list[dict]) -> dict:
    """One peer's runs of one configuration: numbers as median/min/max over the runs, flags
    true when true in every run, anything else (lists, text) run by run."""
    out: dict = {}
    for key, first in runs[0].items():
        values = [r.get(key) for r in runs]
        if isinstance(first, bool):
            out[key] = all(values)
        elif isinstance(first, dict) and all(isinstance(v, dict) for v in values):
            out[key] = summarise(values)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[key] = spread(values, 3)
        else:
            out[key] = values
    return out


def median(summary: dict, *path: str) -> float | None:
    for key in path:
        summary = summary.get(key) if isinstance(summary, dict) else None
    return summary.get("median") if isinstance(summary, dict) else None


def lower_is_better(ours, theirs) -> float | None:
    return None if ours is None or theirs is None else ratio(ours, theirs, False)


FIGURES = {"chunk_latency_p95": ("chunk_latency_ms", "p95"),
           "chunk_latency_p99": ("chunk_latency_ms", "p99"),
           "token_latency_p95": ("token_latency_ms", "p95"),
           "server_cpu": ("server_cpu_percent",),
           "server_rss_max": ("server_rss_mb", "max")}


def figure_ratios(ours: dict, theirs: dict) -> dict:
    """theirs / ours of each of ``FIGURES`` (lower is better: > 1 when ours is better)."""
    return {name: lower_is_better(median(ours, *path), median(theirs, *path))
            for name, path in FIGURES.items()}


def compare(conf: dict) -> None:
    """``ratio`` and ``ratios`` of a configuration that holds both peers (> 1: streamdec is
    better); ``b_ratios`` where it holds ``streamdec_b`` (> 1: B is better)."""
    if "streamdec" in conf and B_KEY in conf:
        conf["b_ratios"] = figure_ratios(conf[B_KEY], conf["streamdec"])
    if "streamdec" not in conf or "sherpa_onnx" not in conf:
        return
    conf["ratios"] = figure_ratios(conf["streamdec"], conf["sherpa_onnx"])
    conf["ratio"] = conf["ratios"]["chunk_latency_p95"]


def with_server(start: Callable[[], Target], measure: Callable[[Target], dict]) -> dict:
    """Start a server, measure it, stop it."""
    server = start()
    try:
        out = measure(server)
    finally:
        status = server.stop()
    if status is not None:
        out["server_exit"] = status
    return out


def peer_runs(args, starts: dict[str, Callable[[], Target]],
              measure: Callable[[Target], dict]) -> dict:
    """``measure`` on every peer, ``--runs`` times each, alternated; the summaries by peer."""
    names = list(starts)
    runs = alternate(args.runs, *[lambda n=n: with_server(starts[n], measure) for n in names])
    return {name: summarise(r) for name, r in zip(names, runs)}


def row(search: str, streams: int, peer: str, s: dict) -> list:
    f = s["finals"]
    return [search, streams, peer, *(median(s, "chunk_latency_ms", p) for p in ("p50", "p95",
                                                                                 "p99")),
            median(s, "token_latency_ms", "p95"),
            f"{median(f, 'lost')}/{median(f, 'late')}/{median(f, 'utterances')}",
            median(s, "server_cpu_percent"), median(s, "server_rss_mb", "max"),
            s["sustained"]]


# -- the servers to measure ------------------------------------------------------------------
def add_peer_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the servers this script starts and compares."""
    g = p.add_argument_group("servers started and compared (unless --url)")
    g.add_argument("--peer", type=peer_list, default=list(PEERS),
                   help=f"servers to start, comma-separated: {', '.join(PEERS)} "
                        "(default both, A/B alternated)")
    g.add_argument("--runs", type=int, default=1,
                   help="runs of each server per configuration, alternated (default 1)")
    g.add_argument("--search", type=search_list, default=["greedy"],
                   help="searches, comma-separated: greedy, modified_beam (default greedy)")
    g.add_argument("--beam", type=int, default=4, help="modified_beam: max active paths")
    g.add_argument("--threads", type=int, default=1,
                   help="ONNX Runtime threads per session, both servers (default 1)")
    g.add_argument("--max-batch", type=int, default=None,
                   help="streams decoded in one batch, both servers (default: streamdec's "
                        "engine chooses by the model, the C++ server 32)")
    add_model_options(g)
    g.add_argument("--server-arg", action="append", default=[],
                   help="extra argument for streamdec serve (repeat)")
    g.add_argument("--b-arg", action="append", default=[],
                   help="A/B: also start streamdec_b, streamdec serve with this extra "
                        "argument (repeat)")
    g.add_argument("--b-tree", type=Path,
                   help="A/B: also start streamdec_b from this checkout's streamdec")
    g.add_argument("--sherpa-arg", action="append", default=[],
                   help="extra argument for sherpa-onnx-online-websocket-server, as "
                        "--name=value (repeat)")


def peer_list(text: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    for n in names:
        if n not in PEERS:
            raise argparse.ArgumentTypeError(f"{n!r}: the servers are {', '.join(PEERS)}")
    if not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected distinct servers, got {text!r}")
    return names


def peer_starts(args, rec, search: str) -> dict[str, Callable[[], Target]]:
    """Report key -> how to start that server with ``search``."""
    settings = Settings(files=rec.model_files, model_args=tuple(serve_model_args(args)),
                        model_type=rec.meta.model_type,
                        search=search, beam=args.beam, threads=args.threads,
                        max_batch=args.max_batch, streamdec_args=tuple(args.server_arg),
                        sherpa_args=tuple(args.sherpa_arg))
    starts = {REPORT_KEYS[n]: (lambda n=n: PEERS[n](settings)) for n in args.peer}
    if args.b_arg or args.b_tree:
        b = dataclasses.replace(settings, streamdec_args=(*args.server_arg, *args.b_arg),
                                source=(args.b_tree or settings.source).resolve())
        starts[B_KEY] = lambda: dataclasses.replace(PEERS["streamdec"](b), name=B_KEY)
    return starts


def chunk_pacing(args, rec, server_name: str) -> Pacing:
    """Which message completes each model chunk, for a server: sherpa-onnx waits for
    feature frames beyond the chunk's before it decodes it."""
    extra = 0
    if server_name == REPORT_KEYS["sherpa-onnx"]:
        from bench.common.peer import sherpa_recognizer

        srec = sherpa_recognizer(rec.model_files, rec.meta.model_type, "greedy_search",
                                 args.beam, endpoint=True)
        extra = sherpa_extra_frames(srec, rec.meta, rec.config.features)
    return Pacing(0.0, int(args.chunk_ms * RATE / 1000), rec.meta, rec.config.features, extra)


# -- the report --------------------------------------------------------------------------------
def measure(args) -> dict:
    from bench.common.devset import dev_set
    from streamdec import Recognizer, RecognizerConfig

    if args.speech == "real":  # the real dev set's 16 kHz recordings (clients send 16 kHz)
        from bench.accuracy.realvoice import real_dev_set

        dev = [u for u in real_dev_set() if u.rate == RATE][:args.utterances]
    else:
        dev = dev_set("espeak", args.utterances)
    utts = [u.samples.astype(np.float32) for u in dev]
    refs = [u.text for u in dev]
    rec = Recognizer(RecognizerConfig(model=model_config(args)))
    load_before = load_average()
    report: dict = {"setup": {
        "benchmark": "load", "command": " ".join(sys.argv), "streams": args.streams,
        "seconds": args.seconds, "grace": args.grace, "warmup": args.warmup,
        "chunk_ms": args.chunk_ms, "spread": args.spread, "gap": args.gap,
        "utterances": args.utterances, "speech": args.speech, "protocol": args.protocol,
        "runs": args.runs, "model_dir": str(rec.config.model.path),
        "model": model_report(rec.model_files, args.int8), "search": args.search,
        "beam": args.beam, "threads": args.threads, "max_batch": args.max_batch,
        "server_args": args.server_arg, "b_args": args.b_arg,
        "b_tree": str(args.b_tree) if args.b_tree else None,
        "commands": {}}, "configurations": []}
    commands = report["setup"]["commands"]
    pacings: dict[str, Pacing] = {}

    def starts_for(search: str) -> dict[str, Callable[[], Target]]:
        if args.url:
            http = urllib.parse.urlsplit(args.url)._replace(path="/metrics", query="")
            metrics = args.metrics_url or urllib.parse.urlunsplit(
                http._replace(scheme="https" if http.scheme == "wss" else "http"))
            return {"server": lambda: Target("server", args.url, args.pid, [], metrics)}
        return peer_starts(args, rec, search)

    def recorded(measure_one: Callable[[Target], dict]) -> Callable[[Target], dict]:
        def run(server: Target) -> dict:
            commands[server.name] = " ".join(server.command) or server.url
            return measure_one(server)
        return run

    def probe(server: Target) -> dict:
        time.sleep(1.0)
        return asyncio.run(memory_probe(server.url, server, args.memory_probe, utts[0]))

    if args.memory_probe:
        report["memory"] = peer_runs(args, starts_for(args.search[0]), recorded(probe))
        if {"streamdec", "sherpa_onnx"} <= set(report["memory"]):
            report["memory"]["ratio"] = lower_is_better(
                *(median(report["memory"][k], "rss_per_active_stream_kb")
                  for k in ("streamdec", "sherpa_onnx")))
    if args.message_cost:
        report["message_cost"] = peer_runs(args, starts_for(args.search[0]), recorded(
            lambda s: asyncio.run(message_cost(s.url, s, args.message_cost))))
    rows = []
    for search in args.search:
        starts = starts_for(search)
        for name in starts:
            if name not in pacings:
                pacings[name] = chunk_pacing(args, rec, name)
        for streams in args.streams:
            conf = {"search": search, "streams": streams, **peer_runs(
                args, starts, recorded(lambda s, k=streams: measure_load(
                    args, k, s, utts, pacings[s.name], refs)))}
            compare(conf)
            report["configurations"].append(conf)
            for name in starts:
                rows.append(row(search, streams, name, conf[name]))
                print(" ".join(map(str, rows[-1])), file=sys.stderr)
            if "ratio" in conf:
                print(f"ratio {conf['ratio']} {conf['ratios']}", file=sys.stderr)
            if "b_ratios" in conf:
                print(f"b_ratios {conf['b_ratios']}", file=sys.stderr)
    report["machine"] = machine(load_before)
    print_table(["search", "N", "server", "chunk p50", "p95", "p99", "token p95",
                 "lost/late/finals", "CPU %", "RSS MB", "sustained"], rows)
    for conf in report["configurations"]:
        if "ratio" in conf:
            print(f"{conf['search']} N={conf['streams']}: ratios (> 1: streamdec better) "
                  f"{conf['ratios']}")
        if "b_ratios" in conf:
            print(f"{conf['search']} N={conf['streams']}: B/A ratios (> 1: streamdec_b "
                  f"better) {conf['b_ratios']}")
    return report


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--out", type=Path, required=True, help="JSON report")
    p.add_argument("--streams", type=int_list, default=[10],
                   help="clients at once, comma-separated: one configuration each")
    p.add_argument("--seconds", type=float, default=60.0, help="audio per client")
    p.add_argument("--url", help="a running server (sherpa-onnx protocol); needs --pid")
    p.add_argument("--pid", type=int,
                   help="process id of that server (CPU and RSS: it and all below it)")
    p.add_argument("--metrics-url", help="its Prometheus /metrics, if any (default: /metrics "
                                         "on the host and port of --url)")
    p.add_argument("--chunk-ms", type=float, default=100.0, help="audio per message")
    p.add_argument("--protocol", choices=tuple(PROTOCOL_PATHS), default="sherpa",
                   help="the protocol the clients speak (streamdec only for the vendors'): "
                        "sherpa-onnx's float32 frames, Deepgram's live protocol (linear32, "
                        "interim results), AssemblyAI's universal streaming (pcm_s16le, "
                        "partial turns), or OpenAI Realtime (base64 pcm16 at 24 kHz in JSON; "
                        "finals only are timed: it has no times in deltas)")
    p.add_argument("--spread", choices=("message", "chunk"), default="message",
                   help="clients' start times: over one message (their model chunks "
                        "arrive in bursts), or evenly over one model chunk (chunks arrive at "
                        "an even rate, as independent calls' do)")
    p.add_argument("--gap", type=float, default=2.5, help="silence after each utterance (s)")
    p.add_argument("--warmup", type=float, default=20.0,
                   help="seconds before CPU/RSS count as steady")
    p.add_argument("--grace", type=float, default=60.0,
                   help="seconds after the audio's end before unfinished clients are stopped")
    p.add_argument("--memory-probe", type=int, default=0, metavar="K",
                   help="first measure RSS per idle connection / active stream with K")
    p.add_argument("--utterances", type=int, default=20, help="dev-set utterances to use")
    p.add_argument("--speech", choices=("espeak", "real"), default="espeak",
                   help="the utterances: the synthetic dev set (espeak) or the real dev set's "
                        "16 kHz recordings (bench/accuracy/realvoice.py; for a real model)")
    p.add_argument("--message-cost", type=int, default=0, metavar="M",
                   help="first measure server CPU per message with M messages")
    add_peer_arguments(p)
    return p


def main() -> int:
    p = parser()
    args = p.parse_args()
    if args.url and args.pid is None:
        p.error("--url needs --pid")
    write_report(args.out, measure(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
