"""Interoperability: on the same model files and audio, sherpa-onnx's greedy search gives
the same tokens and timestamps as ours (sherpa-onnx is a test-time reference)."""

import numpy as np
import pytest

from streamdec import EndpointConfig
from conftest import make_recognizer
from decode_utils import decode_in_pieces, finals, sherpa_decode
from model_factory import test_audio


@pytest.mark.parametrize("seed", [61, 62, 63])
def test_greedy_matches_sherpa_onnx_on_lstm_layout(model_dirs, seed):
    d = model_dirs["lstm"]
    ours_rec = make_recognizer(d, endpoint=EndpointConfig(enabled=False))
    audio = test_audio(4.0 + seed % 3, seed=seed)
    ours = finals(decode_in_pieces(ours_rec, audio, 3200))
    assert len(ours) == 1
    theirs = sherpa_decode(d, "lstm", audio, ours_rec.meta.chunk_frames)
    assert len(ours[0].tokens) > 10
    assert list(ours[0].tokens) == list(theirs.tokens)
    np.testing.assert_allclose(ours[0].timestamps, theirs.timestamps, atol=0.006)
    assert ours[0].text == theirs.text.strip()
