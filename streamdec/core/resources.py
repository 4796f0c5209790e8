"""The store of search resources: what the streams of one recognizer share per
configuration, built once, kept in one bounded map, safe from any thread.

    resources = SearchResources(model, symbols, meta, model_dir, decoder_cache_size=20000)
    search, graph, words = resources.prepare(config, hotwords=["HELLO :2"], phrases=None)

=============  ===========================================  ==============================
kind           key                                          made by
=============  ===========================================  ==============================
search         ``SearchConfig``                             ``make_search``
neural LM      LM file                                      ``NeuralLm`` (one ONNX session
                                                            per file, for every config)
hotwords file  (file, default score)                        ``read_hotwords_file``
hotwords       (file, default score, the stream's phrases)  ``hotwords_graph``
grammar        (phrases, penalties, bonus)                  ``grammar_graph``
keywords       (keyword lines, default boost, threshold)     ``parse_keywords``,
                                                            ``KeywordGraph.build``
word graph     (lang directory, ``WordOptions``)            ``load_word_graph``
compiled lang  lang directory                               ``load_compiled`` (its prefix
                                                            tree and n-gram: one per
                                                            directory, for every option set)
=============  ===========================================  ==============================

One eviction rule for all: the least recently used entries go when the weights kept pass
``RESOURCE_BUDGET`` (a lang directory's word graph and its compiled form weigh ``HEAVY``, the
rest 1), so clients that bring their own configurations cannot grow it without bound. A
stream holds references to its objects, so eviction never disturbs a live stream.

Any thread may ask (the engine builds a connection's resources in an executor, off the
event loop, then opens its streams from the store): a key is built by one thread while
others asking for it wait for that build; a build that fails raises to every asker and
is not kept (the next ask tries again).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Hashable, Sequence

from ..lru import LruCache
from ..search import DecoderCache, Search, SearchConfig, make_search
from ..search.context_graph import (ContextGraph, hotwords_graph, parse_hotwords,
                                   read_hotwords_file)
from ..search.word_graph import WordGraph, WordOptions

if TYPE_CHECKING:
    from ..search.keyword_graph import KeywordGraph

__all__ = ["SearchResources", "StreamResources", "RESOURCE_BUDGET", "HEAVY"]

#: total weight of the resources a store keeps
RESOURCE_BUDGET = 128

#: weight of a lang directory's word graph and of a word n-gram (each may be large)
HEAVY = 16


@dataclass(frozen=True)
class StreamResources:
    """What one stream decodes with."""

    search: Search
    hotwords: ContextGraph | None
    words: WordGraph | None


class SearchResources:
    """The per-configuration resources of one recognizer (see the module notes)."""

    def __init__(self, model, symbols, meta, model_dir: Path, decoder_cache_size: int,
                 budget: int = RESOURCE_BUDGET) -> None:
        self.model, self.symbols, self.meta = model, symbols, meta
        self.model_dir = Path(model_dir)
        #: decoder outputs, shared by every search configuration
        self.decoder_cache = DecoderCache(model, decoder_cache_size)
        self._entries: LruCache[Hashable, object] = LruCache(budget)
        self._building: dict[Hashable, Future] = {}
        self._lock = threading.Lock()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def keys(self) -> list[Hashable]:
        """The keys kept, least recently used first (each a tuple: kind, then key)."""
        with self._lock:
            return self._entries.keys()

    @property
    def weight(self) -> int:
        with self._lock:
            return self._entries.weight

    # -- what streams ask for ----------------------------------------------------------------
    def prepare(self, config: SearchConfig, hotwords: Sequence[str] = (),
                phrases: Sequence[str] | None = None) -> StreamResources:
        """The search, hotwords graph and word graph of a stream (see
        ``Recognizer.create_stream``); ConfigError / TokenizeError / ModelLoadError for
        unusable ones. Builds what is missing in the calling thread."""
        return StreamResources(self.search(config), self.hotwords(config, hotwords),
                               self.words(config, phrases))

    def search(self, config: SearchConfig) -> Search:
        """The shared search object of one configuration (all share one decoder cache and,
        per LM file, one neural LM)."""
        def build() -> Search:
            resolved = replace(config, lm_file=self.model_file(config.lm_file))
            lm = self.neural_lm(resolved.lm_file) if resolved.lm_file else None
            return make_search(self.model, resolved, self.decoder_cache, self.symbols.unk_id,
                               self.meta, lm=lm)

        return self._get(("search", config), build)

    def neural_lm(self, path: str):
        """The neural LM of one file (one ONNX session, whatever the configurations)."""
        from ..search.neural_lm import NeuralLm

        return self._get(("neural_lm", path), lambda: NeuralLm(path, self.meta.vocab_size))

    def hotwords(self, config: SearchConfig, extra: Sequence[str] = ()
                 ) -> ContextGraph | None:
        """The hotwords graph of a stream: the config's file plus ``extra`` phrases."""
        file_key = (config.hotwords_file, config.hotwords_score)
        file_phrases = self._get(("hotwords_file",) + file_key, lambda: (
            read_hotwords_file(config.hotwords_file, config.hotwords_score)
            if config.hotwords_file else []))
        extra = tuple(extra)
        return self._get(("hotwords",) + file_key + (extra,), lambda: hotwords_graph(
            file_phrases + parse_hotwords(extra, config.hotwords_score), self.symbols))

    def keywords(self, lines: Sequence[str], config) -> "KeywordGraph":
        """The keyword graph of a stream's keyword lines (``search.keyword_graph``) with the
        defaults of ``config`` (a ``KeywordConfig``); ConfigError / TokenizeError for an
        unusable list."""
        from ..search.keyword_graph import KeywordGraph, parse_keywords

        lines = tuple(lines)
        return self._get(("keywords", lines, config.boost, config.threshold),
                         lambda: KeywordGraph.build(
                             parse_keywords(lines, self.symbols, config.boost, config.threshold),
                             self.meta.vocab_size))

    def words(self, config: SearchConfig, phrases: Sequence[str] | None = None
              ) -> WordGraph | None:
        """The word graph of a stream: its grammar, or the config's lang directory."""
        if phrases is not None:
            from ..search.grammar import grammar_graph

            key = (tuple(phrases), config.unk_penalty, config.word_bonus,
                   config.unk_unit_penalty)
            return self._get(("grammar",) + key, lambda: grammar_graph(
                list(phrases), self.symbols, config.unk_penalty, config.word_bonus,
                config.unk_unit_penalty))
        if not config.lang_dir:
            return None
        from ..lang.compiled import load_word_graph

        options = WordOptions(lm_scale=config.word_lm_scale, word_bonus=config.word_bonus,
                              lookahead=config.word_lookahead, allow_oov=config.allow_oov,
                              unk_penalty=config.unk_penalty,
                              unk_unit_penalty=config.unk_unit_penalty)
        return self._get(("word_graph", config.lang_dir, options), lambda: load_word_graph(
            self.model_file(config.lang_dir), self.symbols, options,
            compiled=self.compiled_lang), HEAVY)

    def compiled_lang(self, folder, symbols):
        """A lang directory's prefix tree and word n-gram, read from its compiled form
        (shared by every option set over it)."""
        from ..lang.compiled import load_compiled

        return self._get(("compiled_lang", str(folder)), lambda: load_compiled(folder, symbols),
                         HEAVY)

    def model_file(self, path: str | None) -> str | None:
        """A relative ``lang_dir``/``lm_file`` names a path inside the model directory when
        it exists there (the built-in model ships ``lang/`` and ``lm.onnx``), else a path
        relative to the working directory."""
        if not path or Path(path).is_absolute():
            return path
        inside = self.model_dir / path
        return str(inside) if inside.exists() else path

    # -- the one map ------------------------------------------------------------------------
    def _get(self, key: Hashable, build: Callable[[], object], weight: int = 1):
        """The value of ``key``, built (once, whoever asks) when missing."""
        with self._lock:
            if key in self._entries:
                return self._entries.get(key)
            pending = self._building.get(key)
            mine = pending is None
            if mine:
                pending = self._building[key] = Future()
        if not mine:
            return pending.result()  # another thread builds it (raises its error)
        try:
            value = build()
        except BaseException as e:
            with self._lock:
                del self._building[key]
            pending.set_exception(e)
            raise
        with self._lock:
            self._entries.put(key, value, weight)
            del self._building[key]
        pending.set_result(value)
        return value
