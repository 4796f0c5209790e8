"""The vectorised fbank computes kaldi-native-fbank's features: the same frames (count and
timing, edges included) and the same values to float32 rounding of the spectrum."""

import kaldi_native_fbank as knf
import numpy as np
import pytest

from model_factory import test_audio
from streamdec.audio.fbank import Fbank
from streamdec.audio.features import FeatureConfig, StreamingFeatures, fbank_options

#: |mel energy difference| allowed, relative to the frame's largest mel energy: both
#: compute the same float32 spectrum, so they differ by its rounding (about 1e-6)
ENERGY_TOLERANCE = 1e-5


def knf_frames(config: FeatureConfig, audio: np.ndarray, piece: int) -> tuple[list[int], np.ndarray]:
    """kaldi-native-fbank itself: frames ready after each piece, and all frames at the end."""
    f = knf.OnlineFbank(fbank_options(config))
    ready = []
    for i in range(0, len(audio), piece):
        f.accept_waveform(float(config.sample_rate), audio[i:i + piece])
        ready.append(f.num_frames_ready)
    f.input_finished()
    frames = np.array([f.get_frame(i) for i in range(f.num_frames_ready)], np.float32)
    return ready, frames.reshape(-1, config.num_bins)


def our_frames(config: FeatureConfig, audio: np.ndarray, piece: int) -> tuple[list[int], np.ndarray]:
    f = StreamingFeatures(config)
    ready = []
    for i in range(0, len(audio), piece):
        f.accept_waveform(config.sample_rate, audio[i:i + piece])
        ready.append(f.num_frames_ready)
    f.input_finished()
    return ready, f.frames(0, f.num_frames_ready)


def assert_same_features(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.shape == theirs.shape
    a, b = np.exp(ours.astype(np.float64)), np.exp(theirs.astype(np.float64))
    scale = b.max(axis=1, keepdims=True)
    assert np.all(np.abs(a - b) <= ENERGY_TOLERANCE * scale)


@pytest.mark.parametrize("rate, seconds, seed, piece", [
    (16000, 2.0, 11, 16000),
    (16000, 1.3, 12, 777),
    (16000, 0.9, 13, 1),
    (8000, 1.5, 14, 333),
])
def test_features_equal_kaldi_native_fbank(rate, seconds, seed, piece):
    config = FeatureConfig(sample_rate=rate)
    audio = test_audio(seconds, seed=seed, rate=rate)
    ready, ours = our_frames(config, audio, piece)
    their_ready, theirs = knf_frames(config, audio, piece)
    assert ready == their_ready
    assert_same_features(ours, theirs)


# lengths around the frame edges: 400-sample window, 160 shift, the first frame starts 120
# samples before the signal (reflected), the last ones reflect about the end
@pytest.mark.parametrize("samples", [1, 79, 80, 100, 279, 280, 281, 399, 400, 401, 439, 440,
                                     559, 560, 561, 1000, 1601])
def test_edge_frames_equal_kaldi_native_fbank(samples):
    config = FeatureConfig()
    audio = test_audio(0.2, seed=samples)[:samples] + np.float32(0.01)
    ready, ours = our_frames(config, audio, 97)
    their_ready, theirs = knf_frames(config, audio, 97)
    assert ready == their_ready
    assert_same_features(ours, theirs)


@pytest.mark.parametrize("rate", [16000, 8000])
def test_log_mel_rows_do_not_depend_on_the_block(rate):
    """A frame's features are bit for bit the same whichever block computes it: alone, at
    any place in blocks of every size (the FFT's vectorised groups and their remainders),
    or in one block of all (what makes them independent of message sizes and batches)."""
    fbank = Fbank(FeatureConfig(sample_rate=rate))
    frames = (np.random.default_rng(rate).standard_normal((150, fbank.frame_length))
              * 0.1).astype(np.float32)
    whole = fbank.log_mel(frames.copy())
    for size in [*range(1, 34), 64, 97, 128]:
        for a in range(0, len(frames), size):
            np.testing.assert_array_equal(fbank.log_mel(frames[a:a + size].copy()),
                                          whole[a:a + size], err_msg=f"block of {size} at {a}")
