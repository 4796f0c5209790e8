"""Modified Kneser-Ney estimation against probabilities computed by hand, pruning that keeps
every distribution normalised, the ARPA round trip through the search's n-gram reader, and
``streamdec lang lm`` writing G.arpa and G.fst (kaldilm)."""

from __future__ import annotations

import math

import pytest

from streamdec.cli.main import main
from streamdec.errors import ConfigError
from streamdec.lang.kneser_ney import discounts_from_counts, estimate
from streamdec.lang.ngram import NgramLm, read_arpa

# <s> A B </s> (twice), <s> B </s>; fixed discounts D1 = 0.5, D2 = 1.0, D3+ = 1.5
CORPUS = [["A", "B"], ["A", "B"], ["B"]]
FIXED = [(0.5, 1.0, 1.5)] * 3

# Worked by hand (see the module notes of streamdec.lang.kneser_ney):
# unigram continuation counts A 1 ({<s>}), B 2 ({<s>, A}), </s> 1 ({B}); T = 4; |V| = 4
# (A, B, </s>, <unk>); gamma() = (0.5 * 2 + 1.0 * 1) / 4 = 0.5
P1 = {"A": 0.5 / 4 + 0.5 / 4, "B": 1.0 / 4 + 0.5 / 4, "</s>": 0.5 / 4 + 0.5 / 4,
      "<unk>": 0.5 / 4}
# bigrams (continuation counts; raw for <s> ones): <s> A 2, <s> B 1, A B 1, B </s> 2
P2 = {("<s>", "A"): (2 - 1.0) / 3 + 0.5 * P1["A"],  # gamma(<s>) = (0.5 + 1.0) / 3
      ("<s>", "B"): (1 - 0.5) / 3 + 0.5 * P1["B"],
      ("A", "B"): (1 - 0.5) / 1 + 0.5 * P1["B"],  # gamma(A) = 0.5 / 1
      ("B", "</s>"): (2 - 1.0) / 2 + 0.5 * P1["</s>"]}  # gamma(B) = 1.0 / 2
# trigrams (raw counts): <s> A B 2, A B </s> 2, <s> B </s> 1
P3 = {("<s>", "A", "B"): (2 - 1.0) / 2 + 0.5 * P2[("A", "B")],
      ("A", "B", "</s>"): (2 - 1.0) / 2 + 0.5 * P2[("B", "</s>")],
      ("<s>", "B", "</s>"): (1 - 0.5) / 1 + 0.5 * P2[("B", "</s>")]}
BACKOFF = {("<s>",): 0.5, ("A",): 0.5, ("B",): 0.5, ("<s>", "A"): 0.5, ("A", "B"): 0.5,
           ("<s>", "B"): 0.5}


def test_probabilities_and_backoffs_match_the_hand_computation():
    est = estimate(CORPUS, 3, discounts=FIXED)
    got1 = {w: 10 ** p for (w,), p in est.probs[0].items() if w != "<s>"}
    assert got1 == pytest.approx(P1, abs=1e-9)
    assert est.probs[0][("<s>",)] == -99.0
    assert {g: 10 ** p for g, p in est.probs[1].items()} == pytest.approx(P2, abs=1e-9)
    assert {g: 10 ** p for g, p in est.probs[2].items()} == pytest.approx(P3, abs=1e-9)
    assert {g: 10 ** b for g, b in est.backoffs.items()} == pytest.approx(BACKOFF, abs=1e-9)
    # unseen: back off through both levels, p(A | <s> A) = bo(<s> A) bo(A) p(A)
    assert 10 ** est.logprob(("<s>", "A"), "A") == pytest.approx(0.5 * 0.5 * P1["A"], abs=1e-9)


def test_discounts_from_counts_of_counts():
    d, ok = discounts_from_counts([10, 5, 3, 2])
    assert ok
    assert d == pytest.approx((1 - 2 * 0.5 * 5 / 10, 2 - 3 * 0.5 * 3 / 5, 3 - 4 * 0.5 * 2 / 3))
    assert discounts_from_counts([10, 0, 3, 2]) == ((0.5, 1.0, 1.5), False)


TEXT = [s.split() for s in ("THE CAT SAT ON THE MAT", "THE DOG SAT ON THE LOG",
                            "A CAT AND A DOG", "THE CAT ATE", "ON THE MAT THE CAT SAT",
                            "A DOG SAT", "THE LOG", "THE MAT AND THE LOG AND THE CAT")]


def distributions_sum_to_one(est, contexts):
    vocab = [w for w in est.vocab if w != "<s>"]
    for h in contexts:
        assert sum(10 ** est.logprob(h, w) for w in vocab) == pytest.approx(1.0, abs=1e-9), h


def test_pruning_keeps_every_distribution_normalised():
    est = estimate(TEXT, 3)
    contexts = [(), ("<s>",), ("THE",), ("THE", "CAT"), ("ON", "THE"), ("ZZ", "A"), ("A", "DOG")]
    distributions_sum_to_one(est, contexts)
    before = [len(p) for p in est.probs]
    est.prune([2, 2])
    after = [len(p) for p in est.probs]
    assert after[0] == before[0] and after[1] < before[1] and after[2] < before[2]
    distributions_sum_to_one(est, contexts)
    for g in est.probs[2]:  # a kept trigram keeps its context
        assert g[:2] in est.probs[1]
    with pytest.raises(ConfigError):
        est.prune([2])


def test_arpa_round_trip_through_the_search_reader():
    est = estimate(TEXT, 3).prune([1, 2])
    order, entries = read_arpa(list(est.arpa_lines()))
    lm = NgramLm(order, entries)
    state, total, want = lm.start, 0.0, 0.0
    history = ("<s>",)
    for w in "THE CAT SAT ON A LOG".split() + ["</s>"]:
        lp, state = lm.score(state, lm.word_id(w))
        total += lp
        want += est.logprob(history, w) * math.log(10)
        history = history + (w,)
    assert total == pytest.approx(want, abs=1e-4)  # ARPA keeps 6 decimals of log10
    assert lm.word_id("ZEBRA") == lm.unk
    with pytest.raises(ConfigError):
        read_arpa(["\\data\\", "ngram 1=2", "", "\\1-grams:", "-1.0 A", "\\end\\"])


def test_lang_lm_command_writes_arpa_and_g_fst(tmp_path):
    import kaldifst

    text = tmp_path / "text.txt"
    text.write_text("\n".join(" ".join(s) for s in TEXT) + "\n", encoding="utf-8")
    words = tmp_path / "lang" / "words.txt"
    words.parent.mkdir()
    vocab = sorted({w for s in TEXT for w in s})
    words.write_text("".join(f"{w} {i}\n" for i, w in enumerate(
        ["<eps>", "<unk>"] + vocab + ["#0", "<s>", "</s>"])), encoding="utf-8")
    assert main(["lang", "lm", "--order", "3", str(text), "--out", str(tmp_path / "lang"),
                 "--prune", "1,1"]) == 0
    order, entries = read_arpa((tmp_path / "lang" / "G.arpa").read_text().splitlines())
    assert order == 3 and {w for (w,) in entries[0]} == set(vocab) | {"<s>", "</s>", "<unk>"}
    g = kaldifst.StdVectorFst.read(str(tmp_path / "lang" / "G.fst"))
    ids = {line.split()[0]: int(line.split()[1]) for line in words.read_text().splitlines()}
    labels = {arc.ilabel for s in range(g.num_states)
              for arc in kaldifst.ArcIterator(g, s)}
    assert ids["#0"] in labels  # back-off arcs
    assert {ids[w] for w in vocab} <= labels
