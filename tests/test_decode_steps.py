"""The decode split into gather / compute / commit: a stream is fed between gather and
commit without losing a frame or an event, compute touches no stream, and a stream whose
decode fails ends alone (``Stream.error``) while the others of its batch go on."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_recognizer
from decode_utils import decode_in_pieces, decode_together, finals, key
from model_factory import test_audio
from streamdec import DecodeError, Recognizer
from streamdec.core.recognizer import DecodeBatch

AUDIO = test_audio(5.0, seed=61)


class FailsOnLoudAudio:
    """The real model, except that encoding a batch with a chunk of loud noise raises (a
    runtime failure a test cannot otherwise provoke). Speech-like test audio has mean fbank
    values below 0, full-scale noise above 2.9."""

    def __init__(self, model) -> None:
        self._model = model
        self.meta, self.state_layout = model.meta, model.state_layout
        self.encode_calls: list[int] = []  # batch size of each call

    def encode(self, features, states):
        self.encode_calls.append(len(features))
        if (features.mean(axis=(1, 2)) > 1.5).any():
            raise RuntimeError("simulated runtime failure")
        return self._model.encode(features, states)

    def decode(self, contexts):
        return self._model.decode(contexts)

    def join(self, encoder_out, decoder_out):
        return self._model.join(encoder_out, decoder_out)


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["zipformer2"])


@pytest.fixture(scope="module")
def failing_rec(rec):
    return Recognizer(rec.config, model=FailsOnLoudAudio(rec.model), symbols=rec.symbols)


def noise_after(seconds: float, total: float) -> np.ndarray:
    audio = test_audio(total, seed=62)
    start = int(seconds * 16000)
    audio[start:] = np.random.RandomState(0).uniform(-1, 1, len(audio) - start)
    return audio


def test_feeding_and_popping_between_gather_and_commit_loses_nothing(rec):
    want = finals(decode_in_pieces(rec, AUDIO, len(AUDIO)))
    s = rec.create_stream()
    events, pos, piece = [], 0, 2400
    batch, updates = None, None
    while not s.done:
        if pos < len(AUDIO):  # audio arrives while the batch is "being decoded"
            s.accept_waveform(16000, AUDIO[pos:pos + piece])
            pos += piece
        elif not s.input_done:
            s.input_finished()
        events += s.pop_events()
        if batch is not None:
            rec.commit(batch, updates)
            batch = None
        batch = rec.gather([s])
        if batch is not None:
            assert s.in_flight and not rec.is_ready(s)  # never gathered twice
            updates = rec.compute(batch)
    events += s.pop_events()
    assert key(finals(events)) == key(want)
    assert sum(e.is_eof for e in events) == 1


def test_compute_touches_no_stream(rec):
    s = rec.create_stream()
    s.accept_waveform(16000, AUDIO[:16000])
    batch = rec.gather([s])
    assert isinstance(batch, DecodeBatch) and len(batch) == 1
    state, frames = s.state, s.features.num_frames_ready
    updates = rec.compute(batch)
    assert s.state is state and s.features.num_frames_ready == frames and s.pop_events() == []
    assert updates[0].state.processed_feature_frames == rec.meta.chunk_shift
    rec.commit(batch, updates)
    assert s.state is updates[0].state and not s.in_flight


def test_gather_limit_takes_the_first_ready_streams(rec):
    streams = [rec.create_stream() for _ in range(5)]
    for s in streams:
        s.accept_waveform(16000, AUDIO[:8000])
    batch = rec.gather(streams, limit=3)
    assert batch.streams == tuple(streams[:3])
    assert [rec.is_ready(s) for s in streams] == [False, False, False, True, True]


def test_a_failing_stream_ends_alone_and_its_batch_mates_go_on(rec, failing_rec):
    audios = [test_audio(2.0 + 0.5 * n, seed=70 + n) for n in range(4)]
    audios.insert(2, noise_after(1.0, 4.0))
    alone = [finals(decode_in_pieces(rec, a, 1600)) for a in audios]
    streams = [failing_rec.create_stream() for _ in audios]
    events = decode_together(failing_rec, streams, audios, 1600)
    for n, (a, ev, s) in enumerate(zip(alone, events, streams)):
        if n == 2:
            assert isinstance(s.error, DecodeError)
            assert "RuntimeError: simulated runtime failure" in str(s.error)
            assert s.done and not failing_rec.is_ready(s)
            assert not any(e.is_eof for e in ev)
        else:
            assert s.error is None
            assert key(finals(ev)) == key(a)
    assert max(failing_rec.model.encode_calls) == 5  # they really were decoded together


def test_a_lone_failing_stream_has_an_error_and_stops(failing_rec):
    s = failing_rec.create_stream()
    s.accept_waveform(16000, noise_after(0.0, 1.0))
    failing_rec.decode([s])
    assert isinstance(s.error, DecodeError) and s.done
    failing_rec.decode([s])  # nothing more happens to it
    assert s.pop_events() == []
