"""Words grouped from units: char models with a stand-alone boundary unit, BPE pieces with
a leading boundary, a space symbol; times and confidences of ``make_result``."""

import math

import pytest

from streamdec.models.base import ModelMeta
from streamdec.core.results import make_result
from streamdec.search.base import Hypothesis
from streamdec.tokens import SymbolTable

CHARS = SymbolTable({0: "<blk>", 1: "\u2581", 2: "A", 3: "B", 4: "C"})
BPE = SymbolTable({0: "<blk>", 1: "\u2581AB", 2: "C", 3: "\u2581D", 4: "<unk>"})
SPACE = SymbolTable({0: "<blk>", 1: " ", 2: "a", 3: "b"})


@pytest.mark.parametrize("table, ids, want", [
    (CHARS, [1, 2, 3, 1, 4], [("AB", 1, 2), ("C", 4, 4)]),
    (CHARS, [2, 1, 1, 3, 0], [("A", 0, 0), ("B", 3, 3)]),  # no leading boundary; blank dropped
    (CHARS, [1, 1], []),
    (BPE, [1, 2, 3, 4], [("ABC", 0, 1), ("D", 2, 2)]),
    (SPACE, [2, 1, 3, 3], [("a", 0, 0), ("bb", 2, 3)]),
])
def test_word_spans(table, ids, want):
    assert table.word_spans(ids) == want


def test_result_words_have_frame_times_and_geometric_mean_confidence():
    meta = ModelMeta(model_type="t", chunk_frames=35, chunk_shift=32, encoder_frames_per_chunk=8,
                     feature_dim=80, joiner_dim=4, context_size=2, vocab_size=5,
                     blank_id=0, frame_shift_ms=10.0, sample_rate=16000)
    hyp = Hypothesis(context=(1, 4), tokens=(1, 2, 3, 1, 4), frames=(10, 11, 13, 20, 21),
                     log_probs=(-0.1, -0.2, -0.4, -0.05, -1.0), score=-2.0)
    r = make_result(hyp, CHARS, meta, segment=0, segment_start=10, encoder_frame_offset=30,
                    is_final=True)
    assert [w.text for w in r.words] == ["AB", "C"]
    ab, c = r.words
    assert (ab.start, ab.end) == pytest.approx((0.44, 0.56), abs=1e-9)  # frames 11..13+1, 40 ms
    assert (c.start, c.end) == pytest.approx((0.84, 0.88), abs=1e-9)
    assert ab.conf == pytest.approx(math.exp(-0.3), abs=1e-6)
    assert c.conf == pytest.approx(math.exp(-1.0), abs=1e-6)
    assert r.text == "AB C"


def test_result_times_are_the_same_before_and_past_the_lookup_table():
    """Frame counts are turned into seconds from a shared table up to ``_TABLE_FRAMES``
    frames and computed past it: the same value ``round(frames * seconds, 6)`` either way,
    on a stream hours long too."""
    from streamdec.core.results import _TABLE_FRAMES
    meta = ModelMeta(model_type="t", chunk_frames=35, chunk_shift=32, encoder_frames_per_chunk=8,
                     feature_dim=80, joiner_dim=4, context_size=2, vocab_size=5,
                     blank_id=0, frame_shift_ms=10.0, sample_rate=16000)
    sec = meta.encoder_frame_seconds
    for base in (7, _TABLE_FRAMES - 3, 200_000):  # inside, across the end, far past it
        frames = (base, base + 1, base + 3, base + 6)
        hyp = Hypothesis(context=(1, 4), tokens=(1, 2, 3, 1), frames=frames,
                         log_probs=(-0.1, -0.2, -0.4, -0.05), score=-1.0)
        r = make_result(hyp, CHARS, meta, segment=0, segment_start=base - 2,
                        encoder_frame_offset=base + 9, is_final=False, stable_tokens=2)
        assert r.start_time == round((base - 2) * sec, 6)
        assert r.end_time == round((base + 9) * sec, 6)
        assert r.timestamps == tuple(round((f - base + 2) * sec, 6) for f in frames)
        (ab,) = r.words
        assert (ab.start, ab.end) == (round((base + 1) * sec, 6), round((base + 4) * sec, 6))
