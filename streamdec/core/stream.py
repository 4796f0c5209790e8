"""Per-stream state: pending audio and features, the decoding state (encoder states,
search state, segment bookkeeping), the events not yet handed out and, when decoding it
failed, its error. Create streams with ``Recognizer.create_stream()``; the recognizer
decodes them.

A stream is touched by one thread at a time. Its decoding state is one frozen value
(``DecodeState``) that a decode replaces in a single assignment (``Recognizer.commit``),
so a decode computed in a worker thread never writes into a stream.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..audio.features import FeatureConfig, StreamingFeatures
from ..errors import StreamdecError, StreamStateError
from .results import Event
from .segments import SegmentState

if TYPE_CHECKING:
    from ..audio.vad import SampleQueue, VadState
    from ..models.states import EncoderStates
    from ..search.base import Search, SearchState
    from ..search.keywords import KeywordState
    from .endpoint import EndpointConfig
    from .local_agreement import Agreement
    from .second_pass import KeptAudio
    from .segments import Closing, Segmenter

__all__ = ["Stream", "DecodeState"]


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class DecodeState:
    """Everything a decode of one chunk reads and replaces."""

    encoder_states: "EncoderStates"  # a tuple (batch axis of size 1) or a row of a batch
    search_state: "SearchState"
    segment: SegmentState
    processed_feature_frames: int = 0  # feature frames the encoder has advanced past
    vad: "VadState | None" = None  # the stream's voice activity detector (None: no VAD)
    keywords: "KeywordState | None" = None  # the stream's keyword spotting (None: none)


class Stream:
    """Audio in (``accept_waveform``, ``input_finished``), events out (``pop_events``)."""

    def __init__(self, feature_config: FeatureConfig, tail_padding_frames: int,
                 search: "Search", state: DecodeState,
                 vad_queue: "SampleQueue | None" = None,
                 endpoint: "EndpointConfig | None" = None,
                 kept: "KeptAudio | None" = None) -> None:
        # with a VAD (``state.vad``), the audio at the model's rate also queues for it
        self.vad_queue = vad_queue
        # with a second pass, the recent audio at the model's rate is kept for it
        self.kept = kept
        # with partials refreshed by local agreement, its state (None: off; the drive or
        # the engine replaces it: ``streamdec.core.local_agreement``)
        self.agreement: "Agreement | None" = None
        sinks = [q.append for q in (vad_queue, kept) if q is not None]
        self.features = StreamingFeatures(
            feature_config, on_samples=(sinks[0] if len(sinks) == 1 else
                                        _both(*sinks) if sinks else None))
        self.search = search  # shared, stateless
        self.endpoint = endpoint  # this stream's endpoint rules (None: the recognizer's)
        # a requested final (force-final): the feature frame decoding must reach, and how
        # the segment closes there (``Recognizer.request_final``); None: none pending
        self.close_at: int | None = None
        self.closing: "Closing | None" = None
        self.inserted_samples = 0  # silence inserted by force-finals (model rate)
        self.state = state
        self.error: StreamdecError | None = None  # set when decoding this stream failed
        self.in_flight = False  # gathered into a batch whose results are not committed yet
        self._tail_padding_frames = tail_padding_frames
        self._events: list[Event] = []

    # -- audio in ------------------------------------------------------------------------
    def accept_waveform(self, sample_rate: int, samples: np.ndarray) -> None:
        """Add mono audio (float in [-1, 1] or int16) at ``sample_rate``; any chunk size.
        Raises AudioInputError for unusable audio (the stream is left unchanged) and
        StreamStateError after ``input_finished``."""
        self.features.accept_waveform(sample_rate, samples)

    def input_finished(self) -> None:
        """No more audio. Pads the tail with silence so the last chunk is complete and
        every sample accepted so far is decoded."""
        self.features.input_finished(self._tail_padding_frames)

    @property
    def input_done(self) -> bool:
        return self.features.finished

    # -- events out ----------------------------------------------------------------------
    def pop_events(self) -> list[Event]:
        """Partial and final results made since the last call, oldest first (and, in a
        stream created with keywords, ``KeywordEvent``s among them)."""
        events, self._events = self._events, []
        return events

    # -- decoding state (read-only views) -------------------------------------------------
    @property
    def search_state(self) -> "SearchState":
        return self.state.search_state

    @property
    def segment(self) -> int:
        """Id of the open segment."""
        return self.state.segment.segment_id

    @property
    def done(self) -> bool:
        """The end-of-stream final has been made (or decoding failed): nothing more follows."""
        return self.state.segment.done or self.error is not None

    def commit(self, state: DecodeState, events: list[Event]) -> None:
        """Take a decode's result (``Recognizer.commit`` calls this): the new state, its
        events queued, feature frames the encoder no longer needs freed."""
        self.state = state
        self._events.extend(events)
        self.features.drop_before(state.processed_feature_frames)
        if self.vad_queue is not None:
            self.vad_queue.drop_before(state.vad.scored)
        self.in_flight = False
        if self.close_at is not None and state.processed_feature_frames >= self.close_at:
            self.close_at = self.closing = None  # that decode closed the segment

    def end_segment(self, segmenter: "Segmenter") -> None:
        """Close the open segment now, where decoding stands: its final is queued (empty
        when the segment has no text) and the next segment starts there. Audio accepted but
        not decoded yet goes to the next segment (``Recognizer.request_final`` decodes it
        first). StreamStateError while a decode of the stream is in flight or after its
        end."""
        if self.in_flight or self.done:
            raise StreamStateError("a segment can be closed only between decodes of a live "
                                   "stream")
        events, search_state, segment = segmenter.close(self.search, self.state.search_state,
                                                        self.state.segment)
        self.commit(replace(self.state, search_state=search_state, segment=segment), events)

    def fail(self, error: StreamdecError) -> None:
        """Decoding this stream failed: it ends with ``error`` (nothing more is decoded)."""
        self.error = error
        self.in_flight = False


def _both(first, second):
    def both(x: np.ndarray) -> None:
        first(x)
        second(x)

    return both
