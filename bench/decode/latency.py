"""Latency of live streams: K streams paced in real time, the time from a chunk's last sample
being accepted to the result of that chunk reaching its reader; p50/p95/p99.

    python bench/decode/latency.py --out bench-latency.json                 # K = 100, 20 s runs
    python bench/decode/latency.py --out r.json --streams 10,100 --seconds 10 --search greedy

Each stream plays dev utterances back to back (1.5 s of silence between them, so the
endpoint rules close segments as in a conversation), starting at its own utterance, in
``--piece-ms`` pieces at real-time pace; the K streams start staggered over one piece. A
run lasts ``--seconds`` of audio; then what was fed is decoded to its end.

- streamdec: the ``Engine`` (asyncio; batches of up to ``--max-batch`` ready streams,
  waiting up to ``--max-wait-ms`` for one to fill, computed in a worker thread), default
  endpointing; every result it hands out (a partial whose text changed, or a final) is
  measured.
- sherpa-onnx: the same feeders and the same batching rule in the same kind of loop
  (``decode_streams`` in a worker thread, ``is_endpoint`` / ``reset`` after each decode);
  a result is handed out when its text changed or at an endpoint, and measured.

A chunk's last sample is "accepted" when the piece that holds it was due (its real-time
schedule), so a loop that falls behind shows as latency. ``ratio`` = sherpa-onnx p95 /
streamdec p95 (> 1: streamdec answers sooner). Percentiles are computed per run; the
report gives their median and min/max over ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import (alternate, bench_parser, load_average, machine,  # noqa: E402
                                 print_table, ratio, spread, main, workload)
from bench.common.peer import (SHERPA_METHODS, model_config, model_report,  # noqa: E402
                               sherpa_recognizer)
from streamdec import Recognizer, RecognizerConfig  # noqa: E402
from streamdec.engine import Engine, EngineConfig, sizes_for  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402

RATE = 16000
GAP_SECONDS = 1.5  # silence between two utterances of a stream


class Pacing:
    """When each piece of a stream is due, and when the sample that completes a chunk was.

    Feature frame j (25 ms window, 10 ms shift, no edge snipping) needs the samples up to
    ``j * shift + (window + shift) / 2``; an encoder chunk that ends before feature frame
    ``end`` (exclusive, including its right context) needs frame ``end - 1``, and a decoder
    that waits for ``extra_frames`` more frames before it takes a chunk needs those too."""

    def __init__(self, start: float, piece_samples: int, meta, features,
                 extra_frames: int = 0) -> None:
        self.start = start
        self.piece = piece_samples
        self.piece_seconds = piece_samples / RATE
        self.shift = features.frame_shift_samples
        window = int(round(features.sample_rate * features.frame_length_ms / 1000))
        self.first_frame_end = (window + self.shift) // 2
        self.meta = meta
        self.extra_frames = extra_frames

    def frame_end(self, j: int) -> int:
        """Samples feature frame j needs."""
        return j * self.shift + self.first_frame_end

    def frames_ready(self, samples: int) -> int:
        """Feature frames that ``samples`` samples make."""
        return max(0, (samples - self.first_frame_end) // self.shift + 1)

    def due(self, n: int) -> float:
        """When piece n (0-based) is fed."""
        return self.start + n * self.piece_seconds

    def last_piece(self, chunks: int) -> int:
        """The piece (0-based) that holds the last sample the ``chunks``-th chunk (1-based)
        needs."""
        end = (chunks - 1) * self.meta.chunk_shift + self.meta.chunk_frames + self.extra_frames
        return math.ceil(self.frame_end(end - 1) / self.piece) - 1

    def chunk_accepted(self, chunks: int) -> float:
        """When the last sample of the ``chunks``-th chunk (1-based) was fed."""
        return self.due(self.last_piece(chunks))


def stream_audio(utts, first: int, seconds: float) -> np.ndarray:
    """Utterances from index ``first`` on (cycling), GAP_SECONDS apart, >= ``seconds`` long."""
    parts, total, i = [], 0, first
    gap = np.zeros(int(GAP_SECONDS * RATE), np.float32)
    while total < seconds * RATE:
        samples = utts[i % len(utts)].samples
        parts += [samples, gap]
        total += len(samples) + len(gap)
        i += 1
    return np.concatenate(parts)


async def feed_paced(pacing: Pacing, audio: np.ndarray, seconds: float, feed) -> None:
    """Feed ``audio`` piece by piece when each piece is due, for ``seconds`` of audio."""
    loop = asyncio.get_running_loop()
    for n in range(int(seconds / pacing.piece_seconds)):
        delay = pacing.due(n) - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await feed(audio[n * pacing.piece:(n + 1) * pacing.piece])


async def run_streamdec(rec: Recognizer, audios, args, engine_config: EngineConfig
                        ) -> list[float]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    frame_ms = rec.config.features.frame_shift_ms
    piece = int(args.piece_ms * RATE / 1000)
    async with Engine(rec, engine_config) as engine:
        t0 = loop.time() + 0.1
        lives = [engine.open(search=args.search_config) for _ in audios]

        async def read(live, pacing: Pacing) -> None:
            async for result in live.results():
                chunks = round(result.end_time * 1000 / frame_ms) // rec.meta.chunk_shift
                latencies.append(loop.time() - pacing.chunk_accepted(chunks))

        async def play(i: int, live, audio) -> None:
            pacing = Pacing(t0 + i * piece / RATE / len(audios), piece, rec.meta,
                            rec.config.features)
            reader = asyncio.ensure_future(read(live, pacing))
            await feed_paced(pacing, audio, args.seconds,
                             lambda x: live.feed(RATE, x))
            while not live.done and live.pending_frames >= rec.meta.chunk_frames:
                await asyncio.sleep(0.005)  # what was fed is decoded to its end
            await asyncio.sleep(0.005)  # the reader takes the last results
            reader.cancel()
            live.close()

        await asyncio.gather(*(play(i, live, a) for i, (live, a) in
                               enumerate(zip(lives, audios))))
    return latencies


def sherpa_extra_frames(srec, meta, features) -> int:
    """Feature frames beyond a whole chunk that sherpa-onnx waits for before a stream is
    ready (found by feeding one frame shift at a time)."""
    s = srec.create_stream()
    shift = features.frame_shift_samples
    pacing = Pacing(0.0, shift, meta, features)
    for n in range(1, 10 * meta.chunk_frames):
        s.accept_waveform(RATE, np.zeros(shift, np.float32))
        if srec.is_ready(s):
            return pacing.frames_ready(n * shift) - meta.chunk_frames
    raise RuntimeError("sherpa-onnx never became ready")


class SherpaLoop:
    """sherpa-onnx streams under the batching rule of streamdec's engine: wait until a
    stream holds a chunk, wait up to max_wait for max_batch to fill, decode the batch in a
    worker thread, hand out the results whose text changed."""

    def __init__(self, srec, max_batch: int, max_wait: float) -> None:
        self.srec = srec
        self.max_batch, self.max_wait = max_batch, max_wait
        self.streams: dict = {}  # stream -> its record (see add)
        self.in_flight: set = set()
        self.changed = asyncio.Event()
        self.pool = ThreadPoolExecutor(1)

    def add(self, pacing: Pacing, latencies: list[float]):
        s = self.srec.create_stream()
        self.streams[s] = {"pacing": pacing, "chunks": 0, "text": "", "out": latencies}
        return s

    def ready(self) -> list:
        return [s for s in self.streams if s not in self.in_flight and self.srec.is_ready(s)]

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            deadline = None
            while True:
                ready = self.ready()
                now = loop.time()
                if ready and (len(ready) >= self.max_batch or self.max_wait == 0
                              or (deadline is not None and now >= deadline)):
                    break
                if ready and deadline is None:
                    deadline = now + self.max_wait
                self.changed.clear()
                try:
                    await asyncio.wait_for(self.changed.wait(),
                                           None if deadline is None else max(0, deadline - now))
                except asyncio.TimeoutError:
                    pass
            batch = ready[:self.max_batch]
            self.in_flight.update(batch)
            await loop.run_in_executor(self.pool, self.srec.decode_streams, batch)
            self.in_flight.difference_update(batch)
            now = loop.time()
            for s in batch:
                rec = self.streams[s]
                rec["chunks"] += 1
                text = self.srec.get_result(s)
                endpoint = self.srec.is_endpoint(s)
                if text != rec["text"] or (endpoint and text):
                    rec["out"].append(now - rec["pacing"].chunk_accepted(rec["chunks"]))
                rec["text"] = text
                if endpoint:
                    self.srec.reset(s)
                    rec["text"] = ""


async def run_sherpa(srec, meta, features, audios, args, max_batch: int) -> list[float]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    piece = int(args.piece_ms * RATE / 1000)
    sl = SherpaLoop(srec, max_batch, args.max_wait_ms / 1000)
    scheduler = asyncio.ensure_future(sl.run())
    t0 = loop.time() + 0.1
    extra = sherpa_extra_frames(srec, meta, features)

    async def play(i: int, audio) -> None:
        pacing = Pacing(t0 + i * piece / RATE / len(audios), piece, meta, features, extra)
        s = sl.add(pacing, latencies)

        async def feed(x):
            s.accept_waveform(RATE, x)
            sl.changed.set()

        await feed_paced(pacing, audio, args.seconds, feed)
        while srec.is_ready(s) or s in sl.in_flight:
            await asyncio.sleep(0.005)

    try:
        await asyncio.gather(*(play(i, a) for i, a in enumerate(audios)))
    finally:
        scheduler.cancel()
        sl.pool.shutdown(wait=True)
    return latencies


def percentiles(latencies: list[float]) -> dict:
    ms = np.array(latencies) * 1000
    return {"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)),
            "p99": float(np.percentile(ms, 99)), "max": float(ms.max()), "results": len(ms)}


def summarise(runs: list[dict]) -> dict:
    return {key: spread([r[key] for r in runs], 1) for key in runs[0]}


def measure(args) -> dict:
    utts = workload(args.dev, max(60.0, args.seconds))
    searches = args.search
    engine_config = EngineConfig(max_batch=args.max_batch, max_wait_ms=args.max_wait_ms)
    report: dict = {"setup": {
        "benchmark": "latency", "dev": args.dev, "seconds": args.seconds, "runs": args.runs,
        "piece_ms": args.piece_ms, "max_batch": args.max_batch,
        "max_wait_ms": args.max_wait_ms, "streams": args.streams, "threads": args.threads,
        "beam": args.beam, "endpointing": True,
        "unit": "ms from a chunk's last sample being due to its result reaching the reader"},
        "configurations": []}
    load_before = load_average()
    rows = []
    for threads in args.threads:
        rec = Recognizer(RecognizerConfig(model=model_config(args, threads)))
        report["setup"]["model"] = model_report(rec.model_files, args.int8)
        # the engine's batch size (by the model's weights unless --max-batch), both peers
        max_batch = sizes_for(engine_config, rec.meta.weights)[0]
        for method in searches:
            args.search_config = SearchConfig(method=method, beam=args.beam)
            srec = sherpa_recognizer(rec.model_files, rec.meta.model_type,
                                     SHERPA_METHODS[method], args.beam, threads, endpoint=True)
            for k in args.streams:
                audios = [stream_audio(utts, 7 * i, args.seconds) for i in range(k)]
                runs = alternate(
                    args.runs,
                    lambda: percentiles(asyncio.run(run_streamdec(rec, audios, args,
                                                                  engine_config))),
                    lambda: percentiles(asyncio.run(run_sherpa(
                        srec, rec.meta, rec.config.features, audios, args, max_batch))))
                conf = {"search": method, "threads": threads, "streams": k,
                        "max_batch": max_batch,
                        "streamdec": summarise(runs[0]), "sherpa_onnx": summarise(runs[1])}
                conf["ratio"] = ratio(conf["streamdec"]["p95"]["median"],
                                      conf["sherpa_onnx"]["p95"]["median"], False)
                report["configurations"].append(conf)
                rows.append([method, threads, k,
                             *(conf["streamdec"][p]["median"] for p in ("p50", "p95", "p99")),
                             *(conf["sherpa_onnx"][p]["median"] for p in ("p50", "p95", "p99")),
                             conf["ratio"]])
                print(" ".join(map(str, rows[-1])), file=sys.stderr)
    report["machine"] = machine(load_before)
    print_table(["search", "threads", "K", "streamdec p50", "p95", "p99", "sherpa-onnx p50",
                 "p95", "p99", "ratio (p95)"], rows)
    return report


def parser() -> argparse.ArgumentParser:
    ap = bench_parser(__doc__, streams="100", seconds=20, runs=3)
    ap.set_defaults(search=["greedy"])
    ap.add_argument("--piece-ms", type=float, default=100.0,
                    help="audio per feed of a stream, ms (default 100)")
    ap.add_argument("--max-batch", type=int, default=None,
                    help="streams per batch, both peers (default: the engine's for the model, "
                         "streamdec.engine.sizes_for)")
    ap.add_argument("--max-wait-ms", type=float, default=EngineConfig.max_wait_ms,
                    help=f"wait for a batch to fill, ms (default {EngineConfig.max_wait_ms:g})")
    return ap


if __name__ == "__main__":
    main(parser(), measure)
