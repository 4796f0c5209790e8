"""Modified beam search (icefall / sherpa-onnx): at most one symbol per frame.

Per encoder frame, for all hypotheses of all streams at once: one decoder call (through the
cache) and one joiner call; each stream keeps the ``beam`` (max_active_paths) best of its
(hypotheses x vocabulary) children: a blank keeps the sequence, a token appends it. Equal
sequences merge by log-add-exp. The best hypothesis is the one with the best score divided
by its number of tokens (see ``beam_utils``).

Shape legend: N streams, D joiner dim, V vocabulary size.
"""

from __future__ import annotations

import numpy as np

from .base import Hypothesis
from .beam_utils import BeamSearchBase, top_k_stable
from .context_graph import ContextGraph
from .word_graph import WordGraph

__all__ = ["ModifiedBeamSearch"]


class ModifiedBeamSearch(BeamSearchBase):
    def _frame(self, beams: list[list[Hypothesis]], enc: np.ndarray, frames: list[int],
               graphs: list[ContextGraph | None], words: list[WordGraph | None]
               ) -> list[list[Hypothesis]]:
        """enc (N, D): one frame per stream -> the new beams."""
        scored, rows = self._score(beams, enc, graphs, words)
        total, k = scored.total, self.config.beam
        vocab = total.shape[1]
        # every stream's (hypotheses x vocabulary) scores as one row (-inf after its own),
        # its k best in a stable order: the order each stream's own stable sort would give
        sizes = [len(r) * vocab for r in rows]
        if min(sizes) == max(sizes):
            flat = total.reshape(len(rows), sizes[0])
        else:
            flat = np.full((len(rows), max(sizes)), -np.inf)
            for n, r in enumerate(rows):
                flat[n, :sizes[n]] = total[r.start:r.stop].ravel()
        order = top_k_stable(flat, k)
        out = []
        for n, r in enumerate(rows):
            best = [i for i in order[n] if i < sizes[n]]
            out.append(scored.select([(r.start + i // vocab, i % vocab, frames[n]) for i in best],
                                     len(best)))
        return out
