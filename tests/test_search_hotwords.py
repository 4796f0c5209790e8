"""Hotwords: the context graph (bonuses, fail links, refunds), phrase parsing and
tokenisation, and biasing inside the beam searches."""

from __future__ import annotations

import pytest

import search_reference as ref
from streamdec.errors import ConfigError, TokenizeError
from streamdec.search import SEARCHES, SearchConfig, make_search
from streamdec.search.context_graph import ContextGraph, hotwords_graph, parse_hotwords
from streamdec.tokens import SymbolTable

BEAM_METHODS = ["modified_beam", "alsd", "tsd", "beam", "nsc"]


def test_every_beam_search_is_tested_with_hotwords():
    assert sorted(BEAM_METHODS) == sorted(set(SEARCHES) - {"greedy"})
A, B, C, D, X = 1, 2, 3, 4, 5


def walk(graph: ContextGraph, tokens, node: int = 0) -> tuple[float, int]:
    total = 0.0
    for t in tokens:
        bonus, node = graph.step(node, t)
        total += bonus
    return total, node


def test_matched_tokens_earn_the_bonus_and_a_completed_phrase_keeps_it():
    g = ContextGraph.build([((A, B, C), 1.0)], vocab_size=8)
    assert walk(g, [A]) == (1.0, g.next_node(0, A))
    total, node = walk(g, [A, B, C])
    assert total == 3.0 and g.refund(node) == 0.0  # completed: nothing left to give back
    assert walk(g, [A, B, C, X]) == (3.0, 0)


def test_a_longer_phrase_extending_a_completed_one_earns_its_whole_bonus():
    # NEW YORK and NEW YORK CITY: completing the first does not stop the second
    g = ContextGraph.build([((A, B), 1.0), ((A, B, C, D), 1.0)], vocab_size=8)
    assert walk(g, [A, B, C, D])[0] == 4.0
    total, node = walk(g, [A, B, C])
    assert (total, g.refund(node)) == (3.0, 1.0)  # C is held until D completes the longer one
    assert walk(g, [A, B, C, X]) == (2.0, 0)  # a mismatch gives back C, not A B


def test_a_mismatch_gives_the_partial_bonus_back():
    g = ContextGraph.build([((A, B, C), 1.0)], vocab_size=8)
    total, node = walk(g, [A, B, X])
    assert (total, node) == (0.0, 0)
    # A A B C: the second A restarts the phrase through the fail link, not from scratch
    total, node = walk(g, [A, A, B, C])
    assert total == 3.0 and g.refund(node) == 0.0


def test_fail_links_keep_the_longest_matching_suffix():
    g = ContextGraph.build([((A, B, C), 1.0), ((B, D), 2.0)], vocab_size=8)
    bonus_ab, node_ab = walk(g, [A, B])
    assert bonus_ab == 2.0
    bonus, node = g.step(node_ab, D)  # A B D: "B D" completes through the fail link
    assert g.refund(node) == 0.0
    assert bonus_ab + bonus == pytest.approx(4.0)  # B and D at 2.0 each; A given back


def test_a_phrase_inside_a_broken_longer_match_earns_its_bonus():
    g = ContextGraph.build([((X, A, B, C), 1.0), ((A, B, D), 2.0)], vocab_size=8)
    assert walk(g, [X, A, B])[0] == 3.0
    total, node = walk(g, [X, A, B, D])  # X A B C broken; A B D completes through the fail link
    assert total == pytest.approx(6.0) and g.refund(node) == 0.0


def test_refund_at_segment_end_and_bonus_rows_agree_with_step():
    g = ContextGraph.build([((A, B, C), 1.5), ((A, D), 0.5), ((C,), 2.0)], vocab_size=8)
    _, node = walk(g, [A, B])
    assert g.refund(node) == 3.0
    assert g.refund(0) == 0.0
    for n in range(len(g)):
        row = g.bonus_rows([n])[0]
        for tok in range(8):
            bonus, nxt = g.step(n, tok)
            assert row[tok] == pytest.approx(bonus)
            assert g.next_node(n, tok) == nxt


def test_shared_prefix_takes_the_larger_bonus():
    g = ContextGraph.build([((A, B), 1.0), ((A, C), 3.0)], vocab_size=8)
    assert walk(g, [A])[0] == 3.0
    assert walk(g, [A, B])[0] == 4.0


def test_parse_hotwords_lines():
    got = parse_hotwords(["HELLO WORLD :2.5", "", "# comment", "NEW YORK", "A:B"], 1.5)
    assert got == [("HELLO WORLD", 2.5), ("NEW YORK", 1.5), ("A:B", 1.5)]
    with pytest.raises(ConfigError):
        parse_hotwords(["HELLO :x"], 1.5)


def test_encode_characters_with_word_boundaries():
    table = SymbolTable({0: "<blk>", 1: "\u2581", 2: "A", 3: "B", 4: "'"})
    assert table.encode("ab ba") == [1, 2, 3, 1, 3, 2]
    assert table.encode("A'B") == [1, 2, 4, 3]
    with pytest.raises(TokenizeError):
        table.encode("abc")
    with pytest.raises(TokenizeError):
        table.encode("  ")
    # the leading boundary earns nothing; segments start after a boundary, so the phrase
    # matches at an utterance start with or without a leading boundary, and at word starts
    g = hotwords_graph([("ab ba", 1.0)], table)
    for tokens in ([2, 3, 1, 3, 2], [1, 2, 3, 1, 3, 2], [3, 1, 2, 3, 1, 3, 2]):
        assert walk(g, tokens, g.start)[0] == 5.0
    assert walk(g, [3, 2, 3, 1, 3, 2], g.start)[0] == 0.0  # "AB" inside a word: no match


def test_greedy_rejects_hotwords():
    with pytest.raises(ConfigError):
        SearchConfig(method="greedy", hotwords_file="x.txt")
    model = ref.ToyModel()
    graph = ContextGraph.build([((A,), 1.0)], vocab_size=model.meta.vocab_size)
    with pytest.raises(ConfigError):
        make_search(model, SearchConfig()).init_state(graph=graph)


def decode(search, enc, graph=None, chunk=5):
    state = search.init_state(graph=graph)
    for a in range(0, len(enc), chunk):
        state = search.step([state], enc[None, a:a + chunk])[0]
    return state


@pytest.mark.parametrize("method", BEAM_METHODS)
def test_biasing_pulls_a_phrase_into_the_result(method):
    model = ref.ToyModel(seed=4)
    enc = model.random_encoder_out(30, seed=4)
    search = make_search(model, SearchConfig(method=method, beam=4, nbest=2))
    plain = search.finalize(decode(search, enc))[0]
    phrase = (A, C, A, C)
    assert not _contains(plain.tokens, phrase)
    graph = ContextGraph.build([(phrase, 6.0)], vocab_size=model.meta.vocab_size)
    biased = search.finalize(decode(search, enc, graph))[0]
    assert _contains(biased.tokens, phrase)


@pytest.mark.parametrize("method", BEAM_METHODS)
def test_partial_matches_are_refunded_at_finalize_and_reset(method):
    model = ref.ToyModel(seed=5)
    enc = model.random_encoder_out(12, seed=5)
    search = make_search(model, SearchConfig(method=method, beam=4, nbest=4))
    # phrases that can only ever be half matched: every bonus is given back at the end
    vocab = model.meta.vocab_size
    graph = ContextGraph.build([((t,) * 9, 0.7) for t in range(1, vocab - 1)], vocab_size=vocab)
    biased = decode(search, enc, graph)
    assert any(h.graph_node for h in biased.hyps)
    for hyp in search.finalize(biased):
        assert hyp.graph_node == 0
    after = search.reset(biased)
    assert all(h.graph_node == 0 and h.score == 0.0 for h in after.hyps)
    assert after.graph is graph


def test_finalize_subtracts_the_partial_bonus():
    from dataclasses import replace

    model = ref.ToyModel()
    search = make_search(model, SearchConfig(method="modified_beam", nbest=2))
    graph = ContextGraph.build([((A, B, C), 1.5)], vocab_size=model.meta.vocab_size)
    state = search.init_state(graph=graph)
    held = state.hyps[0].extend(A, 0, -0.1, 1.4, graph.next_node(0, A))
    held = held.extend(B, 1, -0.1, 2.8, graph.next_node(held.graph_node, B))
    other = replace(state.hyps[0], score=-1.0)
    best = search.finalize(replace(state, hyps=(held, other)))
    assert [h.tokens for h in best] == [(A, B), ()]
    assert best[0].score == pytest.approx(2.8 - 3.0)
    assert best[0].graph_node == 0


def _contains(seq, sub) -> bool:
    return any(tuple(seq[i:i + len(sub)]) == sub for i in range(len(seq) - len(sub) + 1))


def test_recognizer_streams_get_their_own_phrases(model_dirs, tmp_path):
    from conftest import make_recognizer

    hot = tmp_path / "hot.txt"
    hot.write_text("ABC :2\nDEF\n", encoding="utf-8")
    rec = make_recognizer(model_dirs["lstm"],
                          search=SearchConfig(method="modified_beam", hotwords_file=str(hot)))
    plain = rec.create_stream()
    own = rec.create_stream(hotwords=["GHI :3"])
    assert plain.search_state.graph is rec.create_stream().search_state.graph  # shared
    assert len(plain.search_state.graph) == 2 + 3 + 3  # root, shared word start, letters
    assert len(own.search_state.graph) == 2 + 3 + 3 + 3
    with pytest.raises(TokenizeError):
        rec.create_stream(hotwords=["XYZ"])
    with pytest.raises(ConfigError):
        rec.create_stream(search=SearchConfig(), hotwords=["ABC"])
