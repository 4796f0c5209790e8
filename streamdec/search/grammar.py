"""Grammar mode: a phrase list as the word LM of a ``WordGraph`` (IVR menus, commands).

An utterance is one or more of the phrases in a row (``["YES", "NO"]`` accepts "YES",
"NO YES", ...; a list of digits accepts any digit string), or nothing. Every allowed word
scores 0, anything else ``-inf``, so the acoustic model alone chooses among the phrases.
The phrase ``[unk]`` (Vosk's spelling) stands for any word outside the list: with it the
stream may say something else, shown as ``[unk]``; without it every utterance is forced
onto the phrases.

    grammar = Grammar.from_phrases(["YES", "NO", "[unk]"])
    graph = grammar_graph(["yes", "no", "[unk]"], symbols, unk_penalty=...)

States are nodes of a prefix tree over the phrases' words (0: between phrases).
"""

from __future__ import annotations

import math
from typing import Sequence

from ..errors import ConfigError

__all__ = ["Grammar", "grammar_graph", "UNK_PHRASE"]

UNK_PHRASE = "[unk]"


class Grammar:
    """Phrases as a word automaton (see the module notes); a ``WordLm``."""

    def __init__(self, phrases: Sequence[Sequence[str]]) -> None:
        words = sorted({w for p in phrases for w in p})
        self.words = words
        self._ids = {w: i for i, w in enumerate(words)}
        self.unk = self._ids.get(UNK_PHRASE)
        self.start = 0
        self._children: list[dict[int, int]] = [{}]
        self._is_end = [False]
        for phrase in phrases:
            node = 0
            for w in phrase:
                wid = self._ids[w]
                nxt = self._children[node].get(wid)
                if nxt is None:
                    nxt = len(self._children)
                    self._children.append({})
                    self._is_end.append(False)
                    self._children[node][wid] = nxt
                node = nxt
            self._is_end[node] = True

    @classmethod
    def from_phrases(cls, phrases: Sequence[str]) -> "Grammar":
        split = [p.split() for p in phrases]
        if not any(split):
            raise ConfigError("grammar: no phrases")
        return cls([p for p in split if p])

    def word_id(self, word: str) -> int:
        return self._ids.get(word, -1)

    def score(self, state: int, word: int) -> tuple[float, int]:
        nxt = self._children[state].get(word)
        if nxt is None and self._is_end[state]:  # a phrase ended: the next one starts
            nxt = self._children[0].get(word)
        if nxt is None:
            return -math.inf, state
        if self._is_end[nxt] and not self._children[nxt]:
            nxt = 0
        return 0.0, nxt

    def end_score(self, state: int) -> float:
        return 0.0 if state == 0 or self._is_end[state] else -math.inf

    def unigram(self, word: int) -> float:
        return 0.0


def grammar_graph(phrases: Sequence[str], symbols, unk_penalty: float, word_bonus: float = 0.0,
                  unk_unit_penalty: float = 0.0):
    """The ``WordGraph`` of a phrase list: its words spelled with the model's units
    (``symbols``), ``[unk]`` enabling the unknown-word path (shown as ``[unk]``).
    Raises TokenizeError for a word the units cannot write."""
    from .word_graph import WordGraph, WordOptions

    norm = []
    for p in phrases:
        words = [w if w == UNK_PHRASE else symbols.text(symbols.encode(w)) for w in p.split()]
        norm.append(" ".join(words))
    grammar = Grammar.from_phrases(norm)
    lexicon = [(w, tuple(symbols.symbols(symbols.encode(w))))
               for w in grammar.words if w != UNK_PHRASE]
    if not lexicon:
        raise ConfigError("grammar: needs at least one phrase besides [unk]")
    options = WordOptions(lm_scale=1.0, word_bonus=word_bonus, lookahead=False,
                          allow_oov=grammar.unk is not None, unk_penalty=unk_penalty,
                          unk_unit_penalty=unk_unit_penalty)
    return WordGraph.build(lexicon, grammar, symbols, options, unk_text=UNK_PHRASE)
