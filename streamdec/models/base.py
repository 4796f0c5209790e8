"""The transducer model protocol every backend implements, and its metadata.

Shape legend: N batch, T feature frames per call (``meta.chunk_frames``), F feature dim,
T' encoder frames per call (``meta.encoder_frames_per_chunk``), D joiner dim,
C context size, V vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from .states import StateLayout

__all__ = ["ModelMeta", "TransducerModel"]


@dataclass(frozen=True)
class ModelMeta:
    """Facts read from the model files, never hard-coded."""

    model_type: str
    chunk_frames: int  # T: feature frames fed per encoder call (chunk + right context)
    chunk_shift: int  # decode_chunk_len: feature frames the stream advances per call
    encoder_frames_per_chunk: int  # T': encoder output frames per call (found by a test call)
    feature_dim: int  # F
    joiner_dim: int  # D
    context_size: int  # C
    vocab_size: int  # V
    blank_id: int = 0
    frame_shift_ms: float = 10.0  # of the feature frames

    @property
    def subsampling(self) -> int:
        return self.chunk_shift // self.encoder_frames_per_chunk

    @property
    def encoder_frame_seconds(self) -> float:
        """Duration of one encoder output frame (40 ms for subsampling 4 at 10 ms shift)."""
        return self.subsampling * self.frame_shift_ms / 1000.0


class TransducerModel(Protocol):
    """A streaming transducer: chunked encoder with carried state, stateless decoder, joiner.

    All methods are pure functions of their inputs (the model holds no per-stream state)
    and may be called from a worker thread."""

    meta: ModelMeta
    state_layout: StateLayout

    def encode(self, features: np.ndarray, states: Sequence[np.ndarray]
               ) -> tuple[np.ndarray, list[np.ndarray]]:
        """features (N, T, F) float32 and batched states -> encoder_out (N, T', D), next states."""
        ...

    def decode(self, contexts: np.ndarray) -> np.ndarray:
        """contexts (N, C) int64 (the last C tokens; -1 pads) -> decoder_out (N, D)."""
        ...

    def join(self, encoder_out: np.ndarray, decoder_out: np.ndarray) -> np.ndarray:
        """encoder_out (N, D), decoder_out (N, D) -> raw logits (N, V)."""
        ...
