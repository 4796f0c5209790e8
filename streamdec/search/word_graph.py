"""Words in the search: a lexicon prefix tree joined with a word language model (an n-gram
or a grammar), as a lazily expanded automaton over the model's units.

Every hypothesis of a beam search carries two integers: ``word_node``, its node in the
prefix tree of the words' unit sequences, and ``lm_state``, its word-LM state. For each
(node, LM state) the graph gives a row over the vocabulary (``rows``): the score each next
unit adds, ``-inf`` for a unit that leaves the lexicon, and the (node, state) it leads to.
Scores, with s = ``lm_scale``:

- a unit inside a word moves down the tree and adds ``s * (LA(child) - LA(node))``, where
  the look-ahead LA(node) is the best unigram log-probability of any word below the node
  (0 between words; all 0 without ``lookahead``): good prefixes are not pruned before
  their word ends;
- a unit that starts a word (``▁``, or a piece that begins with it) completes the word of
  the current node: ``s * (log p(word | LM state) - LA(node)) + word_bonus`` (the
  look-ahead is given back, exactly as hotword bonuses are refunded) and the LM moves on;
  the best-scoring word is taken when several share one spelling;
- ``end_score`` completes the last word at the end of a segment and adds ``log p(</s>)``;
  a hypothesis inside a word that is not a word cannot end (``-inf``);
- blank (and ``<unk>`` taken as blank) add 0 and change nothing.

Word boundaries: a word's units start with its boundary unit; a segment starts in the
``start`` node, which also accepts a first word without the boundary (models often do
not write it at an utterance start). After a completed word the next word must begin with
a boundary unit.

Open vocabulary (``allow_oov``): a unit with no way on in the tree enters the unknown-word
node: the look-ahead is given back and the unknown word's score ``s * log p(<unk> | state)
+ word_bonus - unk_penalty`` is paid at once (paid only when the word ended, it would make
unknown words look cheap until then, and the beam would fill with them); a word-start
unit there completes it. A word-start unit at a node that is not a word end completes an
unknown word with the same score. Each unit spelled in the unknown-word node costs
``unk_unit_penalty`` more, so that one unknown "word" without boundaries cannot swallow a
sentence at the price of one.

    graph = WordGraph.build(lexicon, lm, symbols, WordOptions(lm_scale=0.5))
    graph = WordGraph(tree, lm, symbols, options)  # a ``LexiconTree`` built before (cached)
    bonus, nxt_node, nxt_state = graph.rows(nodes, states)   # (n, V) each
    score += graph.end_score(node, state)                     # at segment end

Shape legend: n hypotheses, V vocabulary size.

The prefix tree is kept as flat arrays (``LexiconTree``: children and words of each node
in CSR form, the raw look-ahead), independent of the options and the LM scale, so that it can
be stored once and loaded without rebuilding (``streamdec.lang.compiled``).

The graph is immutable once built; rows are computed on demand and kept in a bounded,
thread-safe cache, so one graph serves every stream.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from ..errors import ConfigError

__all__ = ["WordLm", "WordOptions", "WordGraph", "LexiconTree", "build_tree"]

NEG_INF = -math.inf
_ROW_CACHE = 50_000


class WordLm(Protocol):
    """What the graph needs of a word language model (``NgramLm``, ``Grammar``)."""

    start: int  # the state at a segment start
    unk: int | None  # word id of <unk>, None when the model has none

    def word_id(self, word: str) -> int: ...
    def score(self, state: int, word: int) -> tuple[float, int]: ...
    def end_score(self, state: int) -> float: ...
    def unigram(self, word: int) -> float: ...  # history-free score, for the look-ahead


@dataclass(frozen=True)
class WordOptions:
    lm_scale: float = 0.5  # weight of the word LM's natural-log probabilities
    word_bonus: float = 0.0  # added per completed word (insertion bonus)
    lookahead: bool = True  # unigram look-ahead inside words
    allow_oov: bool = False  # words outside the lexicon, spelled freely
    unk_penalty: float = 5.0  # subtracted per unknown word (with allow_oov)
    unk_unit_penalty: float = 0.0  # subtracted per unit of an unknown word (with allow_oov)

    def __post_init__(self) -> None:
        if self.lm_scale < 0:
            raise ConfigError(f"word LM scale must be >= 0, got {self.lm_scale}")
        if self.unk_penalty < 0 or self.unk_unit_penalty < 0:
            raise ConfigError(f"unk penalties must be >= 0, got {self.unk_penalty}, "
                              f"{self.unk_unit_penalty}")


@dataclass(frozen=True)
class LexiconTree:
    """The lexicon prefix tree over the model's units, as arrays. N nodes: 0 is a segment
    start, 1 the root between words; node n's children are ``child_unit / child_node
    [child_ptr[n]:child_ptr[n + 1]]`` (units ascending), the LM word ids it completes
    ``word_ids[word_ptr[n]:word_ptr[n + 1]]``."""

    child_ptr: np.ndarray  # (N + 1,) int64
    child_unit: np.ndarray  # (E,) int32
    child_node: np.ndarray  # (E,) int32
    word_ptr: np.ndarray  # (N + 1,) int64
    word_ids: np.ndarray  # (W,) int32
    lookahead: np.ndarray  # (N,) float64: best unigram ln p at or below a node, -inf: none
    empty: np.ndarray  # (k,) int64: start, root and boundary-only nodes (no word to complete)

    @property
    def num_nodes(self) -> int:
        return len(self.child_ptr) - 1


def build_tree(lexicon: Sequence[tuple[str, Sequence[str]]], lm: WordLm, symbols
               ) -> LexiconTree:
    """The prefix tree of ``lexicon`` ((word, units) pairs, units as in tokens.txt), words
    as ids of ``lm``, for the model's ``symbols`` (``SymbolTable``). Raises ConfigError for
    a unit the model lacks, or an empty lexicon."""
    if not lexicon:
        raise ConfigError("word graph: the lexicon is empty")
    start_set = set(_word_starts(symbols))
    children: list[dict[int, int]] = [{}, {}]  # 0: segment start, 1: root between words
    words: list[list[int]] = [[], []]
    for word, units in lexicon:
        ids = []
        for u in units:
            i = symbols.symbol_to_id.get(u)
            if i is None:
                raise ConfigError(f"lexicon word {word!r}: the model has no unit {u!r}")
            ids.append(i)
        if not ids or ids[0] not in start_set or any(i in start_set for i in ids[1:]):
            raise ConfigError(f"lexicon word {word!r}: its units must begin with a "
                              f"word-boundary unit and hold no other: {' '.join(units)}")
        node = 1
        for i in ids:
            nxt = children[node].get(i)
            if nxt is None:
                nxt = len(children)
                children.append({})
                words.append([])
                children[node][i] = nxt
            node = nxt
        wid = lm.word_id(word)
        if wid not in words[node]:
            words[node].append(wid)
    # boundary-only nodes (a boundary unit alone, no letters yet): nothing to complete
    empty = {0, 1} | {c for t, c in children[1].items() if not words[c]
                      and symbols.text([t]) == ""}
    # the segment start also accepts a first word written without its boundary unit
    children[0] = dict(children[1])
    for c in sorted(empty - {0, 1}):
        for t, cc in children[c].items():
            children[0].setdefault(t, cc)
    # unigram look-ahead: best log-prob of a word at or below each node (a child's id is
    # always above its parent's, node 0 aside, so descending ids visit children first)
    la = [NEG_INF] * len(children)
    for node in range(len(children) - 1, 0, -1):
        best = max((lm.unigram(w) for w in words[node]), default=NEG_INF)
        for c in children[node].values():
            best = max(best, la[c])
        la[node] = best
    kids = [sorted(c.items()) for c in children]
    return LexiconTree(
        child_ptr=np.cumsum([0] + [len(k) for k in kids], dtype=np.int64),
        child_unit=np.array([t for k in kids for t, _ in k], np.int32),
        child_node=np.array([c for k in kids for _, c in k], np.int32),
        word_ptr=np.cumsum([0] + [len(w) for w in words], dtype=np.int64),
        word_ids=np.array([w for ws in words for w in ws], np.int32),
        lookahead=np.array(la, np.float64),
        empty=np.array(sorted(empty), np.int64))


def _word_starts(symbols) -> list[int]:
    starts = [i for i in range(len(symbols)) if symbols.starts_word(i)]
    if not starts:
        raise ConfigError("word graph: the model has no word-boundary unit (▁ or a space)")
    return starts


class WordGraph:
    """Lexicon prefix tree x word LM (see the module notes): ``WordGraph(tree, lm, symbols,
    options)`` or ``WordGraph.build`` from a lexicon."""

    def __init__(self, tree: LexiconTree, lm: WordLm, symbols, options: WordOptions,
                 unk_text: str | None = None) -> None:
        self._tree = tree
        self._cptr = tree.child_ptr
        self._cunit = tree.child_unit
        self._cnode = tree.child_node
        self._wptr = tree.word_ptr
        self._wids = tree.word_ids
        self._word_starts = tuple(_word_starts(symbols))
        self.lm = lm
        self.options = options
        self.vocab_size = len(symbols)
        self._blank_ids = tuple([symbols.blank_id] + (
            [symbols.unk_id] if symbols.unk_id is not None else []))
        self._empty = frozenset(tree.empty.tolist())  # no word to complete
        self.start_node = 0
        self.root = 1
        self.oov_node = tree.num_nodes  # inside an unknown word
        self.unk_text = unk_text  # how unknown words are shown (None: as spelled)
        # look-ahead per node: 0 at the start, the root, the unknown-word node, where no
        # word lies below, and everywhere without ``lookahead``
        la = np.zeros(tree.num_nodes + 1, np.float64)
        if options.lookahead:
            la[:-1] = np.where(tree.lookahead == NEG_INF, 0.0, tree.lookahead)
            la[:2] = 0.0
        self._la = la
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()  # node -> (2, V) row
        self._lock = threading.Lock()
        # a completed word goes on with each word-start unit: its score and node (an unknown
        # word when the unit begins no lexicon word and allow_oov)
        oov = options.allow_oov and lm.unk is not None
        score, node = [], []
        for t in self._word_starts:
            c = self._child(1, t)
            score.append(options.lm_scale * float(la[c]) if c is not None else
                         (0.0 if oov else NEG_INF))
            node.append(c if c is not None else (self.oov_node if oov else 1))
        self._start_score = np.array(score, np.float64)
        self._start_node = np.array(node, np.int64)

    # -- building ----------------------------------------------------------------------
    @classmethod
    def build(cls, lexicon: Sequence[tuple[str, Sequence[str]]], lm: WordLm, symbols,
              options: WordOptions, unk_text: str | None = None) -> "WordGraph":
        """``lexicon``: (word, units) pairs, units as in tokens.txt; ``lm``: the word LM;
        ``symbols``: the model's ``SymbolTable``. Raises ConfigError for a unit the model
        lacks, or an empty lexicon."""
        return cls(build_tree(lexicon, lm, symbols), lm, symbols, options, unk_text)

    def _child(self, node: int, unit: int) -> int | None:
        """The child of ``node`` by ``unit`` (None: no way on in the tree)."""
        a, b = self._cptr[node], self._cptr[node + 1]
        i = a + int(np.searchsorted(self._cunit[a:b], unit))
        return int(self._cnode[i]) if i < b and self._cunit[i] == unit else None

    def _words(self, node: int) -> list[int]:
        """LM ids of the words that end at ``node``."""
        return self._wids[self._wptr[node]:self._wptr[node + 1]].tolist()

    # -- the automaton -------------------------------------------------------------------
    @property
    def start_state(self) -> tuple[int, int]:
        """(node, LM state) of a segment start."""
        return self.start_node, self.lm.start

    def _unk_cost(self, state: int) -> float:
        """What an unknown word scores in LM state ``state``, paid when it starts."""
        o = self.options
        return o.lm_scale * self.lm.score(state, self.lm.unk)[0] + o.word_bonus - o.unk_penalty

    def _complete(self, node: int, state: int) -> tuple[float, int]:
        """(score, next LM state) of completing the word at ``node``; -inf if none."""
        o, la = self.options, float(self._la[node])
        if node == self.oov_node:  # its score was paid when it started
            return 0.0, self.lm.score(state, self.lm.unk)[1]
        words = self._words(node)
        if words:
            best = max(self.lm.score(state, w) for w in words)
            return o.lm_scale * (best[0] - la) + o.word_bonus, best[1]
        if o.allow_oov and node not in self._empty and self.lm.unk is not None:
            lp, nxt = self.lm.score(state, self.lm.unk)
            return o.lm_scale * (lp - la) + o.word_bonus - o.unk_penalty, nxt
        return NEG_INF, state

    def _static(self, node: int) -> np.ndarray:
        """(2, V) float64: the score and next node of every unit from ``node`` that does not
        depend on the LM state; word-start units are filled in by ``rows`` (-inf here
        unless they move inside the tree)."""
        row = self._cache.get(node)
        if row is not None:
            return row
        s, la = self.options.lm_scale, float(self._la[node])
        row = np.empty((2, self.vocab_size), np.float64)
        bonus, nxt = row[0], row[1]
        bonus[:], nxt[:] = NEG_INF, node
        oov = self.options.allow_oov and self.lm.unk is not None
        unit_cost = self.options.unk_unit_penalty
        if node == self.oov_node:
            bonus[:] = -unit_cost
        elif oov:  # any unit with no way on in the tree starts an unknown word
            bonus[:], nxt[:] = -s * la - unit_cost, self.oov_node
        starts = list(self._word_starts)
        bonus[starts], nxt[starts] = NEG_INF, node
        if node != self.oov_node:
            a, b = self._cptr[node], self._cptr[node + 1]
            units, kids = self._cunit[a:b], self._cnode[a:b]
            bonus[units], nxt[units] = s * (self._la[kids] - la), kids
        bonus[list(self._blank_ids)], nxt[list(self._blank_ids)] = 0.0, node
        with self._lock:
            self._cache[node] = row
            if len(self._cache) > _ROW_CACHE:
                self._cache.popitem(last=False)
        return row

    def _can_complete(self, node: int) -> bool:
        return node != self.start_node and node not in self._empty

    def rows(self, nodes: Sequence[int], states: Sequence[int]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(score (n, V) float64, next node (n, V) int64, next LM state (n, V) int64) of
        every next unit for hypotheses at (nodes[r], states[r])."""
        static = np.stack([self._static(n) for n in nodes])
        bonus = static[:, 0]
        nxt_node = static[:, 1].astype(np.int64)
        nxt_state = np.repeat(np.asarray(states, np.int64)[:, None], self.vocab_size, axis=1)
        if self.options.allow_oov and self.lm.unk is not None:  # units starting unknown words
            enter = (nxt_node == self.oov_node) & (np.asarray(nodes) != self.oov_node)[:, None]
            rows = np.nonzero(enter.any(axis=1))[0]
            if len(rows):
                cost = np.array([self._unk_cost(states[r]) for r in rows])
                bonus[rows] += np.where(enter[rows], cost[:, None], 0.0)
        todo = [r for r, n in enumerate(nodes) if self._can_complete(n)]
        if todo:
            done = [self._complete(nodes[r], states[r]) for r in todo]
            score = np.array([d[0] for d in done])
            ok = score != NEG_INF
            rows = np.array(todo)[ok]
            if len(rows):
                cols = np.array(self._word_starts)
                bonus[np.ix_(rows, cols)] = score[ok][:, None] + self._start_score[None, :]
                nxt_node[np.ix_(rows, cols)] = self._start_node[None, :]
                nxt_state[np.ix_(rows, cols)] = np.array([d[1] for d in done])[ok][:, None]
        return bonus, nxt_node, nxt_state

    def next(self, node: int, state: int, token: int) -> tuple[int, int]:
        """(node, LM state) after ``token``."""
        _, nn, ns = self.rows([node], [state])
        return int(nn[0, token]), int(ns[0, token])

    def end_score(self, node: int, state: int) -> float:
        """What ending the segment at (node, state) adds: the last word completed and
        ``</s>``; -inf when the hypothesis is inside something that is not a word."""
        if node in self._empty:
            return self.options.lm_scale * (self.lm.end_score(state) - float(self._la[node]))
        done, after = self._complete(node, state)
        if done == NEG_INF:
            return NEG_INF
        return done + self.options.lm_scale * self.lm.end_score(after)

    def word_is_known(self, token_ids: Sequence[int]) -> list[bool]:
        """For the words of a unit sequence that the graph accepted: whether each one is a
        lexicon word (False: spelled through the unknown-word path)."""
        out, node = [], self.start_node
        for t in token_ids:
            if t in self._blank_ids:
                continue
            if t in self._word_starts and node not in self._empty:
                out.append(node != self.oov_node and bool(self._words(node)))
                node = self._next_known(1, t)
                continue
            node = self._next_known(node, t) if node != self.oov_node else node
        if node not in self._empty:
            out.append(node != self.oov_node and bool(self._words(node)))
        return out

    def _next_known(self, node: int, unit: int) -> int:
        c = self._child(node, unit)
        return self.oov_node if c is None else c

    def __len__(self) -> int:
        """Nodes of the prefix tree (start, root and the unknown-word node included)."""
        return self._tree.num_nodes + 1
