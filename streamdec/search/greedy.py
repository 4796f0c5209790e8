"""Greedy search: per encoder frame, the joiner's argmax; a token is appended and the
decoder re-run, up to ``max_sym_per_frame`` symbols per frame.

Batched over streams and frames: one joiner call scores all frames left in the chunk of
all streams; a stream that emits a token needs a new decoder output (one decoder call for
all such streams, through the decoder cache) and re-scores only its remaining frames.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from .config import require_beam_search
from .base import Hypothesis, Search, SearchState, initial_context

__all__ = ["GreedySearch", "GreedyState"]


@dataclass(frozen=True)
class GreedyState(SearchState):
    hyp: Hypothesis | None = None
    decoder_out: np.ndarray | None = None  # (D,) for hyp.context


class GreedySearch(Search[GreedyState]):
    def init_state(self, context: tuple[int, ...] | None = None, encoder_frame_offset: int = 0,
                   graph=None, words=None) -> GreedyState:
        if graph is not None:
            require_beam_search("greedy", "hotwords need")
        if words is not None:
            require_beam_search("greedy", "a lexicon, word LM or grammar needs")
        context = context or initial_context(self.context_size, self.blank_id)
        return GreedyState(encoder_frame_offset=encoder_frame_offset,
                           segment_start=encoder_frame_offset,
                           hyp=Hypothesis(context=context),
                           decoder_out=self.decoder_cache.get([context])[0])

    def step(self, states: Sequence[GreedyState], encoder_out: np.ndarray) -> list[GreedyState]:
        """encoder_out (N, T', D). Each round scores every frame a stream has left with its
        current decoder output in one joiner call, then each stream reads its rows up to
        its first token; only streams that emitted need a new decoder output and another
        round. The decisions equal a frame-by-frame walk."""
        num, num_frames = encoder_out.shape[:2]
        blanks = (self.blank_id, self.unk_id)
        max_sym = self.config.max_sym_per_frame
        hyps = [s.hyp for s in states]
        scores = [h.score for h in hyps]
        dec = np.stack([s.decoder_out for s in states])
        pos = [0] * num  # next frame each stream scores
        at_pos = [0] * num  # symbols already emitted at that frame
        todo = list(range(num))
        # first round: every frame of every stream, in stream-major order
        enc, dec_rows = encoder_out.reshape(num * num_frames, -1), np.repeat(dec, num_frames, 0)
        while todo:
            logp, reported = self.scores(enc, dec_rows)
            best = logp.argmax(axis=-1)
            picked = logp[np.arange(len(best)), best].tolist()
            best = best.tolist()
            emitted = []
            r = 0
            for n in todo:
                t, end, at, score = pos[n], r + num_frames - pos[n], at_pos[n], scores[n]
                for row in range(r, end):  # this stream's frames t, t + 1, ...
                    token = best[row]
                    score += picked[row]
                    if token in blanks:
                        t, at = t + 1, 0
                        continue
                    hyps[n] = hyps[n].extend(token, states[n].encoder_frame_offset + t,
                                             float(reported[row, token]), score)
                    at += 1
                    if at >= max_sym:
                        t, at = t + 1, 0
                    emitted.append(n)
                    break
                scores[n], pos[n], at_pos[n], r = score, t, at, end
            if emitted:
                dec[emitted] = self.decoder_cache.get([hyps[n].context for n in emitted])
            todo = [n for n in emitted if pos[n] < num_frames]
            if todo:
                rows_n = [n for n in todo for _ in range(pos[n], num_frames)]
                rows_t = [t for n in todo for t in range(pos[n], num_frames)]
                enc, dec_rows = encoder_out[rows_n, rows_t], dec[rows_n]
        return [replace(s, hyp=h.rescored(sc), decoder_out=dec[n],
                        encoder_frame_offset=s.encoder_frame_offset + num_frames)
                for n, (s, h, sc) in enumerate(zip(states, hyps, scores))]

    def partial(self, state: GreedyState) -> Hypothesis:
        return state.hyp

    def stable_length(self, state: GreedyState) -> int:
        """All of them: greedy search keeps one path and only appends to it, so a token,
        once emitted, is final within the segment."""
        return len(state.hyp.tokens)

    def finalize(self, state: GreedyState) -> list[Hypothesis]:
        return [state.hyp]

    def reset(self, state: GreedyState) -> GreedyState:
        return replace(state, hyp=Hypothesis(context=state.hyp.context),
                       segment_start=state.encoder_frame_offset)
