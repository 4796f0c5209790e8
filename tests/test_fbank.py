"""The vectorised fbank computes kaldi-native-fbank's features: the same frames (count and
timing, edges included) and the same values to float32 rounding of the spectrum."""

import kaldi_native_fbank as knf
import numpy as np
import pytest

from model_factory import test_audio
from streamdec.features import FeatureConfig, StreamingFeatures, fbank_options

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



def test_frames_computed_together_equal_each_stream_alone():
    """Fbank.log_mel_many (a decode's worker: every stream's new frames in blocks of
    BLOCK_FRAMES, a stream's frames split across blocks) gives each stream exactly the
    frames it computes alone: fresh streams (reflected start), streams mid-way, finished
    ones (reflected end), more frames than two blocks."""
    from streamdec.fbank import BLOCK_FRAMES, OnlineFbank, fbank_for

    fb = fbank_for(FeatureConfig())
    audio = [test_audio(s, seed=30 + i) for i, s in enumerate((3.0, 11.0, 0.02, 7.3))]
    together, alone = [OnlineFbank(fb) for _ in audio], [OnlineFbank(fb) for _ in audio]
    for x, t, a in zip(audio, together, alone):
        t.accept_waveform(x[:1601])
        a.accept_waveform(x[:1601])
    first = fb.log_mel_many([t.take_windows() for t in together])
    for t, a in zip(first, alone):
        np.testing.assert_array_equal(t, fb.log_mel(a.take_windows()))
    for x, t, a in zip(audio, together, alone):
        t.accept_waveform(x[1601:])
        a.accept_waveform(x[1601:])
    rest = fb.log_mel_many([t.take_windows() for t in together])
    assert sum(len(f) for f in rest) > 2 * BLOCK_FRAMES
    for t, a in zip(rest, alone):
        np.testing.assert_array_equal(t, fb.log_mel(a.take_windows()))
    for f in together + alone:
        f.input_finished()
    tails = fb.log_mel_many([t.take_windows() for t in together])
    for t, a in zip(tails, alone):
        assert len(t) >= 1
        np.testing.assert_array_equal(t, fb.log_mel(a.take_windows()))


def test_frames_taken_for_a_worker_come_back_in_order():
    """While a decode computes a stream's taken frames elsewhere, audio still arrives and
    nothing else computes frames there (they would land out of order); the frames handed
    back are checked and the stream carries on exactly as if it had computed them."""
    from streamdec.errors import StreamStateError

    config = FeatureConfig()
    audio = test_audio(6.0, seed=40)
    alone, worked = StreamingFeatures(config), StreamingFeatures(config)
    for f in (alone, worked):
        f.accept_waveform(16000, audio[:16000])
    computed, windows = worked.chunk_input(0, 45)
    assert len(computed) == 0 and len(windows) == worked.num_frames_ready == 99
    worked.accept_waveform(16000, audio[16000:])  # 5 s more: past the eager limit, still
    with pytest.raises(StreamStateError):         # nothing is computed while frames are out
        worked.compute()
    with pytest.raises(StreamStateError):
        worked.add_frames(np.zeros((98, config.num_bins), np.float32))
    worked.add_frames(worked._fbank.fbank.log_mel(windows))
    alone.accept_waveform(16000, audio[16000:])
    n = alone.num_frames_ready
    assert worked.num_frames_ready == n
    np.testing.assert_array_equal(worked.frames(0, n), alone.frames(0, n))
