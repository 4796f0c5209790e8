"""The one way to drive the core synchronously: accept audio -> decode while ready -> pop
events, for one stream or for a continuous batch of many.

    stream = recognizer.create_stream()
    events = decode_audio(recognizer, stream, 16000, pieces)   # every piece, then the end
    # or step by step, as audio arrives:
    events = accept(recognizer, stream, 16000, samples)        # events so far
    events += finish(recognizer, stream)                        # the last ones

    for job in decode_continuously(jobs, k, recognizer.decode):  # k streams at a time
        ...                                                      # each job as it finishes

Events leave a stream through ``pop_events`` (a second pass, where configured, runs
there). Live streams under asyncio go through the engine instead (``engine.run_stream``), which
drives the same three steps from the event loop with worker threads.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Protocol, Sequence, TypeVar

import numpy as np

from .recognizer import Recognizer
from .results import Event, Result
from .stream import Stream

__all__ = ["decode_ready", "accept", "finish", "decode_audio", "pop_events", "Job",
           "decode_continuously"]


def pop_events(recognizer: Recognizer, stream: Stream) -> list[Event]:
    """The stream's events since the last call (``Stream.pop_events``), each final that a
    second pass applies to decoded again here, in this thread (the recognizer's second
    pass, when the stream keeps audio for it: ``streamdec.core.second_pass``), and each
    partial of a stream with local agreement refreshed here when a refresh is due
    (``streamdec.core.local_agreement``: on the audio's clock, never skipped)."""
    events = stream.pop_events()
    second = recognizer.second_pass
    if second is None or stream.kept is None:
        return events
    out = []
    for e in events:
        if not isinstance(e, Result):  # a keyword event: neither pass applies to it
            out.append(e)
            continue
        if second.applies(e):
            e = second.run(e, second.clip(stream.kept, e), stream.search.config.nbest)
        elif not e.is_final and stream.agreement is not None:
            e = _refreshed(recognizer, stream, e)
        out.append(e)
    return out


def _refreshed(recognizer: Recognizer, stream: Stream, partial: Result) -> Result:
    agreement = recognizer.local_agreement
    state = agreement.state_for(stream.agreement, partial)
    if agreement.due(state, partial):
        state = agreement.started(state, partial)
        words = agreement.run(stream.kept, partial)
        if words is not None:
            state = agreement.agreed(state, words)
    stream.agreement = state
    return agreement.shown(state, partial)


def decode_ready(recognizer: Recognizer, streams: Sequence[Stream]) -> None:
    """Decode until none of ``streams`` holds a whole chunk: each round decodes one chunk of
    every ready stream in one batch."""
    while any(recognizer.is_ready(s) for s in streams):
        recognizer.decode(streams)


def accept(recognizer: Recognizer, stream: Stream, sample_rate: int,
           samples: np.ndarray) -> list[Event]:
    """One step of the loop: accept ``samples``, decode every whole chunk, and return the
    events made since the last call (AudioInputError / StreamStateError from
    ``Stream.accept_waveform``: the stream is unchanged)."""
    stream.accept_waveform(sample_rate, samples)
    decode_ready(recognizer, [stream])
    return pop_events(recognizer, stream)


def finish(recognizer: Recognizer, stream: Stream) -> list[Event]:
    """End of input: decode to the end and return the last events (the last is_eof)."""
    stream.input_finished()
    decode_ready(recognizer, [stream])
    return pop_events(recognizer, stream)


def decode_audio(recognizer: Recognizer, stream: Stream, sample_rate: int,
                 pieces: Iterable[np.ndarray]) -> list[Event]:
    """``accept`` each piece in turn, then ``finish``: every event of the stream."""
    events: list[Event] = []
    for samples in pieces:
        events += accept(recognizer, stream, sample_rate, samples)
    return events + finish(recognizer, stream)


class Job(Protocol):
    """One input of the continuous-batching loop."""

    @property
    def stream(self) -> Stream | None:
        """Its stream (None for an input that failed before it had one)."""

    @property
    def finished(self) -> bool:
        """Nothing more to decode: its stream is done, or the input failed."""

    def feed(self) -> None:
        """Before each round: hand the stream audio (a job that accepted all its audio up
        front does nothing)."""

    def collect(self) -> None:
        """After each round: take the stream's events."""


J = TypeVar("J", bound=Job)


def decode_continuously(jobs: Iterable[J], k: int,
                        decode: Callable[[list[Stream]], None]) -> Iterator[J]:
    """The continuous-batching loop: keep up to ``k`` jobs active, refilled from ``jobs`` (read
    lazily: a generator may make each job when its turn comes); each round feeds every
    active job, decodes one round of their unfinished streams (``decode``, e.g.
    ``Recognizer.decode``), lets each collect its events, and yields the jobs that finished,
    in the order they finish."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    pending = iter(jobs)
    active: list[J] = []
    exhausted = False
    while True:
        while not exhausted and len(active) < k:
            job = next(pending, None)
            if job is None:
                exhausted = True
            else:
                active.append(job)
        if not active:
            return
        for job in active:
            job.feed()
        decode([job.stream for job in active if not job.finished])
        still = []
        for job in active:
            job.collect()
            if job.finished:
                yield job
            else:
                still.append(job)
        active = still
