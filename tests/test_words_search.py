"""Searches constrained by a lexicon and a word LM (``search.lang_dir``), and grammar mode,
on the random test models: only lexicon words come out, the state is carried across chunks
(chunking invariance) and streams (batch invariance), per stream and per config; the
WordGraph's scores on a hand-made lexicon."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import search_reference as ref
from conftest import make_recognizer
from decode_utils import decode_in_pieces, decode_together, finals, key
from model_factory import test_audio
from streamdec.errors import ConfigError
from streamdec.lang.kneser_ney import estimate
from streamdec.lang.ngram import NgramLm
from streamdec.search import SearchConfig, make_search
from streamdec.search.grammar import Grammar
from streamdec.search.word_graph import WordGraph, WordOptions
from streamdec.tokens import SymbolTable

WORD_METHODS = ["modified_beam", "alsd", "tsd", "beam", "nsc"]
LEXICON = ["A", "AB", "ABBA", "BAD", "BE", "BED", "CAB", "DEAF", "FACE", "HI", "HID", "HIDE",
           "I", "ICE", "FIG", "EGG", "DIG", "GAG", "HEAD", "BIG", "CHI", "DICE", "FEED"]
AUDIO = test_audio(4.0, seed=12)


def write_lang(folder, words=LEXICON, seed=0):
    """A lang directory for the test models: words.txt and a trigram from random text."""
    rng = random.Random(seed)
    text = [[rng.choice(words) for _ in range(rng.randint(1, 6))] for _ in range(300)]
    est = estimate(text, 3, vocab=words)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "words.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    (folder / "G.arpa").write_text("\n".join(est.arpa_lines()) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def lang(tmp_path_factory):
    return write_lang(tmp_path_factory.mktemp("lang") / "lang")


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["zipformer2"])


def words_config(method: str, lang, **kw) -> SearchConfig:
    return SearchConfig(method=method, beam=3, lang_dir=str(lang), **kw)


@pytest.mark.parametrize("method", WORD_METHODS)
def test_only_lexicon_words_come_out_and_chunking_does_not_matter(rec, lang, method):
    search = words_config(method, lang)
    want = finals(decode_in_pieces(rec, AUDIO, len(AUDIO), search=search))
    assert any(r.token_ids for r in want), "the test model should emit words"
    for r in [r for r in want if r.text]:  # a segment closed inside a word keeps it
        *done, last = r.text.split()
        assert set(done) <= set(LEXICON), r.text
        assert any(w.startswith(last) for w in LEXICON), r.text
        assert [w.text for w in r.words] == r.text.split()
    for piece in (160, 777):
        got = finals(decode_in_pieces(rec, AUDIO, piece, search=search))
        assert key(got) == key(want)
        np.testing.assert_allclose([r.score for r in got], [r.score for r in want], atol=1e-4)
    plain = finals(decode_in_pieces(rec, AUDIO, len(AUDIO),
                                    search=SearchConfig(method=method, beam=3)))
    assert key(plain) != key(want), "the lexicon should change this random model's output"


@pytest.mark.parametrize("method", ["modified_beam", "alsd"])
def test_batch_invariance_with_word_streams_grammar_streams_and_plain_streams(rec, lang, method):
    audios = [test_audio(1.0 + 0.5 * n, seed=50 + n) for n in range(6)]
    kinds = [dict(search=words_config(method, lang)),
             dict(search=SearchConfig(method=method, beam=3)),
             dict(search=SearchConfig(method=method, beam=3), phrases=["BAD", "FACE", "[unk]"]),
             dict(search=words_config(method, lang, allow_oov=True, unk_penalty=1.0)),
             dict(search=words_config(method, lang, word_bonus=1.5)),
             dict(search=SearchConfig(method=method, beam=3), phrases=["HI", "HIDE"])]
    alone = [finals(decode_in_pieces(rec, a, 1600, **kw)) for a, kw in zip(audios, kinds)]
    streams = [rec.create_stream(**kw) for kw in kinds]
    events = decode_together(rec, streams, audios, 1600)
    for a, ev in zip(alone, events):
        assert key(finals(ev)) == key(a)
        assert [r.text for r in finals(ev)] == [r.text for r in a]
        np.testing.assert_allclose([r.score for r in finals(ev)], [r.score for r in a],
                                   atol=1e-4)
    grammar_texts = " ".join(r.text for r in alone[5]).split()
    assert set(grammar_texts) <= {"HI", "HIDE"}


def test_one_graph_per_config_and_options_checked(rec, lang, tmp_path):
    a = rec.create_stream(search=words_config("alsd", lang))
    b = rec.create_stream(search=words_config("alsd", lang))
    assert a.search_state.words is b.search_state.words
    assert rec.create_stream(search=words_config("alsd", lang, word_bonus=1.0)) \
        .search_state.words is not a.search_state.words
    with pytest.raises(ConfigError):
        SearchConfig(method="greedy", lang_dir=str(lang))
    with pytest.raises(ConfigError):
        SearchConfig(method="alsd", word_lm_scale=-1.0)
    with pytest.raises(ConfigError):
        rec.create_stream(search=words_config("alsd", tmp_path / "missing"))
    (tmp_path / "nolm").mkdir()
    (tmp_path / "nolm" / "words.txt").write_text("A\n")
    with pytest.raises(ConfigError):
        rec.create_stream(search=words_config("alsd", tmp_path / "nolm"))
    with pytest.raises(ConfigError):
        rec.create_stream(search=SearchConfig(), phrases=["A"])
    beam = SearchConfig(method="alsd")
    g1 = rec.create_stream(search=beam, phrases=["BAD", "[unk]"]).search_state.words
    assert rec.create_stream(search=beam, phrases=["BAD", "[unk]"]).search_state.words is g1
    assert rec.create_stream(search=beam, phrases=["BAD"]).search_state.words is not g1


# -- the graph on a hand-made lexicon --------------------------------------------------------

SYMS = SymbolTable({0: "<blk>", 1: "\u2581", 2: "A", 3: "B", 4: "C", 5: "<unk>"})
B_, A_, B2, C_ = 1, 2, 3, 4


def toy_lm(lines: str) -> NgramLm:
    from streamdec.lang.ngram import read_arpa

    order, entries = read_arpa(lines.strip().splitlines())
    return NgramLm(order, entries)


# unigram model over A, AB, C, </s>, <unk> (log10)
ARPA = """
\\data\\
ngram 1=6

\\1-grams:
-1.0\t</s>
-99\t<s>\t0.0
-0.5\tA
-1.5\tAB
-2.0\tC
-3.0\t<unk>

\\end\\
"""
LN10 = math.log(10)


def spell(*words):
    return [(w, ("\u2581",) + tuple(w)) for w in words]


def walk(graph: WordGraph, tokens):
    node, state = graph.start_state
    total = 0.0
    for t in tokens:
        bonus, nn, ns = graph.rows([node], [state])
        total += float(bonus[0, t])
        node, state = int(nn[0, t]), int(ns[0, t])
    return total, node, state


def test_word_scores_lookahead_and_its_refund():
    lm = toy_lm(ARPA)
    s = 0.5
    g = WordGraph.build(spell("A", "AB", "C"), lm, SYMS, WordOptions(lm_scale=s, word_bonus=0.25))
    # "A AB": ▁ A ▁ A B, then the end: log p(A) + log p(AB) + log p(</s>), two bonuses
    total, node, state = walk(g, [B_, A_, B_, A_, B2])
    total += g.end_score(node, state)
    want = s * LN10 * (-0.5 - 1.5 - 1.0) + 2 * 0.25
    assert total == pytest.approx(want, abs=1e-5)
    # inside a word the look-ahead is the best word below: after ▁: A (-0.5); after ▁ A: A
    bonus, _, _ = g.rows([g.start_node], [lm.start])
    assert bonus[0, B_] == pytest.approx(s * LN10 * -0.5, abs=1e-5)
    assert bonus[0, A_] == pytest.approx(s * LN10 * -0.5, abs=1e-5)  # no leading boundary
    assert bonus[0, C_] == pytest.approx(s * LN10 * -2.0, abs=1e-5)
    assert bonus[0, 0] == 0.0 and bonus[0, 5] == 0.0  # blank and <unk> change nothing
    # a unit that leaves the lexicon is pruned; ▁ ▁ is no word; B cannot start a word
    _, node, state = walk(g, [B_, C_])
    assert g.rows([node], [state])[0][0, A_] == -math.inf
    assert walk(g, [B_, B_])[0] == -math.inf
    assert walk(g, [B2])[0] == -math.inf
    # a word that is only a prefix cannot end the segment
    _, node, state = walk(g, [B_, A_, B2])
    assert g.end_score(node, state) != -math.inf
    g2 = WordGraph.build(spell("AB"), lm, SYMS, WordOptions(lm_scale=s))
    _, node, state = walk(g2, [B_, A_])
    assert g2.end_score(node, state) == -math.inf


def test_unknown_words_pay_the_penalty_and_the_unk_probability():
    lm = toy_lm(ARPA)
    s, pen = 0.5, 2.0
    g = WordGraph.build(spell("A", "C"), lm, SYMS,
                        WordOptions(lm_scale=s, allow_oov=True, unk_penalty=pen))
    # "BB C": B leaves the lexicon at the start, then ▁ C
    total, node, state = walk(g, [B2, B2, B_, C_])
    total += g.end_score(node, state)
    assert total == pytest.approx(s * LN10 * (-3.0 - 2.0 - 1.0) - pen, abs=1e-5)
    assert g.word_is_known([B2, B2, B_, C_]) == [False, True]
    # "AB" = A then B (out of the lexicon after A): the look-ahead of A is given back
    total, node, state = walk(g, [B_, A_, B2])
    total += g.end_score(node, state)
    assert total == pytest.approx(s * LN10 * (-3.0 - 1.0) - pen, abs=1e-5)
    without = WordGraph.build(spell("A", "C"), lm, SYMS, WordOptions(lm_scale=s))
    assert walk(without, [B2])[0] == -math.inf
    # per unit spelled outside the lexicon: "BB" costs two units more, "A" then B one
    per_unit = WordGraph.build(spell("A", "C"), lm, SYMS, WordOptions(
        lm_scale=s, allow_oov=True, unk_penalty=pen, unk_unit_penalty=0.75))
    for tokens, units in (([B2, B2, B_, C_], 2), ([B_, A_, B2], 1)):
        base, n0, s0 = walk(g, tokens)
        more, n1, s1 = walk(per_unit, tokens)
        assert more + per_unit.end_score(n1, s1) == pytest.approx(
            base + g.end_score(n0, s0) - 0.75 * units, abs=1e-5)
    # the unknown word's score is paid when it starts, not when it ends
    first, _, _ = walk(g, [B2])
    assert first == pytest.approx(s * LN10 * -3.0 - pen, abs=1e-5)


def test_grammar_accepts_its_phrases_in_a_row_and_nothing_else():
    g = Grammar.from_phrases(["YES", "NO", "ONE TWO"])
    ids = {w: g.word_id(w) for w in ("YES", "NO", "ONE", "TWO")}

    def accepts(words):
        state, total = g.start, 0.0
        for w in words:
            lp, state = g.score(state, ids.get(w, -1))
            total += lp
        return total + g.end_score(state) == 0.0

    assert accepts(["YES"]) and accepts(["NO", "YES"]) and accepts(["ONE", "TWO", "NO"])
    assert accepts([])
    assert not accepts(["ONE"]) and not accepts(["TWO"]) and not accepts(["MAYBE"])


def test_searches_without_word_support_refuse_a_word_graph(rec, lang):
    model = ref.ToyModel()
    greedy = make_search(model, SearchConfig())
    g = Grammar.from_phrases(["A"])
    graph = WordGraph.build(spell("A"), g, SYMS, WordOptions())
    with pytest.raises(ConfigError):
        greedy.init_state(words=graph)


@pytest.mark.parametrize("method", ["modified_beam", "alsd"])
def test_word_options_without_a_lang_directory_change_nothing(rec, method):
    plain = finals(decode_in_pieces(rec, AUDIO, 777, search=SearchConfig(method=method, beam=3)))
    idle = SearchConfig(method=method, beam=3, word_lm_scale=0.9, word_bonus=2.0,
                        allow_oov=True, unk_penalty=1.0, unk_unit_penalty=0.5, lm_scale=0.8)
    got = finals(decode_in_pieces(rec, AUDIO, 777, search=idle))
    assert key(got) == key(plain)
    assert [r.score for r in got] == [r.score for r in plain]


def test_transcribe_command_with_a_lang_directory(model_dirs, lang, tmp_path, capsys):
    import json

    import soundfile as sf

    from streamdec.cli.main import main

    wav = tmp_path / "a.wav"
    sf.write(str(wav), AUDIO, 16000)
    assert main(["transcribe", str(wav), "--model", str(model_dirs["zipformer2"]),
                 "--search", "alsd", "--beam", "3", "--lang", str(lang), "--word-bonus", "0.5",
                 "--format", "jsonl", "--no-endpoint"]) == 0
    final = [json.loads(line) for line in capsys.readouterr().out.splitlines()][-1]
    words = [w["word"] for w in final["words"]]
    assert words and set(words[:-1]) <= set(LEXICON)
    assert main(["transcribe", str(wav), "--model", str(model_dirs["zipformer2"]),
                 "--search", "greedy", "--lang", str(lang)]) == 2  # greedy cannot use words
    assert "beam search" in capsys.readouterr().err
    # --lang without --search: transcribe's words settings (the accurate config) with them
    assert main(["transcribe", str(wav), "--model", str(model_dirs["zipformer2"]),
                 "--lang", str(lang), "--format", "jsonl", "--no-endpoint"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()][-1]["type"] == "final"
