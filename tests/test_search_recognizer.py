"""Every search through the Recognizer: chunking invariance (audio in pieces of 1, 160,
777 samples and all at once), batch invariance (alone == in a batch of 7 streams of
different lengths, some with other search methods), n-best and the ALSD first frame."""

from __future__ import annotations

import numpy as np
import pytest

import search_reference as ref
from conftest import make_recognizer
from decode_utils import decode_in_pieces, decode_together, finals, key
from model_factory import test_audio
from streamdec.models.base import ModelMeta
from streamdec.search import SEARCHES, SearchConfig, make_search

METHODS = sorted(SEARCHES)
AUDIO = test_audio(4.0, seed=12)


def config(method: str, **kw) -> SearchConfig:
    return SearchConfig(method=method, beam=3, **kw)


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["zipformer2"])


@pytest.mark.parametrize("method", METHODS)
def test_chunking_invariance(rec, method):
    search = config(method)
    want = finals(decode_in_pieces(rec, AUDIO, len(AUDIO), search=search))
    assert any(r.token_ids for r in want), "the test model should emit tokens"
    for piece in (160, 777):
        got = finals(decode_in_pieces(rec, AUDIO, piece, search=search))
        assert key(got) == key(want)
        np.testing.assert_allclose([r.score for r in got], [r.score for r in want], atol=1e-4)
    short = AUDIO[:12000]
    assert key(finals(decode_in_pieces(rec, short, 1, search=search))) == \
        key(finals(decode_in_pieces(rec, short, len(short), search=search)))


@pytest.mark.parametrize("method", METHODS)
def test_batch_invariance(rec, method):
    audios = [test_audio(1.0 + 0.5 * n, seed=50 + n) for n in range(7)]
    # the stream under test is #3; the others use other methods, so groups interleave
    methods = [METHODS[(METHODS.index(method) + n) % len(METHODS)] if n % 2 else method
               for n in range(7)]
    alone = [finals(decode_in_pieces(rec, a, 1600, search=config(m)))
             for a, m in zip(audios, methods)]
    streams = [rec.create_stream(search=config(m)) for m in methods]
    events = decode_together(rec, streams, audios, 1600)
    for a, ev in zip(alone, events):
        assert key(finals(ev)) == key(a)
        np.testing.assert_allclose([r.score for r in finals(ev)], [r.score for r in a],
                                   atol=1e-4)


@pytest.mark.parametrize("method", [m for m in METHODS if m != "greedy"])
def test_nbest_is_ranked_with_per_token_details(method):
    model = ref.ToyModel(seed=3)
    enc = model.random_encoder_out(20, seed=3)
    search = make_search(model, SearchConfig(method=method, beam=4, nbest=3))
    state = search.init_state(encoder_frame_offset=100)
    state = search.step([state], enc[None, :7])[0]
    state = search.step([state], enc[None, 7:])[0]
    nbest = search.finalize(state)
    assert 1 <= len(nbest) <= 3
    assert len({h.tokens for h in nbest}) == len(nbest)
    norm = [h.normalized_score for h in nbest]
    assert norm == sorted(norm, reverse=True)
    for h in nbest:
        assert len(h.frames) == len(h.log_probs) == len(h.tokens)
        assert all(100 <= f < 120 for f in h.frames)
        assert list(h.frames) == sorted(h.frames)
        assert all(lp <= 0 for lp in h.log_probs)
    assert search.partial(state).tokens in {h.tokens for h in state.hyps}
    after = search.reset(state)
    assert after.segment_start == after.encoder_frame_offset == 120
    assert after.hyps[0].context == nbest[0].context and after.hyps[0].tokens == ()


class FirstFrameModel:
    """Hand-made transducer: frame 0 says token 2, every later frame says blank; the
    decoder forbids repeating its last token at once. V = 4, D = 4, C = 1."""

    meta = ModelMeta(model_type="hand", chunk_frames=1, chunk_shift=4,
                     encoder_frames_per_chunk=1, feature_dim=1, joiner_dim=4, context_size=1,
                     vocab_size=4, blank_id=0, frame_shift_ms=10.0, sample_rate=16000)

    def decode(self, contexts):
        out = np.zeros((len(contexts), 4), np.float32)
        for n, (c,) in enumerate(contexts):
            if c > 0:
                out[n, c] = -20.0
        return out

    def join(self, encoder_out, decoder_out):
        logits = 10.0 * encoder_out + decoder_out
        logits[:, 0] += 5.0
        return logits

    @staticmethod
    def utterance(frames: int = 6) -> np.ndarray:
        enc = np.zeros((frames, 4), np.float32)
        enc[0, 2] = 1.0
        return enc


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("chunk", [1, 2, 6])
def test_first_frame_decides_the_first_token(method, chunk):
    """ALSD's t = i - u (not i - u + 1): frame 0 is searched like every other frame."""
    model = FirstFrameModel()
    enc = model.utterance()
    search = make_search(model, SearchConfig(method=method, beam=2))
    state = search.init_state()
    for a in range(0, len(enc), chunk):
        state = search.step([state], enc[None, a:a + chunk])[0]
    best = search.finalize(state)[0]
    assert best.tokens == (2,)
    assert best.frames == (0,)


@pytest.mark.parametrize("method", METHODS)
def test_step_is_pure(method):
    """States are values: stepping the same state twice gives equal results, the input is
    left as it was, and one state can seed two streams of a batch (an in-place update of a shared
    hypothesis would corrupt its sibling)."""
    model = ref.ToyModel(seed=6)
    enc = model.random_encoder_out(9, seed=6)
    search = make_search(model, SearchConfig(method=method, beam=3, nbest=3))
    s0 = search.step([search.init_state()], enc[None, :4])[0]
    before = repr(s0)
    a, b = search.step([s0, s0], np.stack([enc[4:], enc[4:]]))
    again = search.step([s0], enc[None, 4:])[0]
    assert repr(s0) == before
    # a batch of two and a batch of one may round a log-prob differently (by ~1e-7):
    # tokens and frames exactly, scores to 1e-5
    want = search.finalize(again)
    for got in (search.finalize(a), search.finalize(b)):
        assert [(h.tokens, h.frames, h.context) for h in got] == \
            [(h.tokens, h.frames, h.context) for h in want]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want], atol=1e-5)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.log_probs, w.log_probs, atol=1e-5)


@pytest.mark.parametrize("method", [m for m in METHODS if m != "greedy"])
def test_temperature_changes_confidences_only_and_blank_penalty_is_applied(method):
    model = ref.ToyModel(seed=8, blank_bias=2.0)
    enc = model.random_encoder_out(16, seed=8)

    def best(**kw):
        search = make_search(model, SearchConfig(method=method, beam=3, **kw))
        return search.finalize(search.step([search.init_state()], enc[None])[0])[0]

    plain, warm = best(), best(temperature=2.0)
    assert (warm.tokens, warm.frames) == (plain.tokens, plain.frames)
    assert warm.score == pytest.approx(plain.score)
    assert warm.log_probs != plain.log_probs
    assert best(blank_penalty=3.0).score != pytest.approx(plain.score, abs=1e-3)
