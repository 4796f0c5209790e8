import numpy as np
import pytest

from streamdec import AudioInputError, StreamStateError
from streamdec.buffers import size_class
from streamdec.audio.features import (TOGETHER_FRAMES, FeatureConfig, StreamingFeatures,
                                      compute_fbank, compute_ready_together, fbank_options)
from model_factory import test_audio


def test_frames_computed_together_equal_each_stream_alone():
    """compute_ready_together (the engine's per-turn fbank) gives every stream the very
    frames it computes alone, piece by piece: streams of two feature configurations (two
    fbanks), one with more pending than one call takes, one with nothing pending, more
    rows in all than one call takes, and the frames computed earlier untouched."""
    configs = [FeatureConfig()] * 6 + [FeatureConfig(num_bins=40)] * 2
    audios = [test_audio(1.0 + 0.13 * n, seed=n) for n in range(len(configs))]
    together = [StreamingFeatures(c) for c in configs]
    alone = [StreamingFeatures(c) for c in configs]
    pieces = [1600, 3200, 16000 * 3, 0, 1600, 5000, 2400, 16000 * 3]  # per stream, per round
    assert 16000 * 3 // 160 > TOGETHER_FRAMES
    for rounds in range(3):
        for n, (a, b, audio) in enumerate(zip(together, alone, audios)):
            piece = audio[rounds * pieces[n]:(rounds + 1) * pieces[n]]
            if len(piece):
                a.accept_waveform(16000, piece)
                b.accept_waveform(16000, piece)
                b.compute_ready()
        compute_ready_together(together)
        for a, b in zip(together, alone):
            assert a._num_computed == b._num_computed == a.num_frames_ready
            np.testing.assert_array_equal(a.frames(0, a.num_frames_ready),
                                          b.frames(0, b.num_frames_ready))
    assert sum(f.num_frames_ready for f in together) > 2 * TOGETHER_FRAMES
    assert together[3].num_frames_ready == 0


def test_options_are_the_models_training_options_not_knf_defaults():
    o = fbank_options(FeatureConfig())
    assert o.frame_opts.dither == 0.0
    assert o.frame_opts.snip_edges is False
    assert o.mel_opts.num_bins == 80
    assert o.mel_opts.high_freq == -400.0
    assert o.mel_opts.low_freq == 20.0
    assert o.frame_opts.window_type == "povey"


@pytest.mark.parametrize("piece", [1, 160, 777, 16000])
def test_streaming_equals_whole(piece):
    audio = test_audio(1.5, seed=3)
    whole = compute_fbank(audio, 16000)
    f = StreamingFeatures(FeatureConfig())
    for i in range(0, len(audio), piece):
        f.accept_waveform(16000, audio[i:i + piece])
    f.input_finished()
    assert f.num_frames_ready == len(whole) == 150
    np.testing.assert_array_equal(f.frames(0, f.num_frames_ready), whole)


@pytest.mark.parametrize("piece", [160, 1600, 5120])
def test_frames_read_as_a_decode_reads_them_equal_the_whole(piece):
    """Frames are computed when first read, in whatever runs the reads ask for (a decode
    reads a chunk of 45 every 32, then drops what it advanced past): bit-identical to the
    whole utterance's; a run dropped unread (a VAD's skipped silence) is never computed
    and the frames after it are still the same."""
    audio = test_audio(3.0, seed=21)
    whole = compute_fbank(audio, 16000, tail_padding_frames=45)
    f = StreamingFeatures(FeatureConfig())
    got, start, read = {}, 0, set()
    skipped = (96, 128)  # chunks 3 and 4: dropped unread
    for i in range(0, len(audio) + piece, piece):
        if i < len(audio):
            f.accept_waveform(16000, audio[i:i + piece])
        else:
            f.input_finished(tail_padding_frames=45)
        while f.num_frames_ready >= start + 45:
            if start not in skipped:
                got.update(enumerate(f.frames(start, 45).copy(), start))
                read |= set(range(start, start + 45))
            start += 32
            f.drop_before(start)
    assert f.num_frames_ready == len(whole)
    assert f._fbank.num_frames_taken <= len(whole)
    assert set(got) == read and len(read) > 200 and not {141, 150, 159} & read
    for n, frame in got.items():
        np.testing.assert_array_equal(frame, whole[n])


def test_samples_kept_across_many_small_and_one_large_piece():
    """The fbank keeps its samples in a store appended in place: pieces of 1 sample, a
    large piece after them and the frames read (and their samples freed) in between give
    the whole utterance's frames."""
    audio = test_audio(4.0, seed=24)
    whole = compute_fbank(audio, 16000)
    f = StreamingFeatures(FeatureConfig())
    got, start = [], 0
    pieces = [(i, i + 1) for i in range(0, 5000)] + [(5000, 60000), (60000, len(audio))]
    for a, b in pieces:
        f.accept_waveform(16000, audio[a:b])
        while f.num_frames_ready >= start + 32:
            got.append(f.frames(start, 32).copy())
            start += 32
            f.drop_before(start)
    f.input_finished()
    got.append(f.frames(start, f.num_frames_ready - start))
    np.testing.assert_array_equal(np.concatenate(got), whole)


def test_frames_are_computed_only_when_read(monkeypatch):
    from streamdec.audio.fbank import Fbank

    computed = []
    log_mel = Fbank.log_mel
    monkeypatch.setattr(Fbank, "log_mel", lambda self, x: computed.append(len(x))
                        or log_mel(self, x))
    f = StreamingFeatures(FeatureConfig())
    for i in range(10):  # ten messages of 100 ms: counted, not computed
        f.accept_waveform(16000, test_audio(0.1, seed=30 + i))
    assert f.num_frames_ready == 99 and computed == []
    f.frames(0, 45)  # the ready frames at once, in blocks of at most 32
    assert computed == [32, 32, 32, 3]
    f.drop_before(99)
    f.accept_waveform(16000, test_audio(0.5, seed=40))
    f.drop_before(120)  # passed over unread: never computed
    f.frames(120, 20)
    assert computed[4:] == [29] and f.num_frames_ready == 149


def test_int16_is_scaled_like_float():
    audio = test_audio(0.5, seed=4)
    as_int = (audio * 32768).clip(-32768, 32767).astype(np.int16)
    np.testing.assert_allclose(compute_fbank(as_int, 16000),
                               compute_fbank(as_int.astype(np.float32) / 32768, 16000), atol=1e-5)


def test_resampling_8k_gives_16k_frame_rate_and_streams():
    audio = test_audio(2.0, seed=5, rate=8000)
    whole = compute_fbank(audio, 8000)
    assert len(whole) == 200
    f = StreamingFeatures(FeatureConfig())
    for i in range(0, len(audio), 333):
        f.accept_waveform(8000, audio[i:i + 333])
    f.input_finished()
    np.testing.assert_allclose(f.frames(0, f.num_frames_ready), whole, atol=1e-3)


def test_drop_before_frees_old_frames_keeps_indices():
    f = StreamingFeatures(FeatureConfig())
    f.accept_waveform(16000, test_audio(1.0, seed=6))
    n = f.num_frames_ready
    tail = f.frames(50, 10).copy()
    f.drop_before(50)
    assert f.num_frames_ready == n
    np.testing.assert_array_equal(f.frames(50, 10), tail)
    with pytest.raises(IndexError):
        f.frames(10, 5)


@pytest.mark.parametrize("samples, message", [
    (np.zeros(100, np.int32), "dtype int32"),
    (np.array([0.1, np.nan], np.float32), "NaN or infinity"),
    (np.array([0.1, np.inf], np.float32), "NaN or infinity"),
    (np.array([np.nan, 0.1, 0.2], np.float32), "NaN or infinity"),
    (np.array([-np.inf, 0.1], np.float64), "NaN or infinity"),
    (np.array([0.1, 3.0, np.nan], np.float32), "NaN or infinity"),
    (np.array([0.1, -2.5], np.float32), r"must lie in \[-1, 1\] \(overshoot up to 2 is "
                                        r"clipped\), got a peak of 2.5: not on the float scale"),
    (np.array([0.1, 2.0000001], np.float64), r"must lie in \[-1, 1\]"),
    (np.array([0.5, 20000.0], np.float32), "got a peak of 2e\\+04"),
    (np.zeros(0, np.float32), "empty waveform"),
    (np.zeros((2, 100), np.float32), "1-D mono"),
    ([0.0, 0.1], "numpy array"),
])
def test_bad_samples_rejected_and_stream_unchanged(samples, message):
    f = StreamingFeatures(FeatureConfig())
    f.accept_waveform(16000, test_audio(0.3, seed=7))
    before = f.num_frames_ready
    with pytest.raises(AudioInputError, match=message):
        f.accept_waveform(16000, samples)
    assert f.num_frames_ready == before
    f.accept_waveform(16000, test_audio(0.3, seed=8))  # still usable
    assert f.num_frames_ready > before


@pytest.mark.parametrize("samples", [
    np.array([-1.0, 0.0, 1.0], np.float32),  # full scale is allowed, not clipped
    np.array([-32768, 32767], np.int16),
])
def test_full_scale_samples_accepted(samples):
    f = StreamingFeatures(FeatureConfig())
    f.accept_waveform(16000, samples)
    assert f.num_samples_accepted == len(samples)


def test_small_overshoot_is_clipped_to_full_scale():
    from streamdec.audio.features import as_float_samples

    hot = np.array([0.5, 1.5, -2.0, 1.0000001], np.float32)
    np.testing.assert_array_equal(as_float_samples(hot), [0.5, 1.0, -1.0, 1.0])
    audio = test_audio(0.5, seed=10)
    loud = audio * 3.0  # overshoots by up to ~1.7: decodes as the clipped audio does
    assert np.abs(loud).max() <= 2.0
    np.testing.assert_array_equal(compute_fbank(loud, 16000),
                                  compute_fbank(np.clip(loud, -1, 1), 16000))


def test_a_rejected_first_chunk_leaves_the_rate_unset():
    f = StreamingFeatures(FeatureConfig())
    with pytest.raises(AudioInputError, match="must lie in"):
        f.accept_waveform(8000, np.full(80, 3.0, np.float32))
    assert f.input_rate is None and f.num_samples_accepted == 0
    f.accept_waveform(16000, test_audio(0.3, seed=9))  # another rate: still the first chunk
    assert f.input_rate == 16000


def test_rate_change_mid_stream_is_an_error():
    f = StreamingFeatures(FeatureConfig())
    f.accept_waveform(8000, test_audio(0.2, rate=8000))
    with pytest.raises(AudioInputError, match="changed mid-stream from 8000 to 16000"):
        f.accept_waveform(16000, test_audio(0.2))


@pytest.mark.parametrize("rate", [0, -16000, 16000.5])
def test_bad_rate(rate):
    with pytest.raises(AudioInputError, match="sample rate"):
        StreamingFeatures(FeatureConfig()).accept_waveform(rate, np.zeros(10, np.float32))


def test_audio_after_input_finished():
    f = StreamingFeatures(FeatureConfig())
    f.accept_waveform(16000, test_audio(0.2))
    f.input_finished()
    with pytest.raises(StreamStateError):
        f.accept_waveform(16000, test_audio(0.2))


@pytest.mark.parametrize("piece", [160, 320, 1600, 4000])
def test_a_live_streams_buffers_keep_one_size_once_they_hold_a_chunk(piece):
    """A live stream (messages of 10-250 ms, its chunks read and dropped as a decode does)
    keeps the same sample store for a minute of audio once it holds a chunk's worth
    (samples move to its front instead of into a new one: no heap churn per stream); its
    frame buffer, replaced when full (views of it stay valid for a decode thread), always
    takes the same size class; and its frames are the whole utterance's."""
    audio = test_audio(60.0, seed=31)
    whole = compute_fbank(audio, 16000)
    f = StreamingFeatures(FeatureConfig())
    got, start, stores, bufs = [], 0, set(), set()
    for i in range(0, len(audio), piece):
        f.accept_waveform(16000, audio[i:i + piece])
        compute_ready_together([f])
        if i >= 5 * 16000:  # after the first seconds
            stores.add(id(f._fbank._store))
            bufs.add(len(f._buf))
        while f.num_frames_ready >= start + 45:
            got.append(f.frames(start, 32).copy())
            start += 32
            f.drop_before(start)
    assert len(stores) == 1 and len(bufs) == 1
    assert len(f._fbank._store) == size_class(len(f._fbank._store), 1) >= 4096
    assert len(f._buf) == size_class(len(f._buf), 1) >= 128
    got = np.concatenate(got)
    np.testing.assert_array_equal(got, whole[:len(got)])
    assert len(got) > 5900
