"""Bookkeeping shared by the beam searches: state, scoring a flat batch of hypotheses,
making children, merging equal sequences, pruning, n-best, and the common protocol
methods (``init_state``, ``partial``, ``finalize``, ``reset``).

Shape legend: N streams, n hypotheses of all streams together, D joiner dim,
V vocabulary size.

Conventions every beam search follows:
- ``<unk>`` with ``unk_as_blank`` is never emitted: a child by ``<unk>`` keeps the sequence
  like a blank child (modified beam search, as sherpa-onnx does), and the searches that
  extend by "blank + best tokens" never pick it as a token.
- Hotword bonuses, word-graph scores (lexicon, word LM, look-ahead; ``-inf`` for a unit
  that leaves the lexicon) and the neural LM's ``lm_scale * log p(unit)`` are added to the
  scores of token extensions *before* pruning; children scored ``-inf`` are never made.
- At the end of a segment (``finalize``) a partial hotword match is refunded and the word
  graph completes the last word (``WordGraph.end_score``); a hypothesis that cannot end on
  a word is dropped, unless none can: then the beam is ranked as it is (the segment was
  closed inside a word, which keeps its spelled prefix).
- Equal token sequences merge by log-add-exp; the merged hypothesis keeps the frames,
  log-probs and graph state of its best single member (ties: the first one seen).
- Ranking for ``partial``/``finalize``: ``Hypothesis.normalized_score``: score divided by
  (tokens of the segment + context_size), i.e. icefall's / sherpa-onnx's ``len(ys)``, which
  counts the decoder's start context; never zero, even for an empty hypothesis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np

from .base import Hypothesis, Search, SearchState, initial_context
from .context_graph import ContextGraph
from .word_graph import WordGraph

__all__ = ["BeamState", "BeamSearchBase", "Scored", "merge", "prune", "ranked", "score_hyps",
           "refunded", "finished", "tokens_at_frame", "common_prefix_length", "top_k_stable"]


@dataclass(frozen=True)
class BeamState(SearchState):
    """The whole beam of one stream, carried from chunk to chunk."""

    hyps: tuple[Hypothesis, ...] = ()
    graph: ContextGraph | None = None  # hotwords of this stream (None: no biasing)
    words: WordGraph | None = None  # lexicon + word LM of this stream (None: free spelling)


@dataclass(frozen=True)
class Scored:
    """Joiner scores of a flat batch of n hypotheses (row r belongs to ``hyps[r]``).

    ``total[r, v]`` is the score of the child of ``hyps[r]`` by token v (v = blank or
    ``<unk>`` as blank: a child with the same sequence): hypothesis score + log-prob
    (+ hotword bonus for tokens)."""

    hyps: Sequence[Hypothesis]
    graphs: Sequence[ContextGraph | None]
    total: np.ndarray  # (n, V) float64
    reported: np.ndarray  # (n, V) per-token log-probs at the configured temperature
    blank_ids: tuple[int, ...]  # blank, and <unk> when it counts as blank
    # word graphs: (next word node, next LM state), each (n, V); None without word graphs
    word_next: tuple[np.ndarray, np.ndarray] | None = None
    lm: object = None  # the search's NeuralLm (None: no shallow fusion)

    def child(self, r: int, token: int, frame: int, score: float | None = None) -> Hypothesis:
        """The child of row ``r`` by ``token`` (a blank-like token keeps the sequence), with
        its own score or ``score`` (merged paths)."""
        hyp = self.hyps[r]
        if score is None:
            score = self.total.item(r, token)
        if token in self.blank_ids:
            return hyp.rescored(score)
        graph = self.graphs[r]
        node = graph.next_node(hyp.graph_node, token) if graph is not None else 0
        word_node, lm_state = ((int(self.word_next[0][r, token]), int(self.word_next[1][r, token]))
                               if self.word_next is not None else (0, 0))
        lm = self.lm.after(hyp.lm, token) if self.lm is not None else None
        return hyp.extend(token, frame, float(self.reported[r, token]), score, node, word_node,
                          lm_state, lm)

    def blank_child(self, r: int) -> Hypothesis:
        return self.child(r, self.blank_ids[0], -1)

    def select(self, cands: Iterable[tuple[int, int, int]], k: int) -> list[Hypothesis]:
        """Children given as (row, token, frame), merged by sequence and pruned to the k
        best: ``prune(merge(children), k)`` without making the children that lose."""
        groups: dict[tuple[int, ...], list] = {}
        for r, v, frame in cands:
            score = self.total.item(r, v)
            if score == -math.inf:
                continue
            tokens = self.hyps[r].tokens
            key = tokens if v in self.blank_ids else tokens + (v,)
            g = groups.get(key)
            if g is None:
                groups[key] = [score, score, r, v, frame]
            else:
                g[0] = logaddexp(g[0], score)
                if score > g[1]:
                    g[1:] = [score, r, v, frame]
        best = sorted(groups.values(), key=lambda g: -g[0])[:k]
        return [self.child(r, v, f, total) for total, _, r, v, f in best]

    def top_tokens(self, r: int, k: int) -> np.ndarray:
        """The k best tokens of row r that are not blank-like, best first (stable on ties)."""
        row = self.total[r].copy()
        row[list(self.blank_ids)] = -np.inf
        order = np.argsort(-row, kind="stable")[:k]
        return order[np.isfinite(row[order])]


def score_hyps(search: Search, hyps: Sequence[Hypothesis], enc: np.ndarray,
               graphs: Sequence[ContextGraph | None],
               words: Sequence[WordGraph | None] | None = None) -> Scored:
    """One decoder call (through the cache), one joiner call and, with a neural LM, one LM
    call for n hypotheses.

    hyps: n hypotheses; enc: (n, D) the encoder frame each one is scored at; graphs: n
    hotword graphs; words: n word graphs (None: none)."""
    lm = search.lm
    if lm is not None:
        hyps = lm.resolve(hyps)
    dec = search.decoder_cache.get([h.context for h in hyps])
    logp, reported = search.scores(enc, dec)
    total = logp.astype(np.float64) + np.array([h.score for h in hyps], np.float64)[:, None]
    blank_ids = (search.blank_id,) + ((search.unk_id,) if search.unk_id is not None else ())
    rows = [r for r, g in enumerate(graphs) if g is not None]
    if rows:
        bonus = np.stack([graphs[r].bonus_rows([hyps[r].graph_node])[0] for r in rows])
        bonus[:, list(blank_ids)] = 0.0
        total[rows] += bonus
    word_next = None
    by_graph: dict[int, list[int]] = {}
    for r, w in enumerate(words or ()):
        if w is not None:
            by_graph.setdefault(id(w), []).append(r)
    if by_graph:
        n, v = total.shape
        word_next = (np.zeros((n, v), np.int64), np.zeros((n, v), np.int64))
        for rows in by_graph.values():  # one call per graph for its hypotheses
            bonus, nxt_node, nxt_state = words[rows[0]].rows(
                [hyps[r].word_node for r in rows], [hyps[r].lm_state for r in rows])
            total[rows] += bonus
            word_next[0][rows], word_next[1][rows] = nxt_node, nxt_state
    if lm is not None:
        fused = lm.log_probs(hyps) * search.config.lm_scale
        fused[:, list(blank_ids)] = 0.0
        total += fused
    return Scored(hyps, graphs, total, reported, blank_ids, word_next, lm)


def top_k_stable(scores: np.ndarray, k: int) -> list[list[int]]:
    """Per row of scores (N, M): the column indices of its k best, best first, equal scores
    in column order: ``np.argsort(-scores, axis=1, kind="stable")[:, :k]``, without sorting
    the whole row (a selection finds each row's k-th best; only the columns at least that
    good are sorted)."""
    if k >= scores.shape[1]:
        return np.argsort(-scores, axis=1, kind="stable").tolist()
    neg = -scores
    kth = np.partition(neg, k - 1, axis=1)[:, k - 1]  # each row's k-th best (negated)
    out = []
    for row, bound in zip(neg, kth):
        if bound != bound:  # NaN: fewer than k comparable scores; the stable sort's order
            out.append(np.argsort(row, kind="stable")[:k].tolist())
            continue
        cols = np.flatnonzero(row <= bound)  # the k best and their ties, in column order
        out.append(cols[np.argsort(row[cols], kind="stable")[:k]].tolist())
    return out


def logaddexp(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) of two Python floats."""
    if a < b:
        a, b = b, a
    return a if b == -math.inf else a + math.log1p(math.exp(b - a))


def merge(hyps: Iterable[Hypothesis]) -> list[Hypothesis]:
    """Equal token sequences merged by log-add-exp, in order of first appearance; the merged
    hypothesis keeps the frames, log-probs and graph state of its best single member."""
    out: dict[tuple[int, ...], tuple[float, Hypothesis]] = {}
    for h in hyps:
        old = out.get(h.tokens)
        if old is None:
            out[h.tokens] = (h.score, h)
        else:
            out[h.tokens] = (logaddexp(old[0], h.score), h if h.score > old[1].score else old[1])
    return [best if best.score == total else best.rescored(total)
            for total, best in out.values()]


def prune(hyps: Iterable[Hypothesis], k: int) -> list[Hypothesis]:
    """The k best by score (stable: earlier wins ties)."""
    return sorted(hyps, key=lambda h: -h.score)[:k]


def ranked(hyps: Iterable[Hypothesis]) -> list[Hypothesis]:
    """Best first by length-normalised score (stable)."""
    return sorted(hyps, key=lambda h: -h.normalized_score)


def refunded(hyp: Hypothesis, graph: ContextGraph | None) -> Hypothesis:
    """``hyp`` at segment end: a partial hotword match gives its bonus back."""
    if graph is None or hyp.graph_node == 0:
        return hyp
    return replace(hyp, score=hyp.score - graph.refund(hyp.graph_node), graph_node=0)


def finished(search: Search, hyps: Sequence[Hypothesis], state: BeamState) -> list[Hypothesis]:
    """The hypotheses a segment ends with, scored as complete: hotword refunds, the last word
    and ``</s>`` of the word graph (hypotheses that cannot end on a word dropped, unless
    none can), and the neural LM's end of sentence."""
    out = [refunded(h, state.graph) for h in hyps]
    if state.words is not None:
        ends = [state.words.end_score(h.word_node, h.lm_state) for h in out]
        done = [h.rescored(h.score + e) for h, e in zip(out, ends) if e != -math.inf]
        out = done or out
    if search.lm is not None:
        out = search.lm.resolve(out)
        ends = search.lm.end_scores(out) * search.config.lm_scale
        out = [h.rescored(h.score + float(e)) for h, e in zip(out, ends)]
    return out


def common_prefix_length(sequences: Sequence[tuple[int, ...]]) -> int:
    """Length of the longest prefix all ``sequences`` share (0 for none)."""
    if not sequences:
        return 0
    first, n = sequences[0], min(len(s) for s in sequences)
    for i in range(n):
        token = first[i]
        if any(s[i] != token for s in sequences):
            return i
    return n


def tokens_at_frame(hyp: Hypothesis, frame: int) -> int:
    """How many of ``hyp``'s tokens were emitted at ``frame``."""
    n = 0
    for f in reversed(hyp.frames):
        if f != frame:
            break
        n += 1
    return n


class BeamSearchBase(Search[BeamState]):
    """Protocol methods common to the frame-synchronous beam searches.

    Subclasses implement ``_frame(beams, enc, frames, graphs)``: advance every stream's
    beam by one encoder frame (enc (N, D), frames: absolute index per stream)."""

    state_class: type[BeamState] = BeamState

    def init_state(self, context: tuple[int, ...] | None = None, encoder_frame_offset: int = 0,
                   graph: ContextGraph | None = None, words: WordGraph | None = None
                   ) -> BeamState:
        context = tuple(context or initial_context(self.context_size, self.blank_id))
        node, lm_state = words.start_state if words is not None else (0, 0)
        hyp = Hypothesis(context=context, graph_node=graph.start if graph else 0,
                         word_node=node, lm_state=lm_state,
                         lm=self.lm.initial() if self.lm is not None else None)
        return self.state_class(encoder_frame_offset=encoder_frame_offset,
                                segment_start=encoder_frame_offset,
                                hyps=(hyp,), graph=graph, words=words)

    def step(self, states: Sequence[BeamState], encoder_out: np.ndarray) -> list[BeamState]:
        beams = [list(s.hyps) for s in states]
        graphs = [s.graph for s in states]
        words = [s.words for s in states]
        for t in range(encoder_out.shape[1]):
            beams = self._frame(beams, encoder_out[:, t],
                                [s.encoder_frame_offset + t for s in states], graphs, words)
        advance = encoder_out.shape[1]
        return [replace(s, hyps=tuple(b), encoder_frame_offset=s.encoder_frame_offset + advance)
                for s, b in zip(states, beams)]

    def _frame(self, beams: list[list[Hypothesis]], enc: np.ndarray, frames: list[int],
               graphs: list[ContextGraph | None], words: list[WordGraph | None]
               ) -> list[list[Hypothesis]]:
        raise NotImplementedError

    def _score(self, beams: Sequence[Sequence[Hypothesis]], enc: np.ndarray,
               graphs: Sequence[ContextGraph | None], words: Sequence[WordGraph | None]
               ) -> tuple[Scored, list[range]]:
        """Score every hypothesis of every stream against its stream's frame enc (N, D)
        (N = len(beams)). Returns the scores and, per stream, its rows."""
        flat, rows, owner = [], [], []
        for n, beam in enumerate(beams):
            rows.append(range(len(flat), len(flat) + len(beam)))
            flat.extend(beam)
            owner.extend([n] * len(beam))
        scored = score_hyps(self, flat, enc[owner], [graphs[n] for n in owner],
                            [words[n] for n in owner])
        return scored, rows

    def _end_hyps(self, state: BeamState) -> list[Hypothesis]:
        """The hypotheses a segment ends with (ALSD overrides)."""
        return list(state.hyps)

    def _live_hyps(self, state: BeamState) -> list[Hypothesis]:
        """Every hypothesis a later result of the segment can descend from (ALSD adds its
        ended set)."""
        return list(state.hyps)

    def partial(self, state: BeamState) -> Hypothesis:
        return ranked(state.hyps)[0]

    def stable_length(self, state: BeamState) -> int:
        """The tokens all live hypotheses agree on. Every later hypothesis of the segment
        extends one of them (children only append; merging joins equal sequences; pruning
        and the segment end's word-graph filter only drop), so this prefix is kept by every
        later partial and by the final."""
        return common_prefix_length([h.tokens for h in self._live_hyps(state)])

    def finalize(self, state: BeamState) -> list[Hypothesis]:
        return ranked(finished(self, self._end_hyps(state), state))[:self.config.nbest]

    def reset(self, state: BeamState) -> BeamState:
        context = self.finalize(state)[0].context
        return self.init_state(context, state.encoder_frame_offset, state.graph, state.words)
