"""Property-based tests of the wire protocols, as state machines without I/O (hypothesis;
the profile is tests/conftest.py's): arbitrary sequences of a peer's messages, valid ones
with bad ones interleaved, repeated, reordered, and AudioSocket's bytes split at any
byte. Each protocol may answer only with its commands / events or the project's
``ClientError``; and keeps the invariants that matter:

- sherpa-onnx: audio is fed exactly as sent until ``Done`` (or the drain), never after;
- Vosk: one reply per audio message and channel; config only before the audio;
- Twilio, audio fork, AudioSocket: a call starts once, first, and ends once, last
  (``bench/fuzz/harness.check_call_events``); each leg's samples are what was sent;
  events the protocol ignores (an unknown Twilio event) change nothing; a refused
  message leaves the events before it as they were;
- AudioSocket: any split of the byte stream gives the same events, and what is left
  buffered is never more than one frame not yet whole.

The fuzz targets (bench/fuzz/) check the same invariants on bytes a fuzzer makes; the
inputs either found broke something are replayed in test_parser_regressions.py.
"""

from __future__ import annotations

import base64
import json
import sys
import uuid
from pathlib import Path

import numpy as np
from hypothesis import given, strategies as st

from streamdec import SearchConfig
from streamdec.errors import ClientError
from streamdec.server import jsontext
from streamdec.server.audiofork import AudioForkProtocol
from streamdec.server.audiosocket import (HEADER, KIND_DTMF, KIND_ERROR, KIND_HANGUP,
                                          KIND_UUID, AudioSocketProtocol, frame)
from streamdec.server.call_events import CallAudio, CallFailed
from streamdec.server.options import MAX_RATE, MIN_RATE, StreamOptions
from streamdec.server.session import DRAIN, Close, Feed, Finish, ForceFinal, Reopen, Reply, Retune
from streamdec.server.sherpa import SherpaSession
from streamdec.server.twilio import TwilioProtocol
from streamdec.server.vosk import MAX_ALTERNATIVES, VoskSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "fuzz"))
from harness import check_call_events, drive  # noqa: E402

# -- values a peer may send --------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)
texts = st.text(max_size=40) | st.sampled_from(
    ["Done", "Finalize", "{", "[]", "null", "{\"eof\" : 1}", "{\"reset\" : 1}", "[" * 2000,
     "\x00", "\ud7ff", "Done!", " Done"])
noise = st.binary(max_size=64) | texts | json_values.map(
    lambda v: json.dumps(v, allow_nan=True)) | st.just(DRAIN)


def _paths(value, prefix=()):
    """Every place in a JSON value: () the value itself, then its members' places."""
    yield prefix
    members = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, member in members:
        yield from _paths(member, prefix + (key,))


def _replaced(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


@st.composite
def mutated(draw, messages: list[str]):
    """One of ``messages`` (JSON text) with one value anywhere in it replaced by any JSON
    value: a valid message with one field gone wrong."""
    value = json.loads(draw(st.sampled_from(messages), "message"))
    path = draw(st.sampled_from(list(_paths(value))), "place")
    return json.dumps(_replaced(value, path, draw(json_values, "new value")), allow_nan=True)


def _interleave(data, valid: list, bad) -> list:
    """``valid`` with up to 3 draws of ``bad`` placed anywhere, some repeated, and
    (sometimes) the valid messages reordered."""
    items = list(valid)
    if data.draw(st.booleans(), "reorder"):
        items = data.draw(st.permutations(items), "order")
    for _ in range(data.draw(st.integers(0, 3), "bad count")):
        at = data.draw(st.integers(0, len(items)), "at")
        items.insert(at, data.draw(bad, "bad"))
    if items and data.draw(st.booleans(), "repeat"):
        at = data.draw(st.integers(0, len(items) - 1), "repeated")
        items.insert(at, items[at])
    return items


# -- sherpa-onnx -------------------------------------------------------------------------------
f32_audio = st.lists(st.floats(-1, 1, width=32), max_size=40).map(
    lambda xs: np.asarray(xs, "<f4").tobytes())


@given(st.data(), st.integers(1, 2))
def test_sherpa_feeds_exactly_the_audio_sent_until_done(data, channels):
    valid = data.draw(st.lists(f32_audio | st.sampled_from(["Finalize"]), max_size=8))
    valid.append("Done")
    items = _interleave(data, valid, noise)
    session = SherpaSession(channels, 0.04)
    outputs, error = drive(session.receive, items)
    fed, finished = [], False
    for item, commands in zip(items, outputs):
        for command in commands:
            assert isinstance(command, (Feed, Finish, ForceFinal))
            if isinstance(command, Feed):
                assert not finished and command.data is item
                fed.append(item)
            finished = finished or isinstance(command, Finish)
    taken = items[:len(outputs)]
    first_end = next((n for n, m in enumerate(taken) if m is DRAIN or m == "Done"), len(taken))
    assert fed == [m for m in taken[:first_end] if isinstance(m, bytes)]
    if error is None:
        assert finished  # the valid messages end with Done
    else:
        assert error.kind == "bad_message"


# -- Vosk --------------------------------------------------------------------------------------
s16_audio = st.binary(max_size=64)
vosk_configs = st.fixed_dictionaries({}, optional={
    "sample_rate": st.sampled_from([8000, 16000, 44100, 96000]) | json_values,
    "words": st.sampled_from([0, 1, True]) | json_values,
    "max_alternatives": st.integers(0, MAX_ALTERNATIVES) | json_values,
    "phrase_list": st.lists(st.sampled_from(["yes", "no", "[unk]"]), max_size=3) | json_values,
    "rule1_min_trailing_silence": st.floats(0, 30) | json_values,
    "rule3_min_utterance_length": st.floats(0, 600) | json_values,
    "model": json_values,
}).map(lambda c: json.dumps({"config": c}, allow_nan=True))


@given(st.data(), st.integers(1, 2))
def test_vosk_one_reply_per_audio_message_and_channel(data, channels):
    valid = [data.draw(vosk_configs)] if data.draw(st.booleans()) else []
    valid += data.draw(st.lists(s16_audio, max_size=6))
    valid.append(data.draw(st.sampled_from(['{"eof" : 1}', '{"reset" : 1}'])))
    good_config = json.dumps({"config": {"sample_rate": 16000, "words": 1, "max_alternatives": 2,
                                         "phrase_list": ["yes"], "rule1_min_trailing_silence": 1}})
    items = _interleave(data, valid, noise | vosk_configs | mutated([good_config]))
    session = VoskSession(StreamOptions(8000, "s16le", channels=channels), SearchConfig())
    audio_seen = False
    for item in items:
        try:
            commands = session.receive(item)
        except ClientError as e:
            assert e.kind in ("bad_json", "bad_message", "bad_config")
            try:
                command = jsontext.loads(item) if isinstance(item, str) else None
            except ValueError:
                command = None
            if audio_seen and isinstance(command, dict) and "config" in command:
                assert str(e) == "config must come before the audio"
            return
        if isinstance(item, bytes):
            audio_seen = True
            assert commands == [Feed(item), Reply()]
        for command in commands:
            if isinstance(command, Reply):
                for channel in range(channels):
                    [send] = session.reply(channel, [], 1.0)
                    assert set(json.loads(send.text)) <= {"partial", "stable", "channel", "text"}
            if isinstance(command, (Reopen, Retune)):
                assert MIN_RATE <= command.options.sample_rate <= MAX_RATE
                assert 1 <= (command.options.search or SearchConfig()).nbest <= MAX_ALTERNATIVES
        if any(isinstance(c, Close) for c in commands):
            assert isinstance(commands[-1], Close)
            return


# -- Twilio ------------------------------------------------------------------------------------
def _twilio(event: str, **fields) -> str:
    return json.dumps({"event": event, "sequenceNumber": "1", "streamSid": "MZ1", **fields})


@st.composite
def twilio_calls(draw):
    """A valid call's messages (start, media of each track at its timestamps, dtmf, marks,
    stop) and the samples each track gets."""
    tracks = draw(st.sampled_from([["inbound"], ["inbound", "outbound"], ["outbound"]]))
    messages = [_twilio("connected", protocol="Call", version="1.0.0"),
                _twilio("start", start={"callSid": "CA1", "tracks": tracks,
                                        "customParameters": {"agent": "7"},
                                        "mediaFormat": {"encoding": "audio/x-mulaw",
                                                        "sampleRate": 8000, "channels": 1}})]
    placed = [0] * len(tracks)
    for _ in range(draw(st.integers(0, 6))):
        leg = draw(st.integers(0, len(tracks) - 1))
        payload = draw(st.binary(max_size=160))
        media = {"track": tracks[leg], "payload": base64.b64encode(payload).decode()}
        if draw(st.booleans()):
            media["timestamp"] = str(placed[leg] // 8)  # ms, on time
        messages.append(_twilio("media", media=media))
        placed[leg] += len(payload)
        if draw(st.integers(0, 4)) == 0:
            messages.append(_twilio(draw(st.sampled_from(["dtmf", "mark"])),
                                    dtmf={"track": "inbound_track", "digit": "5"},
                                    mark={"name": "m"}))
    messages.append(_twilio("stop", stop={"callSid": "CA1"}))
    return messages, placed


def _audio(events) -> list[tuple[int, bytes]]:
    return [(e.leg, e.samples.tobytes()) for e in events if isinstance(e, CallAudio)]


def _twilio_events(items):
    protocol = TwilioProtocol()
    outputs, error = drive(protocol.receive, items)
    return [e for out in outputs for e in out], error, protocol


@given(twilio_calls())
def test_twilio_valid_call_starts_once_ends_once_and_places_every_sample(call):
    messages, placed = call
    events, error, protocol = _twilio_events(messages)
    assert error is None
    facts = check_call_events(events)
    assert facts["started"] is not None and facts["ended"]
    assert list(facts["samples"].values()) == placed


@given(twilio_calls(), st.data())
def test_twilio_events_it_ignores_change_nothing(call, data):
    messages, _ = call
    unknown = st.builds(lambda name, v: _twilio(name, data=v),
                        st.text(min_size=1, max_size=8).filter(
                            lambda n: n not in ("connected", "start", "media", "dtmf", "mark",
                                                "stop")), json_values)
    items = list(messages)
    for _ in range(data.draw(st.integers(1, 3))):
        items.insert(data.draw(st.integers(0, len(items) - 1)), data.draw(unknown))
    clean, _, _ = _twilio_events(messages)
    noisy, error, _ = _twilio_events(items)
    assert error is None and _audio(noisy) == _audio(clean)
    assert [type(e) for e in noisy] == [type(e) for e in clean]


call_noise = noise.filter(lambda m: m is not DRAIN)  # a call has no drain message


@given(twilio_calls(), st.data())
def test_twilio_refused_message_leaves_the_events_before_it(call, data):
    messages, _ = call
    event = st.sampled_from(["start", "media", "dtmf", "stop", "connected"])
    bad = call_noise | mutated(messages) | st.builds(
        lambda e, v: _twilio(e, start=v, media=v, dtmf=v), event, json_values)
    at = data.draw(st.integers(0, len(messages)))
    items = messages[:at] + [data.draw(bad)] + messages[at:]
    before, error, _ = _twilio_events(messages[:at])
    assert error is None
    events, error, protocol = _twilio_events(items)
    check_call_events(events)  # whatever came, the call's events are in order
    assert _same_events(events[:len(before)], before)
    if error is not None:
        assert error.kind in ("bad_message", "bad_json", "bad_audio", "unsupported")


# -- FreeSWITCH audio fork ---------------------------------------------------------------------
metadata = st.fixed_dictionaries({}, optional={
    "callSid": st.text(max_size=8) | json_values, "mixType": st.sampled_from(
        ["mono", "mixed", "stereo"]) | json_values,
    "sampleRate": st.sampled_from([8000, 16000, "8k", "16k"]) | json_values,
    "rule2_min_trailing_silence": st.floats(0, 30) | json_values,
    "text_format": st.sampled_from(["raw", "punct"]) | json_values}).map(
    lambda m: json.dumps(m, allow_nan=True)) | st.text(max_size=20)


@given(st.data())
def test_audiofork_call_legs_get_every_sample_sent(data):
    good = json.dumps({"callSid": "c1", "mixType": "stereo", "sampleRate": 16000,
                       "rule2_min_trailing_silence": 0.5, "text_format": "punct"})
    valid = [data.draw(metadata | mutated([good]))] + data.draw(st.lists(
        st.binary(max_size=64) | st.sampled_from(["Finalize", "stop", '{"a": 1}']), max_size=8))
    items = _interleave(data, valid, call_noise)
    query = data.draw(st.sampled_from([{}, {"mix": "stereo"}, {"rate": "16k"},
                                       {"mix": "sideways"}, {"colour": "red"}]))
    try:
        protocol = AudioForkProtocol(query, "call-1")
    except ClientError as e:
        assert e.kind == "bad_config"
        return
    outputs, error = drive(protocol.receive, items)
    events = [e for out in outputs for e in out]
    facts = check_call_events(events)
    sent = sum(len(m) for m in items[:len(outputs)] if isinstance(m, bytes))
    if facts["started"] is not None:
        assert sum(facts["samples"].values()) * 2 == sent
        assert len(set(facts["samples"].values())) == 1  # every leg as long
    if error is not None:
        assert error.kind in ("bad_message", "bad_audio", "bad_config")


# -- Asterisk AudioSocket ----------------------------------------------------------------------
good_frames = st.one_of(
    st.binary(max_size=80).map(lambda b: frame(0x10, b[:len(b) // 2 * 2])),
    st.sampled_from("0123456789*#ABCD").map(lambda d: frame(KIND_DTMF, d.encode())))
bad_frames = st.one_of(
    st.tuples(st.integers(0, 255), st.binary(max_size=20)).map(lambda t: frame(*t)),
    st.binary(min_size=1, max_size=8),  # a header that lies, or a cut frame
    st.just(frame(KIND_UUID, uuid.UUID(int=1).bytes)), st.just(frame(0x12, b"\x00\x00")),
    st.just(frame(0x10, b"\x00")), st.just(frame(KIND_ERROR, b"\x02")))


def _socket_events(stream: bytes, cuts: list[int]):
    protocol = AudioSocketProtocol()
    events, edges = [], [0] + sorted(set(c % (len(stream) + 1) for c in cuts)) + [len(stream)]
    for a, b in zip(edges, edges[1:]):
        events += protocol.receive_data(stream[a:b])
        buffered = protocol._buffer
        assert len(buffered) < HEADER or len(buffered) < HEADER + int.from_bytes(
            buffered[1:3], "big"), "a whole frame left unread"
    try:
        events += protocol.receive_eof()
        closed = None
    except ClientError as e:
        closed = e
    return events, closed


def _same_events(a, b) -> bool:
    key = lambda e: (type(e), e.leg, e.samples.tobytes()) if isinstance(e, CallAudio) else (
        (type(e), str(e.error)) if isinstance(e, CallFailed) else e)  # noqa: E731
    return [key(e) for e in a] == [key(e) for e in b]


@given(st.data(), st.lists(st.integers(0, 10**6), max_size=12))
def test_audiosocket_any_split_gives_the_same_call(data, cuts):
    body = data.draw(st.lists(good_frames, max_size=8))
    if data.draw(st.booleans()):
        body += [frame(KIND_HANGUP)]
    frames = [frame(KIND_UUID, uuid.UUID(int=7).bytes)] + _interleave(data, body, bad_frames)
    stream = b"".join(frames)
    whole, whole_closed = _socket_events(stream, [])
    split, split_closed = _socket_events(stream, cuts)
    assert _same_events(whole, split) and str(whole_closed) == str(split_closed)
    facts = check_call_events(split)
    if whole_closed is None and facts["started"] is not None:
        assert facts["ended"]  # a started call ends exactly once


@given(st.lists(good_frames, max_size=8), st.integers(0, 8), bad_frames)
def test_audiosocket_bad_frame_keeps_the_frames_before_it(body, at, bad):
    head = [frame(KIND_UUID, uuid.UUID(int=7).bytes)] + body[:at]
    clean, _ = _socket_events(b"".join(head + body[at:]), [])
    mixed, _ = _socket_events(b"".join(head + [bad] + body[at:]), [])
    # every frame of ``head`` gave one event (the start, audio, a digit), whatever follows
    assert _same_events(mixed[:len(head)], clean[:len(head)])
    check_call_events(mixed)
