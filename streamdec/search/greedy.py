"""Greedy search: per encoder frame, the joiner's argmax; a token is appended and the
decoder re-run, up to ``max_sym_per_frame`` symbols per frame.

Batched over streams: one joiner call per frame (and per extra symbol round) for all
streams, one decoder call for all streams that emitted (through the decoder cache).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..errors import ConfigError
from .base import Hypothesis, Search, SearchState, initial_context

__all__ = ["GreedySearch", "GreedyState"]


@dataclass(frozen=True)
class GreedyState(SearchState):
    hyp: Hypothesis | None = None
    decoder_out: np.ndarray | None = None  # (D,) for hyp.context


class GreedySearch(Search[GreedyState]):
    name = "greedy"

    def init_state(self, context: tuple[int, ...] | None = None, frame_offset: int = 0,
                   graph=None) -> GreedyState:
        if graph is not None:
            raise ConfigError("hotwords need a beam search (modified_beam, alsd, tsd, beam, nsc)")
        context = context or initial_context(self.context_size, self.blank_id)
        return GreedyState(frame_offset=frame_offset, segment_start=frame_offset,
                           hyp=Hypothesis(context=context),
                           decoder_out=self.decoder_cache.get([context])[0])

    def step(self, states: Sequence[GreedyState], encoder_out: np.ndarray) -> list[GreedyState]:
        hyps = [s.hyp for s in states]
        dec = np.stack([s.decoder_out for s in states])
        for t in range(encoder_out.shape[1]):
            active = np.arange(len(states))
            for _ in range(self.config.max_sym_per_frame):
                logp, reported = self.scores(encoder_out[active, t], dec[active])
                best = logp.argmax(axis=-1)
                emitted = []
                for row, n in enumerate(active):
                    token = int(best[row])
                    score = hyps[n].score + float(logp[row, token])
                    if self.is_blank(token):
                        hyps[n] = replace(hyps[n], score=score)
                    else:
                        hyps[n] = hyps[n].extend(token, states[n].frame_offset + t,
                                                 float(reported[row, token]), score)
                        emitted.append(n)
                if not emitted:
                    break
                active = np.array(emitted)
                dec[active] = self.decoder_cache.get([hyps[n].context for n in emitted])
        advance = encoder_out.shape[1]
        return [replace(s, hyp=h, decoder_out=dec[n], frame_offset=s.frame_offset + advance)
                for n, (s, h) in enumerate(zip(states, hyps))]

    def partial(self, state: GreedyState) -> Hypothesis:
        return state.hyp

    def finalize(self, state: GreedyState) -> list[Hypothesis]:
        return [state.hyp]

    def reset(self, state: GreedyState) -> GreedyState:
        return replace(state, hyp=Hypothesis(context=state.hyp.context),
                       segment_start=state.frame_offset)
