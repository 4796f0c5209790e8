"""Hotwords (contextual biasing): an Aho-Corasick trie over the phrases' token sequences.

Every hypothesis of a beam search carries a node of the stream's graph (an int, 0 = root).
A token that continues a phrase earns the phrase's per-token bonus; a token that breaks a
match follows the fail links to the longest phrase prefix that is a suffix of what was
matched, and gives back the bonus of the part that no longer matches
(``node_score(dest) - node_score(src)``). A completed phrase keeps its bonus for good: the
automaton stays in the phrase's node, so a longer phrase that extends it (``NEW YORK`` then
``NEW YORK CITY``) goes on earning, and a later mismatch gives back only the part after the
last completed phrase (``held``). At the end of a segment the held part is refunded
(``refund``).

Word starts: with character units that spell the word boundary as its own unit (``▁``), a
phrase keeps its leading ``▁`` at no bonus, so it only starts matching at a word start, and
every segment starts in the state after ``▁`` (``graph.start``): a phrase also matches at
the start of an utterance, whether or not the model writes a leading ``▁``.

A phrase completed only inside a longer partial match (``A B`` while matching ``X A B C``)
earns its bonus when that match breaks and the automaton falls back to it.

    graph = ContextGraph.build([((5, 9, 2), 1.5), ((7,), 2.0)], vocab_size=V)
    bonus = graph.bonus_rows(nodes)          # (n, V): bonus of every next token
    node = graph.next_node(node, token)      # the state after ``token``
    score -= graph.refund(node)              # at segment end

Shape legend: n hypotheses, V vocabulary size.

The graph is immutable once built (its per-node bonus rows are computed lazily and
memoised; filling the memo is idempotent, so sharing a graph between threads is safe).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..errors import ConfigError

__all__ = ["ContextGraph", "parse_hotwords", "read_hotwords_file", "hotwords_graph"]


@dataclass
class _Node:
    depth: int
    token_score: float  # bonus for reaching this node from its parent
    node_score: float  # sum of token scores from the root
    is_end: bool = False
    done: float = 0.0  # node_score of the deepest completed phrase on the path (kept for good)
    children: dict[int, int] = field(default_factory=dict)
    fail: int = 0


class ContextGraph:
    """Aho-Corasick automaton over token sequences with per-token bonuses."""

    def __init__(self, nodes: list[_Node], vocab_size: int, start: int = 0) -> None:
        self._nodes = nodes
        self.vocab_size = vocab_size
        self.start = start  # the state every segment starts in
        self._rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def build(cls, phrases: Iterable[tuple[Sequence[int], float | Sequence[float]]],
              vocab_size: int, start: Sequence[int] = ()) -> "ContextGraph":
        """``phrases``: (token ids, bonus per token: one for all or one per token). Shared
        prefixes take the larger bonus. ``start``: tokens that lead from the root to the
        segment-start state (when the graph has them)."""
        nodes = [_Node(depth=0, token_score=0.0, node_score=0.0)]
        for tokens, scores in phrases:
            if not tokens:
                continue
            if isinstance(scores, (int, float)):
                scores = [float(scores)] * len(tokens)
            cur = 0
            for tok, score in zip(tokens, scores):
                tok = int(tok)
                if not 0 <= tok < vocab_size:
                    raise ConfigError(f"hotword token id {tok} outside vocabulary [0, {vocab_size})")
                nxt = nodes[cur].children.get(tok)
                if nxt is None:
                    nxt = len(nodes)
                    nodes.append(_Node(depth=nodes[cur].depth + 1, token_score=score,
                                       node_score=nodes[cur].node_score + score))
                    nodes[cur].children[tok] = nxt
                elif score > nodes[nxt].token_score:
                    nodes[nxt].token_score = score
                cur = nxt
            nodes[cur].is_end = True
        # node scores after max-merging of shared prefixes, then fail links, breadth first
        queue = deque([0])
        while queue:
            n = queue.popleft()
            for tok, child in nodes[n].children.items():
                nodes[child].node_score = nodes[n].node_score + nodes[child].token_score
                nodes[child].done = nodes[child].node_score if nodes[child].is_end else nodes[n].done
                if n != 0:
                    f = nodes[n].fail
                    while f and tok not in nodes[f].children:
                        f = nodes[f].fail
                    nodes[child].fail = nodes[f].children.get(tok, 0)
                queue.append(child)
        node = 0
        for tok in start:
            node = nodes[node].children.get(int(tok), 0)
            if node == 0 or nodes[node].is_end:
                node = 0
                break
        return cls(nodes, vocab_size, start=node)

    def __len__(self) -> int:
        """Number of states (the root included)."""
        return len(self._nodes)

    def _held(self, node: int) -> float:
        """The bonus in ``node`` that a mismatch or a segment end takes back."""
        return self._nodes[node].node_score - self._nodes[node].done

    def _goto(self, node: int, token: int) -> int:
        """Aho-Corasick transition."""
        while True:
            child = self._nodes[node].children.get(token)
            if child is not None:
                return child
            if node == 0:
                return 0
            node = self._nodes[node].fail

    def step(self, node: int, token: int) -> tuple[float, int]:
        """(bonus, next node) for ``token`` read in state ``node``."""
        dest = self._goto(node, token)
        if self._nodes[node].children.get(token) == dest:  # the match goes on
            return self._nodes[dest].token_score, dest
        # fell back to a suffix: give back what was held, earn what the suffix holds
        # (the completed phrases inside it included)
        return self._nodes[dest].node_score - self._held(node), dest

    def _row(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """(bonus (V,) float32, next node (V,) int64) of every token from ``node``."""
        row = self._rows.get(node)
        if row is None:
            bonus = np.full(self.vocab_size, -self._held(node), np.float32)
            nxt = np.zeros(self.vocab_size, np.int64)
            chain, n = [], node
            while True:  # every token with a transition other than "back to the root"
                chain.append(n)
                if n == 0:
                    break
                n = self._nodes[n].fail
            for tok in {t for n in chain for t in self._nodes[n].children}:
                bonus[tok], nxt[tok] = self.step(node, tok)
            row = (bonus, nxt)
            self._rows[node] = row
        return row

    def bonus_rows(self, nodes: Sequence[int]) -> np.ndarray:
        """(n, V) bonus of each next token for hypotheses in states ``nodes``."""
        return np.stack([self._row(n)[0] for n in nodes])

    def next_node(self, node: int, token: int) -> int:
        return int(self._row(node)[1][token])

    def refund(self, node: int) -> float:
        """The bonus a partial match in ``node`` holds (to subtract at segment end)."""
        return self._held(node)


def parse_hotwords(lines: Iterable[str], default_score: float
                   ) -> list[tuple[str, float]]:
    """``phrase`` or ``phrase :score`` per line (blank lines and ``#`` comments skipped)."""
    out = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        phrase, score = line, default_score
        head, sep, tail = line.rpartition(" :")
        if sep:
            try:
                phrase, score = head.strip(), float(tail)
            except ValueError:
                raise ConfigError(f"hotwords line {n}: bad score in {raw!r}") from None
        if not phrase:
            raise ConfigError(f"hotwords line {n}: empty phrase in {raw!r}")
        out.append((phrase, score))
    return out


def read_hotwords_file(path: str | Path, default_score: float) -> list[tuple[str, float]]:
    """The phrases of a hotwords file (see ``parse_hotwords``); ConfigError if unreadable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read hotwords file ({e})") from e
    return parse_hotwords(text.splitlines(), default_score)


def hotwords_graph(phrases: Sequence[tuple[str, float]], symbols) -> ContextGraph | None:
    """The graph of (text, bonus per token) phrases tokenised with ``symbols``
    (a ``SymbolTable``); None without phrases. A leading stand-alone word-boundary unit earns
    no bonus and is where segments start (see the module notes). Raises TokenizeError."""
    from ..tokens import WORD_START

    boundary = symbols.symbol_to_id.get(WORD_START)
    seqs = []
    for text, score in phrases:
        ids = symbols.encode(text)
        seqs.append((ids, [0.0 if i == 0 and t == boundary else score
                           for i, t in enumerate(ids)]))
    start = (boundary,) if boundary is not None else ()
    return ContextGraph.build(seqs, len(symbols), start=start) if seqs else None
