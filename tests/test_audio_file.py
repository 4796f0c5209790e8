"""Reading audio inputs: damage partway is reported after the blocks before it, a header
that promises more than the file holds gives a warning, raw PCM files and standard input."""

import io
import sys

import numpy as np
import pytest
import soundfile as sf

from model_factory import test_audio
from streamdec.files.audio_file import AudioFile, AudioFileError, RawFormat
from streamdec import ConfigError


def read_all(audio: AudioFile, seconds: float = 1.0) -> tuple[np.ndarray, AudioFileError | None]:
    """Every block the input gives, and the error that ended them (None at a clean end)."""
    blocks = []
    try:
        for block in audio.blocks(seconds):
            blocks.append(block)
    except AudioFileError as e:
        return np.concatenate(blocks) if blocks else np.zeros(0, np.float32), e
    return np.concatenate(blocks), None


@pytest.fixture(scope="module")
def flac(tmp_path_factory):
    """A 6 s FLAC and its samples (16-bit, so FLAC holds them exactly)."""
    path = tmp_path_factory.mktemp("flac") / "long.flac"
    sf.write(str(path), test_audio(6.0, seed=40), 16000, subtype="PCM_16")
    return path, sf.read(str(path), dtype="float32")[0]


def test_truncated_flac_gives_its_blocks_then_an_error(flac, tmp_path):
    path, samples = flac
    cut = tmp_path / "cut.flac"
    cut.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    got, error = read_all(AudioFile(cut))
    assert error is not None
    assert str(error) == (f"{cut}: unreadable after {len(got) / 16000:.2f} s "
                          "(flac decoder lost sync)")
    assert len(got) % 16000 == 0 and 16000 <= len(got) < len(samples)  # whole 1 s blocks
    np.testing.assert_array_equal(got, samples[:len(got)])


def test_wav_shorter_than_its_header_is_read_to_its_end_with_a_warning(tmp_path):
    full = tmp_path / "full.wav"
    sf.write(str(full), test_audio(2.0, seed=41), 16000, subtype="PCM_16")
    data = full.read_bytes()
    assert data[36:40] == b"data" and int.from_bytes(data[40:44], "little") == 64000
    short = tmp_path / "short.wav"
    short.write_bytes(data[:44 + 32000])  # the header still promises 2 s: 1 s is there
    audio = AudioFile(short)
    got, error = read_all(audio)
    assert error is None and len(got) == 16000
    assert audio.shortfall() == (f"{short}: its header promises 2.00 s of audio but it holds "
                                 "1.00 s; transcribed what is there")
    whole = AudioFile(full)
    read_all(whole)
    assert whole.shortfall() is None


@pytest.mark.parametrize("placeholder", [0xFFFFFFFF, 0x7FFFF000])
def test_streaming_writers_placeholder_sizes_are_no_promise(tmp_path, placeholder):
    path = tmp_path / "piped.wav"
    sf.write(str(path), test_audio(1.0, seed=42), 16000, subtype="PCM_16")
    data = bytearray(path.read_bytes())
    data[4:8] = data[40:44] = placeholder.to_bytes(4, "little")
    path.write_bytes(bytes(data))
    audio = AudioFile(path)
    got, error = read_all(audio)
    assert error is None and len(got) == 16000 and audio.shortfall() is None


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "is a directory, not an audio file"),
    (lambda p: None, "audio file not found"),
    (lambda p: p.write_bytes(b"RIFF nonsense"), "not a readable audio file"),
    (lambda p: p.write_bytes(b""), "not a readable audio file"),
])
def test_inputs_that_cannot_be_opened(tmp_path, make, message):
    path = tmp_path / "x.wav"
    make(path)
    with pytest.raises(AudioFileError, match=f"^{path}: {message}"):
        AudioFile(path)


def test_raw_pcm_file(tmp_path):
    samples = np.array([0, 1000, -1000, 32767, -32768] * 4000, np.int16)  # 20000 samples
    path = tmp_path / "x.raw"
    path.write_bytes(samples.astype("<i2").tobytes())
    audio = AudioFile(path, RawFormat(8000, "s16le"))
    assert (audio.rate, audio.channels) == (8000, 1)
    got, error = read_all(audio)
    assert error is None and audio.shortfall() is None
    np.testing.assert_array_equal(got * 32768, samples.astype(np.float32))
    assert [len(b) for b in AudioFile(path, RawFormat(8000, "s16le")).blocks(1.0)] == \
        [8000, 8000, 4000]


def test_raw_pcm_that_ends_inside_a_sample(tmp_path):
    path = tmp_path / "x.raw"
    path.write_bytes(b"\x00\x10" * 12000 + b"\x00")
    got, error = read_all(AudioFile(path, RawFormat(8000, "s16le")))
    assert len(got) == 12000  # the whole samples, the last block too
    assert str(error) == (f"{path}: unreadable after 1.50 s (it ends inside a 2-byte s16le "
                          "sample)")


def test_empty_raw_file(tmp_path):
    path = tmp_path / "x.ul"
    path.write_bytes(b"")
    with pytest.raises(AudioFileError, match="x.ul: holds no audio samples"):
        AudioFile(path, RawFormat(8000, "mulaw"))


@pytest.mark.parametrize("rate, encoding, message", [
    (0, "s16le", "sample rate must be a positive integer, got 0"),
    (8000, "g722", "unknown encoding 'g722'; known: s16le, f32le, mulaw, alaw"),
])
def test_raw_format_checked(rate, encoding, message):
    with pytest.raises(ConfigError, match=message):
        RawFormat(rate, encoding)


class _Stdin:
    """Standard input at the byte level (what ``sys.stdin.buffer`` gives)."""

    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


def test_standard_input_in_a_soundfile_format(monkeypatch, tmp_path):
    samples = test_audio(1.5, seed=43)
    buf = io.BytesIO()
    sf.write(buf, samples, 16000, format="FLAC", subtype="PCM_16")
    monkeypatch.setattr(sys, "stdin", _Stdin(buf.getvalue()))
    audio = AudioFile("-")
    assert audio.label == "standard input" and audio.declared_samples is None
    got, error = read_all(audio)
    assert error is None
    np.testing.assert_allclose(got, samples, atol=1 / 32768)


def test_raw_standard_input(monkeypatch):
    monkeypatch.setattr(sys, "stdin", _Stdin(bytes([0xFF, 0x80, 0x00]) * 1000))
    got, error = read_all(AudioFile("-", RawFormat(8000, "mulaw")), seconds=0.1)
    assert error is None
    np.testing.assert_array_equal(got[:3] * 32768, [0.0, 32124.0, -32124.0])
    assert len(got) == 3000


def read_standard_input(raw: RawFormat | None) -> None:
    error = read_all(AudioFile("-", raw))[1]
    if error is not None:
        raise error


@pytest.mark.parametrize("data, raw, message", [
    (b"", RawFormat(8000, "mulaw"), "standard input: holds no audio samples"),
    (b"", None, "standard input: not a readable audio file"),
    (b"\x01\x02\x03", RawFormat(8000, "f32le"),
     "standard input: unreadable after 0.00 s \\(it ends inside a 4-byte f32le sample\\)"),
])
def test_unusable_standard_input(monkeypatch, data, raw, message):
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    with pytest.raises(AudioFileError, match=message):
        read_standard_input(raw)
