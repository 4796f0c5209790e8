"""Neural LM shallow fusion (ESPnet's ``lm_weight``): a unit-level LM in ONNX, scored once
per search step for all hypotheses of all streams.

The ONNX interface (``recipes/synthetic-en/train_lm.py`` exports one):

    inputs:  token (N,) int64, state (N, S) float32
    outputs: log_probs (N, V) float32 = log p(next unit | history, token), next_state (N, S)
    metadata: vocab_size (= the transducer's V), state_size (S), sos_id, eos_id

The initial state is zeros and the first token ``sos_id``; ``log_probs[:, eos_id]`` ends
a sentence. Every hypothesis carries an ``LmState``: the state after its units and the
log-probabilities of its next unit. A child made by a unit holds a *pending* state (its
parent's state and the unit); ``resolve`` computes all pending states of a batch in one
call. A state is written once (pending -> resolved, the same values whoever resolves it),
so hypotheses that share one stay consistent.

With s = ``lm_scale`` a non-blank unit u adds ``s * log p(u | history)`` before pruning,
blanks add nothing, and the end of a segment adds ``s * log p(eos | history)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ModelLoadError

__all__ = ["LmState", "NeuralLm"]


class LmState:
    """The LM after a unit sequence; pending until ``NeuralLm.resolve`` fills it."""

    __slots__ = ("parent", "token", "vector", "log_probs")

    def __init__(self, parent: "LmState | None", token: int,
                 vector: np.ndarray | None = None, log_probs: np.ndarray | None = None):
        self.parent = parent
        self.token = token
        self.vector = vector  # (S,) after ``token``
        self.log_probs = log_probs  # (V,) of the next unit

    @property
    def resolved(self) -> bool:
        return self.log_probs is not None


class NeuralLm:
    """An ONNX unit LM (see the module notes); shared by the streams of a search."""

    def __init__(self, path: str | Path, vocab_size: int, num_threads: int = 1) -> None:
        import onnxruntime as ort

        path = Path(path)
        if not path.is_file():
            raise ModelLoadError(f"{path}: LM file not found")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = num_threads
        opts.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(str(path), opts,
                                                 providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types
            raise ModelLoadError(f"{path}: not an ONNX model ({e})") from e
        meta = self._session.get_modelmeta().custom_metadata_map
        try:
            self.vocab_size = int(meta["vocab_size"])
            self.state_size = int(meta["state_size"])
            self.sos_id, self.eos_id = int(meta["sos_id"]), int(meta["eos_id"])
        except (KeyError, ValueError) as e:
            raise ModelLoadError(f"{path}: LM metadata needs vocab_size, state_size, sos_id, "
                                 f"eos_id ({e})") from e
        names = {i.name for i in self._session.get_inputs()}
        if names != {"token", "state"}:
            raise ModelLoadError(f"{path}: LM inputs must be token and state, got {sorted(names)}")
        if self.vocab_size != vocab_size:
            raise ModelLoadError(f"{path}: LM over {self.vocab_size} units, the model has "
                                 f"{vocab_size}")
        self.path = path
        self._zero = LmState(None, -1, np.zeros(self.state_size, np.float32))

    def initial(self) -> LmState:
        """The state of a new segment (pending: the start token)."""
        return LmState(self._zero, self.sos_id)

    @staticmethod
    def after(state: LmState, token: int) -> LmState:
        """The (pending) state after ``token``."""
        return LmState(state, token)

    def resolve(self, hyps: Sequence):
        """Compute the pending LM states of ``hyps`` (chains included), one call per level;
        returns ``hyps``."""
        while True:
            todo: dict[int, LmState] = {}
            for h in hyps:
                s = h.lm
                while s is not None and not s.resolved:  # the oldest pending one
                    if s.parent.resolved or s.parent is self._zero:
                        todo[id(s)] = s
                        break
                    s = s.parent
            if not todo:
                return hyps
            states = list(todo.values())
            logp, nxt = self._session.run(None, {
                "token": np.array([s.token for s in states], np.int64),
                "state": np.stack([s.parent.vector for s in states]).astype(np.float32)})
            for s, lp, v in zip(states, logp, nxt):
                s.vector, s.log_probs, s.parent = v, lp, None

    @staticmethod
    def log_probs(hyps: Sequence) -> np.ndarray:
        """(n, V) float64 next-unit log-probs of resolved hypotheses."""
        return np.stack([h.lm.log_probs for h in hyps]).astype(np.float64)

    def end_scores(self, hyps: Sequence) -> np.ndarray:
        """(n,) log p(eos) of resolved hypotheses."""
        return np.array([h.lm.log_probs[self.eos_id] for h in hyps], np.float64)
