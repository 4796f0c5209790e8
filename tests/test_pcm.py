"""Raw PCM decoding: each encoding against a reference, whole-sample checks."""

import subprocess
import warnings

import numpy as np
import pytest

from streamdec import AudioInputError
from streamdec.audio.features import as_float_samples
from streamdec.audio.pcm import (ALAW_TABLE, MULAW_TABLE, decode_pcm, deinterleave,
                                 sample_size)


@pytest.mark.parametrize("encoding, data, want", [
    ("s16le", np.array([0, 1, -1, 32767, -32768], "<i2").tobytes(),
     [0, 1 / 32768, -1 / 32768, 32767 / 32768, -1.0]),
    ("f32le", np.array([0.5, -0.25, 1.0], "<f4").tobytes(), [0.5, -0.25, 1.0]),
    ("mulaw", bytes([0xFF, 0x7F, 0x80, 0x00]), [0, 0, 32124 / 32768, -32124 / 32768]),
    # G.711 A-law: the smallest step each side of zero, the largest magnitude each side
    ("alaw", bytes([0xD5, 0x55, 0xAA, 0x2A]), [8 / 32768, -8 / 32768, 32256 / 32768,
                                              -32256 / 32768]),
])
def test_decode(encoding, data, want):
    got = decode_pcm(data, encoding)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-7)


def test_mulaw_table_matches_sox(tmp_path):
    """sox decodes every mu-law byte value the same way."""
    raw = tmp_path / "all.ul"
    raw.write_bytes(bytes(range(256)))
    out = tmp_path / "all.s16"
    subprocess.run(["sox", "-t", "ul", "-r", "8000", "-c", "1", str(raw), "-t", "s16",
                    "-e", "signed-integer", str(out)], check=True)
    sox = np.frombuffer(out.read_bytes(), "<i2").astype(np.int32)
    assert (np.round(MULAW_TABLE * 32768).astype(np.int32) == sox).all()


def test_alaw_table_matches_pythons_audioop_and_sox(tmp_path):
    """Every A-law byte value decodes exactly as CPython's ``audioop.alaw2lin`` and sox
    decode it (two independent G.711 implementations)."""
    with warnings.catch_warnings():  # deprecated since Python 3.11, still there until 3.13
        warnings.simplefilter("ignore", DeprecationWarning)
        import audioop
    codes = bytes(range(256))
    ours = np.round(ALAW_TABLE * 32768).astype(np.int32)
    assert ours.tolist() == np.frombuffer(audioop.alaw2lin(codes, 2), "<i2").tolist()
    raw = tmp_path / "all.al"
    raw.write_bytes(codes)
    out = tmp_path / "all.s16"
    subprocess.run(["sox", "-t", "al", "-r", "8000", "-c", "1", str(raw), "-t", "s16",
                    "-e", "signed-integer", str(out)], check=True)
    assert ours.tolist() == np.frombuffer(out.read_bytes(), "<i2").tolist()
    assert len(set(ours.tolist())) == 256  # no two codes alike


@pytest.mark.parametrize("encoding, nbytes, channels, message", [
    ("s16le", 3, 1, "3 bytes is not a whole number of s16le samples (2 bytes each)"),
    ("f32le", 6, 1, "6 bytes is not a whole number of f32le samples (4 bytes each)"),
    ("s16le", 6, 2, "6 bytes is not a whole number of s16le samples x 2 channels (4 bytes"),
    ("g722", 2, 1, "unknown encoding 'g722'; known: s16le, f32le, mulaw, alaw"),
])
def test_bad_sizes_and_encodings(encoding, nbytes, channels, message):
    with pytest.raises(AudioInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        decode_pcm(b"\0" * nbytes, encoding, channels)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", [0, 1, 799, 1599])
def test_nan_and_inf_are_decoded_as_sent_and_refused_where_a_stream_takes_them(bad, where):
    samples = np.full(1600, 0.1, "<f4")
    samples[where] = bad
    decoded = decode_pcm(samples.tobytes(), "f32le")  # checked once: by the stream
    np.testing.assert_array_equal(decoded, samples)
    with pytest.raises(AudioInputError, match="NaN or infinity"):
        as_float_samples(decoded)


def test_deinterleave():
    left, right = deinterleave(np.arange(6, dtype=np.float32), 2)
    assert left.tolist() == [0, 2, 4] and right.tolist() == [1, 3, 5]
    assert sample_size("mulaw") == 1


def test_buffers_of_other_item_types_and_empty_data():
    # a memoryview of int16 items is measured in bytes, not items
    samples = np.array([1, -2, 300], dtype="<i2")
    np.testing.assert_array_equal(decode_pcm(memoryview(samples), "s16le") * 32768,
                                  np.array([1, -2, 300], np.float32))
    assert decode_pcm(bytearray(b"\xff"), "mulaw").tolist() == [0.0]
    assert decode_pcm(b"", "f32le").shape == (0,)


@pytest.mark.parametrize("encoding, sox_type", [("mulaw", "ul"), ("alaw", "al")])
def test_g711_round_trip_of_sox_encoded_speech(tmp_path, encoding, sox_type):
    import soundfile as sf

    from model_factory import test_audio

    audio = test_audio(0.5, seed=3, rate=8000)
    wav = tmp_path / "a.wav"
    sf.write(str(wav), audio, 8000, subtype="PCM_16")
    coded = tmp_path / f"a.{sox_type}"
    subprocess.run(["sox", "-D", str(wav), "-t", sox_type, str(coded)], check=True)
    got = decode_pcm(coded.read_bytes(), encoding)
    assert got.shape == audio.shape
    # the largest step of both laws is 1024/32768 (top segment); quantisation error is half
    # of it
    np.testing.assert_allclose(got, audio, atol=512 / 32768 + 1 / 32768)
