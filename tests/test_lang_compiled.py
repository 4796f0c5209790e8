"""A lang directory's compiled form (streamdec/lang/compiled.py): the word graph read back
from it scores exactly as the graph built from the source files; it is compiled once and
then read, compiled again when a source changes (the stale file removed) or when the file
is damaged, and kept in the user's cache, or in memory only, when the lang directory (or
the cache too) cannot be written. Cases: a small lang directory on the random test models'
units, and the built-in model's lang/ (107k words)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import streamdec
from streamdec.lang import compiled
from streamdec.lang.compiled import load_word_graph
from streamdec.lang.lang_dir import load_lexicon, word_sources
from streamdec.lang.ngram import NgramLm
from streamdec.search.word_graph import WordGraph, WordOptions
from streamdec.tokens import SymbolTable
from test_words_search import write_lang

BUILTIN = Path(streamdec.__file__).parent / "assets" / "synthetic-en"
OPTIONS = [WordOptions(lm_scale=0.5, word_bonus=0.0, allow_oov=True, unk_penalty=5.0,
                       unk_unit_penalty=2.0),
           WordOptions(lm_scale=0.5, lookahead=False)]


@pytest.fixture
def symbols(model_dirs) -> SymbolTable:
    return SymbolTable.from_file(Path(model_dirs["zipformer2"]) / "tokens.txt")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("STREAMDEC_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def compiles(monkeypatch) -> list[Path]:
    """The folders compiled from their source files (a spy on compile_lang)."""
    calls: list[Path] = []
    real = compiled.compile_lang

    def spy(folder, symbols):
        calls.append(Path(folder))
        return real(folder, symbols)

    monkeypatch.setattr(compiled, "compile_lang", spy)
    return calls


def from_sources(folder: Path, symbols, options: WordOptions) -> WordGraph:
    """The graph built straight from the files, as the loader did before compiled forms."""
    _, arpa = word_sources(folder)
    return WordGraph.build(load_lexicon(folder, symbols), NgramLm.from_arpa(arpa), symbols,
                           options)


def assert_same_graph(a: WordGraph, b: WordGraph, nodes, states) -> None:
    """Same rows (scores exactly, next nodes and LM states), end scores and LM scores."""
    assert len(a) == len(b) and a.lm.num_states == b.lm.num_states
    assert a.start_state == b.start_state
    pairs = list(itertools.product(nodes, states))
    for i in range(0, len(pairs), 256):
        n, s = [x for x, _ in pairs[i:i + 256]], [y for _, y in pairs[i:i + 256]]
        for x, y in zip(a.rows(n, s), b.rows(n, s)):
            np.testing.assert_array_equal(x, y)
    for node, state in itertools.product(nodes, states):
        assert a.end_score(node, state) == b.end_score(node, state)
    for state in states:
        for word in range(0, len(a.lm.words), max(1, len(a.lm.words) // 50)):
            assert a.lm.score(state, word) == b.lm.score(state, word)


def test_compiled_once_then_read_back_identical(tmp_path, symbols, home, compiles):
    lang = write_lang(tmp_path / "lang")
    for options in OPTIONS:
        expected = from_sources(lang, symbols, options)
        cold = load_word_graph(lang, symbols, options)
        warm = load_word_graph(lang, symbols, options)
        everything = range(len(expected)), range(expected.lm.num_states)
        assert_same_graph(expected, cold, *everything)
        assert_same_graph(expected, warm, *everything)
    assert compiles == [lang]  # the first load compiled, every other one read the file
    files = list((lang / compiled.LOCAL_DIR).iterdir())
    key = compiled.source_key(list(word_sources(lang)), symbols)
    assert [f.name for f in files] == [f"words-{key}.npz"]
    assert files[0].stat().st_mode & 0o777 == 0o644
    assert not home.exists()  # the lang directory was writable: nothing in the user's cache


def test_a_changed_source_is_compiled_again_and_the_stale_file_removed(tmp_path, symbols, home,
                                                                       compiles):
    lang = write_lang(tmp_path / "lang")
    first = load_word_graph(lang, symbols, OPTIONS[0])
    old = list((lang / compiled.LOCAL_DIR).iterdir())
    write_lang(lang, words=["A", "AB", "BAD"], seed=1)
    second = load_word_graph(lang, symbols, OPTIONS[0])
    assert compiles == [lang, lang]
    assert len(second) < len(first)
    assert_same_graph(from_sources(lang, symbols, OPTIONS[0]), second, range(len(second)),
                      range(second.lm.num_states))
    new = list((lang / compiled.LOCAL_DIR).iterdir())
    assert len(new) == 1 and new != old


def test_two_models_sharing_a_lang_directory_keep_one_file_each(tmp_path, symbols, home,
                                                               compiles):
    lang = write_lang(tmp_path / "lang")
    other = SymbolTable({**symbols.id_to_symbol, len(symbols): "<extra>"})  # other units
    for units in (symbols, other, symbols, other):
        graph = load_word_graph(lang, units, OPTIONS[0])
        assert graph.vocab_size == len(units)
    assert compiles == [lang, lang]
    assert len(list((lang / compiled.LOCAL_DIR).iterdir())) == 2


def test_a_damaged_compiled_file_is_compiled_again(tmp_path, symbols, home, compiles):
    lang = write_lang(tmp_path / "lang")
    load_word_graph(lang, symbols, OPTIONS[0])
    (path,) = (lang / compiled.LOCAL_DIR).iterdir()
    path.write_bytes(path.read_bytes()[:1000])  # cut short
    graph = load_word_graph(lang, symbols, OPTIONS[0])
    assert compiles == [lang, lang]
    assert_same_graph(from_sources(lang, symbols, OPTIONS[0]), graph, range(len(graph)),
                      range(graph.lm.num_states))
    assert path.stat().st_size > 1000  # rewritten whole
    load_word_graph(lang, symbols, OPTIONS[0])
    assert compiles == [lang, lang]


def test_unwritable_places_fall_back_to_the_user_cache_then_to_memory(tmp_path, symbols, home,
                                                                      compiles):
    lang = write_lang(tmp_path / "lang")
    (lang / compiled.LOCAL_DIR).write_text("a file where the cache folder would go")
    expected = from_sources(lang, symbols, OPTIONS[0])
    graph = load_word_graph(lang, symbols, OPTIONS[0])
    assert [p.parent.name for p in (home / "lang-cache").iterdir()] == ["lang-cache"]
    load_word_graph(lang, symbols, OPTIONS[0])
    assert compiles == [lang]  # read back from the user's cache
    assert_same_graph(expected, graph, range(len(graph)), range(graph.lm.num_states))
    # neither place writable: compiled in memory on every load, and still the same graph
    other = write_lang(tmp_path / "other", words=["A", "AB", "BAD", "CAB"], seed=2)
    (other / compiled.LOCAL_DIR).write_text("")
    (home / "lang-cache").rename(home / "moved")
    (home / "lang-cache").write_text("")
    for _ in range(2):
        graph = load_word_graph(other, symbols, OPTIONS[0])
    assert compiles == [lang, other, other]
    assert_same_graph(from_sources(other, symbols, OPTIONS[0]), graph, range(len(graph)),
                      range(graph.lm.num_states))


@pytest.mark.slow
def test_builtin_lang_dir_compiled_scores_as_built_from_its_files(tmp_path, home):
    symbols = SymbolTable.from_file(BUILTIN / "tokens.txt")
    lang = tmp_path / "lang"
    lang.mkdir()
    for f in word_sources(BUILTIN / "lang"):
        (lang / f.name).write_bytes(f.read_bytes())
    options = OPTIONS[0]
    expected = from_sources(lang, symbols, options)
    load_word_graph(lang, symbols, options)  # compiles and stores
    graph = load_word_graph(lang, symbols, options)  # reads back
    rng = np.random.default_rng(0)
    nodes = [0, 1, len(graph) - 1, *rng.integers(2, len(graph) - 1, 60).tolist()]
    states = [0, graph.lm.start, *rng.integers(1, graph.lm.num_states, 30).tolist()]
    assert_same_graph(expected, graph, nodes, states)
    assert (len(graph), graph.lm.num_states) == (241690, 173675)


def test_the_builtin_model_ships_its_compiled_words_for_its_current_sources(home, compiles):
    """A new user's first --config accurate (and words by default) reads the shipped file:
    it is the one for the current lang/ sources and the model's units, compressed, and
    scores as the sources (test above) because it is what compile_lang writes."""
    symbols = SymbolTable.from_file(BUILTIN / "tokens.txt")
    lang = BUILTIN / "lang"
    key = compiled.source_key(list(word_sources(lang)), symbols)
    shipped = sorted(p.name for p in (lang / compiled.LOCAL_DIR).glob("*.npz"))
    assert shipped == [f"words-{key}.npz"], (  # after changing lang/: remove the folder, then
        "recompile: python -m streamdec transcribe examples/hello.wav --config accurate")
    path = lang / compiled.LOCAL_DIR / shipped[0]
    assert path.stat().st_size < 4_000_000  # compressed (12.6 MB as plain arrays)
    tree, lm = compiled.load_compiled(lang, symbols)
    assert compiles == []  # read, not compiled
    assert (tree.num_nodes, lm.num_states) == (241689, 173675)
