"""The offline model of a second pass: a whole utterance's samples in, words with times out.

    model: OfflineModel = WhisperModel(WhisperConfig())       # streamdec.models.whisper
    out = model.transcribe(samples)     # samples: (n,) float32 in [-1, 1] at model.sample_rate
    out.segments[0].words[0]            # OfflineWord(text, start, end, prob), seconds from 0

A model is shared by every stream and holds no per-utterance state: ``transcribe`` may be
called from several threads at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["OfflineModel", "OfflineWord", "OfflineSegment", "OfflineTranscript"]


@dataclass(frozen=True)
class OfflineWord:
    """One word as the model wrote it (casing and punctuation attached), in seconds from
    the start of the samples transcribed."""

    text: str
    start: float
    end: float
    prob: float  # the model's probability of the word, in [0, 1]


@dataclass(frozen=True)
class OfflineSegment:
    """One decoded window of the utterance, with the model's own checks of it."""

    text: str  # as written (casing, punctuation)
    words: tuple[OfflineWord, ...]
    avg_logprob: float  # mean log-prob of its tokens
    no_speech_prob: float  # the model's probability that the window holds no speech
    compression_ratio: float  # len(text) / len(zlib(text)): high for repetition loops


@dataclass(frozen=True)
class OfflineTranscript:
    segments: tuple[OfflineSegment, ...]

    @property
    def words(self) -> tuple[OfflineWord, ...]:
        return tuple(w for s in self.segments for w in s.words)

    @property
    def text(self) -> str:
        return " ".join(s.text.strip() for s in self.segments if s.text.strip())


class OfflineModel(Protocol):
    """A model that decodes a whole utterance at once."""

    @property
    def sample_rate(self) -> int:
        """The rate of the samples ``transcribe`` takes (Hz)."""

    @property
    def name(self) -> str:
        """A short name for reports (e.g. ``whisper-tiny.en``)."""

    def transcribe(self, samples: np.ndarray) -> OfflineTranscript:
        """Decode ``samples`` ((n,) float32 at ``sample_rate``); thread-safe."""
