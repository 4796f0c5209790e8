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

``decode`` is three steps, which a threaded caller (the engine) runs on different threads:

- ``gather`` (the thread that feeds the streams): take each ready stream's next chunk of
  feature frames and its decoding state, mark it in flight;
- ``compute`` (any thread; pure, touches no stream): stack the encoder states, encode once,
  search (one batched step per search method), share the new states out as rows of the
  batch, then the segment/endpoint function gives each stream its events and next state;
  a batch that fails is retried stream by stream, so only a stream that fails on its own
  ends (``Stream.error``);
- ``commit`` (the feeding thread): one state assignment per stream, its events queued.

A stream with a voice activity detector (``create_stream(vad=True)``, ``streamdec.audio.vad``)
is also ready when it holds audio its VAD has not scored; ``compute`` scores that first
and then decodes its next chunk, skips a run of silent chunks (its timeline moves on and
its open segment closes) or leaves it waiting for more audio.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from ..audio.features import FeatureConfig
from ..audio.vad import DECODE, SKIP, WAIT, Chunk, Gate, SampleQueue, SileroVad, VadConfig
from ..errors import ConfigError, DecodeError, ModelLoadError, StreamStateError
from ..models import ModelConfig, TransducerModel, load_model
from ..models.files import find_model_files
from ..search import Search, SearchConfig
from ..search.config import default_search
from ..search.base import SearchState
from ..search.keywords import KeywordConfig, KeywordSearch
from ..tokens import SymbolTable
from .endpoint import EndpointConfig
from .local_agreement import Agreement, LocalAgreement
from .resources import SearchResources
from .results import Event, make_keyword_event
from .second_pass import KeptAudio, SecondPass, SecondPassConfig
from .segments import Closing, SegmentState, Segmenter
from .stream import DecodeState, Stream

__all__ = ["Recognizer", "RecognizerConfig", "DecodeBatch", "StreamUpdate"]

log = logging.getLogger("streamdec")

_NO_ENDPOINT = EndpointConfig(enabled=False)


@dataclass(frozen=True)
class RecognizerConfig:
    """``search`` left out (None) becomes the model's default search
    (``search.config.default_search``: its words where its directory ships them, else
    greedy); ``dataclasses.replace`` of ``model`` keeps the search already chosen, so
    pass ``search=None`` with a new model to choose its default again."""

    model: ModelConfig = field(default_factory=ModelConfig)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    search: SearchConfig = None  # type: ignore[assignment]  # None: default_search(model)
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    vad: VadConfig = field(default_factory=VadConfig)
    second_pass: SecondPassConfig = field(default_factory=SecondPassConfig)

    def __post_init__(self) -> None:
        if self.search is None:
            object.__setattr__(self, "search", default_search(self.model.path))


class Recognizer:
    def __init__(self, config: RecognizerConfig | None = None,
                 model: TransducerModel | None = None, symbols: SymbolTable | None = None,
                 second_pass: SecondPass | None = None):
        """``second_pass``: a second pass already loaded (e.g. shared with another
        recognizer); by default one is loaded when ``config.second_pass.enabled``."""
        self.config = config or RecognizerConfig()
        #: the files the model was loaded from (None when model and symbols were given)
        self.model_files = (find_model_files(self.config.model)
                            if model is None or symbols is None else None)
        self.model = model or load_model(self.config.model, self.config.features,
                                         self.model_files)
        self.symbols = symbols or SymbolTable.from_file(self.model_files.tokens)
        model_dir, features = self.config.model.path, self.config.features
        meta = self.model.meta
        self.symbols.check_vocab(meta.vocab_size)
        if features.num_bins != meta.feature_dim:
            raise ModelLoadError(f"features.num_bins {features.num_bins} != the "
                                 f"encoder's input dim {meta.feature_dim}")
        # (a model loaded here agrees by construction; one passed in may not)
        for key, ours, source in (("blank_id", self.symbols.blank_id, "the symbols"),
                                  ("frame_shift_ms", features.frame_shift_ms, "features"),
                                  ("sample_rate", features.sample_rate, "features")):
            if getattr(meta, key) != ours:
                raise ModelLoadError(f"{model_dir}: the model's {key} is "
                                     f"{getattr(meta, key):g} but {source} give {ours:g}")
        #: the model's metadata, complete from the backend
        self.meta = meta
        self.segmenter = Segmenter(self.config.endpoint, self.symbols, self.meta)
        #: the per-configuration searches, hotwords, word graphs and LMs streams share
        self.resources = SearchResources(self.model, self.symbols, self.meta, model_dir,
                                         self.config.search.decoder_cache_size)
        # the default configuration's files are read and checked now, before any audio
        self.resources.prepare(self.config.search)
        #: keyword spotting, for the streams created with keywords (beside their transcript)
        self.keyword_search = KeywordSearch(self.model, KeywordConfig(),
                                            self.resources.decoder_cache, self.symbols.unk_id,
                                            self.meta)
        self._vad: Gate | None = None  # loaded with the first stream that uses it
        #: the second pass over each utterance (None: off, ``config.second_pass.enabled``)
        self.second_pass = second_pass or self._load_second_pass()
        #: partials refreshed by local agreement, for the streams that ask (None: no second
        #: pass to refresh them with)
        self.local_agreement = (LocalAgreement(self.second_pass)
                                if self.second_pass is not None else None)
        if self.config.vad.enabled:
            self.vad_gate

    def _load_second_pass(self) -> SecondPass | None:
        config = self.config.second_pass
        if not config.enabled:
            return None
        from ..models.whisper import WhisperModel

        model = WhisperModel(config.whisper_config(), workers=config.workers)
        if model.sample_rate != self.config.features.sample_rate:
            raise ModelLoadError(f"the second pass's model takes {model.sample_rate} Hz audio "
                                 f"but the first pass's runs at "
                                 f"{self.config.features.sample_rate} Hz")
        return SecondPass(config, model)

    def _kept_audio(self) -> KeptAudio | None:
        if self.second_pass is None:
            return None
        return KeptAudio(round(self.second_pass.config.max_seconds
                               * self.config.features.sample_rate))

    @property
    def vad_gate(self) -> Gate:
        """The voice activity detector's gate (its model is loaded on first use)."""
        if self._vad is None:
            self._vad = Gate(self.config.vad, SileroVad(self.config.features.sample_rate))
        return self._vad

    def check_second_pass(self, second_pass: bool | None, local_agreement: bool | None
                          ) -> None:
        """ConfigError when a stream could not have these second-pass settings here (see
        ``create_stream``): a second pass or local agreement asked of a recognizer without a
        second pass, or local agreement with the second pass off."""
        if (second_pass or local_agreement) and self.second_pass is None:
            raise ConfigError("a second pass was asked for, but none is configured "
                              "(--config two-pass, or [second_pass] enabled = true)")
        if local_agreement and second_pass is False:
            raise ConfigError("local agreement refreshes partials with the second pass: it "
                              "needs the stream's second pass on")

    def create_stream(self, search: SearchConfig | None = None,
                      hotwords: Sequence[str] = (),
                      phrases: Sequence[str] | None = None, vad: bool | None = None,
                      endpoint: EndpointConfig | None = None,
                      second_pass: bool | None = None,
                      local_agreement: bool | None = None,
                      keywords: Sequence[str] | None = None) -> Stream:
        """A new stream, decoded with ``search`` (default: the recognizer's search config).

        ``vad``: gate the stream's audio with the voice activity detector (None: as
        ``config.vad.enabled`` says): the encoder and search see only speech with its
        padding, the VAD's silence ends an utterance, times stay on the stream's timeline.

        ``hotwords``: phrases (``phrase`` or ``phrase :score``) biased in this stream, on top
        of those of ``search.hotwords_file``; they need a beam search (ConfigError with
        greedy) and units of the model (TokenizeError).

        ``phrases``: grammar mode: the stream recognises only these phrases, one or more in
        a row (Vosk's ``phrase_list``/grammar, e.g. ``["yes", "no", "[unk]"]``); ``[unk]``
        lets anything else through, shown as ``[unk]`` and costing ``search.unk_penalty``.
        Replaces ``search.lang_dir`` for this stream; needs a beam search.

        What the stream needs comes from ``resources`` (built there when missing: call
        ``resources.prepare`` first, e.g. in a worker thread, to keep heavy builds away from
        the caller's thread).

        ``endpoint``: this stream's endpoint rules (default: the recognizer's).

        ``second_pass``: whether the stream's finals get the recognizer's second pass (None:
        when it has one; True without one: ConfigError).

        ``local_agreement``: whether the stream's partials are refreshed by local agreement
        with the second pass's model (``streamdec.core.local_agreement``; None: as
        ``[second_pass] local_agreement`` says; True without the stream's second pass:
        ConfigError).

        ``keywords``: keyword lines (``search.keyword_graph``: units or phrases, with
        optional ``:boost #threshold @text``) spotted beside the transcript: each keyword
        heard is a ``KeywordEvent`` among the stream's results (None: no spotting; a list
        without a keyword: ConfigError; units the model lacks: TokenizeError)."""
        self.check_second_pass(second_pass, local_agreement)
        kept = self._kept_audio() if second_pass is not False else None
        if local_agreement is None:
            local_agreement = (kept is not None
                               and self.second_pass.config.local_agreement)
        r = self.resources.prepare(search or self.config.search, hotwords, phrases)
        spotting = (None if keywords is None else self.keyword_search.init_state(
            self.resources.keywords(keywords, self.keyword_search.config)))
        state = DecodeState(
            encoder_states=tuple(self.model.state_layout.initial()),
            search_state=r.search.init_state(graph=r.hotwords, words=r.words),
            segment=SegmentState(), keywords=spotting)
        queue = None
        if vad if vad is not None else self.config.vad.enabled:
            state = replace(state, vad=self.vad_gate.initial())
            queue = SampleQueue()
        stream = Stream(self.config.features, tail_padding_frames=self.meta.chunk_frames,
                        search=r.search, state=state, vad_queue=queue, endpoint=endpoint,
                        kept=kept)
        if local_agreement:
            stream.agreement = Agreement()
        return stream

    def is_ready(self, stream: Stream) -> bool:
        """True when the stream holds a whole encoder chunk not yet decoded (and is neither
        in a batch being decoded nor ended); with a VAD, when it holds a chunk the VAD has
        decided, or audio the VAD has not scored yet (a chunk's worth, or any before a
        chunk that waits for it, or the end of the input)."""
        if stream.done or stream.in_flight:
            return False
        if stream.state.vad is None:
            return (stream.features.num_frames_ready
                    >= stream.state.processed_feature_frames + self.meta.chunk_frames)
        gate, chunk = self.vad_gate, self._chunk(stream.state, stream.features.num_frames_ready)
        samples = gate.take(stream.state.vad, stream.vad_queue, stream.input_done)
        if samples is not None and (len(samples) >= chunk.step or stream.input_done):
            return True
        if chunk.available == 0:
            return False
        return samples is not None or gate.decide(stream.state.vad, chunk.first,
                                                  chunk.first + chunk.step) != WAIT

    def _chunk(self, state: DecodeState, frames_ready: int) -> Chunk:
        """The stream's next encoder chunks in samples at the model rate (for the VAD)."""
        T, n = self.meta.chunk_shift, self.meta.chunk_frames
        hop = self.config.features.frame_shift_samples
        start = state.processed_feature_frames
        available = (frames_ready - start - n) // T + 1 if frames_ready >= start + n else 0
        return Chunk(first=start * hop, step=T * hop, available=available)

    # -- decoding: gather (caller's thread) -> compute (any thread, pure) -> commit ---------
    def decode(self, streams: Sequence[Stream]) -> None:
        """Decode one chunk of every ready stream in one batch; queue their events.
        A stream whose decode fails ends with ``stream.error`` set; the others go on."""
        batch = self.gather(streams)
        if batch is not None:
            self.commit(batch, self.compute(batch))

    def gather(self, streams: Sequence[Stream], limit: int | None = None
               ) -> DecodeBatch | None:
        """Take the next chunk of up to ``limit`` ready streams (each once) into a batch and
        mark them in flight; None when none is ready. Reads the streams, changes nothing
        else: call it on the thread that feeds them."""
        ready = [s for s in dict.fromkeys(streams) if self.is_ready(s)][:limit]
        if not ready:
            return None
        n, T = self.meta.chunk_frames, self.meta.chunk_shift
        items = []
        for s in ready:
            start = s.state.processed_feature_frames
            # no more audio can come, and after this chunk no whole chunk is left
            ready_frames = s.features.num_frames_ready
            is_last = s.input_done and ready_frames < start + T + n
            endpoint, closing = s.endpoint, None
            if s.close_at is not None:  # a requested final: no endpoint before it closes
                if start + T >= s.close_at:
                    closing = s.closing
                else:
                    endpoint = _NO_ENDPOINT
            if s.state.vad is None:
                items.append(_Item(s.features.frames(start, n), s.search, s.state, is_last,
                                   endpoint, closing))
            else:  # the chunk may not be whole yet: the VAD decides first
                items.append(_Item(
                    s.features.frames(start, n) if ready_frames >= start + n else None,
                    s.search, s.state, is_last, endpoint, closing, ready_frames, s.input_done,
                    self.vad_gate.take(s.state.vad, s.vad_queue, s.input_done)))
            s.in_flight = True
        return DecodeBatch(tuple(ready), tuple(items))

    @property
    def batch_from(self) -> int | None:
        """The fewest streams the model's encoder computes in one call (fewer run one call
        each: ``OnnxTransducer.batch_from``); None: every batch runs one call per stream;
        1 for a model that takes any batch (every model without the attribute)."""
        return getattr(self.model, "batch_from", 1)

    @property
    def batch_up_to(self) -> int | None:
        """The most streams the model's encoder computes in one call (a larger batch runs
        in calls of that many, one after another: ``OnnxTransducer.batch_up_to``); None: any
        number (every model without the attribute)."""
        return getattr(self.model, "batch_up_to", None)

    def release_memory(self) -> None:
        """Hand back the memory the model's runtime keeps for its largest runs so far (ONNX
        Runtime's arenas: ``OnnxTransducer.release_arenas``; nothing for a model without
        one). For when no decode runs; the next burst takes it again."""
        release = getattr(self.model, "release_arenas", None)
        if release is not None:
            release()

    def silent_batch(self, size: int) -> DecodeBatch:
        """A batch of ``size`` new streams, each holding one chunk of silence, for a warm-up:
        compute it and drop it (its streams belong to nobody). A decode's memory (the C
        heap its tensors and arrays come from) grows to the largest batches it has run and
        stays there; running the largest first reaches that mark at start instead of at the
        first burst of load (bench/results/2026-12-04-memory-growth)."""
        features = self.config.features
        fs = features.sample_rate
        samples = np.zeros(int(fs * (features.frame_length_ms / 1000))
                           + self.meta.chunk_frames * features.frame_shift_samples, np.float32)
        streams = [self.create_stream(vad=False) for _ in range(size)]
        for s in streams:
            s.accept_waveform(fs, samples)
        batch = self.gather(streams)
        assert batch is not None and len(batch) == size, "a chunk of silence is a whole chunk"
        return batch

    def compute(self, batch: DecodeBatch) -> list[StreamUpdate]:
        """Decode a gathered batch: pure (touches no stream), safe in a worker thread.
        When the batch fails, each stream is retried alone so only a failing stream fails."""
        try:
            return self._compute(batch.items)
        except Exception:
            if len(batch.items) == 1:
                return [self._failed(batch.items[0])]
        updates = []
        for item in batch.items:
            try:
                updates += self._compute((item,))
            except Exception:
                updates.append(self._failed(item))
        return updates

    def end_segment(self, stream: Stream) -> None:
        """Close ``stream``'s open segment now, where decoding stands (``Stream.end_segment``):
        audio not decoded yet goes to the next segment. ``request_final`` decodes it first."""
        stream.end_segment(self.segmenter)

    def request_final(self, stream: Stream) -> bool:
        """Force-final: end the open utterance with every sample accepted so far in it.

        Call it between decodes once no whole chunk is left (``is_ready`` false; else
        StreamStateError, as after the end of the input). The audio not decoded yet is
        padded with silence to whole chunks; decoding them (``is_ready`` is true again)
        closes the segment with its final, and the next segment starts where the audio
        ended, the inserted silence taken out of every later time. Returns True when
        nothing was left to decode: the final is queued already."""
        if stream.in_flight or stream.done or stream.input_done or self.is_ready(stream):
            raise StreamStateError("a final can be requested only between decodes of a live "
                                   "stream, with no whole chunk left to decode")
        if stream.state.vad is not None:  # its silence already ends utterances
            raise StreamStateError("a final cannot be requested on a stream with voice "
                                   "activity detection (vad): its silence ends utterances")
        features, meta = stream.features, self.meta
        features.flush_resampler()
        step = self.config.features.frame_shift_samples
        shift = meta.chunk_shift
        audio = features.num_samples_fed
        # decode up to the first chunk boundary past every frame that starts in the audio
        frames = -(-audio // step)
        target = -(-frames // shift) * shift
        if target <= stream.state.processed_feature_frames:
            stream.end_segment(self.segmenter)
            return True
        unit = step * meta.subsampling  # one encoder frame: later times stay on the grid
        while features.num_frames_ready < target - shift + meta.chunk_frames:
            features.insert_silence(unit)
        inserted = features.num_samples_fed - audio
        if stream.kept is not None:  # the inserted silence is none of the stream's audio
            stream.kept.drop_last(inserted)
        rate = self.config.features.sample_rate
        stream.close_at = target
        stream.closing = Closing(inserted // unit,
                                 round((audio - stream.inserted_samples) / rate, 6))
        stream.inserted_samples += inserted
        return False

    def commit(self, batch: DecodeBatch, updates: Sequence[StreamUpdate]) -> None:
        """Hand each stream its decode's result: one state assignment and its events (or
        its error). Call it on the thread that feeds the streams."""
        for stream, update in zip(batch.streams, updates):
            if update.error is not None:
                stream.fail(update.error)
            else:
                stream.commit(update.state, update.events)

    def _failed(self, item: "_Item") -> StreamUpdate:
        import traceback

        exc = sys.exc_info()[1]
        log.error("decoding a stream failed:\n%s", traceback.format_exc())
        return StreamUpdate(None, [], DecodeError(f"decoding failed: {type(exc).__name__}: "
                                                  f"{exc}"))

    def _compute(self, items: Sequence["_Item"]) -> list[StreamUpdate]:
        if all(it.state.vad is None for it in items):
            return self._encode(items)
        # the VAD first: what each stream does with its next chunk; the encoder runs only
        # on the chunks it decides to decode
        plans = self._vad_plans(items)
        updates: list[StreamUpdate | None] = [p if isinstance(p, StreamUpdate) else None
                                              for p in plans]
        todo = [i for i, p in enumerate(plans) if not isinstance(p, StreamUpdate)]
        if todo:
            for i, update in zip(todo, self._encode([plans[i][0] for i in todo])):
                updates[i] = StreamUpdate(update.state, plans[i][1] + update.events)
        return updates

    def _vad_plans(self, items: Sequence["_Item"]) -> list:
        """Per item: a StreamUpdate (the VAD waits, or skips silence), or (the item to
        encode, events that come before its own: the final of a segment the VAD closed)."""
        gate, meta = self.vad_gate, self.meta
        vad_items = [it for it in items if it.state.vad is not None]
        scored = iter(gate.run(
            [it.state.vad for it in vad_items],
            [it.vad_samples if it.vad_samples is not None else np.zeros(0, np.float32)
             for it in vad_items],
            [it.input_done and it.vad_samples is not None for it in vad_items]))
        plans = []
        for it in items:
            if it.state.vad is None:
                plans.append((it, []))
                continue
            decision, count, close, vad = gate.plan(next(scored),
                                                    self._chunk(it.state, it.frames_ready))
            state, events = replace(it.state, vad=vad), []
            if close or decision == SKIP:  # the VAD's silence is an endpoint
                events, search_state, segment = self.segmenter.end_at_endpoint(
                    it.search, state.search_state, state.segment)
                state = replace(state, search_state=search_state, segment=segment)
            if decision == WAIT:
                plans.append(StreamUpdate(state, events))
            elif decision == DECODE:
                plans.append((replace(it, state=state), events))
            else:  # SKIP: the timeline moves on, the encoder starts afresh at the next speech
                start = state.processed_feature_frames + count * meta.chunk_shift
                skipped = count * meta.encoder_frames_per_chunk
                state = replace(
                    state, encoder_states=tuple(self.model.state_layout.initial()),
                    search_state=it.search.skip(state.search_state, skipped),
                    processed_feature_frames=start,
                    keywords=(None if state.keywords is None
                              else self.keyword_search.skip(state.keywords, skipped)))
                if it.input_done and it.frames_ready < start + meta.chunk_frames:
                    more, search_state, segment = self.segmenter.advance(
                        it.search, state.search_state, state.segment, True, it.endpoint)
                    events += more
                    state = replace(state, search_state=search_state, segment=segment)
                plans.append(StreamUpdate(state, events))
        return plans

    def _encode(self, items: Sequence["_Item"]) -> list[StreamUpdate]:
        # the encoder takes the streams in the order their states stack fastest (the rows of
        # one earlier batch together, in row order: the same streams gathered in any order
        # feed their batch back); a stream's results do not depend on its place in a batch
        order = self.model.state_layout.order([it.state.encoder_states for it in items])
        updates: list[StreamUpdate] = [None] * len(items)  # type: ignore[list-item]
        for i, update in zip(order, self._encode_in_order([items[i] for i in order])):
            updates[i] = update
        return updates

    def _encode_in_order(self, items: Sequence["_Item"]) -> list[StreamUpdate]:
        meta, layout = self.meta, self.model.state_layout
        x = np.stack([it.features for it in items])
        encoder_out, states = self.model.encode(
            x, layout.stack([it.state.encoder_states for it in items]))
        search_states: list[SearchState | None] = [None] * len(items)
        groups: dict[int, list[int]] = {}
        for i, it in enumerate(items):
            groups.setdefault(id(it.search), []).append(i)
        for idx in groups.values():
            search = items[idx[0]].search
            new = search.step([items[i].state.search_state for i in idx], encoder_out[idx])
            for i, st in zip(idx, new):
                search_states[i] = st
        spotted = self._spot(items, encoder_out)
        updates = []
        # each stream's states stay a row of the batch: the same streams in the same order
        # next time are fed back without a copy (``StateLayout.share``)
        for it, enc_states, st, (keywords, heard) in zip(
                items, layout.share(states, len(items)), search_states, spotted):
            events, st, segment = self.segmenter.advance(it.search, st, it.state.segment,
                                                         it.is_last, it.endpoint, it.closing)
            # a stream that has ended never encodes again: it keeps no states (nor its batch)
            state = DecodeState(() if segment.done else enc_states, st, segment,
                                it.state.processed_feature_frames + meta.chunk_shift, it.state.vad,
                                keywords)
            updates.append(StreamUpdate(state, heard + events))
        return updates

    def _spot(self, items: Sequence["_Item"], encoder_out: np.ndarray
              ) -> list[tuple[object, list[Event]]]:
        """Per item: its keyword state after this chunk and the keywords heard in it (one
        batched step for every stream that spots keywords)."""
        out: list[tuple[object, list[Event]]] = [(it.state.keywords, []) for it in items]
        idx = [i for i, it in enumerate(items) if it.state.keywords is not None]
        if not idx:
            return out
        states, hits = self.keyword_search.step([items[i].state.keywords for i in idx],
                                                encoder_out[idx])
        for i, state, found in zip(idx, states, hits):
            shift = items[i].state.segment.shift
            out[i] = (state, [make_keyword_event(h, self.symbols, self.meta, shift)
                              for h in found])
        return out


@dataclass(frozen=True)
class _Item:
    """One stream's part of a batch: its chunk of feature frames and its decoding state."""

    features: np.ndarray | None  # (chunk_frames, F); None: not whole yet (a VAD stream)
    search: Search
    state: DecodeState
    is_last: bool
    endpoint: EndpointConfig | None = None  # the stream's own rules
    closing: Closing | None = None  # a requested final closes the segment after this chunk
    frames_ready: int = 0  # with a VAD: feature frames the stream holds
    input_done: bool = False  # with a VAD: the stream's input has ended
    vad_samples: np.ndarray | None = None  # with a VAD: samples to score (None: none)


@dataclass(frozen=True)
class DecodeBatch:
    """Streams gathered for one decode, with what the decode reads of each."""

    streams: tuple[Stream, ...]
    items: tuple[_Item, ...]

    def __len__(self) -> int:
        return len(self.streams)


@dataclass(frozen=True)
class StreamUpdate:
    """What a decode gives one stream: its next decoding state and events, or an error."""

    state: DecodeState | None
    events: list[Event]  # results (and keyword events of a stream that spots them)
    error: DecodeError | None = None
