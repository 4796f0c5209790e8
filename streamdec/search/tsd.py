"""Time synchronous decoding (Saon et al., ICASSP 2020).

Per encoder frame, up to ``max_sym_exp`` expansion rounds over the set C (first the beam):
every hypothesis of C ends the frame with a blank (collected in A, equal sequences
log-added); except in the last round, its ``beam`` best token children form the next C
(merged, the ``beam`` best kept). The new beam is the ``beam`` best of A. A frame emits at
most ``max_sym_exp - 1`` symbols along a path.

Each round is one decoder call and one joiner call for the C sets of all streams.

Shape legend: N streams, D joiner dim.
"""

from __future__ import annotations

import numpy as np

from .base import Hypothesis
from .beam_utils import BeamSearchBase, merge, prune
from .context_graph import ContextGraph
from .word_graph import WordGraph

__all__ = ["TsdSearch"]


class TsdSearch(BeamSearchBase):
    def _frame(self, beams: list[list[Hypothesis]], enc: np.ndarray, frames: list[int],
               graphs: list[ContextGraph | None], words: list[WordGraph | None]
               ) -> list[list[Hypothesis]]:
        """enc (N, D): one frame per stream -> the new beams."""
        k, rounds = self.config.beam, self.config.max_sym_exp
        ended: list[list[Hypothesis]] = [[] for _ in beams]  # A
        current = beams  # C
        for v in range(rounds):
            scored, rows = self._score(current, enc, graphs, words)
            nxt = []
            for n, r in enumerate(rows):
                ended[n] = merge(ended[n] + [scored.blank_child(i) for i in r])
                if v == rounds - 1:
                    continue
                nxt.append(scored.select([(i, int(tok), frames[n]) for i in r
                                          for tok in scored.top_tokens(i, k)], k))
            current = nxt
        return [prune(a, k) for a in ended]
