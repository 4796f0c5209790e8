"""Raw PCM decoding: each encoding against hand-computed values, mu-law against sox's own
G.711 expansion of every code, and the errors."""

import subprocess

import numpy as np
import pytest
import soundfile as sf

from model_factory import test_audio
from streamdec import AudioInputError, ConfigError
from streamdec.pcm import MULAW_TO_LINEAR, PCM_ENCODINGS, SAMPLE_BYTES, decode_pcm


@pytest.mark.parametrize("encoding, data, want_int16", [
    ("s16le", b"", []),
    ("s16le", b"\x00\x00\x01\x00\xff\xff\x00\x80\xff\x7f", [0, 1, -1, -32768, 32767]),
    # G.711 mu-law: 0xFF and 0x7F are zero, 0x80 / 0x00 the largest magnitudes
    # ((((15 << 3) + 132) << 7) - 132), 0xFE / 0x7E the smallest ((1 << 3) + 132 - 132)
    ("mulaw", b"\xff\x7f\x80\x00\xfe\x7e", [0, 0, 32124, -32124, 8, -8]),
])
def test_integer_encodings(encoding, data, want_int16):
    got = decode_pcm(data, encoding)
    assert got.dtype == np.float32 and got.ndim == 1
    np.testing.assert_array_equal(got * 32768, np.array(want_int16, np.float32))


@pytest.mark.parametrize("values", [
    [0.0, 0.5, -1.0, 1.0, 0.25],
    [1e-7, -3.0517578125e-05],
])
def test_f32le_is_taken_as_it_is(values):
    data = np.array(values, dtype="<f4").tobytes()
    np.testing.assert_array_equal(decode_pcm(data, "f32le"), np.array(values, np.float32))


def test_buffers_of_other_item_types():
    # a memoryview of int16 items is measured in bytes, not items
    samples = np.array([1, -2, 300], dtype="<i2")
    np.testing.assert_array_equal(decode_pcm(memoryview(samples), "s16le") * 32768,
                                  np.array([1, -2, 300], np.float32))
    assert decode_pcm(bytearray(b"\xff"), "mulaw").tolist() == [0.0]


def test_mulaw_table_matches_sox_for_every_code(tmp_path):
    codes = tmp_path / "all.ul"
    codes.write_bytes(bytes(range(256)))
    linear = tmp_path / "all.s16"
    subprocess.run(["sox", "-t", "ul", "-r", "8000", "-c", "1", str(codes), "-t", "raw", "-e",
                    "signed", "-b", "16", "-L", str(linear)], check=True)
    reference = np.fromfile(linear, dtype="<i2")
    assert reference.shape == (256,)
    np.testing.assert_array_equal(MULAW_TO_LINEAR, reference)
    np.testing.assert_array_equal(decode_pcm(bytes(range(256)), "mulaw") * 32768,
                                  reference.astype(np.float32))


def test_mulaw_round_trip_of_sox_encoded_speech(tmp_path):
    """A sox-encoded .ul file decodes to within one mu-law step of the original."""
    audio = test_audio(0.5, seed=3, rate=8000)
    wav = tmp_path / "a.wav"
    sf.write(str(wav), audio, 8000, subtype="PCM_16")
    ul = tmp_path / "a.ul"
    subprocess.run(["sox", str(wav), "-t", "ul", str(ul)], check=True)
    got = decode_pcm(ul.read_bytes(), "mulaw")
    assert got.shape == audio.shape
    # the largest mu-law step is 1024/32768 (top segment); quantisation error is half of it
    np.testing.assert_allclose(got, audio, atol=512 / 32768 + 1 / 32768)


@pytest.mark.parametrize("encoding, nbytes", [
    ("s16le", 1), ("s16le", 3), ("f32le", 2), ("f32le", 7),
])
def test_partial_sample_is_an_error(encoding, nbytes):
    with pytest.raises(AudioInputError, match=f"{nbytes} byte\\(s\\) of {encoding} audio: not a "
                                              f"whole number of {SAMPLE_BYTES[encoding]}-byte"):
        decode_pcm(b"\x00" * nbytes, encoding)


def test_unknown_encoding():
    with pytest.raises(ConfigError, match="unknown PCM encoding 's24le'; known: s16le, f32le"):
        decode_pcm(b"\x00\x00\x00", "s24le")


def test_every_encoding_has_a_width():
    assert set(SAMPLE_BYTES) == set(PCM_ENCODINGS) == {"s16le", "f32le", "mulaw"}
