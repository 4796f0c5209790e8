"""Which spoken words each written token comes from.

``align(spoken, written)`` pairs the words a recogniser wrote (``five thirty``) with the
tokens a rewriting of them gave (``5:30``): a monotone alignment by longest common runs
(``difflib.SequenceMatcher``). Tokens equal to a spoken word take that word; a run of
changed tokens shares the run of changed words it replaced, in order (each token at least
one word when there are enough); words dropped with no token of their own (``the`` and
``of`` of ``the twenty first of march`` -> ``21 march``) join the token before them (the
one after at the start); a token with no word of its own (an inserted ``%``) takes the
word of the token before it (the one after at the start).
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Sequence

__all__ = ["align"]


def align(spoken: Sequence[str], written: Sequence[str]) -> list[tuple[int, int]]:
    """Per written token, the first and last index (inclusive) of its spoken words.
    Spans are in order and cover every spoken word (when there is a token at all)."""
    if not written:
        return []
    if not spoken:
        raise ValueError("written tokens from no spoken words")
    spans: list[list[int] | None] = [None] * len(written)
    dropped: list[tuple[int, int, int]] = []  # (first word, last word, token index after)
    for op, i1, i2, j1, j2 in SequenceMatcher(None, spoken, written, autojunk=False
                                              ).get_opcodes():
        if op == "equal":
            for k in range(i2 - i1):
                spans[j1 + k] = [i1 + k, i1 + k]
        elif j1 == j2:  # words with no token
            dropped.append((i1, i2 - 1, j1))
        elif i1 < i2:  # a run of tokens from a run of words
            n, m = i2 - i1, j2 - j1
            for k in range(m):
                a = i1 + (k * n) // m
                b = max(a, i1 + ((k + 1) * n) // m - 1)
                spans[j1 + k] = [a, b]
    for j, span in enumerate(spans):  # tokens with no word: the previous token's last word
        if span is None:
            prev = next((spans[p] for p in range(j - 1, -1, -1) if spans[p]), None)
            if prev is not None:
                spans[j] = [prev[1], prev[1]]
    for j, span in enumerate(spans):  # at the start: the next token's first word
        if span is None:
            nxt = next(spans[p] for p in range(j + 1, len(spans)) if spans[p])
            spans[j] = [nxt[0], nxt[0]]
    for first, last, after in dropped:
        if after > 0:
            spans[after - 1][1] = max(spans[after - 1][1], last)
        else:
            spans[0][0] = min(spans[0][0], first)
    return [(a, b) for a, b in spans]
