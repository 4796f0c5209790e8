"""Per-stream state: pending audio and features, encoder states, search state, segment
bookkeeping and the events not yet handed out. Create streams with
``Recognizer.create_stream()``; the recognizer decodes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .features import FeatureConfig, StreamingFeatures
from .results import Result

if TYPE_CHECKING:
    from .search.base import Search, SearchState

__all__ = ["Stream"]


class Stream:
    """Audio in (``accept_waveform``, ``input_finished``), events out (``pop_events``)."""

    def __init__(self, feature_config: FeatureConfig, tail_padding_frames: int,
                 encoder_states: list[np.ndarray], search: "Search",
                 search_state: "SearchState") -> None:
        self.features = StreamingFeatures(feature_config)
        self.encoder_states = encoder_states
        self.search = search
        self.search_state = search_state
        self.num_processed_frames = 0  # feature frames the encoder has advanced past
        self.segment = 0
        self.done = False  # the end-of-stream final result has been made
        self._tail_padding_frames = tail_padding_frames
        self._events: list[Result] = []
        self.last_partial_tokens: tuple[int, ...] = ()  # of the last partial event (dedup)

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

    def pop_events(self) -> list[Result]:
        """Partial and final results made since the last call, oldest first."""
        events, self._events = self._events, []
        return events

    def push_event(self, result: Result) -> None:
        """Queue a result for ``pop_events`` (the Recognizer calls this)."""
        self._events.append(result)
        self.last_partial_tokens = () if result.is_final else result.token_ids
