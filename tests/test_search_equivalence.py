"""Offline equivalence: every incremental search, fed an utterance's encoder output in
random chunkings, gives the same n-best (tokens, frames, scores) as the plain offline
reference run over all frames at once (tests/search_reference.py)."""

from __future__ import annotations

import numpy as np
import pytest

import search_reference as ref
from streamdec.search import SEARCHES, SearchConfig, make_search

REFERENCES = {
    "modified_beam": ref.modified_beam_ref,
    "alsd": ref.alsd_ref,
    "tsd": ref.tsd_ref,
    "beam": ref.beam_ref,
    "nsc": ref.nsc_ref,
}
METHODS = ["modified_beam", "alsd", "tsd", "beam", "nsc"]  # every beam search (greedy: test_greedy)


def test_every_beam_search_has_a_reference():
    assert sorted(METHODS) == sorted(set(SEARCHES) - {"greedy"}) == sorted(REFERENCES)


def random_chunking(total: int, rng: np.random.RandomState) -> list[int]:
    """Split points of [0, total) into chunks of 1..9 frames (sometimes all at once)."""
    if rng.rand() < 0.2:
        return [0, total]
    cuts = [0]
    while cuts[-1] < total:
        cuts.append(min(total, cuts[-1] + rng.randint(1, 10)))
    return cuts


def run_incremental(search, enc: np.ndarray, cuts: list[int]):
    """enc (T, D) fed as chunks enc[cuts[i]:cuts[i+1]] to one stream."""
    state = search.init_state()
    for a, b in zip(cuts[:-1], cuts[1:]):
        state = search.step([state], enc[None, a:b])[0]
    return search.finalize(state)


def assert_same_nbest(got, want):
    assert [h.tokens for h in got] == [h.tokens for h in want]
    assert [h.frames for h in got] == [h.frames for h in want]
    np.testing.assert_allclose([h.score for h in got], [h.score for h in want], atol=1e-4)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.log_probs, w.log_probs, atol=1e-4)


def config_for(method: str, opts: ref.RefOptions, unk: bool) -> SearchConfig:
    return SearchConfig(method=method, beam=opts.beam, nbest=opts.nbest, unk_as_blank=unk,
                        max_sym_per_frame_alsd=opts.max_sym_per_frame_alsd,
                        max_sym_exp=opts.max_sym_exp, nstep=opts.nstep,
                        prefix_alpha=opts.prefix_alpha,
                        max_sym_per_frame_beam=opts.max_sym_per_frame_beam)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_toy_model_random_chunkings(method, seed):
    model = ref.ToyModel(seed=seed)
    unk = seed != 1
    opts = ref.RefOptions(beam=3 + seed, nbest=3, unk_id=model.meta.vocab_size - 1 if unk else None,
                          max_sym_per_frame_alsd=1 + seed, max_sym_exp=2 + seed, nstep=1 + seed,
                          prefix_alpha=1 + seed % 2, max_sym_per_frame_beam=2 + seed)
    enc = model.random_encoder_out(23 + 5 * seed, seed=seed)
    want = REFERENCES[method](model, enc, opts)
    search = make_search(model, config_for(method, opts, unk), unk_id=model.meta.vocab_size - 1)
    rng = np.random.RandomState(100 + seed)
    for _ in range(4):
        assert_same_nbest(run_incremental(search, enc, random_chunking(len(enc), rng)), want)
    assert any(h.tokens for h in want), "the toy utterance should emit tokens"


@pytest.mark.parametrize("method", METHODS)
def test_onnx_model_random_chunkings(method, model_dirs):
    from conftest import make_recognizer
    from model_factory import test_audio

    rec = make_recognizer(model_dirs["lstm"])
    enc = ref.encoder_output(rec, test_audio(2.0, seed=3))
    opts = ref.RefOptions(beam=4, nbest=2, unk_id=rec.symbols.unk_id)
    want = REFERENCES[method](rec.model, enc, opts)
    search = make_search(rec.model, config_for(method, opts, True), unk_id=rec.symbols.unk_id)
    rng = np.random.RandomState(7)
    for _ in range(2):
        assert_same_nbest(run_incremental(search, enc, random_chunking(len(enc), rng)), want)
