"""Keyword spotting: a modified beam search boosted by a stream's keywords (the algorithm
of sherpa-onnx's keyword spotter, written from its published description).

Per encoder frame, for every path of every stream at once: one decoder call (through the
cache) and one joiner call; each stream keeps the ``beam`` best (paths x units) children
by acoustic score (a blank or ``<unk>`` keeps the path), then each child adds the bonus of
its unit in the stream's ``KeywordGraph``. A path that falls back to the graph's root
forgets its units: its decoder context starts afresh (``[-1, blank]``), so every path
outside a keyword merges into one. Equal unit sequences (with equal decoder contexts)
merge by log-add-exp; the merged path keeps the fields (frames, trailing blanks) of the
member chosen first, the one with the best score before its unit's bonus, as sherpa-onnx
does.

A keyword fires when, after a frame, the best path (by total score) is in a state where a
keyword ends, has read more than ``trailing_blanks`` blanks since its last unit, and the
mean probability of the keyword's own units reaches the keyword's threshold. The stream's
search then starts afresh: one empty path at the root, whose decoder context is the
keyword's last units. The search also starts afresh, from the decoder's start context,
when the best path has read ``reset_seconds`` of blanks, as sherpa-onnx's spotter does,
but only while no path is inside a keyword.

    search = KeywordSearch(model, KeywordConfig(), decoder_cache, unk_id, meta)
    state = search.init_state(graph, encoder_frame_offset)
    states, hits = search.step(states, encoder_out)    # encoder_out (N, T', D); hits per stream

A hit's ``frames`` are absolute encoder frames of the stream; seconds are made once, by
``core.results``. Shape legend: N streams, n paths of all streams together, D joiner dim,
V vocabulary size.

Where this differs from sherpa-onnx 2.0.1 (on purpose): sherpa-onnx's spotter also resets
the stream's encoder after a keyword and after ``reset_seconds`` of blanks (even when the
start of a keyword was just heard: it then misses the keyword), and starts the decoder
afresh after a keyword; here the encoder goes on (it serves the transcript too), the
decoder keeps the keyword as its context, so the frames just after a keyword do not spell
it again, and no reset drops a keyword under way. The threshold is checked on the mean
probability of the matched keyword's own units (sherpa-onnx averages the first units of
the path, which are other units when the keyword was reached through a fail link). A path
keeps at most its graph's longest keyword's units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..errors import ConfigError
from ..validation import require_at_least, require_finite, require_positive
from .base import initial_context, log_softmax
from .beam_utils import logaddexp, top_k_stable
from .decoder_cache import DecoderCache
from .keyword_graph import DEFAULT_BOOST, DEFAULT_THRESHOLD, KeywordGraph

__all__ = ["KeywordConfig", "KeywordSearch", "KeywordState", "KeywordHit"]


@dataclass(frozen=True)
class KeywordConfig:
    """Keyword spotting; the defaults are sherpa-onnx's."""

    # paths kept per stream (sherpa-onnx's max_active_paths)
    beam: int = 4
    # a keyword fires once its path has read more than this many blank frames after it
    # (sherpa-onnx's num_trailing_blanks; larger for keywords that are prefixes of others)
    trailing_blanks: int = 1
    # boost per unit and threshold (mean unit probability) of a keyword that names none
    boost: float = DEFAULT_BOOST
    threshold: float = DEFAULT_THRESHOLD
    # the search starts afresh after this much blank on its best path (seconds)
    reset_seconds: float = 1.5

    def __post_init__(self) -> None:
        require_finite(self, "keywords")
        require_at_least(self, "keywords", ("beam",), 1)
        require_at_least(self, "keywords", ("trailing_blanks",), 0)
        require_positive(self, "keywords", ("boost", "reset_seconds"))
        if not 0 < self.threshold <= 1:
            raise ConfigError(f"keywords.threshold must be in (0, 1], got {self.threshold}")


@dataclass(frozen=True)
class _Path:
    """One hypothesis of the keyword search."""

    context: tuple[int, ...]  # the decoder's input: its last context_size units
    tokens: tuple[int, ...] = ()  # units since the path last left the root
    frames: tuple[int, ...] = ()  # absolute encoder frame of each
    probs: tuple[float, ...] = ()  # probability of each (log-softmax at temperature 1)
    score: float = 0.0  # log-prob of the path + keyword bonuses
    node: int = 0  # state in the stream's KeywordGraph
    last: int = -1  # frame of the last unit (or the frame before the path started)


@dataclass(frozen=True)
class KeywordState:
    """The keyword search of one stream (a frozen value the stream owns)."""

    graph: KeywordGraph
    paths: tuple[_Path, ...]
    encoder_frame_offset: int = 0  # absolute encoder frames consumed


@dataclass(frozen=True)
class KeywordHit:
    """A keyword heard: which one, its units and their frames, and its score."""

    keyword: int  # index into the graph's keywords
    text: str
    tokens: tuple[int, ...]
    frames: tuple[int, ...]  # absolute encoder frame of each unit
    score: float  # mean probability of its units, in (0, 1]


class KeywordSearch:
    """Shared by every stream of a recognizer; holds no per-stream state."""

    def __init__(self, model, config: KeywordConfig, decoder_cache: DecoderCache,
                 unk_id: int | None, meta) -> None:
        self.model = model
        self.config = config
        self.decoder_cache = decoder_cache
        self.blank_id = meta.blank_id
        self.blank_like = (meta.blank_id,) + ((unk_id,) if unk_id is not None else ())
        self.start = initial_context(meta.context_size, meta.blank_id)
        self.context_size = meta.context_size
        self.reset_frames = config.reset_seconds / meta.encoder_frame_seconds

    def init_state(self, graph: KeywordGraph, encoder_frame_offset: int = 0) -> KeywordState:
        return KeywordState(graph, (_Path(self.start, last=encoder_frame_offset - 1),),
                            encoder_frame_offset)

    def skip(self, state: KeywordState, frames: int) -> KeywordState:
        """``state`` moved ``frames`` encoder frames on without decoding them (silence a
        voice activity detector skipped): it starts afresh after them."""
        return self.init_state(state.graph, state.encoder_frame_offset + frames)

    def step(self, states: Sequence[KeywordState], encoder_out: np.ndarray
             ) -> tuple[list[KeywordState], list[list[KeywordHit]]]:
        """Consume encoder_out (N, T', D) for N streams: their new states and, per stream,
        the keywords heard in these frames (oldest first)."""
        beams = []
        for s in states:
            frame = s.encoder_frame_offset - 1
            quiet = frame - _best(s.paths).last > self.reset_frames
            # (never while a path is inside a keyword: its start may have just been heard)
            beams.append([_Path(self.start, last=frame)]
                         if quiet and not any(p.node for p in s.paths) else list(s.paths))
        hits: list[list[KeywordHit]] = [[] for _ in states]
        for t in range(encoder_out.shape[1]):
            frames = [s.encoder_frame_offset + t for s in states]
            beams = self._frame(beams, encoder_out[:, t], frames, states, hits)
        advance = encoder_out.shape[1]
        return ([replace(s, paths=tuple(b), encoder_frame_offset=s.encoder_frame_offset + advance)
                 for s, b in zip(states, beams)], hits)

    def _frame(self, beams: list[list[_Path]], enc: np.ndarray, frames: list[int],
               states: Sequence[KeywordState], hits: list[list[KeywordHit]]
               ) -> list[list[_Path]]:
        """enc (N, D): one frame per stream -> the new beams (hits appended to ``hits``)."""
        flat, owner, rows = [], [], []
        for n, beam in enumerate(beams):
            rows.append(range(len(flat), len(flat) + len(beam)))
            flat.extend(beam)
            owner.extend([n] * len(beam))
        dec = self.decoder_cache.get([p.context for p in flat])
        logp = log_softmax(self.model.join(enc[owner], dec).astype(np.float32, copy=False))
        total = logp.astype(np.float64) + np.array([p.score for p in flat])[:, None]
        vocab = total.shape[1]
        out = []
        for n, r in enumerate(rows):
            graph = states[n].graph
            block = total[r.start:r.stop].reshape(1, -1)
            merged: dict[tuple[int, ...], list] = {}
            for i in top_k_stable(block, self.config.beam)[0]:
                row, unit = r.start + i // vocab, i % vocab
                child = self._child(flat[row], unit, float(total[row, unit]),
                                    float(logp[row, unit]), frames[n], graph)
                key = (child.context, child.tokens)
                old = merged.get(key)
                if old is None:
                    merged[key] = [child.score, child]
                else:
                    old[0] = logaddexp(old[0], child.score)
            beam = [p if p.score == s else replace(p, score=s) for s, p in merged.values()]
            best = _best(beam)
            hit = self._fired(best, frames[n], graph)
            if hit is not None:
                hits[n].append(hit)
                beam = [_Path(best.context, last=frames[n])]
            out.append(beam)
        return out

    def _child(self, path: _Path, unit: int, score: float, log_prob: float, frame: int,
               graph: KeywordGraph) -> _Path:
        if unit in self.blank_like:
            return replace(path, score=score)
        bonus, node = graph.step(path.node, unit)
        if node == 0:  # back at the root: the path forgets its units
            return _Path(self.start, score=score + bonus, last=frame)
        keep = graph.max_units
        return _Path((path.context + (unit,))[-self.context_size:],
                     (path.tokens + (unit,))[-keep:], (path.frames + (frame,))[-keep:],
                     (path.probs + (math.exp(log_prob),))[-keep:], score + bonus, node, frame)

    def _fired(self, best: _Path, frame: int, graph: KeywordGraph) -> KeywordHit | None:
        """The keyword ``best`` fires after ``frame``, or None."""
        k = graph.matched(best.node)
        if k < 0 or frame - best.last <= self.config.trailing_blanks:
            return None
        keyword = graph.keywords[k]
        level = len(keyword.ids)
        mean = sum(best.probs[-level:]) / level
        if mean < keyword.threshold:
            return None
        return KeywordHit(k, keyword.text, best.tokens[-level:], best.frames[-level:], mean)


def _best(paths: Sequence[_Path]) -> _Path:
    """The path with the best total score (the first of equals)."""
    return max(paths, key=lambda p: p.score)
