"""The store of search resources (``streamdec.core.resources``): one bounded map with one
eviction rule for every per-configuration resource, one neural LM session per file and one
word n-gram per ARPA file whatever the configurations, each key built once however many
threads ask at the same time, failed builds not kept, and the engine building a
connection's resources off the event loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from conftest import make_recognizer
from streamdec import SearchConfig, TokenizeError
from streamdec.engine import Engine, EngineConfig
from streamdec.core.resources import HEAVY, RESOURCE_BUDGET
from test_neural_lm import export_lm
from test_words_search import write_lang


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["lstm"])


@pytest.fixture(scope="module")
def lm_file(tmp_path_factory):
    return export_lm(tmp_path_factory.mktemp("lm") / "lm.onnx", 12, seed=1)


@pytest.fixture(scope="module")
def lang(tmp_path_factory):
    return write_lang(tmp_path_factory.mktemp("lang") / "lang")


def test_one_neural_lm_session_per_file_whatever_the_configurations(rec, lm_file):
    a = rec.resources.search(SearchConfig(method="modified_beam", beam=3,
                                          lm_file=str(lm_file), lm_scale=0.3))
    b = rec.resources.search(SearchConfig(method="alsd", beam=2, lm_file=str(lm_file),
                                          lm_scale=0.7))
    assert a is not b
    assert a.lm is not None and a.lm is b.lm
    assert [k for k in rec.resources.keys() if k[0] == "neural_lm"] == [("neural_lm",
                                                                          str(lm_file))]


def test_one_compiled_lang_per_directory_and_lang_graphs_weigh_heavy(model_dirs, lang):
    rec = make_recognizer(model_dirs["lstm"])
    base = rec.resources.weight
    g1 = rec.resources.words(SearchConfig(method="modified_beam", lang_dir=str(lang),
                                          word_lm_scale=0.3))
    g2 = rec.resources.words(SearchConfig(method="modified_beam", lang_dir=str(lang),
                                          word_lm_scale=0.6))
    assert g1 is not g2 and g1.lm is g2.lm
    assert rec.resources.weight == base + 3 * HEAVY  # two graphs and one compiled lang (tree + n-gram)
    # one eviction rule for all kinds: enough search configurations push the graphs out
    for n in range(RESOURCE_BUDGET):
        rec.resources.search(SearchConfig(method="modified_beam", beam=2 + n))
    kinds = {k[0] for k in rec.resources.keys()}
    assert kinds == {"search"}
    assert rec.resources.weight == RESOURCE_BUDGET


def test_each_resource_is_built_once_however_many_threads_ask(rec, monkeypatch):
    import streamdec.search.grammar as grammar

    calls = []
    build = grammar.grammar_graph

    def slow_build(*args, **kwargs):
        calls.append(threading.current_thread().name)
        threading.Event().wait(0.2)  # every asker arrives while the first builds
        return build(*args, **kwargs)

    monkeypatch.setattr(grammar, "grammar_graph", slow_build)
    config = SearchConfig(method="modified_beam", beam=3)
    phrases = ["ABC", "BAD", "[unk]"]
    start = threading.Barrier(8)
    got = [None] * 8

    def ask(i):
        start.wait()
        got[i] = rec.resources.words(config, phrases)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert got[0] is not None and all(g is got[0] for g in got)


def test_a_failed_build_raises_to_every_asker_and_is_not_kept(rec):
    config = SearchConfig(method="modified_beam", beam=3)
    for _ in range(2):
        with pytest.raises(TokenizeError, match="the model has no unit for X, Y, Z"):
            rec.resources.hotwords(config, ["XYZ"])
    assert not [k for k in rec.resources.keys() if k[0] == "hotwords" and k[-1] == ("XYZ",)]
    assert ("hotwords", None, config.hotwords_score, ("ABC",)) not in rec.resources
    rec.resources.hotwords(config, ["ABC"])
    assert ("hotwords", None, config.hotwords_score, ("ABC",)) in rec.resources


def test_the_engine_builds_a_connections_resources_off_the_event_loop(rec, monkeypatch):
    import streamdec.search.grammar as grammar
    import streamdec.search.context_graph as context_graph
    import streamdec.core.resources as resources

    built_in = []
    grammar_build, hotwords_build = grammar.grammar_graph, context_graph.hotwords_graph

    def spy(build):
        def wrapper(*args, **kwargs):
            built_in.append(threading.current_thread().name)
            return build(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(grammar, "grammar_graph", spy(grammar_build))
    monkeypatch.setattr(resources, "hotwords_graph", spy(hotwords_build))
    config = SearchConfig(method="modified_beam", beam=4)

    async def main():
        async with Engine(rec, EngineConfig()) as engine:
            await engine.prepare(config, hotwords=["CAB :3"], phrases=["ABC", "CAB"])
            live = engine.open(config, hotwords=["CAB :3"], phrases=["ABC", "CAB"])
            live.close()
            return threading.current_thread().name

    loop_thread = asyncio.run(main())
    assert len(built_in) == 2  # the grammar and the hotwords graph, once each
    assert loop_thread not in built_in
