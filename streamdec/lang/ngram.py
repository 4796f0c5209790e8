"""A back-off word n-gram model for the search: ARPA in, log-probabilities out.

    lm = NgramLm.from_arpa("G.arpa")            # or G.arpa.gz
    state = lm.start                             # the state after <s>
    logp, state = lm.score(state, lm.word_id("HELLO"))
    logp_end = lm.end_score(state)               # log p(</s> | state)

States are small integers, each standing for a context the model has (the longest suffix
of the history, at most order - 1 words, that appears in the ARPA file); they are numbered
when the file is read, so a state id is stable for the model's lifetime. Log-probabilities
are natural logs (ARPA stores log10). Words the model lacks score as ``<unk>`` (or -99 log10
when it has no ``<unk>`` either). The object is immutable once read; its score memo is
bounded and thread-safe.
"""

from __future__ import annotations

import gzip
import math
import threading
from pathlib import Path
from typing import Iterable

from ..errors import ConfigError
from .kneser_ney import BOS, EOS, UNK

__all__ = ["NgramLm", "read_arpa"]

LN10 = math.log(10.0)
_MEMO_LIMIT = 500_000


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_arpa(lines: Iterable[str], where: str = "ARPA"
              ) -> tuple[int, list[dict[tuple[str, ...], tuple[float, float]]]]:
    """(order, entries) with entries[n - 1][ngram] = (log10 p, log10 back-off)."""
    order, entries, section, counts = 0, [], 0, {}
    for num, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        if line == "\\data\\":
            section = 0
            continue
        if line.startswith("ngram ") and section == 0:
            n, _, c = line[6:].partition("=")
            counts[int(n)] = int(c)
            continue
        if line.startswith("\\") and line.endswith("-grams:"):
            section = int(line[1:line.index("-")])
            while len(entries) < section:
                entries.append({})
            order = max(order, section)
            continue
        if line == "\\end\\":
            break
        if section == 0:
            continue
        parts = line.split()
        try:
            logp = float(parts[0])
            words = tuple(parts[1:1 + section])
            bo = float(parts[1 + section]) if len(parts) > 1 + section else 0.0
        except (ValueError, IndexError):
            raise ConfigError(f"{where}:{num}: not an ARPA {section}-gram line: {raw!r}") from None
        if len(words) != section:
            raise ConfigError(f"{where}:{num}: expected {section} words: {raw!r}")
        entries[section - 1][words] = (logp, bo)
    if not order or not entries[0]:
        raise ConfigError(f"{where}: no n-grams found (not an ARPA file?)")
    for n, c in counts.items():
        if n <= len(entries) and len(entries[n - 1]) != c:
            raise ConfigError(f"{where}: header says {c} {n}-grams, file has "
                              f"{len(entries[n - 1])}")
    return order, entries


class NgramLm:
    """Back-off n-gram model over integer word ids (see the module notes)."""

    def __init__(self, order: int, entries: list[dict[tuple[str, ...], tuple[float, float]]]):
        self.order = order
        words = sorted({w for (w,) in entries[0]} | {BOS, EOS})
        self.words = words
        self._ids = {w: i for i, w in enumerate(words)}
        self.bos, self.eos = self._ids[BOS], self._ids[EOS]
        self.unk = self._ids.get(UNK)
        # n-gram (tuple of ids) -> (ln p, ln back-off)
        self._table: dict[tuple[int, ...], tuple[float, float]] = {}
        for level in entries:
            for g, (lp, bo) in level.items():
                self._table[tuple(self._ids[w] for w in g)] = (lp * LN10, bo * LN10)
        self._unk_logp = self._table[(self.unk,)][0] if self.unk is not None else -99.0 * LN10
        # states: every n-gram of order < N (a possible context), the empty context first
        self._contexts: list[tuple[int, ...]] = [()]
        self._state_of: dict[tuple[int, ...], int] = {(): 0}
        for g in self._table:
            if len(g) < order and g not in self._state_of:
                self._state_of[g] = len(self._contexts)
                self._contexts.append(g)
        self.start = self._state((self.bos,))
        self._memo: dict[tuple[int, int], tuple[float, int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_arpa(cls, path: str | Path) -> "NgramLm":
        path = Path(path)
        try:
            with _open_text(path) as f:
                order, entries = read_arpa(f, str(path))
        except (OSError, UnicodeDecodeError, EOFError) as e:
            raise ConfigError(f"{path}: cannot read ARPA file ({e})") from e
        return cls(order, entries)

    @property
    def num_states(self) -> int:
        return len(self._contexts)

    def word_id(self, word: str) -> int:
        """The id of ``word``; ``<unk>``'s id (or -1) for a word the model lacks."""
        return self._ids.get(word, self.unk if self.unk is not None else -1)

    def _state(self, history: tuple[int, ...]) -> int:
        h = history[len(history) - (self.order - 1):] if self.order > 1 else ()
        while h not in self._state_of:
            h = h[1:]
        return self._state_of[h]

    def _logprob(self, context: tuple[int, ...], word: int) -> float:
        total = 0.0
        h = context
        while True:
            entry = self._table.get(h + (word,))
            if entry is not None:
                return total + entry[0]
            if not h:
                return total + self._unk_logp
            bo = self._table.get(h)
            if bo is not None:
                total += bo[1]
            h = h[1:]

    def score(self, state: int, word: int) -> tuple[float, int]:
        """(ln p(word | state), the state after word)."""
        key = (state, word)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        context = self._contexts[state]
        if word < 0:  # no such word and no <unk>: a floor, the context is lost
            out = (-99.0 * LN10, 0)
        else:
            out = (self._logprob(context, word), self._state(context + (word,)))
        with self._lock:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = out
        return out

    def unigram(self, word: int) -> float:
        """ln p(word) with no history (the look-ahead inside words)."""
        return self.score(0, word)[0]

    def end_score(self, state: int) -> float:
        """ln p(</s> | state)."""
        return self.score(state, self.eos)[0]

    def context_words(self, state: int) -> list[str]:
        return [self.words[i] for i in self._contexts[state]]
