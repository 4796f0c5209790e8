"""K streams decoded together as fast as possible, by streamdec and by sherpa-onnx, with the
same driver shape so that only the decoders differ.

Each utterance is one stream, given all its audio at once (features are computed when it is
accepted) and ended; K streams are active at a time and a finished stream's slot is given to
the next utterance at once (continuous batching). Every round decodes one chunk of every
active stream in one batch (``Recognizer.decode`` / ``OnlineRecognizer.decode_streams``).
sherpa-onnx decodes only whole chunks and pads nothing itself: its streams get the same
tail padding streamdec adds (``chunk_frames`` frames of silence) and one frame more
(``sherpa_tail``). ``decode_streamdec_engine``
runs the same work through streamdec's asyncio Engine instead (features of new streams on
the loop thread while a worker thread decodes).

A transcript is (symbols, absolute encoder frame of each symbol): what must be identical.
Symbols are spelled as sherpa-onnx reports them (the word-start mark ``▁`` as a space).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from bench.common.devset import Utterance
from streamdec.core.drive import decode_continuously

__all__ = ["Decoded", "Transcript", "decode_streamdec", "decode_streamdec_engine",
           "decode_sherpa", "sherpa_tail", "digest", "count_identical"]

WORD_START = "\u2581"

#: (symbols, absolute encoder frame of each symbol)
Transcript = tuple[tuple[str, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Decoded:
    seconds: float  # wall time of the whole run
    cpu_seconds: float  # CPU time of the process (all threads) during the run
    feature_seconds: float  # of the wall time: accepting audio (fbank); 0 when overlapped
    transcripts: dict[str, Transcript]  # by utterance id


class _Job:
    """One utterance in streamdec's continuous-batching loop (``drive.decode_continuously``)."""

    def __init__(self, u: Utterance, stream, finished: Callable) -> None:
        self.u, self.stream, self._finished = u, stream, finished
        self.transcript: Transcript | None = None

    @property
    def finished(self) -> bool:
        return self.transcript is not None

    def feed(self) -> None:  # all audio was accepted when the stream was made
        pass

    def collect(self) -> None:
        self.transcript = self._finished(self.stream)


def _continuous(utts: Sequence[Utterance], k: int, start: Callable, step: Callable,
                finished: Callable) -> Decoded:
    """The driver: ``start(u)`` makes a stream with all of u's audio accepted, ``step(streams)``
    decodes one round, ``finished(s)`` returns its transcript when it is done, else None."""
    feature_seconds = 0.0

    def jobs():
        nonlocal feature_seconds
        for u in utts:
            f0 = time.perf_counter()
            stream = start(u)
            feature_seconds += time.perf_counter() - f0
            yield _Job(u, stream, finished)

    t0, c0 = time.perf_counter(), time.process_time()
    out = {job.u.utt: job.transcript for job in decode_continuously(jobs(), k, step)}
    return Decoded(time.perf_counter() - t0, time.process_time() - c0, feature_seconds, out)


def decode_streamdec(rec, utts: Sequence[Utterance], k: int, search) -> Decoded:
    """``utts`` through a streamdec Recognizer, ``k`` streams at a time, with ``search``
    (a SearchConfig). Every stream's events are popped after each round, as an
    application reading partial results does."""
    frame = rec.meta.encoder_frame_seconds
    events: dict[int, list] = {}

    def start(u: Utterance):
        s = rec.create_stream(search=search)
        s.accept_waveform(u.rate, u.samples)
        s.input_finished()
        events[id(s)] = []
        return s

    def finished(s) -> Transcript | None:
        got = s.pop_events()
        events[id(s)] += got
        return transcript(events.pop(id(s)), frame) if s.done else None

    return _continuous(utts, k, start, rec.decode, finished)


def transcript(results, frame_seconds: float) -> Transcript:
    """The transcript of a stream's results (its finals)."""
    finals = [e for e in results if e.is_final]
    return (tuple(t.replace(WORD_START, " ") for e in finals for t in e.tokens),
            tuple(round(t / frame_seconds) for e in finals for t in e.absolute_timestamps))


def decode_streamdec_engine(rec, utts: Sequence[Utterance], k: int, search,
                            workers: int = 1) -> Decoded:
    """Like ``decode_streamdec``, through the asyncio ``Engine``: the loop thread computes
    the features of new streams while ``workers`` threads decode batches of up to ``k``."""
    from streamdec.engine import Engine, EngineConfig, run_stream

    frame = rec.meta.encoder_frame_seconds
    out: dict[str, Transcript] = {}

    async def run() -> None:
        config = EngineConfig(max_batch=k, max_wait_ms=0, workers=workers,
                              max_pending_seconds=3599)
        async with Engine(rec, config) as engine:
            slots = asyncio.Semaphore(k)

            async def one(u: Utterance) -> None:
                async with slots:
                    results = await run_stream(engine.open(search=search),
                                               [(u.rate, u.samples)])
                    out[u.utt] = transcript(results, frame)

            await asyncio.gather(*(one(u) for u in utts))

    t0, c0 = time.perf_counter(), time.process_time()
    asyncio.run(run())
    return Decoded(time.perf_counter() - t0, time.process_time() - c0, 0.0, out)


def sherpa_tail(tail_frames: int, rate: int) -> np.ndarray:
    """The silence appended to a sherpa-onnx stream's audio: streamdec's tail padding
    (``tail_frames`` feature frames) and one frame more. sherpa-onnx decodes a chunk only
    when more frames than the chunk are ready (its ``IsReady``: processed + chunk < ready),
    so with streamdec's padding alone it skips a last chunk that ends on the last frame
    (1 utterance in ``chunk_shift`` frames), which streamdec decodes; the extra frame is
    silence after silence and changes no frame of the chunks both decode."""
    return np.zeros((tail_frames + 1) * rate // 100, np.float32)


def decode_sherpa(srec, utts: Sequence[Utterance], k: int, tail_frames: int,
                  frame_seconds: float, one_at_a_time: bool = False) -> Decoded:
    """``utts`` through a sherpa-onnx OnlineRecognizer, ``k`` streams at a time: the ready
    ones in one call, or one call each when ``one_at_a_time`` (a model whose export fixes
    its batch at 1: ``bench.common.peer.batch_fixed_at_one``)."""
    def start(u: Utterance):
        s = srec.create_stream()
        s.accept_waveform(u.rate, np.concatenate([u.samples, sherpa_tail(tail_frames, u.rate)]))
        s.input_finished()
        return s

    def step(streams) -> None:
        ready = [s for s in streams if srec.is_ready(s)]
        if ready and one_at_a_time:
            for s in ready:
                srec.decode_stream(s)
        elif ready:
            srec.decode_streams(ready)

    def finished(s) -> Transcript | None:
        if srec.is_ready(s):
            return None
        r = srec.get_result_all(s)
        return tuple(r.tokens), tuple(round(t / frame_seconds) for t in r.timestamps)

    return _continuous(utts, k, start, step, finished)


def digest(transcripts: dict[str, Transcript]) -> str:
    """sha256 of the transcripts (symbols and frames of every utterance): equal digests,
    identical transcripts."""
    blob = json.dumps(sorted((u, list(s), list(f)) for u, (s, f) in transcripts.items()))
    return hashlib.sha256(blob.encode()).hexdigest()


def count_identical(a: dict[str, Transcript], b: dict[str, Transcript]) -> int:
    """Utterances whose symbols and frames are the same in both."""
    return sum(1 for u in a if b.get(u) == a[u])
