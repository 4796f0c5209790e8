"""Helpers that drive streams through a recognizer the way an application does."""

from __future__ import annotations

import numpy as np

from streamdec import Recognizer, Result


def decode_in_pieces(rec: Recognizer, audio: np.ndarray, piece: int, rate: int = 16000,
                     **stream_kw) -> list[Result]:
    """Feed ``audio`` in pieces of ``piece`` samples, decoding as chunks become ready;
    returns every event."""
    s = rec.create_stream(**stream_kw)
    events = []
    for i in range(0, len(audio), piece):
        s.accept_waveform(rate, audio[i:i + piece])
        while rec.is_ready(s):
            rec.decode([s])
        events += s.pop_events()
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    return events + s.pop_events()


def finals(events: list[Result]) -> list[Result]:
    return [e for e in events if e.is_final]


def key(results: list[Result]) -> list[tuple]:
    """What must be identical between two decodes of the same audio."""
    return [(r.segment, r.token_ids, r.timestamps, r.start_time) for r in results]
