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
from bisect import bisect_left
from pathlib import Path
from typing import Iterable

import numpy as np

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
        words = sorted({w for (w,) in entries[0]} | {BOS, EOS})
        ids = {w: i for i, w in enumerate(words)}
        levels = []
        for level in entries:
            n = len(next(iter(level))) if level else 0
            grams = np.array([[ids[w] for w in g] for g in level], np.int32).reshape(-1, n)
            values = np.array(list(level.values()), np.float64).reshape(-1, 2)
            levels.append((grams, values[:, 0].copy(), values[:, 1].copy()))
        self._setup(order, words, levels)

    @classmethod
    def from_arrays(cls, order: int, words: list[str],
                    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> "NgramLm":
        """The model of ``to_arrays``' output (a compiled lang directory)."""
        lm = cls.__new__(cls)
        lm._setup(order, words, levels)
        return lm

    def to_arrays(self) -> tuple[int, list[str], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """(order, words, levels): levels[n - 1] = (ids (k, n) int32, log10 p (k,), log10
        back-off (k,)), n-grams in the ARPA file's order (it numbers the states)."""
        return self.order, self.words, self._levels

    def _setup(self, order: int, words: list[str],
               levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
        self.order = order
        self.words = words
        self._levels = levels
        self._ids_memo: dict[str, int] | None = None
        self.bos, self.eos = bisect_left(words, BOS), bisect_left(words, EOS)
        unk = bisect_left(words, UNK)
        self.unk = unk if unk < len(words) and words[unk] == UNK else None
        # unigrams by word id, longer n-grams (tuples of ids) in a dict: (ln p, ln back-off)
        self._uni: list[tuple[float, float] | None] = [None] * len(words)
        self._uni_state: list[int | None] = [None] * len(words)
        self._table: dict[tuple[int, ...], tuple[float, float]] = {}
        # states: every n-gram of order < N (a possible context), the empty context first,
        # then in the file's order
        self._contexts: list[tuple[int, ...]] = [()]
        self._state_of: dict[tuple[int, ...], int] = {}
        for n, (grams, logp, backoff) in enumerate(levels, 1):
            if n == 1:
                ids = grams[:, 0]
                by_id = np.full((len(words), 2), np.nan)
                by_id[ids, 0], by_id[ids, 1] = logp * LN10, backoff * LN10
                self._uni = list(zip(*by_id.T.tolist()))
                for i in np.setdiff1d(np.arange(len(words)), ids).tolist():
                    self._uni[i] = None  # a word only as <s> or </s>
                if order > 1:
                    state = np.zeros(len(words), np.int64)
                    state[ids] = np.arange(len(ids)) + len(self._contexts)
                    self._uni_state = [s if s else None for s in state.tolist()]
                    self._contexts += [(i,) for i in ids.tolist()]
            else:
                keys = list(map(tuple, grams.tolist()))
                self._table.update(zip(keys, zip((logp * LN10).tolist(),
                                                 (backoff * LN10).tolist())))
                if n < order:
                    self._state_of.update(zip(keys, range(len(self._contexts),
                                                          len(self._contexts) + len(keys))))
                    self._contexts += keys
        self._unk_logp = self._uni[self.unk][0] if self.unk is not None else -99.0 * LN10
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

    @property
    def _ids(self) -> dict[str, int]:
        """word -> id (made on first use: only building a graph needs it)."""
        if self._ids_memo is None:
            self._ids_memo = {w: i for i, w in enumerate(self.words)}
        return self._ids_memo

    def word_id(self, word: str) -> int:
        """The id of ``word``; ``<unk>``'s id (or -1) for a word the model lacks."""
        return self._ids.get(word, self.unk if self.unk is not None else -1)

    def _entry(self, ngram: tuple[int, ...]) -> tuple[float, float] | None:
        return self._uni[ngram[0]] if len(ngram) == 1 else self._table.get(ngram)

    def _state(self, history: tuple[int, ...]) -> int:
        h = history[len(history) - (self.order - 1):] if self.order > 1 else ()
        while h:
            state = self._uni_state[h[0]] if len(h) == 1 else self._state_of.get(h)
            if state is not None:
                return state
            h = h[1:]
        return 0

    def _logprob(self, context: tuple[int, ...], word: int) -> float:
        total = 0.0
        h = context
        while True:
            entry = self._entry(h + (word,))
            if entry is not None:
                return total + entry[0]
            if not h:
                return total + self._unk_logp
            bo = self._entry(h)
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
