"""Interoperability: on the same model files and audio, our modified beam search gives the
same tokens and timestamps as sherpa-onnx's modified_beam_search (a test-time reference),
and with one active path it is exactly greedy search."""

import numpy as np
import pytest

from conftest import make_recognizer
from decode_utils import decode_in_pieces, finals, sherpa_decode
from model_factory import test_audio
from streamdec import EndpointConfig
from streamdec.search import SearchConfig


@pytest.mark.parametrize("seed,paths", [(61, 4), (62, 4), (63, 2), (64, 8)])
def test_modified_beam_matches_sherpa_onnx(model_dirs, seed, paths):
    d = model_dirs["lstm"]
    rec = make_recognizer(d, endpoint=EndpointConfig(enabled=False))
    audio = test_audio(3.0 + seed % 3, seed=seed)
    ours = finals(decode_in_pieces(rec, audio, 3200,
                                   search=SearchConfig(method="modified_beam", beam=paths)))
    assert len(ours) == 1
    theirs = sherpa_decode(d, "lstm", audio, rec.meta.chunk_frames, "modified_beam_search",
                           paths)
    assert len(ours[0].tokens) > 10
    assert list(ours[0].tokens) == list(theirs.tokens)
    np.testing.assert_allclose(ours[0].timestamps, theirs.timestamps, atol=0.006)


@pytest.mark.parametrize("seed", [71, 72])
def test_one_active_path_is_greedy(model_dirs, seed):
    rec = make_recognizer(model_dirs["conformer"])
    audio = test_audio(4.0, seed=seed)
    greedy = finals(decode_in_pieces(rec, audio, 4000))
    beam1 = finals(decode_in_pieces(rec, audio, 4000,
                                    search=SearchConfig(method="modified_beam", beam=1)))
    assert [(r.token_ids, r.timestamps) for r in beam1] == \
        [(r.token_ids, r.timestamps) for r in greedy]
    np.testing.assert_allclose([r.score for r in beam1], [r.score for r in greedy], atol=1e-4)
