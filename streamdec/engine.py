"""The engine: many live streams decoded in batches by worker threads under asyncio.

The only module that knows about threads. Adapters (the WebSocket server, the microphone,
the Ray Serve replicas) open streams, feed audio and read results through it; they never
call the Recognizer themselves:

    async with Engine(recognizer, EngineConfig()) as engine:
        await engine.warm_up()                     # optional: memory at its mark at start
        live = engine.open()                       # or open(search=..., hotwords=[...])
        await live.feed(16000, samples)            # waits while too much audio is undecoded
        live.finish()                              # end of input
        async for result in live.results():        # partials and finals, the last is_eof
            ...
        live.close()                               # always: frees the stream
        # or all of that in one call, the audio fed while the results are read:
        results = await run_stream(engine.open(), audio, on_result)

How a decode runs: on the event loop a scheduler waits (never polls) until streams hold a
whole chunk, lets the oldest of them wait up to ``max_wait_ms`` from when it became ready
for a batch of ``max_batch`` to fill (not at all when no other open stream could join:
a larger batch costs less CPU per stream, the wait is latency), gathers
it (``Recognizer.gather``, loop thread), computes it in a worker thread
(``Recognizer.compute``: pure, touches no stream; ONNX Runtime releases the GIL, so the
loop goes on computing features meanwhile: at the end of each turn of the loop, those of
every chunk made whole in it, in one fbank call) and commits it back on the loop thread
(``Recognizer.commit``). So each stream is touched by one thread only: the loop's.
A model whose encoder runs batches under ``Recognizer.batch_from`` streams one call per
stream (an export with a fixed batch of 1) gains nothing from a batch below that: while the
ready streams and those expected to become ready within the wait (the free open streams'
chunks, at one per stream per chunk of audio) cannot reach it, the oldest ready stream goes
alone at once, in a worker thread of its own (``small_batch``), so the streams' chunks run
side by side on the cores; once the ready streams reach it (the workers busy: load), they
batch as any model's do, in batches of at most the streams its encoder computes in one call
(``Recognizer.batch_up_to``, unless ``max_batch`` is set): a larger batch would run its
calls one after another in one thread while another thread could run them beside it.
A stream whose decode fails ends alone with its error; ``workers`` batches may be in
flight at once (each stream in at most one).

A second pass (``Recognizer.second_pass``, ``streamdec.core.second_pass``): each final
with words is held, with every result after it, while an offline model decodes its
utterance in threads of its own; it goes out with the second pass's words, or as the first
pass made it, marked ``second_pass="skipped"``, once ``deadline_seconds`` have passed since
it was committed or when ``queue`` second passes are running already.
A stream with local agreement (``streamdec.core.local_agreement``) has its partials
refreshed in the same threads, one refresh at a time per stream (one due meanwhile starts
as it ends) and only on a free thread (else skipped and counted); a refresh that ends
hands the open segment's partial out again.

Back-pressure: ``feed`` accepts the samples, then waits while the stream holds more than
``max_pending_seconds`` of audio not yet decoded; an adapter that awaits it stops reading
its socket, which slows the client down instead of buffering without bound.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import inspect
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import AsyncIterable, AsyncIterator, Callable, Iterable, Protocol, Sequence

import numpy as np

from .audio.features import compute_ready_together
from .core.endpoint import EndpointConfig
from .core.recognizer import DecodeBatch, Recognizer, StreamUpdate
from .core.results import Result
from .core.second_pass import SKIPPED
from .core.stream import Stream
from .errors import ConfigError, DecodeError, StreamdecError
from .search import SearchConfig
from .validation import require_finite

__all__ = ["EngineConfig", "Engine", "LiveStream", "EngineObserver", "run_stream", "sizes_for",
           "small_batch"]

log = logging.getLogger("streamdec")


#: A model of this many weights or more is heavy (``sizes_for``).
HEAVY_MODEL_WEIGHTS = 10_000_000
#: (max_batch, workers) by default for a light model and for a heavy one. Light: the
#: built-in model (3 M weights), whose batches cost a fraction of a millisecond a stream,
#: so the daemon decodes hundreds of streams: batches of up to 32, 3 decode threads, so
#: that one batch's encoder runs on a second core while another batch decodes (measured
#: best on 2 cores: bench/results/2026-12-02-decode-threads). Heavy: the published 20 M and
#: 66 M zipformers,
#: whose batches take 25-53 ms for 1-4 streams (66 M int8), so a 2-core machine holds tens
#: of streams in batches of a few: a third thread's batch only shares a core with another
#: one's, and a warm-up at 16 needs half the memory of one at 32 (chunk p95 5-19 % lower,
#: 415 MB before the first client instead of 828: bench/results/2026-12-06-sized-models-capacity).
LIGHT_SIZES, HEAVY_SIZES = (32, 3), (16, 2)


@dataclass(frozen=True)
class EngineConfig:
    # streams decoded together in one batch, and batches decoded at once (each in its own
    # thread); None: chosen by the model's weights (``sizes_for``)
    max_batch: int | None = None
    max_wait_ms: float = 15.0  # how long a ready stream may wait for a batch to fill
    workers: int | None = None
    max_pending_seconds: float = 2.0  # undecoded audio per stream before feed() waits

    def __post_init__(self) -> None:
        require_finite(self, "engine")
        if any(v is not None and v < 1 for v in (self.max_batch, self.workers)):
            raise ConfigError(f"engine: max_batch and workers must be >= 1: {self}")
        if not (0 <= self.max_wait_ms < 10_000):
            raise ConfigError(f"engine: max_wait_ms must be in [0, 10000): {self.max_wait_ms}")
        if not (0 < self.max_pending_seconds < 3600):
            raise ConfigError("engine: max_pending_seconds must be in (0, 3600): "
                              f"{self.max_pending_seconds}")


def small_batch(ready: int, could_join: int, batch_from: int | None, free: int,
                wait_left: float, chunk_seconds: float) -> bool:
    """Whether ``ready`` streams (of the ``could_join`` that one batch could hold) are a
    batch too small to be worth waiting for or computing together, on a model whose encoder
    computes ``batch_from`` streams or more in one call (None: never): below it, even with
    the chunks expected from ``free`` open streams (neither ready nor in flight) within the
    ``wait_left`` seconds of the wait, one chunk each per ``chunk_seconds`` of audio. The
    engine then decodes the oldest alone, now."""
    if batch_from == 1 or ready >= (batch_from or ready + 1):
        return False
    if batch_from is None or could_join < batch_from:
        return True
    return ready + free * max(0.0, wait_left) / chunk_seconds < batch_from


def sizes_for(config: EngineConfig, weights: int) -> tuple[int, int]:
    """(max_batch, workers) of an engine with ``config`` on a model of ``weights`` weights
    (``ModelMeta.weights``; 0: not known, taken as light): the config's where it sets
    them, else ``HEAVY_SIZES`` from ``HEAVY_MODEL_WEIGHTS`` weights up, ``LIGHT_SIZES``
    below."""
    batch, workers = HEAVY_SIZES if weights >= HEAVY_MODEL_WEIGHTS else LIGHT_SIZES
    return (config.max_batch or batch, config.workers or workers)


class EngineObserver(Protocol):
    """Hooks for metrics (all called on the loop thread)."""

    def on_batch(self, size: int, seconds: float) -> None:
        """A batch of ``size`` streams took ``seconds`` to compute."""

    def on_result_latency(self, seconds: float) -> None:
        """From a chunk's last sample being accepted to its results being committed."""

    def on_stream_error(self, error: StreamdecError) -> None:
        """A stream's decode failed."""

    # optional (an observer without them is not told):
    # def on_partial_refresh(self, outcome: str) -> None:
    #     """A partial refresh due (local agreement) ended: ``done``, ``skipped`` (not
    #     run: the stream's last still running, the threads busy, the audio not kept) or
    #     ``dropped`` (its segment closed before it ended, or it failed)."""
    # def on_second_pass(self, status: str, seconds: float) -> None:
    #     """A final's second pass ended ``status`` (done, rejected, skipped) ``seconds``
    #     after the first pass's final was committed."""


class LiveStream:
    """One live stream of an engine: feed audio, read results. Use from the loop thread."""

    def __init__(self, engine: "Engine", stream: Stream) -> None:
        self._engine = engine
        self.stream = stream
        self.closed = False
        self._results: collections.deque[Result] = collections.deque()
        # results made but held: a final waiting for its second pass and what follows it
        self._held: collections.deque[Result | _SecondPassJob] = collections.deque()
        self._changed = asyncio.Event()  # results, an error or the end arrived
        self._decoded = asyncio.Event()  # a decode of this stream was committed
        # feature frame counts at which chunks became whole, with the time (latency)
        self._chunk_marks: collections.deque[tuple[int, float]] = collections.deque()
        self._next_chunk_end = engine.recognizer.meta.chunk_frames
        # local agreement: the open segment's last first-pass partial (None: none open) and
        # whether a refresh of this stream is running
        self._partial: Result | None = None
        self._refreshing = False

    # -- audio in --------------------------------------------------------------------------
    async def feed(self, sample_rate: int, samples: np.ndarray) -> float:
        """Accept audio (raises AudioInputError / StreamStateError like
        ``Stream.accept_waveform``; the stream stays usable), then wait while more than the
        engine's ``max_pending_seconds`` of it is undecoded. Returns the seconds it waited
        (0.0 when it did not: an adapter that awaits it had its reads paused that long)."""
        return await self.wait_pending() if self.accept(sample_rate, samples) else 0.0

    def accept(self, sample_rate: int, samples: np.ndarray) -> bool:
        """``feed`` without the wait, for a caller that cannot await (it raises the same);
        returns ``over_limit``: True when the caller should wait (``wait_pending``) before
        it takes more audio."""
        self.stream.accept_waveform(sample_rate, samples)
        self._engine._arrived(self)
        return self.over_limit

    @property
    def over_limit(self) -> bool:
        """More than the engine's ``max_pending_seconds`` of audio is undecoded (and the
        stream is still decoding)."""
        limit = (self._engine.max_pending_frames if self.stream.state.vad is None
                 else self._engine.max_pending_frames_vad)
        return not self.stream.done and not self.closed and self.pending_frames > limit

    async def wait_pending(self) -> float:
        """Wait while ``over_limit``; the seconds it waited (0.0 when it did not)."""
        if not self.over_limit:
            return 0.0
        started = time.monotonic()
        while self.over_limit:
            self._decoded.clear()
            await self._decoded.wait()
        return time.monotonic() - started

    async def wait_decoded(self) -> None:
        """Wait until every whole chunk accepted so far is decoded and its results are out
        (a final held for its second pass too: what a request/reply protocol needs before
        it answers a message); returns at once when done or closed."""
        recognizer = self._engine.recognizer
        while (not self.done and not self.closed
               and (self.stream.in_flight or recognizer.is_ready(self.stream) or self._held)):
            self._decoded.clear()
            await self._decoded.wait()

    async def force_final(self) -> None:
        """End the current utterance now with every sample accepted so far: the chunks
        ready (and the one in flight) are decoded, then the rest, padded with silence
        (``Recognizer.request_final``); the segment's final (empty when it has no text) is
        queued and the next audio opens a new segment. Nothing when the input has ended
        or the stream is done."""
        await self.wait_decoded()
        if self.done or self.closed or self.stream.input_done:
            return
        if self._engine.recognizer.request_final(self.stream):  # nothing was left to decode
            self._hold(self.stream.pop_events())
            return
        self._engine._arrived(self)
        await self.wait_decoded()

    def finish(self) -> None:
        """End of input: the tail is padded and decoded; the last result has ``is_eof``."""
        if not self.stream.input_done:
            self.stream.input_finished()
            self._engine._arrived(self)

    @property
    def pending_frames(self) -> int:
        """Feature frames accepted and not decoded yet."""
        return self.stream.features.num_frames_ready - self.stream.state.processed_feature_frames

    # -- results out -----------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """The last result has been made and handed out (or the stream failed)."""
        return self.stream.done and not self._held

    @property
    def error(self) -> StreamdecError | None:
        return self.stream.error

    def pop_results(self) -> list[Result]:
        """Results made since the last call (without waiting)."""
        out = list(self._results)
        self._results.clear()
        return out

    async def next_results(self) -> list[Result]:
        """Wait for results; [] once the stream is done, failed or closed and nothing is left.
        Raises the stream's DecodeError when its decode failed."""
        while not self._results and not self.done and not self.closed:
            self._changed.clear()
            await self._changed.wait()
        out = self.pop_results()
        if not out and self.error is not None:
            raise self.error
        return out

    async def results(self) -> AsyncIterator[Result]:
        """Every result until the last one (``is_eof``), and the ``KeywordEvent``s of a
        stream opened with keywords among them; raises DecodeError on failure."""
        while True:
            batch = await self.next_results()
            if not batch:
                return
            for r in batch:
                yield r

    def close(self) -> None:
        """Forget the stream (a client left): it is never decoded again; a batch in flight
        that holds it finishes and its results are dropped."""
        if not self.closed:
            self.closed = True
            self._engine._forget(self)
            self._changed.set()
            self._decoded.set()

    # -- engine side -------------------------------------------------------------------------
    def _mark_chunks(self, now: float) -> None:
        ready = self.stream.features.num_frames_ready
        while ready >= self._next_chunk_end:
            self._chunk_marks.append((self._next_chunk_end, now))
            self._next_chunk_end += self._engine.recognizer.meta.chunk_shift

    def _delivered(self, results: Sequence[Result], now: float) -> list[float]:
        """Queue results after a commit; returns the latency of the chunk just decoded."""
        latencies = []
        meta = self._engine.recognizer.meta
        need = self.stream.state.processed_feature_frames - meta.chunk_shift + meta.chunk_frames
        while self._chunk_marks and self._chunk_marks[0][0] <= need:
            end, t = self._chunk_marks.popleft()
            if end == need:
                latencies.append(now - t)
        self._hold(results)
        self._decoded.set()
        return latencies

    def _hold(self, results: Sequence[Result]) -> None:
        """Queue results: a final with a second pass (``Engine._second_pass``) holds itself
        and every later result until its second pass ends or its deadline passes."""
        engine = self._engine
        for r in results:
            if not isinstance(r, Result):  # a keyword event: never held for a second pass
                self._held.append(r)
                continue
            if engine._second is not None and self.stream.kept is not None \
                    and engine._second.applies(r):
                self._held.append(engine._second_pass(self, r))
            elif not r.is_final and self.stream.agreement is not None:
                self._held.append(engine._refreshed(self, r))
            else:
                self._held.append(r)
            if r.is_final:
                self._partial = None
        self._release()

    def _release(self) -> None:
        """Hand out the held results up to the first second pass still running."""
        while self._held:
            head = self._held[0]
            if isinstance(head, _SecondPassJob):
                if head.result is None:
                    break
                head = head.result
            self._held.popleft()
            self._results.append(head)
        self._changed.set()
        self._decoded.set()


class Engine:
    """Batches the decodes of many live streams (see the module notes)."""

    def __init__(self, recognizer: Recognizer, config: EngineConfig | None = None,
                 observer: EngineObserver | None = None) -> None:
        self.recognizer = recognizer
        self.config = config or EngineConfig()
        #: streams in one batch and batches at once (the config's, or by the model)
        self.max_batch, self.workers = sizes_for(self.config, recognizer.meta.weights)
        if self.config.max_batch is None and recognizer.batch_up_to is not None:
            # a larger batch would run its calls one after another in one thread, while
            # another thread could run them beside it
            self.max_batch = min(self.max_batch, recognizer.batch_up_to)
        self._batch_from = recognizer.batch_from
        self._chunk_seconds = recognizer.meta.chunk_shift \
            * recognizer.config.features.frame_shift_ms / 1000
        self.observer = observer
        frame_shift = recognizer.config.features.frame_shift_ms / 1000
        self.max_pending_frames = max(int(self.config.max_pending_seconds / frame_shift),
                                      2 * recognizer.meta.chunk_frames)
        # a stream with a VAD may also hold what its VAD's decision waits for (a stream
        # that waits must never be blocked from receiving the audio it waits for)
        vad_wait = recognizer.config.vad.max_wait_seconds + 2 * recognizer.meta.chunk_shift \
            * frame_shift
        self.max_pending_frames_vad = max(self.max_pending_frames, 2 * recognizer.meta.chunk_frames
                                          + int(vad_wait / frame_shift))
        self._streams: dict[Stream, LiveStream] = {}
        # ready to decode, oldest first, with the time each became ready
        self._ready: dict[LiveStream, float] = {}
        # a whole chunk arrived in this turn of the loop: its frames not computed yet
        self._arriving: dict[LiveStream, float] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._slots: asyncio.Semaphore | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._scheduler: asyncio.Task | None = None
        self._in_flight: set[asyncio.Future] = set()
        self._busy = 0  # streams in the batches in flight
        #: the recognizer's second pass (None: none): run in threads of its own
        self._second = recognizer.second_pass
        self._second_pool: ThreadPoolExecutor | None = None
        self._second_running = 0  # second passes submitted and not finished
        self._refreshes_running = 0  # partial refreshes (local agreement) not finished
        self._progress: asyncio.Event | None = None  # set after every commit

    # -- lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> "Engine":
        self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    @property
    def running(self) -> bool:
        """``start`` has been called and ``stop`` has not."""
        return self._scheduler is not None

    def start(self) -> None:
        """Start the scheduler on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._progress = asyncio.Event()
        self._slots = asyncio.Semaphore(self.workers)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="streamdec-decode")
        if self._second is not None:
            self._second_pool = ThreadPoolExecutor(self._second.config.workers,
                                                   thread_name_prefix="streamdec-second")
        self._scheduler = asyncio.get_running_loop().create_task(self._schedule())

    async def warm_up(self) -> None:
        """Decode ``workers`` batches of ``max_batch`` silent streams at once, and drop them:
        the decode's memory reaches its high-water mark (every decode thread at the largest
        batch) now, not at the first burst of load, so the process's memory does not grow
        in steps under steady load. Call after ``start``, before taking streams."""
        loop = asyncio.get_running_loop()
        batches = [self.recognizer.silent_batch(self.max_batch) for _ in range(self.workers)]
        await asyncio.gather(*(loop.run_in_executor(self._pool, self.recognizer.compute, b)
                               for b in batches))
        if self._second is not None:  # the offline model's first decode is its slowest
            silence = np.zeros(self._second.sample_rate, np.float32)
            await loop.run_in_executor(self._second_pool, self._second.model.transcribe,
                                       silence)

    async def release_memory(self) -> None:
        """``Recognizer.release_memory`` on a decode thread: after the warm-up, and when the
        engine has been idle a while (the server's caller decides when)."""
        await asyncio.get_running_loop().run_in_executor(self._pool,
                                                         self.recognizer.release_memory)

    async def stop(self) -> None:
        """Stop scheduling; wait for the batches in flight; close every stream."""
        if self._scheduler is not None:
            self._scheduler.cancel()
            try:
                await self._scheduler
            except asyncio.CancelledError:
                pass
            self._scheduler = None
        while self._in_flight:  # each commit sets _progress (a cancelled stop() cancels
            self._progress.clear()  # no batch: they commit all the same)
            await self._progress.wait()
        for live in list(self._streams.values()):
            live.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._second_pool is not None:
            self._second_pool.shutdown(wait=True, cancel_futures=True)
            self._second_pool = None

    # -- streams ---------------------------------------------------------------------------
    def open(self, search: SearchConfig | None = None, hotwords: Sequence[str] = (),
             phrases: Sequence[str] | None = None, vad: bool | None = None,
             endpoint: EndpointConfig | None = None,
             second_pass: bool | None = None,
             local_agreement: bool | None = None,
             keywords: Sequence[str] | None = None) -> LiveStream:
        """A new live stream (ConfigError / TokenizeError for unusable options); see
        ``Recognizer.create_stream`` for the arguments. A stream opened with ``keywords``
        also hands out ``KeywordEvent``s among its results (not held for a second pass)."""
        live = LiveStream(self, self.recognizer.create_stream(
            search=search, hotwords=hotwords, phrases=phrases, vad=vad, endpoint=endpoint,
            second_pass=second_pass, local_agreement=local_agreement, keywords=keywords))
        self._streams[live.stream] = live
        return live

    async def prepare(self, search: SearchConfig | None = None, hotwords: Sequence[str] = (),
                      phrases: Sequence[str] | None = None,
                      keywords: Sequence[str] | None = None) -> None:
        """Build what ``open`` with these arguments needs (grammars, hotword graphs, word
        graphs, LMs, keyword graphs: see ``streamdec.core.resources``) in a thread of the
        loop's default executor, so a heavy build does not stall the loop; raises what
        ``open`` would."""
        loop = asyncio.get_running_loop()
        recognizer = self.recognizer
        await loop.run_in_executor(None, recognizer.resources.prepare,
                                   search or recognizer.config.search, hotwords, phrases)
        if keywords is not None:
            await loop.run_in_executor(None, recognizer.resources.keywords, keywords,
                                       recognizer.keyword_search.config)

    # -- the second pass ---------------------------------------------------------------------
    def _second_pass(self, live: LiveStream, final: Result) -> "_SecondPassJob":
        """Start ``final``'s second pass (loop thread): its audio clipped now, decoded in
        the second pass's threads; the job ends with the second pass's final, or with the
        first pass's final marked skipped when ``deadline_seconds`` pass first, when
        ``queue`` second passes are running already, or when its audio is no longer kept."""
        second = self._second
        job = _SecondPassJob(final, time.monotonic())
        clip = second.clip(live.stream.kept, final)
        if clip is None or self._second_running >= second.config.queue \
                or self._second_pool is None:
            self._second_ended(live, job, second.mark(final, SKIPPED))
            return job
        deadline = job.started + second.config.deadline_seconds
        nbest = live.stream.search.config.nbest

        def work() -> Result | None:  # a second-pass thread
            if time.monotonic() >= deadline:  # waited past its deadline: not worth running
                return None
            return second.run(final, clip, nbest)

        loop = self._loop
        self._second_running += 1
        job.timer = loop.call_later(second.config.deadline_seconds, self._second_ended, live,
                                    job, second.mark(final, SKIPPED))

        def finished(work: concurrent.futures.Future) -> None:  # a second-pass thread
            try:
                loop.call_soon_threadsafe(self._second_finished, live, job, work)
            except RuntimeError:  # the loop is closed
                pass

        self._second_pool.submit(work).add_done_callback(finished)
        return job

    def _second_finished(self, live: LiveStream, job: "_SecondPassJob",
                         work: concurrent.futures.Future) -> None:
        self._second_running -= 1
        if work.cancelled() or work.exception() is not None:
            if not work.cancelled():
                log.error("a second pass failed", exc_info=work.exception())
            result = None
        else:
            result = work.result()
        self._second_ended(live, job, result or self._second.mark(job.final, SKIPPED))

    def _second_ended(self, live: LiveStream, job: "_SecondPassJob", result: Result) -> None:
        """``job`` ends with ``result`` (the first to come: its second pass or its
        deadline); its stream's held results go out."""
        if job.result is not None:
            return
        if job.timer is not None:
            job.timer.cancel()
        job.result = result
        hook = getattr(self.observer, "on_second_pass", None)
        if hook is not None:
            hook(result.second_pass, time.monotonic() - job.started)
        if not live.closed:
            live._release()
        if self._progress is not None:
            self._progress.set()

    # -- partials refreshed by local agreement -------------------------------------------------
    def _refreshed(self, live: LiveStream, partial: Result) -> Result:
        """``partial`` as handed out with its stream's agreement (loop thread), a refresh
        over its audio started when one is due (``_refresh_if_due``)."""
        agreement = self.recognizer.local_agreement
        live.stream.agreement = agreement.state_for(live.stream.agreement, partial)
        live._partial = partial
        self._refresh_if_due(live, partial)
        return agreement.shown(live.stream.agreement, partial)

    def _refresh_if_due(self, live: LiveStream, partial: Result) -> None:
        """Start a refresh over ``partial``'s audio when one is due: at once on a free
        thread, after the stream's own refresh when one is running (it calls this again as it
        ends), else skipped (the threads busy): counted, the next due an interval later."""
        agreement = self.recognizer.local_agreement
        state = live.stream.agreement
        if live._refreshing or not agreement.due(state, partial):
            return
        live.stream.agreement = agreement.started(state, partial)
        busy = self._second_running + self._refreshes_running
        if self._second_pool is None or busy >= self._second.config.workers:
            self._refresh_counted("skipped")
        else:
            self._refresh(live, partial)

    def _refresh(self, live: LiveStream, partial: Result) -> None:
        agreement, loop = self.recognizer.local_agreement, self._loop
        clip = agreement.clip(live.stream.kept, partial)  # here: the kept audio moves
        if clip is None:  # the utterance is longer than the audio kept
            self._refresh_counted("skipped")
            return
        live._refreshing = True
        self._refreshes_running += 1

        def finished(work: concurrent.futures.Future) -> None:  # a second-pass thread
            try:
                loop.call_soon_threadsafe(self._refresh_finished, live, partial, work)
            except RuntimeError:  # the loop is closed
                pass

        self._second_pool.submit(agreement.decode, partial, clip).add_done_callback(finished)

    def _refresh_finished(self, live: LiveStream, partial: Result,
                          work: concurrent.futures.Future) -> None:
        """A refresh ended (loop thread): its words merged into the stream's agreement and
        the open segment's last partial handed out again with it (``done``), unless that
        segment or the stream has closed meanwhile, or the decode failed (``dropped``)."""
        self._refreshes_running -= 1
        live._refreshing = False
        if work.cancelled() or work.exception() is not None:
            if not work.cancelled():
                log.error("a partial refresh failed", exc_info=work.exception())
            self._refresh_counted("dropped")
            return
        words = work.result()
        last, state = live._partial, live.stream.agreement
        if live.closed or last is None or state is None \
                or last.segment != partial.segment or state.segment != partial.segment:
            self._refresh_counted("dropped")
            return
        agreement = self.recognizer.local_agreement
        live.stream.agreement = agreement.agreed(state, words)
        self._refresh_counted("done")
        shown = agreement.shown(live.stream.agreement, last)
        if shown != agreement.shown(state, last):  # (the partial handed out last)
            live._held.append(shown)
            live._release()
        self._refresh_if_due(live, last)  # one was due while this ran

    def _refresh_counted(self, outcome: str) -> None:
        hook = getattr(self.observer, "on_partial_refresh", None)
        if hook is not None:
            hook(outcome)

    @property
    def active_streams(self) -> int:
        return len(self._streams)

    @property
    def ready_streams(self) -> int:
        """Streams holding a whole chunk, waiting for a decode slot (the queue)."""
        return len(self._ready)

    @property
    def batches_in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def decode_delay(self) -> float:
        """Seconds the longest-waiting ready stream has waited for its decode (0.0: none
        waits). Beyond the batching wait and a few batches' compute, the engine is behind
        its audio: it has more live streams than it decodes in real time."""
        if not self._ready:
            return 0.0
        return max(0.0, time.monotonic() - min(self._ready.values()))

    async def drain(self) -> None:
        """End the input of every stream and wait until each has its last result."""
        for live in list(self._streams.values()):
            live.finish()
        while any(not live.done for live in self._streams.values()):
            self._progress.clear()
            await self._progress.wait()

    def _arrived(self, live: LiveStream) -> None:
        """Audio (or its end) arrived for ``live``. When it makes a chunk whole, the
        chunk's feature frames are computed at the end of this turn of the loop, with those
        of every other stream whose chunk became whole in it (``_featurize``: here, while a
        batch may be decoding, not later in ``gather`` on the way of every stream of a
        batch)."""
        now = time.monotonic()
        live._mark_chunks(now)
        if (live not in self._ready and live not in self._arriving
                and self.recognizer.is_ready(live.stream)):
            if not self._arriving:
                self._loop.call_soon(self._featurize)
            self._arriving[live] = now

    def _featurize(self) -> None:
        """The streams whose chunk became whole since the last call: their feature frames
        computed together (``compute_ready_together``), then ready."""
        arriving, self._arriving = self._arriving, {}
        compute_ready_together(live.stream.features for live in arriving)
        self._ready.update(arriving)
        self._changed.set()

    def _forget(self, live: LiveStream) -> None:
        self._streams.pop(live.stream, None)
        self._ready.pop(live, None)
        self._arriving.pop(live, None)

    # -- scheduling ------------------------------------------------------------------------
    async def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._slots.acquire()
            try:
                batch = await self._next_batch()
            except BaseException:
                self._slots.release()
                raise
            self._submit(loop, batch)

    def _submit(self, loop: asyncio.AbstractEventLoop, batch: DecodeBatch) -> None:
        """Compute ``batch`` in a worker thread; its commit runs on the loop when the thread
        is done, whatever happens to the future that waiters see: ``done`` (in
        ``_in_flight``) may be cancelled by a cancelled waiter, the commit still happens, so
        no stream stays in flight."""
        started = time.perf_counter()
        done = loop.create_future()
        self._in_flight.add(done)
        self._busy += len(batch)

        def computed(work: concurrent.futures.Future) -> None:  # worker thread (or here)
            try:
                loop.call_soon_threadsafe(self._finished, batch, work, started, done)
            except RuntimeError:  # the loop is closed: nobody is left to hand results to
                pass

        try:
            work = self._pool.submit(self.recognizer.compute, batch)
        except RuntimeError as e:  # the pool is shut down
            work = concurrent.futures.Future()
            work.set_exception(e)
        work.add_done_callback(computed)

    async def _next_batch(self) -> DecodeBatch:
        """Wait for ready streams; give them up to max_wait_ms, counted from when the
        oldest of them became ready, to fill a batch (a stream that became ready while a
        batch was decoding has waited already), and no time when every open stream not
        in flight is ready."""
        while True:
            ready = [live for live in self._ready if self.recognizer.is_ready(live.stream)]
            now = time.monotonic()
            deadline = (self._ready[ready[0]] + self.config.max_wait_ms / 1000
                        if ready else None)
            # no wait when no other stream could join (one live stream: a microphone)
            could_join = min(self.max_batch, len(self._streams) - self._busy)
            alone = ready and small_batch(
                len(ready), could_join, self._batch_from,
                len(self._streams) - self._busy - len(ready), deadline - now,
                self._chunk_seconds)
            if ready and (alone or len(ready) >= could_join or now >= deadline):
                batch = self.recognizer.gather([live.stream for live in ready],
                                               limit=1 if alone else self.max_batch)
                for stream in batch.streams:
                    self._ready.pop(self._streams[stream], None)
                return batch
            self._changed.clear()
            # the deadline sets the event itself: no task and no timeout per wait, as
            # wait_for would make (this wakes for every chunk made whole)
            timer = (None if deadline is None else
                     self._loop.call_later(max(0.0, deadline - now), self._changed.set))
            try:
                await self._changed.wait()
            finally:
                if timer is not None:
                    timer.cancel()

    def _finished(self, batch: DecodeBatch, work: concurrent.futures.Future,
                  started: float, done: asyncio.Future) -> None:
        """A batch's compute ended (loop thread): commit it and hand out the results. A
        compute that was cancelled or broke gives each of its streams a DecodeError."""
        self._in_flight.discard(done)
        self._busy -= len(batch)
        self._slots.release()
        try:
            updates = self._updates(batch, work)
            if self.observer:
                self.observer.on_batch(len(batch), time.perf_counter() - started)
            self.recognizer.commit(batch, updates)
            now, again = time.monotonic(), []
            for stream, update in zip(batch.streams, updates):
                live = self._streams.get(stream)
                if live is None:  # closed while in flight
                    continue
                # the stream queued the events at commit: hand them out (it keeps no copy)
                latencies = live._delivered(stream.pop_events(), now)
                if self.observer:
                    for seconds in latencies:
                        self.observer.on_result_latency(seconds)
                    if update.error is not None:
                        self.observer.on_stream_error(update.error)
                if self.recognizer.is_ready(stream):  # its next chunk came meanwhile
                    again.append(live)
            compute_ready_together(live.stream.features for live in again)
            self._ready.update((live, now) for live in again)
        finally:
            self._changed.set()
            self._progress.set()
            if not done.done():
                done.set_result(None)

    @staticmethod
    def _updates(batch: DecodeBatch, work: concurrent.futures.Future) -> list[StreamUpdate]:
        """The compute's updates, or a DecodeError for every stream when it was cancelled or
        broke (``Recognizer.compute`` itself turns a stream's failure into its update)."""
        if work.cancelled():
            error = DecodeError("decoding was cancelled")
        elif work.exception() is not None:
            log.error("decoding a batch failed", exc_info=work.exception())
            error = DecodeError(f"decoding failed: {work.exception()!r}")
        else:
            updates = work.result()
            if len(updates) == len(batch):
                return updates
            error = DecodeError(f"decoding gave {len(updates)} updates for {len(batch)} streams")
        return [StreamUpdate(None, [], error) for _ in batch.streams]


@dataclass(eq=False)
class _SecondPassJob:
    """A final waiting for its second pass (loop thread only)."""

    final: Result  # the first pass's
    started: float  # time.monotonic() when the first pass's final was committed
    result: Result | None = None  # set once: the final to hand out
    timer: asyncio.TimerHandle | None = None  # its deadline


Audio = AsyncIterable[tuple[int, np.ndarray]] | Iterable[tuple[int, np.ndarray]]


async def run_stream(live: LiveStream, audio: Audio,
                     on_result: Callable[[Result], object] | None = None) -> list[Result]:
    """The async loop, once: feed ``audio`` ((sample rate, samples) pieces, sync or async)
    in a task of its own (it waits on back-pressure) while the results are read as they
    come (``on_result`` gets each; what it returns is awaited when it can be, so it may be a
    coroutine function); the input is finished when the audio ends (or its
    source fails, or is cancelled); the stream is closed in any case. Returns every result.
    Raises the stream's DecodeError, or what the audio source raised."""
    async def feed() -> None:
        try:
            if isinstance(audio, AsyncIterable):
                async for rate, samples in audio:
                    await live.feed(rate, samples)
            else:
                for rate, samples in audio:
                    await live.feed(rate, samples)
        finally:
            live.finish()

    feeder = asyncio.get_running_loop().create_task(feed())
    results: list[Result] = []
    try:
        async for result in live.results():
            if on_result is not None:
                outcome = on_result(result)
                if inspect.isawaitable(outcome):
                    await outcome
            results.append(result)
    finally:
        if not feeder.done():
            feeder.cancel()
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await feeder
        finally:
            live.close()
    return results
