"""Encoder state layouts: how per-stream states are batched and split again.

A model's encoder carries k state tensors from one chunk to the next. Each has a batch
axis somewhere (axis 1 for LSTM h/c, axis 2 for conformer caches, 0 or 1 for zipformer2
tensors). A stream keeps its own states with that axis of size 1; ``stack`` concatenates
the states of N streams along each tensor's batch axis and ``unstack`` splits them back.
The two are exact inverses (no arithmetic, only copies).

What an encode returns is batched; splitting it into N streams' states after every chunk,
only to concatenate them again before the next, costs k x N copies per chunk (98 x 16 for
a zipformer2 at 16 streams). So ``share`` hands each stream a ``StateRow`` instead: its
row of the returned batch. ``stack`` of rows that are a whole batch in its order (the same
streams decoded together again: the steady state) gives that batch back as it is, without
a copy; rows of several batches, or of part of one, are sliced out of theirs, a run of
consecutive rows at a time. The values are the same either way (only copies, never
arithmetic), so the encoder sees the same input whatever path built it. ``order`` puts
the streams of a batch in the order that copies least (the recognizer encodes them in it:
a stream's results do not depend on its place in the batch), so the same streams gathered
in another order (as they became ready) still feed their batch back.

A row keeps its whole batch alive. When ``stack`` takes part of a batch, the rows it left
out (a stream that waits for audio, or has ended) are copied out into their own arrays
(``StateRow`` is then materialised), so a stream that sits idle holds only its own states.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np

__all__ = ["StateSpec", "StateLayout", "StateRow", "EncoderStates", "batch_axis_from_table"]

# Fallback only, for exports that declare fixed sizes: the batch axis of each state by model
# family and state-name prefix, as the icefall exporters lay them out.
_BATCH_AXIS_TABLE: dict[str, tuple[tuple[str, int], ...]] = {
    "lstm": (("", 1),),
    "conformer": (("processed_lens", 0), ("cached_attn", 2), ("cached_conv", 2)),
    "zipformer2": (("cached_key", 1), ("cached_nonlin_attn", 1), ("cached_val1", 1),
                   ("cached_val2", 1), ("cached_conv1", 0), ("cached_conv2", 0),
                   ("embed_states", 0), ("processed_lens", 0)),
    "zipformer": (("cached_len", 1), ("cached_avg", 1), ("cached_key", 2), ("cached_val2", 2),
                  ("cached_val", 2), ("cached_conv1", 1), ("cached_conv2", 1)),
}


def batch_axis_from_table(model_type: str, state_name: str) -> int | None:
    """The batch axis the family table gives for a state name, or None."""
    for prefix, axis in _BATCH_AXIS_TABLE.get(model_type, ()):
        if state_name.startswith(prefix):
            return axis
    return None


@dataclass(frozen=True)
class StateSpec:
    """One state tensor: its name, dtype, batch axis and shape with batch size 1."""

    name: str
    dtype: np.dtype
    batch_axis: int
    shape: tuple[int, ...]  # with shape[batch_axis] == 1


class _Batch:
    """State tensors of one batched encode, shared by the rows ``share`` handed out."""

    __slots__ = ("tensors", "size", "rows", "__weakref__")

    def __init__(self, tensors: list[np.ndarray], size: int) -> None:
        self.tensors = tensors
        self.size = size
        self.rows: list[weakref.ref] = []  # weak: a row keeps its batch, not the other way


class StateRow:
    """One stream's encoder states: row ``index`` of a batch an encode returned, or (once
    materialised) a tuple of its own arrays with a batch axis of size 1. A value: what it
    stands for never changes; only where the arrays live does, once, and any thread may
    see either. Made by ``StateLayout.share``; read by ``StateLayout.stack`` (batched) or
    ``StateLayout.own`` (one stream's arrays)."""

    __slots__ = ("_batch", "_index", "_own", "__weakref__")

    def __init__(self, batch: _Batch, index: int) -> None:
        self._batch: _Batch | None = batch
        self._index = index
        self._own: tuple[np.ndarray, ...] | None = None

    def _where(self) -> "_Batch | tuple[np.ndarray, ...]":
        # read the batch before the own arrays: ``_materialise`` sets them in the other
        # order, so whichever of the two this thread sees is there
        batch = self._batch
        own = self._own
        return own if own is not None else batch

    def _materialise(self, layout: "StateLayout") -> None:
        where = self._where()
        if isinstance(where, _Batch):
            self._own = _row_copy(layout.specs, where.tensors, self._index)
            self._batch = None


#: one stream's encoder states: a tuple of arrays (batch axis of size 1) or a ``StateRow``
EncoderStates = Union[Sequence[np.ndarray], StateRow]


class _Run:
    """Rows ``start:stop`` of one batch, consecutive in a stack."""

    __slots__ = ("batch", "start", "stop")

    def __init__(self, batch: _Batch, start: int, stop: int) -> None:
        self.batch, self.start, self.stop = batch, start, stop


def _rows(t: np.ndarray, axis: int, start: int, stop: int) -> np.ndarray:
    return t[(slice(None),) * axis + (slice(start, stop),)]


def _row_copy(specs: Sequence[StateSpec], tensors: Sequence[np.ndarray],
              index: int) -> tuple[np.ndarray, ...]:
    """Row ``index`` of a batch's tensors as one stream's own arrays (batch axis of size 1)."""
    return tuple(_rows(t, spec.batch_axis, index, index + 1).copy()
                 for spec, t in zip(specs, tensors))


@dataclass(frozen=True)
class StateLayout:
    """All state tensors of one encoder, in input order (inputs 1..k, outputs 1..k)."""

    specs: tuple[StateSpec, ...]

    def initial(self) -> list[np.ndarray]:
        """Zero states for one stream."""
        return [np.zeros(s.shape, dtype=s.dtype) for s in self.specs]

    def stack(self, per_stream: Sequence[EncoderStates]) -> list[np.ndarray]:
        """[stream] states (tuples with batch 1 each, or ``StateRow``) -> [tensor] batched
        over the streams, in order. Rows that are one whole batch in its order give that
        batch's tensors themselves (the caller must not write into them)."""
        pieces: list = []  # _Run (consecutive rows of one batch) or a stream's own arrays
        for states in per_stream:
            where = states._where() if isinstance(states, StateRow) else states
            if isinstance(where, _Batch):
                last = pieces[-1] if pieces else None
                if (isinstance(last, _Run) and last.batch is where
                        and last.stop == states._index):
                    last.stop += 1
                else:
                    pieces.append(_Run(where, states._index, states._index + 1))
            else:
                pieces.append(where)
        if len(pieces) == 1:
            one = pieces[0]
            if not isinstance(one, _Run):
                return list(one)
            if one.start == 0 and one.stop == one.batch.size:
                return list(one.batch.tensors)
        out = []
        for i, spec in enumerate(self.specs):
            axis = spec.batch_axis
            out.append(np.concatenate(
                [_rows(p.batch.tensors[i], axis, p.start, p.stop) if isinstance(p, _Run)
                 else p[i] for p in pieces], axis=axis))
        self._materialise_left_out([p for p in pieces if isinstance(p, _Run)])
        return out

    def order(self, per_stream: Sequence[EncoderStates]) -> list[int]:
        """The positions of ``per_stream`` in the order ``stack`` copies least: the rows of
        each batch together in row order (the batches in the order their first row comes),
        then the streams with their own arrays as they came. Rows of one whole batch, in
        whatever order they come, are then that batch, fed back without a copy."""
        batches: dict[int, list[tuple[int, int]]] = {}
        own = []
        for pos, states in enumerate(per_stream):
            where = states._where() if isinstance(states, StateRow) else states
            if isinstance(where, _Batch):
                batches.setdefault(id(where), []).append((states._index, pos))
            else:
                own.append(pos)
        return [pos for rows in batches.values() for _, pos in sorted(rows)] + own

    def _materialise_left_out(self, runs: list["_Run"]) -> None:
        """Copy out the rows of the batches in ``runs`` that ``runs`` leave out and someone
        still holds, so that they no longer keep their whole batch alive."""
        taken: dict[int, tuple[_Batch, set[int]]] = {}
        for run in runs:
            taken.setdefault(id(run.batch), (run.batch, set()))[1].update(
                range(run.start, run.stop))
        for batch, rows in taken.values():
            if len(rows) == batch.size:
                continue
            for ref in batch.rows:
                row = ref()
                if row is not None and row._index not in rows:
                    row._materialise(self)

    def share(self, batched: Sequence[np.ndarray], batch_size: int) -> list[EncoderStates]:
        """Per stream of an encode's batch of ``batched`` states, its states: a
        ``StateRow`` of the batch, which ``stack`` gives back without copies when the same
        streams come again in the same order (a batch of 1: the tensors themselves)."""
        if batch_size == 1:
            return [tuple(batched)]
        batch = _Batch(list(batched), batch_size)
        rows = [StateRow(batch, n) for n in range(batch_size)]
        batch.rows = [weakref.ref(r) for r in rows]
        return rows

    def own(self, states: EncoderStates) -> tuple[np.ndarray, ...]:
        """One stream's states as its own arrays (batch axis of size 1)."""
        if isinstance(states, StateRow):
            where = states._where()
            if isinstance(where, _Batch):
                return _row_copy(self.specs, where.tensors, states._index)
            return where
        return tuple(states)

    def unstack(self, batched: Sequence[np.ndarray], batch_size: int) -> list[list[np.ndarray]]:
        """Inverse of ``stack``: [tensor] batched -> [stream][tensor] with batch 1 each,
        each a copy (not a view that would keep the whole batch alive)."""
        if batch_size == 1:
            return [list(batched)]
        return [list(_row_copy(self.specs, batched, n)) for n in range(batch_size)]
