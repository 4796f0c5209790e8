"""The synchronous drive loops (``streamdec.core.drive``): one stream step by step, and the
continuous-batching loop."""

from __future__ import annotations

import pytest

from conftest import make_recognizer
from decode_utils import finals, key
from model_factory import test_audio
from streamdec.core.drive import accept, decode_audio, decode_continuously, finish

AUDIOS = [test_audio(0.8 + 0.5 * n, seed=700 + n) for n in range(5)]


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["zipformer2"])


def test_accept_then_finish_is_decode_audio(rec):
    audio = AUDIOS[2]
    stream = rec.create_stream()
    events = accept(rec, stream, 16000, audio[:5000]) + accept(rec, stream, 16000, audio[5000:])
    events += finish(rec, stream)
    assert stream.done and events[-1].is_eof
    whole = decode_audio(rec, rec.create_stream(), 16000, [audio])
    assert key(finals(events)) == key(finals(whole))


class _Job:
    def __init__(self, rec, audio):
        self.stream = rec.create_stream()
        self.stream.accept_waveform(16000, audio)
        self.stream.input_finished()
        self.events = []

    @property
    def finished(self):
        return self.stream.done

    def feed(self):
        pass

    def collect(self):
        self.events += self.stream.pop_events()


def test_continuous_batching_keeps_k_streams_and_gives_each_its_own_result(rec):
    batches = []

    def decode(streams):
        batches.append(len([s for s in streams if rec.is_ready(s)]))
        rec.decode(streams)

    jobs = [_Job(rec, a) for a in AUDIOS]
    done = list(decode_continuously(iter(jobs), 2, decode))
    assert sorted(map(id, done)) == sorted(map(id, jobs))  # each job once
    assert max(batches) == 2 and min(batches) >= 1
    # shorter inputs finish first: the finishing order follows the audio lengths here
    assert [jobs.index(j) for j in done] == [0, 1, 2, 3, 4]
    for job, audio in zip(jobs, AUDIOS):
        alone = decode_audio(rec, rec.create_stream(), 16000, [audio])
        assert key(finals(job.events)) == key(finals(alone))


def test_continuous_batching_refuses_k_below_1(rec):
    with pytest.raises(ValueError, match="k must be >= 1"):
        list(decode_continuously([], 0, rec.decode))
