"""The offline model of a second pass: a whole utterance's samples in, words with times out.

    model: OfflineModel = WhisperModel(WhisperConfig())       # streamdec.models.whisper
    out = model.transcribe(samples)     # samples: (n,) float32 in [-1, 1] at model.sample_rate
    out.segments[0].words[0]            # OfflineWord(text, start, end, prob), seconds from 0
    hyps = model.nbest(samples, 8)      # up to 8 OfflineHypothesis(text, score), best first

A model is shared by every stream and holds no per-utterance state: ``transcribe`` may be
called from several threads at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["OfflineModel", "OfflineWord", "OfflineSegment", "OfflineTranscript",
           "OfflineHypothesis"]


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


@dataclass(frozen=True)
class OfflineHypothesis:
    """One hypothesis of an n-best decode: its text as written, and its score."""

    text: str  # as written (casing, punctuation)
    score: float  # length-normalised log-prob: its tokens' total log-prob / their number


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

    def nbest(self, samples: np.ndarray, n: int) -> tuple[OfflineHypothesis, ...]:
        """Up to ``n`` hypotheses of ``samples`` ((k,) float32 at ``sample_rate``) from one
        beam search of width ``n``, best first by score; empty when ``samples`` are longer
        than the one window the model decodes at once. Thread-safe."""
