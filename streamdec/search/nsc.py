"""N-step constrained beam search (Kim et al. 2020; ESPnet's ``nsc_beam_search``).

Per encoder frame:
1. Prefix merging: hypotheses sorted longest first; when a shorter hypothesis y_i is a
   proper prefix of y_j with at most ``prefix_alpha`` tokens fewer, the path "y_i, then the
   rest of y_j emitted at this frame" is log-added into y_j's score (computed from the
   original scores).
2. ``nstep`` expansion rounds: every hypothesis ends the frame with a blank (collected in
   S); its ``beam`` best token children, merged and pruned to ``beam``, are the next round's
   hypotheses. The children of the last round also end the frame with a blank.
3. The new beam: the ``beam`` best of S (equal sequences log-added).

Differences from ESPnet's ``nsc_beam_search``, on purpose: the token children are rebuilt every
round (not carried into the next round's pool), the last round's children are scored with
their own decoder output, and kept hypotheses are merged. A path emits at most ``nstep``
symbols per frame.

Each phase is one decoder call and one joiner call for all streams.

Shape legend: N streams, D joiner dim.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .base import Hypothesis
from .beam_utils import BeamSearchBase, merge, prune, score_hyps
from .context_graph import ContextGraph
from .word_graph import WordGraph

__all__ = ["NscSearch"]


class NscSearch(BeamSearchBase):
    def _frame(self, beams: list[list[Hypothesis]], enc: np.ndarray, frames: list[int],
               graphs: list[ContextGraph | None], words: list[WordGraph | None]
               ) -> list[list[Hypothesis]]:
        """enc (N, D): one frame per stream -> the new beams."""
        k = self.config.beam
        hyps = self._prefix_merge([sorted(b, key=lambda h: -len(h.tokens)) for b in beams],
                                  enc, graphs, words)
        ended: list[list[Hypothesis]] = [[] for _ in beams]  # S
        for n in range(self.config.nstep + 1):
            scored, rows = self._score(hyps, enc, graphs, words)
            for s, r in enumerate(rows):
                ended[s] += [scored.blank_child(i) for i in r]
            if n == self.config.nstep:
                break
            hyps = [scored.select([(i, int(v), frames[s]) for i in r
                                   for v in scored.top_tokens(i, k)], k)
                    for s, r in enumerate(rows)]
        return [prune(merge(s), k) for s in ended]

    def _prefix_merge(self, beams: list[list[Hypothesis]], enc: np.ndarray,
                      graphs: list[ContextGraph | None], words: list[WordGraph | None]
                      ) -> list[list[Hypothesis]]:
        """Step 1 for every stream: one decoder + one joiner call for all prefix paths."""
        alpha = self.config.prefix_alpha
        pairs = []  # (stream, j, i): beams[s][i] is a short enough proper prefix of beams[s][j]
        for s, beam in enumerate(beams):
            for j, long in enumerate(beam):
                for i in range(j + 1, len(beam)):
                    short = beam[i]
                    du = len(long.tokens) - len(short.tokens)
                    if 0 < du <= alpha and long.tokens[:len(short.tokens)] == short.tokens:
                        pairs.append((s, j, i))
        if not pairs:
            return beams
        steps, owner = [], []  # one row per token of the rest of y_j after the prefix y_i
        for s, j, i in pairs:
            short, rest = beams[s][i], beams[s][j].tokens[len(beams[s][i].tokens):]
            node, graph, word_graph = short.graph_node, graphs[s], words[s]
            word_node, lm_state, lm = short.word_node, short.lm_state, short.lm
            for m, token in enumerate(rest):
                steps.append(Hypothesis(context=(short.context + rest[:m])[-self.context_size:],
                                        graph_node=node, word_node=word_node, lm_state=lm_state,
                                        lm=lm))
                owner.append(s)
                if graph is not None:
                    node = graph.next_node(node, token)
                if word_graph is not None:
                    word_node, lm_state = word_graph.next(word_node, lm_state, token)
                if self.lm is not None:
                    lm = self.lm.after(lm, token)
        scored = score_hyps(self, steps, enc[owner], [graphs[s] for s in owner],
                            [words[s] for s in owner])
        extra: dict[tuple[int, int], list[float]] = {}
        row = 0
        for s, j, i in pairs:
            short, rest = beams[s][i], beams[s][j].tokens[len(beams[s][i].tokens):]
            path = short.score + sum(float(scored.total[row + m, t]) for m, t in enumerate(rest))
            row += len(rest)
            extra.setdefault((s, j), []).append(path)
        return [[replace(h, score=float(np.logaddexp.reduce([h.score, *extra[(s, j)]])))
                 if (s, j) in extra else h for j, h in enumerate(beam)]
                for s, beam in enumerate(beams)]
