"""Word n-gram estimation: interpolated modified Kneser-Ney (Chen & Goodman 1998), written in
back-off form (ARPA), with count-cutoff pruning that renormalises the back-off weights.

No installable Python package estimates this model: the PyPI packages that write ARPA use
one discount per order (``kaldingram``: SRILM's ``-ukndiscount``; ``arpabo``: a fixed 0.75),
and KenLM's estimator is a C++ program its Python module does not ship. The estimate here
follows the formulas below exactly; ``tests/test_kneser_ney.py`` checks it against
probabilities computed by hand on a toy corpus.

Definitions (order N; a sentence is ``<s> w1 .. wk </s>``; ``<s>`` is never predicted):

- *adjusted count* a(g) of an n-gram g: for n = N, or when g starts with ``<s>`` (nothing can
  precede it), the raw count; otherwise the number of distinct words v with count(v g) > 0
  (the continuation count).
- *discounts* of order n, from the numbers t_k of order-n n-grams with a(g) = k:
  Y = t1 / (t1 + 2 t2);  D1 = 1 - 2Y t2/t1;  D2 = 2 - 3Y t3/t2;  D3+ = 3 - 4Y t4/t3
  (when a t_k is zero, or a D leaves [0, k], the defaults 0.5, 1.0, 1.5 are used and the
  estimator says so in ``Estimate.notes``).
- for a context h of n-1 words with total T(h) = sum_w a(h w):
  p(w | h) = (a(h w) - D(a(h w))) / T(h) + gamma(h) p(w | h'),
  gamma(h) = (D1 N1(h) + D2 N2(h) + D3+ N3+(h)) / T(h),
  N_k(h) = number of words with a(h w) = k (N3+: >= 3), h' = h without its first word;
- the unigram level interpolates with the uniform distribution over the vocabulary (all
  words but ``<s>``, ``<unk>`` included): p(w) = (a(w) - D(a(w))) / T + gamma() / |V|.

In back-off form a seen n-gram stores the interpolated p(w | h) and a context stores
gamma(h) as its back-off weight: for an unseen w, p(w | h) = gamma(h) p(w | h') exactly.

Pruning (``prune``): n-grams of order >= 2 whose raw count is below the order's cutoff are
dropped (unless a kept longer n-gram needs them as its context); each context's back-off
weight is then recomputed so that its distribution sums to one again:
bo(h) = (1 - sum_{kept w} p(w|h)) / (1 - sum_{kept w} p(w|h')).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..errors import ConfigError

__all__ = ["BOS", "EOS", "UNK", "Estimate", "estimate", "discounts_from_counts"]

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
DEFAULT_DISCOUNTS = (0.5, 1.0, 1.5)


@dataclass
class Estimate:
    """A back-off n-gram model: ``probs[n][g]`` = log10 p of the n-gram g (a tuple of words),
    ``backoffs[g]`` = log10 back-off weight of context g; ``counts[n][g]`` raw counts (kept for
    pruning); ``vocab`` every word with a unigram entry."""

    order: int
    vocab: list[str]
    probs: list[dict[tuple[str, ...], float]]  # index n - 1
    backoffs: dict[tuple[str, ...], float]
    counts: list[dict[tuple[str, ...], int]] = field(repr=False)
    discounts: list[tuple[float, float, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def prune(self, min_counts: Sequence[int]) -> "Estimate":
        """Drop n-grams of order n >= 2 with raw count < ``min_counts[n - 2]`` and
        renormalise (see the module notes). Returns self."""
        if len(min_counts) != self.order - 1:
            raise ConfigError(f"prune: need {self.order - 1} cutoffs (orders 2..{self.order}), "
                              f"got {len(min_counts)}")
        keep: list[set] = [set(self.probs[0])]
        for n in range(2, self.order + 1):
            cut = min_counts[n - 2]
            keep.append({g for g in self.probs[n - 1] if self.counts[n - 1].get(g, 0) >= cut})
        for n in range(self.order, 2, -1):  # contexts of kept n-grams stay
            for g in keep[n - 1]:
                keep[n - 2].add(g[:-1])
        old = [dict(p) for p in self.probs]
        self.probs = [{g: old[n][g] for g in keep[n]} for n in range(self.order)]
        by_context: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for n in range(2, self.order + 1):
            for g in self.probs[n - 1]:
                by_context[g[:-1]].append(g[-1])
        for h in sorted(self.backoffs, key=len):  # shorter first: p(w|h') uses new weights
            if h not in self.probs[len(h) - 1]:
                del self.backoffs[h]
                continue
            words = by_context.get(h, [])
            num = 1.0 - sum(10 ** self.probs[len(h)][h + (w,)] for w in words)
            den = 1.0 - sum(10 ** self.logprob(h[1:], w) for w in words)
            self.backoffs[h] = math.log10(max(num, 1e-12) / max(den, 1e-12))
        return self

    def logprob(self, history: tuple[str, ...], word: str) -> float:
        """log10 p(word | history) by back-off (history: at most order - 1 words)."""
        h = tuple(history[-(self.order - 1):]) if self.order > 1 else ()
        total = 0.0
        while True:
            p = self.probs[len(h)].get(h + (word,))
            if p is not None:
                return total + p
            if not h:
                return total + self.probs[0].get((UNK,), -99.0)
            total += self.backoffs.get(h, 0.0)
            h = h[1:]

    def arpa_lines(self) -> Iterable[str]:
        """The model as ARPA text, line by line (n-grams sorted)."""
        yield ""
        yield "\\data\\"
        for n in range(1, self.order + 1):
            yield f"ngram {n}={len(self.probs[n - 1])}"
        for n in range(1, self.order + 1):
            yield ""
            yield f"\\{n}-grams:"
            for g in sorted(self.probs[n - 1]):
                line = f"{self.probs[n - 1][g]:.6f}\t{' '.join(g)}"
                if n < self.order and g in self.backoffs:
                    line += f"\t{self.backoffs[g]:.6f}"
                yield line
        yield ""
        yield "\\end\\"


def discounts_from_counts(t: Sequence[int]) -> tuple[tuple[float, float, float], bool]:
    """(D1, D2, D3+) from the counts-of-counts t1..t4; second item False when the defaults
    had to be used."""
    t1, t2, t3, t4 = t
    if min(t) == 0:
        return DEFAULT_DISCOUNTS, False
    y = t1 / (t1 + 2 * t2)
    d = (1 - 2 * y * t2 / t1, 2 - 3 * y * t3 / t2, 3 - 4 * y * t4 / t3)
    if not all(0 < dk <= k for k, dk in zip((1, 2, 3), d)):
        return DEFAULT_DISCOUNTS, False
    return d, True


def estimate(sentences: Iterable[Sequence[str]], order: int = 3,
             vocab: Iterable[str] | None = None,
             discounts: Sequence[tuple[float, float, float]] | None = None) -> Estimate:
    """Estimate an interpolated modified Kneser-Ney model of ``order`` from sentences (word
    lists, without ``<s>``/``</s>``).

    ``vocab``: when given, the model's vocabulary (words outside it become ``<unk>``; vocabulary
    words never seen get the uniform share); otherwise every word seen. ``discounts``: fixed
    (D1, D2, D3+) per order instead of the counts-of-counts estimate."""
    if order < 1:
        raise ConfigError(f"n-gram order must be >= 1, got {order}")
    known = set(vocab) if vocab is not None else None
    counts: list[dict[tuple[str, ...], int]] = [defaultdict(int) for _ in range(order)]
    seen: set[str] = set()
    for sent in sentences:
        words = [w if known is None or w in known else UNK for w in sent]
        seen.update(words)
        toks = [BOS] + words + [EOS]
        for i in range(1, len(toks)):
            for n in range(1, order + 1):
                if i - n + 1 < 0:
                    break
                counts[n - 1][tuple(toks[i - n + 1:i + 1])] += 1
    if not counts[0]:
        raise ConfigError("n-gram estimation: the text has no words")
    vocab_all = sorted((known if known is not None else seen) | {EOS, UNK} | seen)
    vocab_all = [w for w in vocab_all if w != BOS]

    # adjusted counts: continuation counts below the top order, raw counts for <s> n-grams
    adjusted: list[dict[tuple[str, ...], int]] = [dict() for _ in range(order)]
    adjusted[order - 1] = dict(counts[order - 1])
    for n in range(order - 1, 0, -1):
        cont: dict[tuple[str, ...], int] = defaultdict(int)
        for g in counts[n]:  # order n + 1 n-grams: v g
            cont[g[1:]] += 1
        for g, c in counts[n - 1].items():
            adjusted[n - 1][g] = c if g[0] == BOS else cont.get(g, c)

    est = Estimate(order=order, vocab=[BOS] + vocab_all, probs=[{} for _ in range(order)],
                   backoffs={}, counts=[dict(c) for c in counts])
    for n in range(1, order + 1):
        if discounts is not None:
            d = tuple(discounts[n - 1])
        else:
            t = [0, 0, 0, 0]
            for a in adjusted[n - 1].values():
                if a <= 4:
                    t[a - 1] += 1
            d, ok = discounts_from_counts(t)
            if not ok:
                est.notes.append(f"order {n}: counts of counts {t} give no valid discounts; "
                                 f"using {DEFAULT_DISCOUNTS}")
        est.discounts.append(d)

    def disc(n: int, a: int) -> float:
        return est.discounts[n - 1][min(a, 3) - 1]

    # per context: total adjusted count and gamma
    totals: list[dict[tuple[str, ...], float]] = []
    gammas: list[dict[tuple[str, ...], float]] = []
    for n in range(1, order + 1):
        tot: dict[tuple[str, ...], float] = defaultdict(float)
        dsum: dict[tuple[str, ...], float] = defaultdict(float)
        for g, a in adjusted[n - 1].items():
            tot[g[:-1]] += a
            dsum[g[:-1]] += disc(n, a)
        totals.append(tot)
        gammas.append({h: dsum[h] / tot[h] for h in tot})

    # probabilities, lowest order first (each level interpolates with the one below)
    uni_gamma = gammas[0][()]
    prob: list[dict[tuple[str, ...], float]] = [dict() for _ in range(order)]
    tot0 = totals[0][()]
    for w in vocab_all:
        a = adjusted[0].get((w,), 0)
        p = (a - disc(1, a)) / tot0 if a else 0.0
        prob[0][(w,)] = p + uni_gamma / len(vocab_all)

    def lower(g: tuple[str, ...]) -> float:
        """Interpolated p(g[-1] | g[1:-1]) from the level below (back-off for unseen)."""
        h, w = g[1:-1], g[-1]
        scale = 1.0
        while True:
            p = prob[len(h)].get(h + (w,))
            if p is not None:
                return scale * p
            scale *= gammas[len(h)].get(h, 1.0) if h else 1.0
            if not h:
                return scale * prob[0].get((w,), prob[0][(UNK,)])
            h = h[1:]

    for n in range(2, order + 1):
        for g, a in adjusted[n - 1].items():
            h = g[:-1]
            prob[n - 1][g] = (a - disc(n, a)) / totals[n - 1][h] + gammas[n - 1][h] * lower(g)

    est.probs[0] = {(w,): math.log10(p) for (w,), p in prob[0].items()}
    est.probs[0][(BOS,)] = -99.0
    for n in range(2, order + 1):
        est.probs[n - 1] = {g: math.log10(p) for g, p in prob[n - 1].items()}
    for n in range(1, order):  # contexts of order n that predict something at order n + 1
        for h, gmm in gammas[n].items():
            est.backoffs[h] = math.log10(gmm)
    return est
