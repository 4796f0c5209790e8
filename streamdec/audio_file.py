"""Reading audio files (any format soundfile reads) as blocks of mono float32 samples."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from .errors import StreamdecError

__all__ = ["AudioFile", "AudioFileError"]


class AudioFileError(StreamdecError):
    """An audio file is missing, unreadable or holds no samples."""


class AudioFile:
    """An open audio file: ``rate``, ``duration`` and ``blocks()`` of mono float32."""

    def __init__(self, path: str | Path) -> None:
        import soundfile as sf

        self.path = Path(path)
        if not self.path.is_file():
            raise AudioFileError(f"{self.path}: audio file not found")
        try:
            info = sf.info(str(self.path))
        except Exception as e:  # soundfile raises LibsndfileError / RuntimeError
            raise AudioFileError(f"{self.path}: not a readable audio file ({e})") from None
        if info.frames <= 0:
            raise AudioFileError(f"{self.path}: holds no audio samples")
        self.rate = int(info.samplerate)
        self.num_samples = int(info.frames)
        self.channels = int(info.channels)

    @property
    def duration(self) -> float:
        return self.num_samples / self.rate

    def blocks(self, seconds: float = 10.0, channel: int | None = None) -> Iterator[np.ndarray]:
        """Mono float32 blocks of ``seconds``: one ``channel`` (0-based; e.g. the caller's
        side of a stereo call recording) or, with None, all channels averaged."""
        import soundfile as sf

        if channel is not None and not 0 <= channel < self.channels:
            raise AudioFileError(f"{self.path}: has {self.channels} channel(s), no channel "
                                 f"{channel}")
        size = max(1, int(seconds * self.rate))
        blocks = sf.blocks(str(self.path), blocksize=size, dtype="float32", always_2d=True)
        return (np.ascontiguousarray(b[:, channel] if channel is not None else b.mean(axis=1))
                for b in blocks)
