import numpy as np
import pytest

from streamdec import AudioInputError, EndpointConfig, EndpointRule, StreamStateError
from model_factory import test_audio
from conftest import make_recognizer
from decode_utils import decode_in_pieces, decode_together, finals, key

AUDIO = test_audio(7.0, seed=11)


@pytest.mark.parametrize("piece", [160, 777, 16000, len(AUDIO)])
def test_chunking_invariance(layout_recognizer, piece):
    rec = layout_recognizer
    reference = finals(decode_in_pieces(rec, AUDIO, len(AUDIO)))
    assert reference and any(r.token_ids for r in reference), "test model emitted nothing"
    got = finals(decode_in_pieces(rec, AUDIO, piece))
    assert key(got) == key(reference)
    for a, b in zip(got, reference):
        assert a.score == pytest.approx(b.score, abs=1e-4)


def test_chunking_invariance_one_sample_at_a_time(layout_recognizer):
    audio = AUDIO[:16000 * 2]
    rec = layout_recognizer
    assert key(finals(decode_in_pieces(rec, audio, 1))) == \
        key(finals(decode_in_pieces(rec, audio, len(audio))))


def test_batch_invariance(layout_recognizer):
    rec = layout_recognizer
    audios = [test_audio(2.0 + 0.7 * n, seed=20 + n) for n in range(7)]
    alone = [finals(decode_in_pieces(rec, a, 1600)) for a in audios]
    events = decode_together(rec, [rec.create_stream() for _ in audios], audios, 1600)
    for a, ev in zip(alone, events):
        assert key(finals(ev)) == key(a)


def test_tail_is_decoded(layout_recognizer):
    """Every sample before input_finished is decoded: the last chunk covers the end."""
    rec = layout_recognizer
    audio = test_audio(3.33, seed=31)
    events = decode_in_pieces(rec, audio, 4000)
    last = events[-1]
    assert last.is_final and last.is_eof
    assert last.end_time >= len(audio) / 16000
    assert sum(e.is_eof for e in events) == 1


def test_exactly_one_final_per_segment_and_increasing_ids(model_dirs):
    # rule3 (utterance length) closes a segment every 2 s of this model's busy output
    rec = make_recognizer(model_dirs["zipformer2"], endpoint=EndpointConfig(
        rule3=EndpointRule(False, 0.0, 2.0)))
    audio = test_audio(7.0, seed=41)
    events = decode_in_pieces(rec, audio, 1600)
    fin = finals(events)
    assert [r.segment for r in fin] == list(range(len(fin)))
    assert len(fin) >= 3
    assert all(2.0 <= r.end_time - r.start_time < 2.0 + 0.32 for r in fin[:-1])
    for r in fin[:-1]:
        assert r.text, "a segment closed by an endpoint has text"
    for r in fin:
        assert all(0 <= t <= r.end_time - r.start_time for t in r.timestamps)
        assert r.absolute_timestamps == tuple(r.start_time + t for t in r.timestamps)
    assert fin[1].start_time > fin[0].start_time


def test_endpoint_disabled_gives_one_segment(model_dirs):
    rec = make_recognizer(model_dirs["zipformer2"], endpoint=EndpointConfig(enabled=False))
    audio = np.concatenate([test_audio(2.0, seed=41), np.zeros(16000 * 3, np.float32)])
    fin = finals(decode_in_pieces(rec, audio, 1600))
    assert len(fin) == 1 and fin[0].is_eof


def test_partials_only_when_the_text_changes(model_dirs):
    rec = make_recognizer(model_dirs["conformer"])
    events = decode_in_pieces(rec, AUDIO, 1600)
    partials = [e for e in events if not e.is_final]
    assert partials
    for a, b in zip(partials, partials[1:]):
        assert a.segment != b.segment or a.token_ids != b.token_ids


def test_empty_stream_gives_one_empty_final(layout_recognizer):
    rec = layout_recognizer
    s = rec.create_stream()
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    events = s.pop_events()
    assert len(events) == 1 and events[0].is_final and events[0].is_eof


def test_audio_after_end_is_an_error_and_decode_skips_done_streams(model_dirs):
    rec = make_recognizer(model_dirs["lstm"])
    s = rec.create_stream()
    s.accept_waveform(16000, AUDIO[:8000])
    s.input_finished()
    with pytest.raises(StreamStateError):
        s.accept_waveform(16000, AUDIO[:100])
    while rec.is_ready(s):
        rec.decode([s])
    assert s.done and not rec.is_ready(s)
    rec.decode([s])
    assert len(s.pop_events()) >= 1
    assert s.pop_events() == []


def test_bad_chunk_does_not_disturb_the_stream(model_dirs):
    rec = make_recognizer(model_dirs["lstm"])
    ref = finals(decode_in_pieces(rec, AUDIO, 1600))
    s = rec.create_stream()
    for i in range(0, len(AUDIO), 1600):
        if i == 16000:
            with pytest.raises(AudioInputError, match="NaN or infinity"):
                s.accept_waveform(16000, np.full(100, np.nan, np.float32))
        s.accept_waveform(16000, AUDIO[i:i + 1600])
        while rec.is_ready(s):
            rec.decode([s])
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    assert key(finals(s.pop_events())) == key(ref)


def test_8khz_input_is_resampled(model_dirs):
    rec = make_recognizer(model_dirs["conformer"])
    audio8 = test_audio(3.0, seed=51, rate=8000)
    a = finals(decode_in_pieces(rec, audio8, 800, rate=8000))
    b = finals(decode_in_pieces(rec, audio8, len(audio8), rate=8000))
    assert key(a) == key(b)
    assert a[-1].end_time >= 3.0


def test_a_stream_listed_twice_is_decoded_once(model_dirs):
    rec = make_recognizer(model_dirs["lstm"])
    ref = finals(decode_in_pieces(rec, AUDIO, len(AUDIO)))
    s = rec.create_stream()
    s.accept_waveform(16000, AUDIO)
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s, s])
    assert key(finals(s.pop_events())) == key(ref)
