"""Alignment-length synchronous decoding (Saon et al., ICASSP 2020), truly incremental.

Step i runs over alignment length: a hypothesis with u tokens in the segment is at frame
``t = i - u`` (frames counted from the segment start; frame 0 is used). Each step expands
every hypothesis at its own frame (a blank moves it to t + 1, a token keeps it at t), merges
equal sequences by log-add-exp and keeps the ``beam`` best.

Incremental rule: step i runs only when every hypothesis of the beam has its frame; the
encoder frames not consumed yet wait inside the state (``buffer``, a value). With that rule
the result equals ALSD over the whole utterance at once. The offline bound
``u_max = min(u_max, T - 1)`` needs the total length, so a per-frame symbol cap
(``max_sym_per_frame_alsd``) replaces it.

End of segment (``finalize``): the remaining steps run with the total length known
(hypotheses past the last frame drop out); the answer is the set of hypotheses whose blank
consumed the last frame, or the beam when that set is empty.

Shape legend: N streams, k buffered frames, D joiner dim, V vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from .base import Hypothesis
from .beam_utils import BeamSearchBase, BeamState, score_hyps, tokens_at_frame

__all__ = ["AlsdSearch", "AlsdState"]


@dataclass(frozen=True, eq=False)  # holds an array: compared by identity
class AlsdState(BeamState):
    step_index: int = 0  # i: the next alignment step of the segment
    # (k, D): frames [encoder_frame_offset - k, encoder_frame_offset)
    buffer: np.ndarray | None = None
    ended_last: tuple[Hypothesis, ...] = ()  # blank consumed frame encoder_frame_offset - 1

    def frame_of(self, hyp: Hypothesis) -> int:
        """Absolute frame a hypothesis is at before step ``step_index``."""
        return self.segment_start + self.step_index - len(hyp.tokens)

    def frame(self, t: int) -> np.ndarray:
        return self.buffer[t - (self.encoder_frame_offset - len(self.buffer))]


class AlsdSearch(BeamSearchBase):
    state_class = AlsdState

    def step(self, states: Sequence[AlsdState], encoder_out: np.ndarray) -> list[AlsdState]:
        """encoder_out (N, T', D): appended to each buffer, then every step that can run."""
        if encoder_out.shape[1] == 0:
            return list(states)
        grown = []
        for s, enc in zip(states, encoder_out):
            buf = enc.copy() if s.buffer is None else np.concatenate([s.buffer, enc])
            grown.append(replace(s, buffer=buf, ended_last=(),
                                 encoder_frame_offset=s.encoder_frame_offset + len(enc)))
        return [self._trim(s) for s in self._run(grown, ended=False)]

    def _run(self, states: list[AlsdState], ended: bool) -> list[AlsdState]:
        """Run alignment steps while any stream can; with ``ended`` the stream is over."""
        states = list(states)
        while True:
            runnable = [n for n, s in enumerate(states) if self._can_step(s, ended)]
            if not runnable:
                return states
            for n, s in zip(runnable, self._step_once([states[n] for n in runnable])):
                states[n] = s

    @staticmethod
    def _can_step(state: AlsdState, ended: bool) -> bool:
        if state.buffer is None or not state.hyps:
            return False
        frames = [state.frame_of(h) for h in state.hyps]
        if ended:
            return min(frames) < state.encoder_frame_offset
        return max(frames) < state.encoder_frame_offset

    def _step_once(self, states: list[AlsdState]) -> list[AlsdState]:
        """One alignment step of several streams: one decoder + one joiner call."""
        live = [[h for h in s.hyps if s.frame_of(h) < s.encoder_frame_offset] for s in states]
        enc = np.stack([s.frame(s.frame_of(h)) for s, hs in zip(states, live) for h in hs])
        flat = [h for hs in live for h in hs]
        graphs = [s.graph for s, hs in zip(states, live) for _ in hs]
        words = [s.words for s, hs in zip(states, live) for _ in hs]
        scored = score_hyps(self, flat, enc, graphs, words)
        out, r = [], 0
        for s, hs in zip(states, live):
            cands, ended_last = [], list(s.ended_last)
            for h in hs:
                t = s.frame_of(h)
                cands.append((r, self.blank_id, t))
                if t == s.encoder_frame_offset - 1:
                    ended_last.append(scored.blank_child(r))
                if tokens_at_frame(h, t) < self.config.max_sym_per_frame_alsd:
                    cands += [(r, int(v), t) for v in scored.top_tokens(r, self.config.beam)]
                r += 1
            out.append(replace(s, hyps=tuple(scored.select(cands, self.config.beam)),
                               step_index=s.step_index + 1, ended_last=tuple(ended_last)))
        return out

    @staticmethod
    def _trim(state: AlsdState) -> AlsdState:
        """Drop buffered frames no hypothesis can need again."""
        if state.buffer is None or not state.hyps:
            return state
        first = min(state.frame_of(h) for h in state.hyps)
        drop = first - (state.encoder_frame_offset - len(state.buffer))
        return replace(state, buffer=state.buffer[drop:]) if drop > 0 else state

    def _live_hyps(self, state: AlsdState) -> list[Hypothesis]:
        """The beam and the hypotheses whose blank consumed the last frame (the segment
        may end with those)."""
        return list(state.hyps) + list(state.ended_last)

    def _end_hyps(self, state: AlsdState) -> list[Hypothesis]:
        done = self._run([state], ended=True)[0]
        return list(done.ended_last or done.hyps)
