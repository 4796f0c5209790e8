"""Interoperability: on the same model files and audio, sherpa-onnx's greedy search gives
the same tokens and timestamps as ours (sherpa-onnx is a test-time reference)."""

import numpy as np
import pytest

from streamdec import EndpointConfig
from conftest import make_recognizer
from decode_utils import decode_in_pieces, finals, sherpa_decode
from model_factory import test_audio


@pytest.mark.parametrize("layout, seed", [("lstm", 61), ("lstm", 62), ("lstm", 63),
                                          ("conformer", 61), ("zipformer2", 61)])
def test_greedy_matches_sherpa_onnx_on_the_test_layouts(model_dirs, layout, seed):
    """The test models' layouts are the exporters' (sherpa-onnx builds each family's
    initial states from its metadata and feeds the conformer's processed_lens)."""
    d = model_dirs[layout]
    ours_rec = make_recognizer(d, endpoint=EndpointConfig(enabled=False))
    audio = test_audio(4.0 + seed % 3, seed=seed)
    ours = finals(decode_in_pieces(ours_rec, audio, 3200))
    assert len(ours) == 1
    theirs = sherpa_decode(d, layout, audio, ours_rec.meta.chunk_frames)
    assert len(ours[0].tokens) > 10
    # sherpa-onnx writes a word-start mark as a space in its token strings
    assert list(ours[0].tokens) == [t.replace(" ", "\u2581") for t in theirs.tokens]
    np.testing.assert_allclose(ours[0].timestamps, theirs.timestamps, atol=0.006)
    assert ours[0].text == " ".join(theirs.text.split())
