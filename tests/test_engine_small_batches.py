"""The engine on a model whose encoder runs small batches one call per stream (an export
with a fixed batch of 1; the real -mobile zipformer2 computes 4 streams or more in one call
of its batched rewrite): a batch that cannot reach that size is not waited for, its oldest
stream goes alone at once (side by side with others in the decode threads); streams ready
together in numbers batch as on any model; a model that takes any batch keeps waiting for
its batch to fill (``streamdec.engine.small_batch``)."""

from __future__ import annotations

import asyncio

import pytest

from conftest import make_recognizer
from model_factory import test_audio
from shared_data import REAL_MODEL
from streamdec import ModelConfig, Recognizer, RecognizerConfig
from streamdec.engine import Engine, EngineConfig, small_batch

ENCODER = "encoder-epoch-12-avg-2-chunk-16-left-64.int8.onnx"
AUDIOS = [test_audio(1.0 + 0.2 * n, seed=500 + n) for n in range(8)]
WAIT = 1.0  # max_wait_ms / 1000 in these tests: long enough that waiting shows


@pytest.mark.parametrize("ready, could_join, batch_from, free, wait_left, alone", [
    (1, 10, 1, 9, 0.015, False),     # a model that takes any batch: waits as it did
    (1, 1, 1, 0, 0.015, False),
    (3, 10, None, 7, 0.015, True),   # every batch one call per stream: always alone
    (9, 10, None, 1, 0.015, True),
    (4, 10, 4, 6, 0.015, False),     # enough for one call: batched
    (3, 3, 4, 0, 0.015, True),       # 3 open streams can never make 4
    (1, 10, 4, 9, 0.015, True),      # 9 x 15 ms / 320 ms: 0.4 more expected
    (3, 32, 4, 29, 0.015, False),    # 29 x 15 / 320: 1.4 more expected: wait
    (1, 32, 4, 100, 0.015, False),   # 4.7 more expected
    (3, 32, 4, 29, -0.002, True),    # its wait is over: go now, alone
])
def test_small_batch(ready, could_join, batch_from, free, wait_left, alone):
    assert small_batch(ready, could_join, batch_from, free, wait_left, 0.32) is alone


def _real() -> Recognizer:
    if not (REAL_MODEL / ENCODER).is_file():
        pytest.fail(f"real model missing: {REAL_MODEL} must hold {ENCODER} (the shared models "
                    "folder beside the repository; see docs/models.md)")
    return Recognizer(RecognizerConfig(model=ModelConfig(model_dir=str(REAL_MODEL))))


@pytest.fixture(scope="module")
def real() -> Recognizer:
    return _real()


class Batches:
    def __init__(self) -> None:
        self.sizes: list[int] = []

    def on_batch(self, size, seconds):
        self.sizes.append(size)

    def on_result_latency(self, seconds):
        pass

    def on_stream_error(self, error):
        raise AssertionError(error)


async def _first_chunks(rec: Recognizer, streams: int, ready: int) -> tuple[float, list[int]]:
    """``streams`` open streams, ``ready`` of them handed one whole chunk in the same turn
    of the loop: (seconds until each of those has its chunk decoded, batch sizes)."""
    seen = Batches()
    config = EngineConfig(max_batch=8, max_wait_ms=1000 * WAIT, workers=3)
    async with Engine(rec, config, observer=seen) as engine:
        lives = [engine.open() for _ in range(streams)]
        chunk = int(16000 * (rec.meta.chunk_frames + 2) / 100)
        loop = asyncio.get_running_loop()
        fed = loop.time()
        for live, audio in zip(lives[:ready], AUDIOS):
            live.accept(16000, audio[:chunk])
        while any(live.stream.state.processed_feature_frames == 0 for live in lives[:ready]):
            await asyncio.sleep(0.005)
        took = loop.time() - fed
        for live in lives:
            live.close()
    return took, seen.sizes


def test_a_batch_that_cannot_reach_one_call_goes_alone_at_once(real):
    assert real.batch_from == 4
    took, sizes = asyncio.run(asyncio.wait_for(_first_chunks(real, 3, 3), 30))
    assert sizes == [1, 1, 1]
    assert took < WAIT / 2, f"waited {took:.3f} s for a batch that could not help"


def test_streams_ready_together_in_numbers_are_one_call(real):
    _, sizes = asyncio.run(asyncio.wait_for(_first_chunks(real, 8, 8), 30))
    assert sizes == [8]


def test_a_model_that_takes_any_batch_still_waits_for_its_batch(model_dirs):
    rec = make_recognizer(model_dirs["zipformer2"])
    assert rec.batch_from == 1
    took, sizes = asyncio.run(asyncio.wait_for(_first_chunks(rec, 3, 1), 30))
    assert sizes == [1] and took >= WAIT  # two more open streams could have joined


def test_its_batches_hold_what_one_call_computes_unless_max_batch_is_set(real):
    assert real.batch_up_to == 8
    assert Engine(real).max_batch == 8
    assert Engine(real, EngineConfig(max_batch=32)).max_batch == 32


def test_streams_ready_together_past_one_call_go_in_batches_of_one_call(real):
    async def main():
        seen = Batches()
        async with Engine(real, EngineConfig(max_wait_ms=1000 * WAIT, workers=1),
                          observer=seen) as engine:
            lives = [engine.open() for _ in range(12)]
            chunk = int(16000 * (real.meta.chunk_frames + 2) / 100)
            for n, live in enumerate(lives):
                live.accept(16000, AUDIOS[n % len(AUDIOS)][:chunk])
            while any(live.stream.state.processed_feature_frames == 0 for live in lives):
                await asyncio.sleep(0.005)
            for live in lives:
                live.close()
        return seen.sizes

    assert asyncio.run(asyncio.wait_for(main(), 30)) == [8, 4]
