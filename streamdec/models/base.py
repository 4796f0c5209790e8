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

__all__ = ["ModelMeta", "TransducerModel", "probe_meta", "feature_facts", "DECLARED_KEYS"]

#: Metadata keys a model may state about its features and units (all optional).
DECLARED_KEYS = ("blank_id", "frame_shift_ms", "sample_rate", "subsampling_factor")


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
    blank_id: int  # of the model's units (``<blk>`` in tokens.txt)
    frame_shift_ms: float  # of the feature frames (the feature config's)
    sample_rate: int  # of the features' input (the feature config's)
    # Optional facts the model files state in their metadata (``blank_id``,
    # ``frame_shift_ms``, ``sample_rate``), checked against the rest by ``probe_meta``.
    declared: tuple[tuple[str, float], ...] = ()
    # The values of the networks' weights in all (encoder, decoder, joiner; 0: not known): a
    # measure of the model's cost the same in fp32 and int8, which picks the engine's
    # batch size and decode threads (``streamdec.engine.sizes_for``).
    weights: int = 0

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


def probe_meta(model: TransducerModel, *, model_type: str, chunk_frames: int, chunk_shift: int,
               context_size: int, feature_dim: int, blank_id: int, frame_shift_ms: float,
               sample_rate: int, where: object, declared: dict[str, float] | None = None,
               weights: int = 0) -> ModelMeta:
    """The model's complete metadata, with one test call of each network: T' and D come
    from the encoder's output, V from the joiner's (nothing hard-coded). ``blank_id``: of
    the model's units (tokens.txt); ``frame_shift_ms``, ``sample_rate``: the feature
    config's; ``where`` names the file in errors; ``declared``: the optional
    ``DECLARED_KEYS`` the files state (ModelLoadError where they disagree with the rest,
    or the blank id is outside the vocabulary); ``weights``: ``ModelMeta.weights``."""
    from ..errors import ModelLoadError

    if not 0 < chunk_shift <= chunk_frames:
        raise ModelLoadError(f"{where}: need 0 < decode_chunk_len <= T, got "
                             f"{chunk_shift}, {chunk_frames}")
    probe = np.zeros((1, chunk_frames, feature_dim), np.float32)
    encoder_out, _ = model.encode(probe, model.state_layout.initial())
    decoder_out = model.decode(np.zeros((1, context_size), np.int64))
    logits = model.join(encoder_out[:, 0], decoder_out)
    t_out = encoder_out.shape[1]
    if t_out == 0 or chunk_shift % t_out:
        raise ModelLoadError(f"{where}: decode_chunk_len {chunk_shift} is not a multiple of "
                             f"the {t_out} encoder frames one call produces")
    declared = dict(declared or {})
    factor = declared.pop("subsampling_factor", None)
    if factor is not None and factor != chunk_shift // t_out:
        raise ModelLoadError(f"{where}: metadata subsampling_factor {factor:g} but one call turns "
                             f"{chunk_shift} frames into {t_out} (factor {chunk_shift // t_out})")
    given = {"blank_id": blank_id, "frame_shift_ms": frame_shift_ms, "sample_rate": sample_rate}
    for key, value in sorted(declared.items()):
        if key in given and value != given[key]:
            source = "tokens.txt" if key == "blank_id" else f"features.{key}"
            raise ModelLoadError(f"{where}: the model states {key} = {value:g} but "
                                 f"{source} gives {given[key]:g}")
    vocab_size = logits.shape[-1]
    if not 0 <= blank_id < vocab_size:
        raise ModelLoadError(f"{where}: blank id {blank_id} outside the vocabulary "
                             f"[0, {vocab_size})")
    return ModelMeta(model_type=model_type, chunk_frames=chunk_frames, chunk_shift=chunk_shift,
                     encoder_frames_per_chunk=t_out, feature_dim=feature_dim,
                     joiner_dim=encoder_out.shape[2], context_size=context_size,
                     vocab_size=vocab_size, declared=tuple(sorted(declared.items())),
                     weights=weights, **given)


def feature_facts(tokens, features) -> dict:
    """What ``probe_meta`` needs besides the networks, for a model's ``tokens`` file (the
    one ``ModelFiles`` chose) and the ``features`` (a ``FeatureConfig``) it is run with:
    the blank id of its tokens, the frame shift and the sample rate."""
    from ..tokens import SymbolTable

    return {"blank_id": SymbolTable.from_file(tokens).blank_id,
            "frame_shift_ms": features.frame_shift_ms, "sample_rate": features.sample_rate}
