"""The Recognizer: shared by all streams, holds no per-stream state.

    rec = Recognizer(RecognizerConfig())
    s = rec.create_stream()
    s.accept_waveform(16000, samples)
    while rec.is_ready(s):
        rec.decode([s])          # one batched code path: one stream is a batch of one
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    for result in s.pop_events(): ...

``decode`` runs six plain steps: gather ready streams, stack their encoder states, encode
once, search (one batched step per search method), unstack, scatter events.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from .endpoint import EndpointConfig, is_endpoint
from .errors import ModelLoadError
from .features import FeatureConfig
from .models import ModelConfig, TransducerModel, load_model
from .results import Result, make_result
from .search import DecoderCache, Search, SearchConfig, make_search
from .search.base import Hypothesis, SearchState
from .search.context_graph import (ContextGraph, hotwords_graph, parse_hotwords,
                                   read_hotwords_file)
from .search.word_graph import WordGraph, WordOptions
from .stream import Stream
from .tokens import SymbolTable

__all__ = ["Recognizer", "RecognizerConfig"]

_GRAMMAR_CACHE = 64  # phrase-list graphs kept for reuse (oldest dropped first)


@dataclass(frozen=True)
class RecognizerConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)


class Recognizer:
    def __init__(self, config: RecognizerConfig | None = None,
                 model: TransducerModel | None = None, symbols: SymbolTable | None = None):
        self.config = config or RecognizerConfig()
        self.model = model or load_model(self.config.model)
        self.symbols = symbols or SymbolTable.from_file(self.config.model.path / "tokens.txt")
        self.meta = self.model.meta
        if len(self.symbols) != self.meta.vocab_size:
            raise ModelLoadError(f"{self.config.model.path / 'tokens.txt'}: {len(self.symbols)} "
                                 f"symbols but the joiner outputs {self.meta.vocab_size}")
        if self.config.features.num_bins != self.meta.feature_dim:
            raise ModelLoadError(f"features.num_bins {self.config.features.num_bins} != the "
                                 f"encoder's input dim {self.meta.feature_dim}")
        self._decoder_cache = DecoderCache(self.model, self.config.search.decoder_cache_size)
        self._searches: dict[SearchConfig, Search] = {}
        self._file_hotwords: dict[tuple, list[tuple[str, float]]] = {}
        self._file_graphs: dict[tuple, ContextGraph | None] = {}
        self._word_graphs: dict[tuple, WordGraph] = {}

    def search_for(self, config: SearchConfig) -> Search:
        """The shared search object of one configuration."""
        search = self._searches.get(config)
        if search is None:
            resolved = replace(config, lm_file=self.model_file(config.lm_file))
            search = make_search(self.model, resolved, self._decoder_cache, self.symbols.unk_id)
            self._searches[config] = search
        return search

    def model_file(self, path: str | None) -> str | None:
        """A relative ``lang_dir``/``lm_file`` names a path inside the model directory when
        it exists there (the built-in model ships ``lang/`` and ``lm.onnx``), else a path
        relative to the working directory."""
        if not path or Path(path).is_absolute():
            return path
        inside = self.config.model.path / path
        return str(inside) if inside.exists() else path

    def create_stream(self, search: SearchConfig | None = None,
                      hotwords: Sequence[str] = (),
                      phrases: Sequence[str] | None = None) -> Stream:
        """A new stream, decoded with ``search`` (default: the recognizer's search config).

        ``hotwords``: phrases (``phrase`` or ``phrase :score``) biased in this stream, on top
        of those of ``search.hotwords_file``; they need a beam search (ConfigError with
        greedy) and units of the model (TokenizeError).

        ``phrases``: grammar mode: the stream recognises only these phrases, one or more in
        a row (Vosk's ``phrase_list``/grammar, e.g. ``["yes", "no", "[unk]"]``); ``[unk]``
        lets anything else through, shown as ``[unk]`` and costing ``search.unk_penalty``.
        Replaces ``search.lang_dir`` for this stream; needs a beam search."""
        config = search or self.config.search
        s = self.search_for(config)
        return Stream(self.config.features, tail_padding_frames=self.meta.chunk_frames,
                      encoder_states=self.model.state_layout.initial(), search=s,
                      search_state=s.init_state(graph=self._hotwords(config, hotwords),
                                                words=self._words(config, phrases)))

    def _words(self, config: SearchConfig, phrases: Sequence[str] | None) -> WordGraph | None:
        """The word graph of a stream: its grammar, or the config's lang directory (one
        graph shared by every stream of that configuration)."""
        if phrases is not None:  # streams with the same list share one graph
            from .search.grammar import grammar_graph

            key = ("grammar", tuple(phrases), config.unk_penalty, config.word_bonus,
                   config.unk_unit_penalty)
            graph = self._word_graphs.get(key)
            if graph is None:
                graph = grammar_graph(list(phrases), self.symbols, config.unk_penalty,
                                      config.word_bonus, config.unk_unit_penalty)
                grammars = [k for k in self._word_graphs if k[0] == "grammar"]
                if len(grammars) >= _GRAMMAR_CACHE:
                    del self._word_graphs[grammars[0]]
                self._word_graphs[key] = graph
            return graph
        if not config.lang_dir:
            return None
        options = WordOptions(lm_scale=config.word_lm_scale, word_bonus=config.word_bonus,
                              lookahead=config.word_lookahead, allow_oov=config.allow_oov,
                              unk_penalty=config.unk_penalty,
                              unk_unit_penalty=config.unk_unit_penalty)
        key = (config.lang_dir, options)
        if key not in self._word_graphs:
            from .lang.lang_dir import load_word_graph

            self._word_graphs[key] = load_word_graph(self.model_file(config.lang_dir),
                                                     self.symbols, options)
        return self._word_graphs[key]

    def _hotwords(self, config: SearchConfig, extra: Sequence[str]) -> ContextGraph | None:
        """The hotwords graph of a stream: the config's file plus ``extra`` phrases."""
        key = (config.hotwords_file, config.hotwords_score)
        if key not in self._file_hotwords:
            self._file_hotwords[key] = (read_hotwords_file(config.hotwords_file,
                                                           config.hotwords_score)
                                        if config.hotwords_file else [])
        phrases = self._file_hotwords[key] + parse_hotwords(extra, config.hotwords_score)
        if not extra:  # the same graph for every stream of this config
            if key not in self._file_graphs:
                self._file_graphs[key] = hotwords_graph(phrases, self.symbols)
            return self._file_graphs[key]
        return hotwords_graph(phrases, self.symbols)

    def is_ready(self, stream: Stream) -> bool:
        """True when the stream holds a whole encoder chunk not yet decoded."""
        return (not stream.done and stream.features.num_frames_ready
                >= stream.num_processed_frames + self.meta.chunk_frames)

    def decode(self, streams: Sequence[Stream]) -> None:
        """Decode one chunk of every ready stream in one batch; queue their events."""
        ready = [s for s in dict.fromkeys(streams) if self.is_ready(s)]  # each stream once
        if not ready:
            return
        meta, layout = self.meta, self.model.state_layout
        x = np.stack([s.features.frames(s.num_processed_frames, meta.chunk_frames) for s in ready])
        encoder_out, states = self.model.encode(x, layout.stack([s.encoder_states for s in ready]))
        search_states: list[SearchState | None] = [None] * len(ready)
        groups: dict[int, list[int]] = {}
        for i, s in enumerate(ready):
            groups.setdefault(id(s.search), []).append(i)
        for idx in groups.values():
            search = ready[idx[0]].search
            new = search.step([ready[i].search_state for i in idx], encoder_out[idx])
            for i, st in zip(idx, new):
                search_states[i] = st
        # Nothing above touched a stream: a failure leaves every stream as it was.
        for s, enc_states, st in zip(ready, layout.unstack(states, len(ready)), search_states):
            s.encoder_states = enc_states
            s.search_state = st
            s.num_processed_frames += meta.chunk_shift
            s.features.drop_before(s.num_processed_frames)
            self._update_segment(s)

    def result(self, stream: Stream) -> Result:
        """The current (partial) result of the stream's open segment."""
        return self._result(stream, stream.search.partial(stream.search_state), is_final=False)

    def _result(self, stream: Stream, hyp: Hypothesis, is_final: bool,
                is_eof: bool = False) -> Result:
        st = stream.search_state
        words = getattr(st, "words", None)
        unknown = None
        if words is not None and words.unk_text is not None:
            unknown = [not known for known in words.word_is_known(hyp.tokens)]
        return make_result(hyp, self.symbols, self.meta, segment=stream.segment,
                           segment_start=st.segment_start, frame_offset=st.frame_offset,
                           is_final=is_final, is_eof=is_eof, unknown_words=unknown,
                           unknown_text=words.unk_text if unknown else None)

    def _update_segment(self, stream: Stream) -> None:
        search, st = stream.search, stream.search_state
        if stream.input_done and not self.is_ready(stream):
            best = search.finalize(st)[0]
            stream.push_event(self._result(stream, best, is_final=True, is_eof=True))
            stream.done = True
            return
        best = search.partial(st)
        last = best.frames[-1] + 1 if best.frames else st.segment_start
        if is_endpoint(self.config.endpoint, st.frame_offset - st.segment_start,
                       st.frame_offset - last, self.meta.encoder_frame_seconds):
            if best.tokens:
                stream.push_event(self._result(stream, search.finalize(st)[0], is_final=True))
                stream.segment += 1
            stream.search_state = search.reset(st)
        elif best.tokens != stream.last_partial_tokens:
            stream.push_event(self._result(stream, best, is_final=False))
