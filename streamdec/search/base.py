"""The search protocol: incremental state machines over encoder frames.

A search object is shared by all streams and holds **no per-stream state**: a stream owns
its search state (a frozen value) and hands it in. Every method returns new values and
never mutates its arguments, so sibling hypotheses cannot corrupt each other.

    state = search.init_state()            # or init_state(context, encoder_frame_offset, graph)
    states = search.step(states, encoder_out)        # encoder_out (N, T', D), N streams
    best = search.partial(state)                     # current best Hypothesis
    nbest = search.finalize(state)                   # end of segment/stream: n-best list
    n = search.stable_length(state)                  # tokens of every later result's prefix
    state = search.reset(state)                      # after an endpoint: keeps the context

Frame indices are absolute encoder frames of the stream (integers); seconds are computed
once, when results are made.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Generic, Sequence, TypeVar

import numpy as np

from ..models.base import ModelMeta
from .config import SearchConfig
from .decoder_cache import DecoderCache

if TYPE_CHECKING:
    from .context_graph import ContextGraph
    from .neural_lm import NeuralLm
    from .word_graph import WordGraph

__all__ = ["Hypothesis", "SearchState", "Search", "initial_context", "log_softmax"]


def initial_context(context_size: int, blank_id: int = 0) -> tuple[int, ...]:
    """``[-1, ..., -1, blank]``: icefall decoders map negative ids to a zero embedding."""
    return (-1,) * (context_size - 1) + (blank_id,)


def log_softmax(x: np.ndarray) -> np.ndarray:
    """Row-wise log_softmax of (N, V) logits, in float64-free float32."""
    m = x.max(axis=-1, keepdims=True)
    z = x - m
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


@dataclass(frozen=True)
class Hypothesis:
    """One path of a search within the current segment."""

    context: tuple[int, ...]  # last context_size tokens (the decoder input)
    tokens: tuple[int, ...] = ()  # emitted in this segment
    frames: tuple[int, ...] = ()  # absolute encoder frame of each token
    log_probs: tuple[float, ...] = ()  # per-token log-prob at the configured temperature
    score: float = 0.0  # total log-prob of the path (tokens and blanks) + hotword bonuses
    graph_node: int = 0  # hotwords: state in the stream's ContextGraph (0 = root)
    word_node: int = 0  # words: node in the stream's WordGraph lexicon tree (0 = start)
    lm_state: int = 0  # words: state of the WordGraph's word LM
    # neural LM shallow fusion: the unit LM's state after ``tokens`` (opaque, see neural_lm)
    lm: object = field(default=None, compare=False, repr=False)

    def extend(self, token: int, frame: int, log_prob: float, score: float,
               graph_node: int = 0, word_node: int = 0, lm_state: int = 0,
               lm: object = None) -> "Hypothesis":
        """A copy with ``token`` appended at ``frame``, the new total ``score`` and the
        hotword graph, word graph and LM states reached by ``token``."""
        return Hypothesis(self.context[1:] + (token,), self.tokens + (token,),
                          self.frames + (frame,), self.log_probs + (log_prob,), score, graph_node,
                          word_node, lm_state, lm)

    def rescored(self, score: float) -> "Hypothesis":
        """A copy with total score ``score`` (a blank, or merged paths)."""
        return Hypothesis(self.context, self.tokens, self.frames, self.log_probs, score,
                          self.graph_node, self.word_node, self.lm_state, self.lm)

    @property
    def normalized_score(self) -> float:
        """score / (tokens of the segment + context_size): the decoder's start context counts,
        like icefall's and sherpa-onnx's ``len(ys)``, so the denominator is never zero."""
        return self.score / (len(self.tokens) + len(self.context))


@dataclass(frozen=True)
class SearchState:
    """Fields every search state has."""

    encoder_frame_offset: int = 0  # absolute encoder frames this stream has consumed
    segment_start: int = 0  # absolute encoder frame where the current segment began


S = TypeVar("S", bound=SearchState)


class Search(abc.ABC, Generic[S]):
    """Base of all searches. Subclasses implement the five methods (``SEARCHES`` names
    them)."""

    def __init__(self, model, config: SearchConfig, decoder_cache: DecoderCache | None = None,
                 unk_id: int | None = None, meta: ModelMeta | None = None,
                 lm: "NeuralLm | None" = None) -> None:
        """``decoder_cache``: shared by the searches of one recognizer (None: a cache of
        its own); ``meta``: the recognizer's completed metadata (default ``model.meta``);
        ``lm``: the ``NeuralLm`` of ``config.lm_file`` when the caller shares one (None:
        loaded here)."""
        self.model = model
        self.config = config
        meta = meta or model.meta
        self.blank_id = meta.blank_id
        self.context_size = meta.context_size
        self.unk_id = unk_id if config.unk_as_blank else None
        # not ``decoder_cache or ...``: an empty cache is falsy (it has a length)
        self.decoder_cache = (DecoderCache(model, config.decoder_cache_size)
                              if decoder_cache is None else decoder_cache)
        self.lm = lm  # NeuralLm for shallow fusion (beam searches with config.lm_file)
        if config.lm_file and lm is None:
            from .neural_lm import NeuralLm

            self.lm = NeuralLm(config.lm_file, meta.vocab_size)

    # -- helpers shared by the searches --------------------------------------------------
    def scores(self, encoder_frames: np.ndarray, decoder_out: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Joiner over (n, D) pairs -> (search log-probs, reported log-probs), each (n, V).

        The blank penalty shifts the blank logit before log_softmax; the reported log-probs
        use the configured temperature."""
        logits = self.model.join(encoder_frames, decoder_out).astype(np.float32, copy=False)
        if self.config.blank_penalty:
            logits = logits.copy()
            logits[:, self.blank_id] -= self.config.blank_penalty
        logp = log_softmax(logits)
        if self.config.temperature == 1.0:
            return logp, logp
        return logp, log_softmax(logits / self.config.temperature)

    # -- the protocol --------------------------------------------------------------------
    @abc.abstractmethod
    def init_state(self, context: tuple[int, ...] | None = None, encoder_frame_offset: int = 0,
                   graph: "ContextGraph | None" = None, words: "WordGraph | None" = None) -> S:
        """A fresh state; ``context`` defaults to the initial blank context; ``graph``: the
        stream's hotwords; ``words``: the stream's lexicon and word LM (searches that
        cannot use them raise ConfigError when given one)."""

    @abc.abstractmethod
    def step(self, states: Sequence[S], encoder_out: np.ndarray) -> list[S]:
        """Consume one chunk of encoder frames (N, T', D) for N streams; new states."""

    @abc.abstractmethod
    def partial(self, state: S) -> Hypothesis:
        """The current best hypothesis of the segment."""

    @abc.abstractmethod
    def stable_length(self, state: S) -> int:
        """How many leading tokens of ``partial(state)`` every later partial and the
        segment's final keep (they can no longer change within this segment)."""

    @abc.abstractmethod
    def finalize(self, state: S) -> list[Hypothesis]:
        """The segment's n-best list (best first) with nothing more to come."""

    @abc.abstractmethod
    def reset(self, state: S) -> S:
        """Start a new segment at ``state.encoder_frame_offset``, keeping the decoder context."""

    def skip(self, state: S, frames: int) -> S:
        """``state`` moved ``frames`` encoder frames on without decoding them (a voice
        activity detector skipped silence). Only for a state that starts a segment (just
        made by ``init_state`` or ``reset``): its segment then starts after the skip."""
        offset = state.encoder_frame_offset + frames
        return replace(state, encoder_frame_offset=offset, segment_start=offset)
