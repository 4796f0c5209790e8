"""Audio inputs read as blocks of mono float32 samples: files in any format soundfile
reads, headerless raw PCM files (see ``streamdec.audio.pcm``) and standard input, named ``-``.

An input that cannot be opened (missing, a directory, not audio, empty) raises
AudioFileError at once. Damage found while reading (a decoder error in a truncated FLAC,
raw PCM that ends with part of a sample) raises AudioFileError from the blocks iterator
after every block read before it, so a caller can keep what came before. A file that
holds fewer samples than its header promises is read to its end; ``shortfall()`` then
says so (a truncated MP3 too). What a codec prints on stderr while decoding is dropped
(``streamdec.files.codec_stderr``): it prints on correct files as well.

Standard input in a soundfile format is read whole before decoding (libsndfile needs to
seek in most formats); raw PCM on standard input is read block by block, as it comes.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np

from ..audio.pcm import decode_pcm, sample_size
from ..errors import AudioFileError, AudioInputError, ConfigError
from ..validation import require_sample_rate
from .codec_stderr import codec_stderr_caught

__all__ = ["AudioFile", "AudioFileError", "RawFormat", "STDIN"]

#: The input name that means standard input.
STDIN = "-"

# Data sizes a WAV writer puts in its header when it cannot seek back to fill in the real
# one (writing to a pipe): 0xFFFFFFFF (ffmpeg and others), 0x7FFFF000 (sox).
_UNKNOWN_WAV_SIZES = (0xFFFFFFFF, 0x7FFFF000)


def _libsndfile_says(e: Exception) -> str:
    """libsndfile's own words for a soundfile error, without its "Error : " prefix."""
    text = str(getattr(e, "error_string", None) or e)
    return text.removeprefix("Error : ").rstrip(".")


@dataclass(frozen=True)
class RawFormat:
    """Headerless mono PCM: its sample rate and encoding (one of ``pcm.ENCODINGS``)."""

    rate: int
    encoding: str = "s16le"

    def __post_init__(self) -> None:
        require_sample_rate(self.rate, "raw PCM")
        try:
            sample_size(self.encoding)
        except AudioInputError as e:
            raise ConfigError(f"raw PCM: {e}") from None


def _wav_declared_frames(f: BinaryIO) -> int | None:
    """Frames the data chunk of a RIFF/WAVE header declares; None when ``f`` is not such
    a file, the header is malformed or the size is a streaming writer's placeholder."""
    head = f.read(12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:] != b"WAVE":
        return None
    block_align = 0
    while True:
        chunk = f.read(8)
        if len(chunk) < 8:
            return None
        kind, size = chunk[:4], int.from_bytes(chunk[4:], "little")
        if kind == b"data":
            return None if size in _UNKNOWN_WAV_SIZES or not block_align else size // block_align
        body = f.read(size + (size & 1))  # chunks are padded to an even size
        if kind == b"fmt " and len(body) >= 14:
            block_align = int.from_bytes(body[12:14], "little")


class AudioFile:
    """An open audio input: ``name`` (a path or ``-``), ``rate``, ``channels`` and
    ``blocks()`` of mono float32. ``samples_read`` counts the samples (per channel) handed
    out so far. Errors name the input by ``label``."""

    def __init__(self, name: str | Path, raw: RawFormat | None = None) -> None:
        self.name = str(name)
        self.label = "standard input" if self.name == STDIN else self.name  # in messages
        self.raw = raw
        self.samples_read = 0
        self.declared_samples: int | None = None  # what a file's header promises
        path = None if self.name == STDIN else Path(self.name)
        if path is not None and path.is_dir():
            raise AudioFileError(f"{self.label}: is a directory, not an audio file")
        if path is not None and not path.is_file():
            raise AudioFileError(f"{self.label}: audio file not found")
        try:
            if raw is not None:
                self._open_raw(path)
            else:
                self._open_soundfile(path)
        except OSError as e:
            raise AudioFileError(f"{self.label}: cannot be read ({e.strerror or e})") from None

    def _open_raw(self, path: Path | None) -> None:
        if path is not None and path.stat().st_size == 0:
            raise AudioFileError(f"{self.label}: holds no audio samples")
        self.rate, self.channels = self.raw.rate, 1
        self._file = sys.stdin.buffer if path is None else open(path, "rb")
        self._owns_file = path is not None

    def _open_soundfile(self, path: Path | None) -> None:
        import soundfile as sf

        source = io.BytesIO(sys.stdin.buffer.read()) if path is None else path
        try:
            with codec_stderr_caught():  # (the MP3 decoder's chatter: codec_stderr)
                self._file = sf.SoundFile(source)
        except sf.SoundFileError as e:
            raise AudioFileError(f"{self.label}: not a readable audio file "
                                 f"({_libsndfile_says(e)})") from None
        self._owns_file = True
        if self._file.frames <= 0:
            raise AudioFileError(f"{self.label}: holds no audio samples")
        self.rate = int(self._file.samplerate)
        self.channels = int(self._file.channels)
        if path is not None:  # (standard input's writer could not fill in the length)
            self.declared_samples = int(self._file.frames)
            if self._file.format in ("WAV", "WAVEX"):  # libsndfile cut frames to the data
                with open(path, "rb") as f:
                    self.declared_samples = _wav_declared_frames(f) or self.declared_samples

    @property
    def seconds_read(self) -> float:
        return self.samples_read / self.rate

    def blocks(self, seconds: float = 1.0, channel: int | None = None) -> Iterator[np.ndarray]:
        """Mono float32 blocks of ``seconds`` (the last may be shorter): one ``channel``
        (0-based; e.g. the caller's side of a stereo call recording) or, with None, all
        channels averaged. Raises AudioFileError, after the blocks read before it, when
        the input is damaged or turns out to hold no samples; closes the input at the end."""
        if channel is not None and not 0 <= channel < self.channels:
            raise AudioFileError(f"{self.label}: has {self.channels} channel(s), no channel "
                                 f"{channel}")
        return self._blocks(max(1, int(seconds * self.rate)), channel)

    def shortfall(self) -> str | None:
        """After the last block: a warning when the header promised more samples than the
        file held, else None."""
        declared = self.declared_samples
        if declared is None or self.samples_read >= declared:
            return None
        return (f"{self.label}: its header promises {declared / self.rate:.2f} s of audio but "
                f"it holds {self.seconds_read:.2f} s; transcribed what is there")

    def _blocks(self, size: int, channel: int | None) -> Iterator[np.ndarray]:
        try:
            for frames in (self._raw_blocks(size) if self.raw else self._soundfile_blocks(size)):
                if frames.ndim == 2:
                    frames = frames[:, channel] if channel is not None else frames.mean(axis=1)
                block = np.ascontiguousarray(frames, dtype=np.float32)
                self.samples_read += len(block)
                yield block
        finally:
            if self._owns_file:
                self._file.close()
        if self.samples_read == 0:
            raise AudioFileError(f"{self.label}: holds no audio samples")

    def _damaged(self, why: str) -> AudioFileError:
        return AudioFileError(f"{self.label}: unreadable after {self.seconds_read:.2f} s ({why})")

    def _soundfile_blocks(self, size: int) -> Iterator[np.ndarray]:
        import soundfile as sf

        while True:
            try:
                with codec_stderr_caught():
                    frames = self._file.read(size, dtype="float32", always_2d=True)
            except sf.SoundFileError as e:  # e.g. "flac decoder lost sync" in a cut file
                raise self._damaged(_libsndfile_says(e)) from None
            if not len(frames):
                return
            yield frames

    def _raw_blocks(self, size: int) -> Iterator[np.ndarray]:
        encoding = self.raw.encoding
        width = sample_size(encoding)
        while data := self._file.read(size * width):
            whole = len(data) - len(data) % width
            if whole:
                yield decode_pcm(data[:whole], encoding)
            if whole < len(data):
                raise self._damaged(f"it ends inside a {width}-byte {encoding} sample")
