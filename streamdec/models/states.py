"""Encoder state layouts: how per-stream states are batched and split again.

A model's encoder carries k state tensors from one chunk to the next. Each has a batch
axis somewhere (axis 1 for LSTM h/c, axis 2 for conformer caches, 0 or 1 for zipformer2
tensors). A stream keeps its own states with that axis of size 1; ``stack`` concatenates
the states of N streams along each tensor's batch axis and ``unstack`` splits them back.
The two are exact inverses (no arithmetic, only copies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["StateSpec", "StateLayout"]


@dataclass(frozen=True)
class StateSpec:
    """One state tensor: its name, dtype, batch axis and shape with batch size 1."""

    name: str
    dtype: np.dtype
    batch_axis: int
    shape: tuple[int, ...]  # with shape[batch_axis] == 1


@dataclass(frozen=True)
class StateLayout:
    """All state tensors of one encoder, in input order (inputs 1..k, outputs 1..k)."""

    specs: tuple[StateSpec, ...]

    def initial(self) -> list[np.ndarray]:
        """Zero states for one stream."""
        return [np.zeros(s.shape, dtype=s.dtype) for s in self.specs]

    def stack(self, per_stream: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
        """[stream][tensor] (batch 1 each) -> [tensor] batched over the streams, in order."""
        if len(per_stream) == 1:
            return list(per_stream[0])
        return [np.concatenate([states[i] for states in per_stream], axis=spec.batch_axis)
                for i, spec in enumerate(self.specs)]

    def unstack(self, batched: Sequence[np.ndarray], batch_size: int) -> list[list[np.ndarray]]:
        """Inverse of ``stack``: [tensor] batched -> [stream][tensor] with batch 1 each."""
        if batch_size == 1:
            return [list(batched)]
        out: list[list[np.ndarray]] = [[] for _ in range(batch_size)]
        for spec, tensor in zip(self.specs, batched):
            for n, piece in enumerate(np.split(tensor, batch_size, axis=spec.batch_axis)):
                out[n].append(np.ascontiguousarray(piece))
        return out
