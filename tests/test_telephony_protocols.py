"""The telephony protocols as state machines (no server): Twilio Media Streams, FreeSWITCH
audio fork and Asterisk AudioSocket messages in, call events out, each bad input a
``ClientError`` of a named kind; the call hub's subscribers and backlog; the replay
clients' mu-law encoder against the project's decoder."""

from __future__ import annotations

import base64
import json
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from streamdec.audio.pcm import MULAW_TABLE, decode_pcm
from streamdec.server.audiofork import AudioForkProtocol, reply
from streamdec.server.audiosocket import AUDIO_RATES, AudioSocketProtocol, frame
from streamdec.core.endpoint import EndpointConfig
from streamdec.server.call_events import (CallAudio, CallDtmf, CallEnded, CallFailed,
                                          CallFinalize, CallNote, CallStarted)
from streamdec.server.call_settings import SettingsLayer, call_settings
from streamdec.server.endpointing import EndpointLimits
from streamdec.server.config import ServerConfig
from streamdec.server.connection import ClientError
from streamdec.server.metrics import Metrics
from streamdec.server.subscribers import CallHub
from streamdec.server.twilio import TwilioProtocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
from call_common import mulaw_encode  # noqa: E402

MULAW = bytes(range(256))


def start(tracks=("inbound",), fmt=None, **extra):
    return json.dumps({"event": "start", "sequenceNumber": "1", "streamSid": "MZ1",
                       "start": {"streamSid": "MZ1", "accountSid": "AC1", "callSid": "CA1",
                                 "tracks": list(tracks), "customParameters": {"agent": "7"},
                                 "mediaFormat": fmt or {"encoding": "audio/x-mulaw",
                                                        "sampleRate": 8000, "channels": 1},
                                 **extra}})


def media(track="inbound", payload=MULAW[:160], timestamp=None, raw=None):
    m = {"track": track, "chunk": "1",
         "payload": raw if raw is not None else base64.b64encode(payload).decode()}
    if timestamp is not None:
        m["timestamp"] = str(timestamp)
    return json.dumps({"event": "media", "sequenceNumber": "2", "streamSid": "MZ1",
                       "media": m})


# -- Twilio ---------------------------------------------------------------------------------------
def test_twilio_call_both_tracks_dtmf_mark_stop():
    t = TwilioProtocol()
    assert t.receive(json.dumps({"event": "connected", "protocol": "Call",
                                 "version": "1.0.0"})) == []
    [started] = t.receive(start(("inbound", "outbound")))
    assert started == CallStarted("CA1", ("inbound", "outbound"),
                                  {"streamSid": "MZ1", "accountSid": "AC1",
                                   "customParameters": {"agent": "7"}})
    [a] = t.receive(media("outbound", MULAW[:160], timestamp=0))
    assert (a.leg, a.sample_rate) == (1, 8000)
    np.testing.assert_array_equal(a.samples, MULAW_TABLE[:160])  # the G.711 table, exactly
    [b] = t.receive(media("inbound", MULAW[100:260], timestamp=0))
    assert b.leg == 0 and len(b.samples) == 156
    assert t.receive(json.dumps({"event": "dtmf", "dtmf": {"track": "inbound_track",
                                                           "digit": "#"}})) == [
        CallDtmf("#", 0)]
    assert t.receive(json.dumps({"event": "mark", "mark": {"name": "greeting"}})) == [
        CallNote("mark", "greeting")]
    assert t.receive(json.dumps({"event": "stop", "stop": {"callSid": "CA1"}})) == [
        CallEnded("stop")]


def test_twilio_gap_in_timestamps_is_silence_on_the_track():
    t = TwilioProtocol()
    t.receive(start())
    t.receive(media(timestamp=0))  # 160 samples: 0 .. 20 ms
    gap, audio = t.receive(media(timestamp=1000))  # 1 s: 7840 samples are missing
    assert (gap.leg, len(gap.samples), float(np.abs(gap.samples).max())) == (0, 7840, 0.0)
    assert len(audio.samples) == 160
    [same] = t.receive(media(timestamp=1025))  # 5 ms of jitter is not a gap
    assert len(same.samples) == 160


@pytest.mark.parametrize("messages, kind, text", [
    ([b"\x00\x01"], "bad_message", "binary frame"),
    (["{nope"], "bad_json", "not JSON"),
    (["[1, 2]"], "bad_message", "JSON object"),
    ([media()], "bad_message", "media before start"),
    ([json.dumps({"event": "stop"})], "bad_message", "stop before start"),
    ([start(), media(raw="***not base64***")], "bad_audio", "not base64"),
    ([start(), media("outbound")], "bad_message", "unknown track 'outbound'"),
    ([start(), media("both")], "bad_message", "unknown track 'both'"),
    ([start(("inbound", "sideways"))], "bad_message", "tracks must be"),
    ([start(fmt={"encoding": "audio/x-l16", "sampleRate": 16000, "channels": 1})],
     "unsupported", "not audio/x-mulaw"),
    ([json.dumps({"event": "start"})], "bad_message", "'start'"),
    ([start(), start()], "bad_message", "a second start"),
    ([start(), media(timestamp="soon")], "bad_message", "timestamp must be milliseconds"),
    ([start(), media(timestamp=10**8)], "bad_message", "jumps"),
    ([start(), json.dumps({"event": "dtmf", "dtmf": {"digit": "55"}})], "bad_message",
     "invalid digit"),
    ([start(), json.dumps({"event": "stop"}), media()], "bad_message", "after stop"),
])
def test_twilio_bad_input(messages, kind, text):
    t = TwilioProtocol()
    *before, last = messages
    for m in before:
        t.receive(m)
    with pytest.raises(ClientError) as e:
        t.receive(last)
    assert e.value.kind == kind and text in str(e.value)


def test_twilio_ignores_events_it_does_not_use():
    t = TwilioProtocol()
    t.receive(start())
    assert t.receive(json.dumps({"event": "someday", "x": 1})) == []


# -- audio fork -----------------------------------------------------------------------------------
def test_audiofork_stereo_metadata_then_interleaved_l16():
    f = AudioForkProtocol({"mix": "mono", "rate": "8k"}, default_id="made-up")
    [s] = f.receive(json.dumps({"callSid": "abc", "mixType": "stereo", "sampleRate": 16000,
                                "from": "+1555"}))
    assert (s.call_id, s.legs) == ("abc", ("caller", "callee"))
    assert s.info == {"mix": "stereo", "sample_rate": 16000,
                      "metadata": {"callSid": "abc", "mixType": "stereo",
                                   "sampleRate": 16000, "from": "+1555"}}
    pcm = np.array([1, -1, 2, -2, 3, -3], "<i2")  # caller 1 2 3, callee -1 -2 -3
    caller, callee = f.receive(pcm.tobytes())
    assert (caller.leg, callee.leg, caller.sample_rate) == (0, 1, 16000)
    np.testing.assert_array_equal(caller.samples * 32768, [1, 2, 3])
    np.testing.assert_array_equal(callee.samples * 32768, [-1, -2, -3])
    assert f.receive("DTMF 5") == [CallNote("text", "DTMF 5")]
    assert f.receive('{"event": "x"}') == [CallNote("text", {"event": "x"})]


@pytest.mark.parametrize("query, metadata, call_id, legs, rate", [
    ({}, "plain text", "made-up", ("caller",), 8000),
    ({"mix": "mixed", "rate": "16k", "call_id": "q1"}, "{}", "q1", ("mixed",), 16000),
    ({"mix": "stereo"}, '{"uuid": "u-1"}', "u-1", ("caller", "callee"), 8000),
    ({}, '{"callId": 42, "sampleRate": "16k"}', "42", ("caller",), 16000),
])
def test_audiofork_format_and_call_id_sources(query, metadata, call_id, legs, rate):
    f = AudioForkProtocol(query, default_id="made-up")
    [s] = f.receive(metadata)
    assert (s.call_id, s.legs, f.rate) == (call_id, legs, rate)


@pytest.mark.parametrize("query, messages, kind, text", [
    ({}, [b"\x00\x00"], "bad_message", "audio before the metadata"),
    ({"mix": "stereo"}, ["{}", b"\x00" * 6], "bad_audio", "x 2 channels"),
    ({}, ["{}", b"\x00" * 3], "bad_audio", "whole number"),
    ({}, ['{"mixType": "quad"}'], "bad_config", "mix type"),
    ({}, ['{"sampleRate": 44100}'], "bad_config", "sampling rate"),
])
def test_audiofork_bad_input(query, messages, kind, text):
    f = AudioForkProtocol(query, default_id="x")
    *before, last = messages
    for m in before:
        f.receive(m)
    with pytest.raises(ClientError) as e:
        f.receive(last)
    assert e.value.kind == kind and text in str(e.value)


@pytest.mark.parametrize("query, text", [
    ({"mix": "quad"}, "mix type"), ({"rate": "11k"}, "sampling rate"),
    ({"sample_rate": "8000"}, "unknown URL parameter"),
    ({"rule4_min_trailing_silence": "1"}, "unknown URL parameter"),
])
def test_audiofork_bad_url(query, text):
    with pytest.raises(ClientError, match=text):
        AudioForkProtocol(query, default_id="x")


def test_audiofork_reply_is_a_freeswitch_event_frame():
    assert json.loads(reply("transcription", {"text": "HI"})) == {
        "type": "transcription", "data": {"text": "HI"}}


# -- AudioSocket ----------------------------------------------------------------------------------
CALL = uuid.UUID("0f8c4b6e-5a44-4c1e-9a39-3c5b0f3ad5a1")


def test_audiosocket_frames_split_anywhere():
    pcm = np.arange(-80, 80, dtype="<i2")
    data = (frame(0x01, CALL.bytes) + frame(0x10, pcm.tobytes()) + frame(0x03, b"7")
            + frame(0x10, pcm.tobytes()) + frame(0x00))
    for cut in (1, 2, 3, 5, 64, len(data)):
        a = AudioSocketProtocol()
        events = []
        for i in range(0, len(data), cut):
            events += a.receive_data(data[i:i + cut])
        assert [type(e) for e in events] == [CallStarted, CallAudio, CallDtmf, CallAudio,
                                             CallEnded]
        assert events[0].call_id == str(CALL) and events[0].legs == ("0",)
        np.testing.assert_array_equal(events[1].samples * 32768, pcm)
        assert events[2] == CallDtmf("7", 0) and events[4] == CallEnded("hangup")
        assert a.receive_eof() == []


@pytest.mark.parametrize("kind, rate", sorted(AUDIO_RATES.items()))
def test_audiosocket_audio_types_and_rates(kind, rate):
    a = AudioSocketProtocol()
    _, audio = a.receive_data(frame(0x01, CALL.bytes) + frame(kind, b"\x01\x00" * 4))
    assert audio.sample_rate == rate and len(audio.samples) == 4


def test_audiosocket_eof_ends_the_call_and_error_frames_name_the_code():
    a = AudioSocketProtocol()
    a.receive_data(frame(0x01, CALL.bytes))
    assert a.receive_eof() == [CallEnded("closed")]
    b = AudioSocketProtocol()
    assert b.receive_data(frame(0x01, CALL.bytes) + frame(0xFF, b"\x02"))[-1] == CallEnded(
        "asterisk error 2 (frame forwarding)")


@pytest.mark.parametrize("data, kind, text", [
    (frame(0x10, b"\x00\x00"), "bad_message", "before the UUID frame"),
    (frame(0x01, b"\x01" * 15), "bad_message", "UUID frame of 15 bytes"),
    (frame(0x01, CALL.bytes) + frame(0x01, CALL.bytes), "bad_message", "a second UUID"),
    (frame(0x01, CALL.bytes) + frame(0x05, b"abc"), "bad_message",
     "unknown AudioSocket frame type 0x05"),
    (frame(0x01, CALL.bytes) + frame(0x10, b"\x00" * 3), "bad_audio", "whole number"),
    (frame(0x01, CALL.bytes) + frame(0x10, b"\x00\x00") + frame(0x12, b"\x00\x00"),
     "bad_audio", "after 8000 Hz audio"),
    (frame(0x01, CALL.bytes) + frame(0x03, b"x"), "bad_message", "DTMF frame"),
])
def test_audiosocket_bad_frames(data, kind, text):
    """A bad frame ends the call after the events of the frames before it (the same read:
    nothing that came before is lost); nothing after it counts."""
    a = AudioSocketProtocol()
    events = a.receive_data(data + frame(0x10, b"\x00\x00"))
    *before, failed = events
    assert isinstance(failed, CallFailed)
    assert failed.error.kind == kind and text in str(failed.error)
    assert [type(e) for e in before] == [CallStarted] * data.startswith(frame(0x01, CALL.bytes)) \
        + [CallAudio] * ("after 8000" in text)
    assert a.receive_data(frame(0x10, b"\x00\x00")) == [] and a.receive_eof() == []


@pytest.mark.parametrize("tail, need, got", [
    (frame(0x10, b"\x00" * 320)[:103], 323, 103),  # a length past the end
    (b"\x10\x01", 3, 2),  # half a header
])
def test_audiosocket_connection_closed_inside_a_frame(tail, need, got):
    a = AudioSocketProtocol()
    assert len(a.receive_data(frame(0x01, CALL.bytes) + tail)) == 1
    with pytest.raises(ClientError, match=f"it needs {need} bytes, {got} arrived") as e:
        a.receive_eof()
    assert e.value.kind == "bad_message"


# -- the call hub ---------------------------------------------------------------------------------
def result(call_id, text, final=True):
    return {"type": "result", "call_id": call_id, "text": text, "is_final": final}


def test_hub_backlog_live_messages_and_end():
    hub = CallHub(ServerConfig(subscriber_queue=10))
    early = hub.subscribe("c1")  # before the call
    hub.begin("c1", {"type": "call_start", "call_id": "c1"})
    hub.publish("c1", result("c1", "HEL", final=False))
    hub.publish("c1", result("c1", "HELLO"))
    late = hub.subscribe("c1")  # during: the backlog has no partials
    hub.publish("c1", result("c1", "BYE"))
    hub.end("c1", {"type": "call_end", "call_id": "c1"})
    assert [m.get("text", m["type"]) for m in early.take()] == [
        "call_start", "HEL", "HELLO", "BYE", "call_end"]
    assert [m.get("text", m["type"]) for m in late.take()] == [
        "call_start", "HELLO", "BYE", "call_end"]
    assert early.ended and late.ended and hub.active == []


def test_hub_drops_a_subscriber_that_falls_behind_and_others_go_on():
    metrics = Metrics(0.32, lambda: 0)
    hub = CallHub(ServerConfig(subscriber_queue=4), metrics)
    slow, fast = hub.subscribe("c"), hub.subscribe("c")
    hub.begin("c", {"type": "call_start", "call_id": "c"})
    for n in range(6):
        hub.publish("c", result("c", str(n)))
        fast.take()  # this one keeps up
    assert slow.dropped and len(slow.messages) == 4
    assert not fast.dropped
    assert b"streamdec_subscriber_drops_total 1.0" in metrics.render()
    hub.end("c", {"type": "call_end", "call_id": "c"})
    assert [m["type"] for m in fast.take()] == ["call_end"]


def test_hub_call_with_two_sessions_ends_with_the_last():
    hub = CallHub(ServerConfig())
    sub = hub.subscribe("c")
    hub.begin("c", {"type": "call_start", "call_id": "c"})
    hub.begin("c", {"type": "call_start", "call_id": "c"})
    hub.end("c", {"type": "call_end", "call_id": "c"})
    assert not sub.ended
    hub.end("c", {"type": "call_end", "call_id": "c"})
    assert sub.ended


# -- the replay clients' encoder ------------------------------------------------------------------
def test_mulaw_encoder_inverts_the_decoder():
    decoded = np.round(decode_pcm(MULAW, "mulaw") * 32768).astype(np.int16)
    again = mulaw_encode(decoded)
    # every byte comes back, except 0x7F (-0), which is the same sample as 0xFF (+0)
    assert [b for b in range(256) if again[b] != b] == [0x7F] and again[0x7F] == 0xFF
    ramp = np.arange(-32768, 32768, 7, dtype=np.int16)
    error = np.abs(decode_pcm(mulaw_encode(ramp), "mulaw") * 32768 - ramp)
    assert error.max() <= 1024  # half the widest mu-law step (2048, the top segment)


# -- per-call settings and force-final ------------------------------------------------------------
def test_twilio_custom_parameters_give_the_call_settings_and_nothing_else():
    t = TwilioProtocol()
    [s] = t.receive(start(customParameters={"agent": "7", "text_format": "punct",
                                            "rule2_min_trailing_silence": "0.4"}))
    assert s.settings == (SettingsLayer("customParameters", {
        "rule2_min_trailing_silence": "0.4", "text_format": "punct"}, text=True),)
    assert TwilioProtocol().receive(start())[0].settings == ()  # {"agent": "7"}: none


def test_audiofork_settings_from_the_url_then_the_metadata_and_finalize():
    f = AudioForkProtocol({"text_format": "raw", "rule1_min_trailing_silence": "3"},
                          default_id="x")
    [s] = f.receive('{"text_format": "full", "rule2_min_trailing_silence": 0.5, "who": 1}')
    assert s.settings == (
        SettingsLayer("URL", {"rule1_min_trailing_silence": "3", "text_format": "raw"}, True),
        SettingsLayer("metadata", {"rule2_min_trailing_silence": 0.5, "text_format": "full"},
                      False))
    got = call_settings(s.settings, EndpointConfig(), EndpointLimits())
    assert got.text_format == "full"  # the metadata wins
    assert (got.endpoint.rule1.min_trailing_silence, got.endpoint.rule2.min_trailing_silence,
            got.endpoint.rule3) == (3.0, 0.5, EndpointConfig().rule3)
    assert f.receive("Finalize") == [CallFinalize()]
    assert f.receive("finalize") == [CallNote("text", "finalize")]  # the exact word only
    assert AudioForkProtocol({}, default_id="x").receive("Finalize")[0].call_id == "x"


@pytest.mark.parametrize("layer, text", [
    (SettingsLayer("URL", {"rule2_min_trailing_silence": "x"}, True),
     "URL: rule2_min_trailing_silence must be a number of seconds, got 'x'"),
    (SettingsLayer("metadata", {"rule1_min_utterance_length": 601}, False),
     "metadata: rule1_min_utterance_length must be in [0, 600] seconds (the server's limit), "
     "got 601"),
    (SettingsLayer("customParameters", {"text_format": "nice"}, True),
     "customParameters: text_format must be one of raw, punct, full; got 'nice'"),
    (SettingsLayer("customParameters", {"second_pass": "yes"}, True),
     "customParameters: second_pass must be true or false, got 'yes'"),
    (SettingsLayer("URL", {"second_pass": True}, True),
     "URL: second_pass must be true or false, got True"),
])
def test_bad_call_settings_are_bad_config(layer, text):
    with pytest.raises(ClientError) as e:
        call_settings([layer], EndpointConfig(), EndpointLimits())
    assert (e.value.kind, str(e.value)) == ("bad_config", text)


@pytest.mark.parametrize("layers, second_pass", [
    ([], None),
    ([SettingsLayer("customParameters", {"second_pass": "false"}, True)], False),
    ([SettingsLayer("metadata", {"second_pass": True}, False)], True),
    ([SettingsLayer("URL", {"second_pass": "true"}, True),
      SettingsLayer("metadata", {"second_pass": False}, False)], False),  # the later wins
])
def test_a_call_turns_the_second_pass_on_or_off(layers, second_pass):
    assert call_settings(layers, EndpointConfig(), EndpointLimits()).second_pass is second_pass
