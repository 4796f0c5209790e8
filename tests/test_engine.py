"""The asyncio engine: many live streams decoded in batches by a worker thread.

- each stream gets exactly what it gets decoded alone, whatever the piece sizes and
  however the streams interleave (chunking and batch invariance through the engine);
- every stream and its features are touched only by the loop thread (the worker only
  computes), while audio is fed and results are popped during decodes;
- a stream whose decode fails ends alone; closing a stream mid-way frees it;
- back-pressure: ``feed`` waits while too much audio is undecoded;
- ``drain`` gives every open stream its last result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import numpy as np
import pytest

from conftest import make_recognizer
from decode_utils import decode_in_pieces, finals, key
from model_factory import test_audio
from streamdec import DecodeError, Recognizer
from streamdec.engine import Engine, EngineConfig, run_stream, sizes_for
from streamdec.audio.features import StreamingFeatures
from streamdec.core.stream import Stream
from test_decode_steps import FailsOnLoudAudio, noise_after

AUDIOS = [test_audio(1.5 + 0.4 * n, seed=300 + n) for n in range(12)]
PIECES = [1, 160, 777, 1600, 4000, 16000, 100000, 333, 2000, 3200, 999, 5000]


class Observer:
    def __init__(self) -> None:
        self.batches: list[int] = []
        self.latencies: list[float] = []
        self.errors: list[Exception] = []

    def on_batch(self, size, seconds):
        self.batches.append(size)

    def on_result_latency(self, seconds):
        self.latencies.append(seconds)

    def on_stream_error(self, error):
        self.errors.append(error)


def compute_threads(rec: Recognizer, monkeypatch) -> set[str]:
    """The names of the threads ``rec.compute`` runs in from now on (filled as it runs)."""
    names: set[str] = set()
    compute = rec.compute

    def spy(batch):
        names.add(threading.current_thread().name)
        return compute(batch)

    monkeypatch.setattr(rec, "compute", spy)
    return names


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["zipformer2"])


async def stream_file(engine: Engine, audio: np.ndarray, piece: int, pause_every: int = 3):
    """Feed ``audio`` in pieces (yielding to the loop now and then, as a socket would) and
    collect results concurrently."""
    async def pieces():
        for n, i in enumerate(range(0, len(audio), piece)):
            yield 16000, audio[i:i + piece]
            if n % pause_every == 0:
                await asyncio.sleep(0)

    return await run_stream(engine.open(), pieces())


def test_concurrent_streams_each_get_their_own_transcript(rec):
    alone = [finals(decode_in_pieces(rec, a, len(a))) for a in AUDIOS]
    observer = Observer()

    async def main():
        async with Engine(rec, EngineConfig(max_batch=8, max_wait_ms=2), observer) as engine:
            out = await asyncio.gather(*[stream_file(engine, a, p)
                                         for a, p in zip(AUDIOS, PIECES)])
            assert engine.active_streams == 0
            return out

    got = asyncio.run(main())
    for want, results in zip(alone, got):
        assert key(finals(results)) == key(want)
        assert [r.is_eof for r in results].count(True) == 1 and results[-1].is_eof
    assert max(observer.batches) > 1, "streams were never batched"
    assert max(observer.batches) <= 8
    assert len(observer.latencies) == sum(observer.batches) - 0  # one per decoded chunk
    assert all(0 <= t < 30 for t in observer.latencies)


def test_warm_up_decodes_the_largest_batches_in_the_decode_threads_and_leaves_nothing(
        rec, monkeypatch):
    threads = compute_threads(rec, monkeypatch)
    compute, sizes = rec.compute, []
    monkeypatch.setattr(rec, "compute", lambda batch: sizes.append(len(batch)) or compute(batch))
    observer = Observer()
    audio = AUDIOS[3]

    async def main():
        async with Engine(rec, EngineConfig(max_batch=5, workers=2), observer) as engine:
            await engine.warm_up()
            assert sorted(sizes) == [5, 5]  # workers batches of max_batch
            assert engine.active_streams == 0 and engine.ready_streams == 0
            assert observer.batches == []  # not load: no metrics
            return await stream_file(engine, audio, 1600)

    results = asyncio.run(main())
    assert threads and all(t.startswith("streamdec-decode") for t in threads), threads
    assert key(finals(results)) == key(finals(decode_in_pieces(rec, audio, len(audio))))


def test_a_silent_batch_holds_one_whole_chunk_of_each_new_stream(rec):
    batch = rec.silent_batch(3)
    assert len(batch) == 3 and len(set(map(id, batch.streams))) == 3
    for item in batch.items:
        assert item.features.shape == (rec.meta.chunk_frames, rec.meta.feature_dim)
        assert item.state.processed_feature_frames == 0 and not item.is_last
    assert all(u.error is None for u in rec.compute(batch))


def test_streams_are_touched_by_the_loop_thread_only(rec, monkeypatch):
    threads: set[str] = set()

    def record(cls, name):
        original = getattr(cls, name)

        def wrapper(self, *a, **kw):
            threads.add(threading.current_thread().name)
            return original(self, *a, **kw)

        monkeypatch.setattr(cls, name, wrapper)

    for name in ("accept_waveform", "input_finished", "pop_events", "commit", "fail"):
        record(Stream, name)
    for name in ("frames", "drop_before", "accept_waveform", "input_finished"):
        record(StreamingFeatures, name)
    computed_in = compute_threads(rec, monkeypatch)

    async def main():
        async with Engine(rec, EngineConfig(max_batch=4, max_wait_ms=1)) as engine:
            return await asyncio.gather(*[stream_file(engine, a, 800, pause_every=1)
                                          for a in AUDIOS[:6]])

    got = asyncio.run(main())
    monkeypatch.undo()
    assert threads == {"MainThread"}
    assert computed_in and all(t.startswith("streamdec-decode") for t in computed_in)
    for audio, results in zip(AUDIOS[:6], got):
        assert key(finals(results)) == key(finals(decode_in_pieces(rec, audio, len(audio))))


def test_a_failing_stream_ends_alone(rec):
    failing = Recognizer(rec.config, model=FailsOnLoudAudio(rec.model), symbols=rec.symbols)
    audios = AUDIOS[:4] + [noise_after(0.8, 3.0)]
    observer = Observer()

    async def one(engine, audio):
        try:
            return await stream_file(engine, audio, 1600)
        except DecodeError as e:
            return e

    async def main():
        async with Engine(failing, EngineConfig(max_batch=5, max_wait_ms=20), observer) as e:
            return await asyncio.gather(*[one(e, a) for a in audios])

    got = asyncio.run(main())
    assert isinstance(got[-1], DecodeError) and "simulated runtime failure" in str(got[-1])
    assert len(observer.errors) == 1
    for audio, results in zip(audios[:4], got[:4]):
        assert key(finals(results)) == key(finals(decode_in_pieces(rec, audio, len(audio))))


def test_closing_a_stream_mid_way_frees_it_and_disturbs_no_other(rec):
    async def main():
        async with Engine(rec, EngineConfig(max_batch=4, max_wait_ms=5)) as engine:
            quitter = engine.open()
            await quitter.feed(16000, AUDIOS[5][:12000])
            other = asyncio.create_task(stream_file(engine, AUDIOS[6], 1600))
            await asyncio.sleep(0)
            quitter.close()  # possibly while in a batch being decoded
            await asyncio.wait_for(quitter.next_results(), 5)  # returns at once, never hangs
            assert quitter.closed and quitter.stream not in engine._streams
            results = await other
            return engine.active_streams, results

    active, results = asyncio.run(main())
    assert active == 0
    assert key(finals(results)) == key(finals(decode_in_pieces(rec, AUDIOS[6], 16000)))


def test_feed_waits_while_too_much_audio_is_undecoded(rec):
    audio = np.concatenate(AUDIOS[:8])
    waits, most = [], 0

    async def main():
        nonlocal most
        async with Engine(rec, EngineConfig(max_pending_seconds=0.5)) as engine:
            live = engine.open()
            limit = engine.max_pending_frames
            reader = asyncio.create_task(collect(live))
            for i in range(0, len(audio), 8000):  # 0.5 s messages, as fast as possible
                before = live.pending_frames
                await live.feed(16000, audio[i:i + 8000])
                most = max(most, live.pending_frames)
                waits.append(live.pending_frames < before + 50)  # it had to wait
            live.finish()
            results = await reader
            live.close()
            return limit, results

    async def collect(live):
        return [r async for r in live.results()]

    limit, results = asyncio.run(main())
    assert most <= limit
    assert sum(waits) > 5
    assert key(finals(results)) == key(finals(decode_in_pieces(rec, audio, len(audio))))


def test_drain_gives_every_open_stream_its_last_result(rec):
    async def main():
        async with Engine(rec, EngineConfig(max_batch=8)) as engine:
            lives = [engine.open() for _ in range(5)]
            for live, audio in zip(lives, AUDIOS):
                await live.feed(16000, audio[:len(audio) // 2])  # mid-utterance
            await engine.drain()
            return [live.pop_results() for live in lives]

    for audio, results in zip(AUDIOS, asyncio.run(main())):
        half = audio[:len(audio) // 2]
        assert results[-1].is_eof
        assert key(finals(results)) == key(finals(decode_in_pieces(rec, half, len(half))))


def test_engine_config_is_validated():
    from streamdec import ConfigError

    for bad in (dict(max_batch=0), dict(workers=0), dict(max_wait_ms=-1),
                dict(max_pending_seconds=0)):
        with pytest.raises(ConfigError):
            EngineConfig(**bad)


def test_results_are_handed_out_once_and_not_kept_by_the_stream(rec):
    """A long-running stream must not accumulate its results anywhere (memory stays flat)."""
    async def main():
        async with Engine(rec, EngineConfig(max_batch=4)) as engine:
            live = engine.open()
            got = []
            for audio in AUDIOS[:4]:
                for i in range(0, len(audio), 1600):
                    await live.feed(16000, audio[i:i + 1600])
                await live.wait_decoded()
                got += live.pop_results()
                assert live.stream.pop_events() == []  # nothing left behind in the stream
            live.finish()
            got += [r async for r in live.results()]
            live.close()
            return got

    got = asyncio.run(main())
    want = decode_in_pieces(rec, np.concatenate(AUDIOS[:4]), 1600)
    assert key(finals(got)) == key(finals(want))


def test_run_stream_finishes_and_closes_when_the_audio_source_fails(rec):
    """A source that raises partway: the results of the audio before it still come (the
    input is finished), the source's error is raised, and the stream is closed."""
    audio = AUDIOS[0]
    got = []

    async def broken():
        yield 16000, audio[:16000]
        raise OSError("device lost")

    async def main():
        async with Engine(rec) as engine:
            with pytest.raises(OSError, match="device lost"):
                await run_stream(engine.open(), broken(), got.append)
            return engine.active_streams

    assert asyncio.run(main()) == 0
    assert got and got[-1].is_eof
    alone = finals(decode_in_pieces(rec, audio[:16000], 16000))
    assert [r.token_ids for r in got if r.is_final] == [r.token_ids for r in alone]


def test_run_stream_awaits_a_coroutine_callback_before_the_next_result(rec):
    """``on_result`` may be a coroutine function (mic formats finals in a thread through
    it): each call is awaited before the next result is handed over, every result once and
    in order, and the results are those of a plain decode."""
    audio = AUDIOS[1]
    seen, active = [], []

    async def take(result):
        active.append(result)
        assert len(active) == 1, "a second result was handed over while one was awaited"
        await asyncio.sleep(0.001)
        seen.append(result)
        active.pop()

    async def main():
        async with Engine(rec) as engine:
            pieces = ((16000, audio[i:i + 1600]) for i in range(0, len(audio), 1600))
            return await run_stream(engine.open(), pieces, take)

    results = asyncio.run(main())
    assert seen == results and results[-1].is_eof
    assert key(finals(results)) == key(finals(decode_in_pieces(rec, audio, 1600)))


class Gated:
    """The real model, except that each encode call waits for ``go`` (so a test can act
    while a batch is being computed) after setting ``entered``."""

    def __init__(self, model) -> None:
        self._model = model
        self.meta, self.state_layout = model.meta, model.state_layout
        self.entered, self.go = threading.Event(), threading.Event()

    def encode(self, features, states):
        self.entered.set()
        assert self.go.wait(10), "the test never let the batch go"
        return self._model.encode(features, states)

    def decode(self, contexts):
        return self._model.decode(contexts)

    def join(self, encoder_out, decoder_out):
        return self._model.join(encoder_out, decoder_out)


class HoldsFirstBatch(Gated):
    """Gated for the first encode call only; later ones go through at once."""

    def encode(self, features, states):
        if self.entered.is_set():
            return self._model.encode(features, states)
        return super().encode(features, states)


async def batch_entered(gated: Gated) -> None:
    """Wait (without blocking the loop) until a batch is inside the model."""
    for _ in range(1000):
        if gated.entered.is_set():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("no batch reached the model in 5 s")


async def first_chunk_decoded(live) -> None:
    """Wait (without blocking the loop) until the stream's first chunk is committed."""
    while live.stream.state.processed_feature_frames == 0:
        await asyncio.sleep(0.005)


def test_a_cancelled_batch_future_still_commits_every_stream(rec):
    """Cancelling the future of a batch being computed (what a cancelled waiter does) must
    not leave its streams in flight: the batch commits and every stream goes on to the
    transcript it gets alone."""
    gated = Gated(rec.model)
    slow = Recognizer(rec.config, model=gated, symbols=rec.symbols)
    audios = AUDIOS[:3]

    async def main():
        async with Engine(slow, EngineConfig(max_batch=3, max_wait_ms=50)) as engine:
            lives = [engine.open() for _ in audios]
            for live, audio in zip(lives, audios):
                await live.feed(16000, audio[:8000])  # one whole chunk each, no waiting
            await batch_entered(gated)
            in_flight = list(engine._in_flight)
            assert len(in_flight) == 1
            assert sum(live.stream.in_flight for live in lives) == 3
            for future in in_flight:
                future.cancel()
            await asyncio.sleep(0.05)  # the cancellation reaches every callback
            gated.go.set()
            results = []
            for live, audio in zip(lives, audios):
                await live.feed(16000, audio[8000:])
                live.finish()
            for live in lives:
                results.append(await asyncio.wait_for(_collect(live), 20))
                assert not live.stream.in_flight and live.error is None
            return results

    # (a bound on the whole test: the bug it guards against hangs)
    for audio, results in zip(audios, asyncio.run(asyncio.wait_for(main(), 30))):
        assert results[-1].is_eof
        assert key(finals(results)) == key(finals(decode_in_pieces(rec, audio, len(audio))))


def test_cancelling_the_task_that_stops_the_engine_mid_batch_leaves_no_stream_in_flight(rec):
    """engine.stop() waits for the batches in flight; cancelling it mid-batch must not cancel
    the batch: its streams get the chunk's results, and a second stop() returns."""
    gated = Gated(rec.model)
    slow = Recognizer(rec.config, model=gated, symbols=rec.symbols)
    audios = AUDIOS[:3]

    async def main():
        engine = Engine(slow, EngineConfig(max_batch=3, max_wait_ms=50))
        engine.start()
        lives = [engine.open() for _ in audios]
        for live, audio in zip(lives, audios):
            await live.feed(16000, audio[:8000])
        await batch_entered(gated)
        stopping = asyncio.create_task(engine.stop())
        await asyncio.sleep(0.05)
        stopping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopping
        gated.go.set()
        await asyncio.wait_for(engine.stop(), 10)
        return lives

    lives = asyncio.run(asyncio.wait_for(main(), 30))
    chunk = rec.meta.chunk_shift
    for live in lives:
        assert not live.stream.in_flight and live.error is None
        assert live.stream.state.processed_feature_frames == chunk  # the one batch was committed


def test_a_stream_that_waited_through_a_batch_is_not_made_to_wait_again(rec):
    """``max_wait_ms`` counts from when a stream became ready: one that became ready while
    a batch was computing, and has waited ``max_wait_ms`` meanwhile, is in the next batch
    as soon as that batch is committed (it used to wait ``max_wait_ms`` more from then)."""
    gated = Gated(rec.model)
    slow = Recognizer(rec.config, model=gated, symbols=rec.symbols)
    max_wait = 1.0

    async def main():
        config = EngineConfig(max_batch=2, max_wait_ms=1000 * max_wait)
        async with Engine(slow, config) as engine:
            first = [engine.open() for _ in range(2)]
            for live, audio in zip(first, AUDIOS):
                await live.feed(16000, audio[:8000])  # a full batch: decoded at once
            await batch_entered(gated)
            late = engine.open()
            await late.feed(16000, AUDIOS[2][:8000])  # ready while the batch computes
            await asyncio.sleep(max_wait + 0.1)
            released = asyncio.get_running_loop().time()
            gated.go.set()
            await first_chunk_decoded(late)
            waited = asyncio.get_running_loop().time() - released
            for live in first + [late]:
                live.close()
            return waited

    waited = asyncio.run(asyncio.wait_for(main(), 30))
    assert waited < max_wait / 2, f"decoded {waited:.3f} s after the batch before it ended"


def test_decode_delay_is_how_long_the_longest_waiting_ready_stream_has_waited(rec):
    """``Engine.decode_delay`` (what the server refuses new connections by when it is
    behind): a stream ready while the only decode thread is busy has waited that long;
    0.0 when no stream waits."""
    gated = Gated(rec.model)
    slow = Recognizer(rec.config, model=gated, symbols=rec.symbols)

    async def main():
        config = EngineConfig(max_batch=1, max_wait_ms=0, workers=1)
        async with Engine(slow, config) as engine:
            idle = engine.decode_delay
            a, b = engine.open(), engine.open()
            await a.feed(16000, AUDIOS[0][:8000])  # one whole chunk
            await batch_entered(gated)  # in the model, held there
            await b.feed(16000, AUDIOS[1][:8000])  # ready; the one thread is busy
            await asyncio.sleep(0.3)
            waited = engine.decode_delay
            gated.go.set()
            await first_chunk_decoded(b)
            after = engine.decode_delay
            a.close()
            b.close()
            return idle, waited, after

    idle, waited, after = asyncio.run(asyncio.wait_for(main(), 30))
    assert idle == 0.0 and after == 0.0
    assert 0.3 <= waited < 5


def test_a_lone_stream_does_not_wait_for_a_batch_that_cannot_fill(rec):
    """With one open stream (a microphone) a ready chunk is decoded at once, not after
    ``max_wait_ms``; with a second open stream that is not ready, it waits for it."""
    max_wait = 1.0

    async def first_decode(streams: int) -> float:
        config = EngineConfig(max_batch=8, max_wait_ms=1000 * max_wait)
        async with Engine(rec, config) as engine:
            lives = [engine.open() for _ in range(streams)]
            loop = asyncio.get_running_loop()
            fed = loop.time()
            await lives[0].feed(16000, AUDIOS[0][:8000])  # one whole chunk
            await first_chunk_decoded(lives[0])
            took = loop.time() - fed
            for live in lives:
                live.close()
            return took

    alone = asyncio.run(asyncio.wait_for(first_decode(1), 30))
    with_another = asyncio.run(asyncio.wait_for(first_decode(2), 30))
    assert alone < max_wait / 2, f"a lone stream's chunk waited {alone:.3f} s"
    assert with_another >= max_wait, f"decoded after {with_another:.3f} s, not waiting"


def test_the_shipped_default_config_waits_15_ms_and_leaves_the_sizes_to_the_model():
    """docs/server.md's engine settings: 15 ms by default, the same in EngineConfig and the
    shipped default.toml; neither sets the batch size or the decode threads."""
    from streamdec.appconfig import load_config

    shipped = load_config("default").server.engine
    assert EngineConfig().max_wait_ms == shipped.max_wait_ms == 15.0
    assert (EngineConfig().max_batch, EngineConfig().workers) == (None, None)
    assert (shipped.max_batch, shipped.workers) == (None, None)


@pytest.mark.parametrize("weights, config, sizes", [
    (0, EngineConfig(), (32, 3)),  # not known: light
    (3_007_549, EngineConfig(), (32, 3)),  # the built-in model
    (9_999_999, EngineConfig(), (32, 3)),
    (10_000_000, EngineConfig(), (16, 2)),
    (20_312_816, EngineConfig(), (16, 2)),  # the 20 M zipformer, int8
    (20_312_816, EngineConfig(max_batch=32), (32, 2)),  # what a config sets wins
    (20_312_816, EngineConfig(workers=3), (16, 3)),
    (3_007_549, EngineConfig(max_batch=8, workers=1), (8, 1)),
])
def test_batch_size_and_decode_threads_are_chosen_by_the_models_weights(weights, config, sizes):
    assert sizes_for(config, weights) == sizes


def test_an_engine_takes_its_sizes_from_its_models_weights(rec):
    """The test model (31,764 weights) is light; the same model stating 20 M weights is
    heavy: the engine then warms up 2 batches of 16, and decodes in 2 threads."""
    assert rec.model.meta.weights == 31_764
    assert (Engine(rec).max_batch, Engine(rec).workers) == (32, 3)

    class Heavy(Gated):
        def __init__(self, model) -> None:
            super().__init__(model)
            self.meta = dataclasses.replace(model.meta, weights=20_000_000)
            self.go.set()
            self.sizes: list[int] = []

        def encode(self, features, states):
            self.sizes.append(len(features))
            return self._model.encode(features, states)

    heavy = Heavy(rec.model)
    engine = Engine(Recognizer(rec.config, model=heavy, symbols=rec.symbols))
    assert (engine.max_batch, engine.workers) == (16, 2)

    async def main():
        async with engine:
            await engine.warm_up()
            assert engine._pool._max_workers == 2

    asyncio.run(asyncio.wait_for(main(), 30))
    assert heavy.sizes == [16, 16]


def test_by_default_a_second_batch_decodes_while_the_first_is_in_the_model(rec):
    """The default engine's second decode thread: a stream that becomes ready while another
    stream's batch is held inside the model is decoded meanwhile, not after it."""
    gated = HoldsFirstBatch(rec.model)
    slow = Recognizer(rec.config, model=gated, symbols=rec.symbols)

    async def main():
        async with Engine(slow) as engine:
            held, other = engine.open(), engine.open()
            await held.feed(16000, AUDIOS[0][:8000])  # one whole chunk
            await batch_entered(gated)
            await other.feed(16000, AUDIOS[1][:8000])
            await asyncio.wait_for(first_chunk_decoded(other), 10)
            assert held.stream.in_flight and engine.batches_in_flight == 1
            gated.go.set()
            await asyncio.wait_for(first_chunk_decoded(held), 10)
            assert not held.stream.in_flight and held.error is other.error is None

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_compute_that_breaks_gives_every_stream_of_its_batch_an_error(rec, monkeypatch):
    """When the compute itself raises (not one stream's failure, which compute turns into
    that stream's update), each stream of the batch ends with a DecodeError."""
    def broken(batch):
        raise MemoryError("simulated: the whole compute broke")

    monkeypatch.setattr(rec, "compute", broken)
    observer = Observer()

    async def one(engine, audio):
        try:
            return await asyncio.wait_for(stream_file(engine, audio, 1600), 20)
        except DecodeError as e:
            return e

    async def main():
        async with Engine(rec, EngineConfig(max_batch=4, max_wait_ms=50), observer) as e:
            return await asyncio.gather(*[one(e, a) for a in AUDIOS[:4]])

    got = asyncio.run(main())
    monkeypatch.undo()
    assert [type(g) for g in got] == [DecodeError] * 4
    assert all("simulated: the whole compute broke" in str(g) for g in got)
    assert len(observer.errors) == 4


async def _collect(live):
    return [r async for r in live.results()]
