"""Interoperability: on the same model files and audio, sherpa-onnx's greedy search gives
the same tokens and timestamps as ours (sherpa-onnx is a test-time reference)."""

import numpy as np
import pytest
import sherpa_onnx

from streamdec import EndpointConfig
from conftest import make_recognizer
from decode_utils import decode_in_pieces, finals
from model_factory import test_audio


def sherpa_greedy(model_dir, model_type, audio, tail_padding_frames):
    rec = sherpa_onnx.OnlineRecognizer.from_transducer(
        tokens=str(model_dir / "tokens.txt"), encoder=str(model_dir / "encoder.onnx"),
        decoder=str(model_dir / "decoder.onnx"), joiner=str(model_dir / "joiner.onnx"),
        num_threads=1, sample_rate=16000, feature_dim=80, decoding_method="greedy_search",
        model_type=model_type)
    s = rec.create_stream()
    # sherpa-onnx runs only whole chunks: give it the same tail padding streamdec adds itself
    s.accept_waveform(16000, np.concatenate([audio, np.zeros(tail_padding_frames * 160,
                                                              np.float32)]))
    s.input_finished()
    while rec.is_ready(s):
        rec.decode_stream(s)
    return rec.get_result_all(s)


@pytest.mark.parametrize("seed", [61, 62, 63])
def test_greedy_matches_sherpa_onnx_on_lstm_layout(model_dirs, seed):
    d = model_dirs["lstm"]
    ours_rec = make_recognizer(d, endpoint=EndpointConfig(enabled=False))
    audio = test_audio(4.0 + seed % 3, seed=seed)
    ours = finals(decode_in_pieces(ours_rec, audio, 3200))
    assert len(ours) == 1
    theirs = sherpa_greedy(d, "lstm", audio, ours_rec.meta.chunk_frames)
    assert len(ours[0].tokens) > 10
    assert list(ours[0].tokens) == list(theirs.tokens)
    np.testing.assert_allclose(ours[0].timestamps, theirs.timestamps, atol=0.006)
    assert ours[0].text == theirs.text.strip()
