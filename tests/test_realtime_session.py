"""OpenAI's Realtime transcription protocol without a server (``streamdec.server.realtime``):
the session driven directly, client events and results in, commands and OpenAI's events
out."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import pytest

from streamdec.core.endpoint import EndpointConfig
from streamdec.errors import ClientError, OptionError
from streamdec.server.options import StreamOptions
from streamdec.server.realtime import (RealtimeSession, parse_realtime_query,
                                       realtime_error)
from streamdec.server.session import DRAIN, Close, Feed, Finish, ForceFinal, Reopen, Reply, \
    Retune, Send
from test_server_protocols import result

PCM = b"\x00\x01" * 480  # 20 ms at 24 kHz


def session() -> RealtimeSession:
    return RealtimeSession(StreamOptions(24000, "s16le"), EndpointConfig())


def events(commands) -> list[dict]:
    return [json.loads(c.text) for c in commands if isinstance(c, Send)]


def append(data: bytes, event_id: str | None = None) -> str:
    event = {"type": "input_audio_buffer.append", "audio": base64.b64encode(data).decode()}
    return json.dumps({**event, **({"event_id": event_id} if event_id else {})})


def update(input_: dict, kind: str = "session.update") -> str:
    if kind == "session.update":
        return json.dumps({"type": kind, "session": {"type": "transcription",
                                                     "audio": {"input": input_}}})
    return json.dumps({"type": kind, "session": input_})


def test_opening_and_append():
    s = session()
    (created,) = events(s.opening())
    assert created["type"] == "session.created"
    assert created["session"]["audio"]["input"]["format"] == {"type": "audio/pcm",
                                                               "rate": 24000}
    assert s.receive(append(PCM)) == [Feed(PCM), Reply()]


@pytest.mark.parametrize("given, kind, encoding, rate, reported", [
    ({"format": {"type": "audio/pcmu"}}, "session.update", "mulaw", 8000,
     {"type": "audio/pcmu"}),
    ({"format": {"type": "audio/pcma"}}, "session.update", "alaw", 8000,
     {"type": "audio/pcma"}),
    ({"format": {"type": "audio/pcm", "rate": 24000}}, "session.update", "s16le", 24000,
     {"type": "audio/pcm", "rate": 24000}),
    ({"input_audio_format": "g711_ulaw"}, "transcription_session.update", "mulaw", 8000,
     {"type": "audio/pcmu"}),
    ({"input_audio_format": "g711_alaw"}, "transcription_session.update", "alaw", 8000,
     {"type": "audio/pcma"}),
])
def test_formats(given, kind, encoding, rate, reported):
    s = session()
    out = s.receive(update(given, kind))
    assert (s.options.encoding, s.options.sample_rate) == (encoding, rate)
    assert events(out)[-1]["type"] == kind.replace("update", "updated")
    assert events(out)[-1]["session"]["audio"]["input"]["format"] == reported
    assert (Retune(s.options) in out) == (encoding != "s16le")


@pytest.mark.parametrize("turn, enabled, silence", [
    (None, False, 1.2), ({"type": "server_vad"}, True, 1.2),
    ({"type": "server_vad", "silence_duration_ms": 500, "threshold": 0.6}, True, 0.5)])
def test_turn_detection_sets_the_endpoint_rules(turn, enabled, silence):
    s = session()
    out = s.receive(update({"turn_detection": turn}))
    assert (s.options.endpoint or EndpointConfig()).enabled == enabled
    assert (s.options.endpoint or EndpointConfig()).rule2.min_trailing_silence == silence
    assert any(isinstance(c, Reopen) for c in out) == (s.options.endpoint is not None)


@pytest.mark.parametrize("message, code, param", [
    (b"\x00\x01", "invalid_request", None),
    ("hello", "invalid_json", None),
    ("[1]", "invalid_request", None),
    ('{"type": "response.create"}', "invalid_request", "type"),
    (append(b"\x00"), "invalid_audio", "audio"),
    ('{"type": "input_audio_buffer.append", "audio": "%%"}', "invalid_audio", "audio"),
    ('{"type": "input_audio_buffer.append"}', "invalid_request", "audio"),
    (update({"format": {"type": "audio/g729"}}), "invalid_value", "format"),
    (update({"format": {"type": ["audio/pcm"]}}), "invalid_value", "format"),
    (update({"input_audio_format": {"a": 1}}, "transcription_session.update"),
     "invalid_value", "format"),
    (update({"format": {"type": "audio/pcm", "rate": 16000}}), "invalid_value",
     "session.audio.input.format.rate"),
    (update({"turn_detection": {"type": "semantic_vad"}}), "invalid_value", "turn_detection"),
    (update({"turn_detection": {"type": "server_vad", "silence_duration_ms": -1}}),
     "invalid_value", "turn_detection.silence_duration_ms"),
    (update({"transcription": {"language": "de"}}), "invalid_value", "language"),
    ('{"type": "session.update", "session": {"type": "realtime"}}', "invalid_request",
     "session.type"),
])
def test_bad_events_are_answered_in_band(message, code, param):
    s = session()
    (error,) = events(s.receive(message))
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert (error["error"]["code"], error["error"]["param"]) == (code, param)
    assert s.receive(append(PCM)) == [Feed(PCM), Reply()]  # the session goes on


def test_format_and_turn_detection_change_only_before_the_audio():
    s = session()
    s.receive(append(PCM))
    for given in ({"format": {"type": "audio/pcmu"}}, {"turn_detection": None}):
        (error,) = events(s.receive(update(given)))
        assert error["type"] == "error" and "before the audio" in error["error"]["message"]


def partial(text: str, stable: int, words=()):
    return replace(result(text=text, final=False, words=words), stable_chars=stable)


def test_utterance_events_with_server_vad():
    s = session()
    word = result().words[0]
    out = events(s.reply(0, [partial("HI YO", 0, (word,)), partial("HI YOU", 3, (word,))],
                         1.0))
    assert [e["type"] for e in out] == ["input_audio_buffer.speech_started",
                                        "conversation.item.input_audio_transcription.delta"]
    assert out[0]["audio_start_ms"] == 2040 and out[1]["delta"] == "HI "
    item = out[0]["item_id"]
    out = events(s.reply(0, [result()], 2.0))
    assert [e["type"] for e in out] == [
        "input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.completed"]
    assert out[0]["audio_end_ms"] == 2320 and {e["item_id"] for e in out} == {item}
    assert out[1]["previous_item_id"] is None
    assert (out[2]["transcript"], out[2]["usage"]) == ("HI YOU", {"type": "duration",
                                                                 "seconds": 0.6})
    nxt = events(s.reply(0, [result(text="OK")], 3.0))
    assert nxt[1]["previous_item_id"] == item and nxt[1]["item_id"] != item


def test_commit_gives_the_item_even_empty_and_clear_drops_it():
    s = session()
    assert s.receive('{"type": "input_audio_buffer.commit"}') == [
        ForceFinal("input_audio_buffer.commit"), Reply()]
    empty = result(text="", tokens=(), timestamps=(), words=())
    out = events(s.reply(0, [empty], 1.0))
    assert [e["type"] for e in out] == ["input_audio_buffer.committed",
                                        "conversation.item.input_audio_transcription.completed"]
    assert out[1]["transcript"] == ""
    s.receive('{"type": "input_audio_buffer.clear"}')
    assert [e["type"] for e in events(s.reply(0, [result()], 2.0))] == [
        "input_audio_buffer.cleared"]
    assert events(s.reply(0, [empty], 3.0)) == []  # an endpoint without text: nothing


def test_drain_and_fatal_errors():
    assert session().receive(DRAIN) == [Finish(), Reply(), Close(1000, "server shutting down")]
    text, code, reason = realtime_error(ClientError("too_big", "message too big"))
    assert json.loads(text)["error"]["code"] == "too_big" and (code, reason) == (1009,
                                                                                "too_big")


@pytest.mark.parametrize("query, model", [
    ({"intent": ["transcription"]}, "streamdec"),
    ({"intent": ["transcription"], "model": ["gpt-4o-transcribe"]}, "gpt-4o-transcribe")])
def test_query(query, model):
    assert parse_realtime_query(query) == model


@pytest.mark.parametrize("query, message", [
    ({}, "only transcription sessions"), ({"model": ["gpt-realtime"]}, "intent=None"),
    ({"intent": ["transcription"], "voice": ["x"]}, "unknown query parameter 'voice'")])
def test_refused_queries(query, message):
    with pytest.raises(OptionError, match=message):
        parse_realtime_query(query)
