"""The engine's ``workers`` option (several decode threads) with every shared resource a
search reads while it decodes: word graphs (lexicon x n-gram, and grammars), a neural LM
session, hotword graphs and the decoder cache. Streams of mixed configurations decoded by
four threads at once (batches of one and of two, so threads really overlap) get exactly
the transcripts each gets decoded alone in one thread."""

from __future__ import annotations

import asyncio

import pytest

from conftest import make_recognizer
from decode_utils import decode_in_pieces, finals, key
from model_factory import test_audio
from streamdec import SearchConfig
from streamdec.engine import Engine, EngineConfig
from test_engine import compute_threads
from test_neural_lm import export_lm
from test_words_search import write_lang

AUDIOS = [test_audio(2.0 + 0.3 * n, seed=700 + n) for n in range(8)]


@pytest.fixture(scope="module")
def setup(model_dirs, tmp_path_factory):
    rec = make_recognizer(model_dirs["zipformer2"])
    lm = str(export_lm(tmp_path_factory.mktemp("lm") / "lm.onnx", 12, seed=1))
    lang = str(write_lang(tmp_path_factory.mktemp("lang") / "lang"))
    # (search, hotwords, phrases) of each stream, listed explicitly
    cases = [
        (SearchConfig(method="modified_beam", beam=3, lang_dir=lang), (), None),
        (SearchConfig(method="modified_beam", beam=3, lm_file=lm, lm_scale=0.5), (), None),
        (SearchConfig(method="modified_beam", beam=3), ("ABC :3", "CAB :2"), None),
        (SearchConfig(method="modified_beam", beam=3), (), ["ABC", "BAD", "[unk]"]),
        (SearchConfig(method="alsd", beam=3, lang_dir=lang, lm_file=lm, lm_scale=0.3),
         ("BED :2",), None),
        (SearchConfig(method="beam", beam=3, lm_file=lm, lm_scale=0.5), (), None),
        (SearchConfig(method="modified_beam", beam=3, lang_dir=lang), ("HIDE :2",), None),
        (SearchConfig(method="greedy"), (), None),
    ]
    return rec, cases


@pytest.mark.parametrize("max_batch", [1, 2])
def test_four_decode_threads_give_what_one_thread_gives(setup, max_batch, monkeypatch):
    rec, cases = setup
    alone = [finals(decode_in_pieces(rec, audio, len(audio), search=search,
                                     hotwords=hotwords, phrases=phrases))
             for audio, (search, hotwords, phrases) in zip(AUDIOS, cases)]
    assert sum(len(r.token_ids) for f in alone for r in f) > 20, "the streams should emit"
    threads = compute_threads(rec, monkeypatch)

    async def one(engine, audio, search, hotwords, phrases):
        await engine.prepare(search, hotwords, phrases)
        live = engine.open(search, hotwords, phrases)
        reader = asyncio.create_task(collect(live))
        for i in range(0, len(audio), 1600):
            await live.feed(16000, audio[i:i + 1600])
            await asyncio.sleep(0)
        live.finish()
        results = await reader
        live.close()
        return finals(results)

    async def collect(live):
        return [r async for r in live.results()]

    async def main():
        config = EngineConfig(max_batch=max_batch, max_wait_ms=1, workers=4)
        async with Engine(rec, config) as engine:
            return await asyncio.gather(*[one(engine, a, *c) for a, c in zip(AUDIOS, cases)])

    got = asyncio.run(asyncio.wait_for(main(), 120))
    monkeypatch.undo()
    assert len(threads) >= 2, f"decoded by {threads}: the threads did not overlap"
    for n, (want, results) in enumerate(zip(alone, got)):
        assert key(results) == key(want), f"stream {n} ({cases[n][0].method})"
