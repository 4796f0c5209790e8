"""Per-stream endpoint rules and force-final in the core, on the built-in model: espeak
sentences with 1.5 s and 0.8 s of silence between them.

- a stream's own endpoint rules decide where its finals fall (exact segment counts), and
  a stream without them follows the recognizer's;
- ``Recognizer.request_final`` (force-final) closes the open segment with every sample
  accepted so far (the same final as that audio ended), ending where the audio did; the
  next audio opens a new segment there, with the times of an unbroken stream (the silence
  that padded the last chunk is taken out); the same however the audio is cut, at 16 kHz
  and at 8 kHz (resampled);
- ``Recognizer.end_segment`` closes it where decoding stands; an empty segment closed on
  request gives an empty final and keeps its id; both are refused while a decode is in
  flight or after the end, and a request while a whole chunk waits (StreamStateError);
- a stream with a voice activity detector refuses a requested final (StreamStateError).
"""

from __future__ import annotations

import numpy as np
import pytest
import soxr

from streamdec import Recognizer
from streamdec.core.endpoint import EndpointConfig, EndpointRule
from streamdec.errors import StreamStateError
from test_builtin_transcribe import speak

GAP = 24000  # 1.5 s of silence between the sentences
SHORT_GAP = 12800  # 0.8 s


@pytest.fixture(scope="module")
def rec():
    return Recognizer()


@pytest.fixture(scope="module")
def sentences(tmp_path_factory):
    d = tmp_path_factory.mktemp("force")
    return (speak("please call me back tomorrow morning", d / "a.wav"),
            speak("the store closes at five", d / "b.wav", voice="en-us+f2"),
            speak("turn left at the next corner", d / "c.wav"))


def decode(rec, stream, audio, piece, rate=16000):
    for i in range(0, len(audio), piece):
        stream.accept_waveform(rate, audio[i:i + piece])
        while rec.is_ready(stream):
            rec.decode([stream])


def run_stream(rec, audio, piece=1600, **kw):
    s = rec.create_stream(**kw)
    decode(rec, s, audio, piece)
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    return [e for e in s.pop_events() if e.is_final]


LONG = EndpointConfig(rule1=EndpointRule(False, 5.0, 0.0), rule2=EndpointRule(True, 5.0, 0.0))
SHORT = EndpointConfig(rule2=EndpointRule(True, 0.4, 0.0))
ENDPOINTS = [  # (id, rules, finals with text)
    ("server", None, 2),  # the recognizer's: 1.2 s of silence after speech ends one
    ("long", LONG, 1),  # 5 s needed: no pause ends an utterance
    ("short", SHORT, 3),  # 0.4 s: the 0.8 s pause ends one too
]


@pytest.mark.parametrize("name, endpoint, count", ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
def test_stream_endpoint_rules_decide_where_finals_fall(rec, sentences, name, endpoint, count):
    a, b, c = sentences
    audio = np.concatenate([a, np.zeros(GAP, np.float32), b, np.zeros(SHORT_GAP, np.float32), c])
    finals = run_stream(rec, audio, endpoint=endpoint)
    spoken = [f for f in finals if f.text]
    assert len(spoken) == count
    assert [f.segment for f in spoken] == list(range(count))
    # the words are the same wherever the utterances end
    assert " ".join(f.text for f in spoken) == " ".join(
        f.text for f in run_stream(rec, audio) if f.text)


def force_final_events(rec, a, b, piece, rate=16000):
    """``a``, a force-final, then 1.5 s of silence and ``b`` (at ``rate``): the finals at
    the force and the finals after."""
    s = rec.create_stream(endpoint=LONG)  # no endpoint of its own in this audio
    decode(rec, s, a, piece, rate)
    s.pop_events()
    if not rec.request_final(s):
        assert rec.is_ready(s)  # the padded chunk(s)
        while rec.is_ready(s):
            rec.decode([s])
    at_force = s.pop_events()
    decode(rec, s, np.concatenate([np.zeros(GAP * rate // 16000, np.float32), b]), piece, rate)
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    return at_force, [e for e in s.pop_events() if e.is_final]


PIECES = [37, 1600, 12345, 10**7]  # samples per accept_waveform; the last: all at once


def key(results):
    return [(r.segment, r.token_ids, r.timestamps, r.start_time, r.end_time, r.is_final,
             r.is_eof, [(w.text, w.start, w.end) for w in r.words]) for r in results]


def test_force_final_closes_the_segment_with_all_its_audio(rec, sentences):
    a, b, _ = sentences
    at_force, after = force_final_events(rec, a, b, 1600)
    assert len(at_force) == 1
    final = at_force[0]
    assert final.is_final and not final.is_eof and final.segment == 0
    # every sample of ``a`` is in it: the same final as ``a`` alone, ended
    alone = run_stream(rec, a, endpoint=LONG)
    assert final.token_ids == alone[0].token_ids and final.text == alone[0].text
    assert final.end_time == round(len(a) / 16000, 6)  # where the audio ended
    # the next utterance: a new segment from there, its times those of an unbroken stream
    # (the silence that padded the closed one is taken out)
    spoken = [f for f in after if f.text]
    assert [(f.segment, f.is_eof) for f in spoken] == [(1, True)]
    assert spoken[0].start_time == final.end_time
    unbroken = run_stream(rec, np.concatenate([a, np.zeros(GAP, np.float32), b]),
                          endpoint=LONG)[0]
    n = len(spoken[0].words)
    # the times are the unbroken stream's; the spelling may differ: the decoder's context
    # restarts with the segment, as after any endpoint (sherpa-onnx's Reset), and the
    # built-in model spells the first word after it TORKLOSES where the unbroken stream,
    # with "THE" as context, has STORKLOSES
    assert [(w.start, w.end) for w in spoken[0].words] == [
        (w.start, w.end) for w in unbroken.words[-n:]]
    assert spoken[0].words[0].text == unbroken.words[-n].text == "THE"
    # (token by token the two differ where the spelling does: the words' times are the test)


@pytest.mark.parametrize("rate, pieces", [(16000, PIECES), (8000, [37, 800, 10**7])])
def test_force_final_does_not_depend_on_how_the_audio_is_cut(rec, sentences, rate, pieces):
    a, b, _ = sentences
    if rate != 16000:  # the resampler's held samples are flushed into the closed segment
        a, b = (soxr.resample(x, 16000, rate) for x in (a, b))
    runs = [force_final_events(rec, a, b, piece, rate) for piece in pieces]
    for got in runs[1:]:
        assert key(got[0]) == key(runs[0][0]) and key(got[1]) == key(runs[0][1])
    assert runs[0][0][0].end_time == pytest.approx(len(a) / rate, abs=1 / rate)


def test_force_final_of_nothing_is_an_empty_final_at_once(rec):
    """No audio yet: nothing to decode, the request queues the (empty) final itself."""
    s = rec.create_stream()
    assert rec.request_final(s) is True
    assert [(e.text, e.is_final, e.segment) for e in s.pop_events()] == [("", True, 0)]


def test_force_final_of_an_empty_segment_is_empty_and_keeps_the_id(rec):
    s = rec.create_stream()
    decode(rec, s, np.zeros(16000, np.float32), 1600)
    s.pop_events()
    rec.end_segment(s)
    events = s.pop_events()
    assert [(e.text, e.is_final, e.is_eof, e.segment) for e in events] == [("", True, False, 0)]
    assert s.segment == 0


def test_force_final_refused_in_flight_and_after_the_end(rec, sentences):
    s = rec.create_stream()
    s.accept_waveform(16000, sentences[0][:16000])
    with pytest.raises(StreamStateError, match="no whole chunk left"):
        rec.request_final(s)  # a whole chunk is ready: decode it first
    batch = rec.gather([s])
    assert batch is not None and s.in_flight
    with pytest.raises(StreamStateError, match="between decodes"):
        rec.end_segment(s)
    with pytest.raises(StreamStateError, match="between decodes"):
        rec.request_final(s)
    with pytest.raises(StreamStateError, match="between decodes"):
        rec.request_final(s)
    rec.commit(batch, rec.compute(batch))
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    assert s.done
    with pytest.raises(StreamStateError, match="between decodes"):
        rec.end_segment(s)
    with pytest.raises(StreamStateError, match="between decodes"):
        rec.request_final(s)


def test_force_final_refused_on_a_stream_with_a_vad(rec, sentences):
    """A stream gated by the voice activity detector ends utterances at the VAD's silence;
    a requested final is refused (StreamStateError), and the stream goes on decoding."""
    s = rec.create_stream(vad=True)
    decode(rec, s, sentences[0], 1600)
    with pytest.raises(StreamStateError, match="voice activity detection"):
        rec.request_final(s)
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    assert s.error is None
    assert [e.text for e in s.pop_events() if e.is_final][-1]
