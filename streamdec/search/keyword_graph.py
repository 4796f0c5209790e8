"""Keywords: the list a stream spots, parsed and compiled into an Aho-Corasick automaton.

One keyword a line (or ``/`` between keywords in one string), in sherpa-onnx's keyword
format: the keyword's units as tokens.txt writes them, or a plain phrase that the model's
units spell (``bpe.model``, as sherpa-onnx's ``text2token`` does it), then optional items:

    ▁HE LL O ▁WORLD :2.0 #0.3 @HELLO_WORLD     units, boost 2.0, threshold 0.3, its text
    HEY JARVIS #0.2                           a phrase; default boost, threshold 0.2

``:B`` the boost (bonus per matched unit, default ``boost``), ``#T`` the threshold: the mean
probability of the keyword's units it must reach to fire (default ``threshold``), ``@TEXT``
the text an event reports (default: the phrase as written, or the units' text). A line
with any unit written with the word-start mark ``▁`` is read as units (each must be in
tokens.txt); any other line is a phrase. Blank lines are skipped.

The automaton (``KeywordGraph``) scores as sherpa-onnx's keyword spotter does: a unit that
continues a keyword earns its boost; completing a keyword earns, once more, the bonus of
every keyword that ends there (its ``output`` score), which lifts a finished keyword to the
top of the beam; a unit that breaks a match follows the fail links to the longest keyword
prefix that is a suffix of what was read and gives back the difference of the two states'
bonuses. ``matched(node)`` names the keyword that ends in a state: the state's own, or the
nearest one on its fail chain (a keyword that is a suffix of a longer match).

    graph = KeywordGraph.build(keywords, vocab_size)
    bonus, node = graph.step(node, token)     # node 0 is the root
    k = graph.matched(node)                   # index into graph.keywords, or -1

The graph is immutable once built, so every thread and stream may share it.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import ConfigError, TokenizeError

__all__ = ["Keyword", "KeywordGraph", "parse_keywords", "read_keywords", "split_keywords",
           "MAX_KEYWORDS", "MAX_KEYWORD_UNITS", "MAX_BOOST", "DEFAULT_BOOST",
           "DEFAULT_THRESHOLD"]

#: sherpa-onnx's defaults (``keywords_score``, ``keywords_threshold``)
DEFAULT_BOOST = 1.0
DEFAULT_THRESHOLD = 0.25
#: bounds of one stream's list: keywords, units in one keyword, boost per unit
MAX_KEYWORDS = 256
MAX_KEYWORD_UNITS = 32
MAX_BOOST = 100.0

_WORD_START = "\u2581"


@dataclass(frozen=True)
class Keyword:
    """One keyword of a list: its units, the text its events report, boost per unit and
    threshold (mean unit probability in (0, 1])."""

    text: str
    ids: tuple[int, ...]
    boost: float = DEFAULT_BOOST
    threshold: float = DEFAULT_THRESHOLD


def split_keywords(text: str) -> list[str]:
    """The lines of a keyword list given in one string: ``/`` or a newline between
    keywords (sherpa-onnx's ``create_stream(keywords)`` takes ``/``)."""
    return [part for line in text.splitlines() for part in line.split("/")]


def read_keywords(path: str | Path) -> list[str]:
    """The lines of a keywords file; ConfigError when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read keywords file ({e})") from e


def _number(item: str, what: str, where: str) -> float:
    try:
        value = float(item[1:])
    except ValueError:
        raise ConfigError(f"{where}: bad {what} {item!r} (a number after "
                          f"{item[0]!r})") from None
    if not math.isfinite(value):
        raise ConfigError(f"{where}: {what} must be finite, got {item!r}")
    return value


def _parse_line(line: str, symbols, where: str, boost: float, threshold: float
                ) -> Keyword | None:
    """One keyword line (None for a blank line); ConfigError / TokenizeError."""
    items = line.split()
    if not items:
        return None
    units, text = [], None
    for item in items:
        if len(item) > 1 and item[0] in ":#@" and item not in symbols.symbol_to_id:
            if item[0] == ":":
                boost = _number(item, "boost", where)
                if not 0 < boost <= MAX_BOOST:
                    raise ConfigError(f"{where}: boost must be in (0, {MAX_BOOST:g}], got "
                                      f"{item[1:]}")
            elif item[0] == "#":
                threshold = _number(item, "threshold", where)
                if not 0 < threshold <= 1:
                    raise ConfigError(f"{where}: threshold must be a probability in (0, 1], "
                                      f"got {item[1:]}")
            else:
                text = item[1:]
        else:
            units.append(item)
    if not units:
        raise ConfigError(f"{where}: empty keyword in {line.strip()!r}")
    if any(_WORD_START in u for u in units):  # written in the model's units
        missing = [u for u in units if u not in symbols.symbol_to_id]
        if missing:
            raise TokenizeError(f"{where}: {', '.join(map(repr, missing))} not in the model's "
                                f"tokens.txt")
        ids = [symbols.symbol_to_id[u] for u in units]
        shown = symbols.text(ids)
    else:
        phrase = " ".join(units)
        try:
            ids = symbols.encode(phrase)
        except TokenizeError as e:
            raise TokenizeError(f"{where}: {e}") from None
        shown = phrase
    if len(ids) > MAX_KEYWORD_UNITS:
        raise ConfigError(f"{where}: a keyword may have at most {MAX_KEYWORD_UNITS} units, "
                          f"{line.strip()!r} has {len(ids)}")
    if any(i in (symbols.blank_id, symbols.unk_id) for i in ids):
        raise ConfigError(f"{where}: a keyword cannot contain <blk> or <unk>")
    return Keyword(text if text is not None else shown, tuple(ids), boost, threshold)


def parse_keywords(lines: Iterable[str], symbols, boost: float = DEFAULT_BOOST,
                   threshold: float = DEFAULT_THRESHOLD, source: str = "keywords"
                   ) -> list[Keyword]:
    """The keywords of ``lines`` (see the module notes), spelled with ``symbols`` (a
    ``SymbolTable``); ``boost``/``threshold``: the defaults of a line that gives none.
    ConfigError for an empty keyword, a bad boost or threshold, too long a keyword, the
    same units twice or more than ``MAX_KEYWORDS``; TokenizeError for a unit not in
    tokens.txt or a phrase the model cannot spell. Messages name ``source`` and the
    line."""
    out: list[Keyword] = []
    seen: dict[tuple[int, ...], int] = {}
    for n, line in enumerate(lines, 1):
        where = f"{source} line {n}"
        keyword = _parse_line(line, symbols, where, boost, threshold)
        if keyword is None:
            continue
        if keyword.ids in seen:
            raise ConfigError(f"{where}: {line.strip()!r} is spelled as line {seen[keyword.ids]}"
                              f" is (the same units twice)")
        seen[keyword.ids] = n
        out.append(keyword)
        if len(out) > MAX_KEYWORDS:
            raise ConfigError(f"{source}: more than {MAX_KEYWORDS} keywords")
    if not out:
        raise ConfigError(f"{source}: no keyword given")
    return out


@dataclass
class _Node:
    depth: int
    token_score: float = 0.0  # bonus for reaching this state from its parent
    node_score: float = 0.0  # bonus of the path from the root
    output_score: float = 0.0  # bonus of the keywords ending here and on the fail chain
    keyword: int = -1  # the keyword that ends here (index), -1: none
    output: int = -1  # nearest state on the fail chain where a keyword ends, -1: none
    fail: int = 0
    children: dict[int, int] = field(default_factory=dict)


class KeywordGraph:
    """Aho-Corasick automaton over the keywords' units (see the module notes)."""

    def __init__(self, keywords: Sequence[Keyword], nodes: list[_Node]) -> None:
        self.keywords = tuple(keywords)
        self._nodes = nodes
        #: units a hypothesis keeps (the longest keyword): enough to report any match
        self.max_units = max((len(k.ids) for k in keywords), default=0)

    @classmethod
    def build(cls, keywords: Sequence[Keyword], vocab_size: int) -> "KeywordGraph":
        nodes = [_Node(depth=0)]
        for index, keyword in enumerate(keywords):
            cur = 0
            for tok in keyword.ids:
                if not 0 <= tok < vocab_size:
                    raise ConfigError(f"keyword unit id {tok} outside the vocabulary "
                                      f"[0, {vocab_size})")
                nxt = nodes[cur].children.get(tok)
                if nxt is None:
                    nxt = len(nodes)
                    nodes.append(_Node(depth=nodes[cur].depth + 1, token_score=keyword.boost))
                    nodes[cur].children[tok] = nxt
                else:  # a shared prefix takes the larger boost
                    nodes[nxt].token_score = max(nodes[nxt].token_score, keyword.boost)
                cur = nxt
            nodes[cur].keyword = index
        queue = deque([0])  # breadth first: scores, fail links, outputs
        while queue:
            n = queue.popleft()
            for tok, child in nodes[n].children.items():
                c = nodes[child]
                c.node_score = nodes[n].node_score + c.token_score
                c.fail = 0 if n == 0 else cls._goto(nodes, nodes[n].fail, tok)
                f = c.fail
                c.output = f if nodes[f].keyword >= 0 else nodes[f].output
                c.output_score = ((c.node_score if c.keyword >= 0 else 0.0)
                                  + (nodes[c.output].output_score if c.output >= 0 else 0.0))
                queue.append(child)
        return cls(keywords, nodes)

    @staticmethod
    def _goto(nodes: list[_Node], node: int, token: int) -> int:
        """The state after ``token`` read in ``node``, through the fail links."""
        while True:
            child = nodes[node].children.get(token)
            if child is not None:
                return child
            if node == 0:
                return 0
            node = nodes[node].fail

    def __len__(self) -> int:
        """Number of states (the root included)."""
        return len(self._nodes)

    def step(self, node: int, token: int) -> tuple[float, int]:
        """(bonus, next state) for ``token`` read in state ``node``."""
        here = self._nodes[node]
        child = here.children.get(token)
        if child is not None:
            score = self._nodes[child].token_score
        else:
            child = self._goto(self._nodes, here.fail, token)
            score = self._nodes[child].node_score - here.node_score
        return score + self._nodes[child].output_score, child

    def matched(self, node: int) -> int:
        """The keyword (index into ``keywords``) that ends in state ``node``: its own, else
        the nearest on its fail chain; -1 when none does."""
        here = self._nodes[node]
        if here.keyword >= 0:
            return here.keyword
        return self._nodes[here.output].keyword if here.output >= 0 else -1
