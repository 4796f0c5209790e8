"""Classic transducer beam search (Graves 2012; ESPnet's ``default_beam_search``).

Per encoder frame: the open set starts as the beam; repeatedly the best open hypothesis is
taken out and expanded at this frame: its blank child always goes to the kept set (without
the blank extension the loop can run forever), its ``beam`` best token children go
back to the open set. The frame ends when ``beam`` kept hypotheses score above the best
open one (or nothing is left open); the new beam is the ``beam`` best kept. Equal sequences
merge by log-add-exp in both sets. A path emits at most ``max_sym_per_frame_beam`` symbols
per frame, which bounds the loop on any model.

Batched over streams: each inner step expands one hypothesis of every stream still in its
loop, with one decoder call and one joiner call.

Shape legend: N streams, D joiner dim.
"""

from __future__ import annotations

import numpy as np

from .base import Hypothesis
from .beam_utils import BeamSearchBase, merge, prune, tokens_at_frame
from .context_graph import ContextGraph
from .word_graph import WordGraph

__all__ = ["ClassicBeamSearch"]


class ClassicBeamSearch(BeamSearchBase):
    def _frame(self, beams: list[list[Hypothesis]], enc: np.ndarray, frames: list[int],
               graphs: list[ContextGraph | None], words: list[WordGraph | None]
               ) -> list[list[Hypothesis]]:
        """enc (N, D): one frame per stream -> the new beams."""
        k, cap = self.config.beam, self.config.max_sym_per_frame_beam
        open_ = [list(b) for b in beams]
        kept: list[list[Hypothesis]] = [[] for _ in beams]
        active = list(range(len(beams)))
        while active:
            popped = []
            for n in active:
                best = max(range(len(open_[n])), key=lambda i: open_[n][i].score)
                popped.append(open_[n].pop(best))
            scored, _ = self._score([[h] for h in popped], enc[active],
                                    [graphs[n] for n in active], [words[n] for n in active])
            still = []
            for r, (n, h) in enumerate(zip(active, popped)):
                kept[n] = merge(kept[n] + [scored.blank_child(r)])
                if tokens_at_frame(h, frames[n]) < cap:
                    open_[n] = merge(open_[n] + [scored.child(r, int(v), frames[n])
                                                 for v in scored.top_tokens(r, k)])
                if open_[n]:
                    top = max(h.score for h in open_[n])
                    if sum(h.score > top for h in kept[n]) < k:
                        still.append(n)
            active = still
        return [prune(kept_n, k) for kept_n in kept]
