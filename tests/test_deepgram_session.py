"""Deepgram's live protocol without a server (``streamdec.server.deepgram``): the handshake
query table-driven, and the session driven directly: client messages and results in,
commands and Deepgram's messages out."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import pytest

from streamdec import SearchConfig
from streamdec.core.endpoint import EndpointConfig, EndpointRule
from streamdec.errors import ClientError, ConfigError, OptionError
from streamdec.server.deepgram import (DeepgramSession, DeepgramSettings, deepgram_error,
                                       parse_deepgram_query)
from streamdec.server.session import DRAIN, Close, Feed, Finish, ForceFinal
from test_server_protocols import result

BASE = {"encoding": ["linear16"], "sample_rate": ["16000"]}
AUDIO = b"\x00\x01" * 800  # 0.05 s at 16 kHz


def parse(**extra):
    return parse_deepgram_query({**BASE, **{k: [v] for k, v in extra.items()}},
                                search=SearchConfig())


def test_sdk_default_query_keeps_the_servers_choices():
    options, settings = parse(model="nova-3")
    assert (options.sample_rate, options.encoding, options.channels) == (16000, "s16le", 1)
    assert options.search is None and options.endpoint is None and options.hotwords == ()
    assert options.text_format is None  # the server's text_format
    assert settings == DeepgramSettings(model="nova-3")


@pytest.mark.parametrize("extra, field, value", [
    ({"punctuate": "true"}, "text_format", "punct"),
    ({"smart_format": "true", "punctuate": "true"}, "text_format", "full"),
    ({"punctuate": "false"}, "text_format", "raw"),
    ({"encoding": "mulaw", "sample_rate": "8000"}, "encoding", "mulaw"),
    ({"encoding": "alaw", "sample_rate": "8000"}, "encoding", "alaw"),
    ({"encoding": "linear32"}, "encoding", "f32le"),
    ({"keyterm": "streamdec"}, "hotwords", ("streamdec",)),
    ({"keywords": "call:2.5"}, "hotwords", ("call :2.5",)),
])
def test_query_options(extra, field, value):
    options, _ = parse(**extra)
    assert getattr(options, field) == value


# what LiveKit Agents' Deepgram plugin (livekit-plugins-deepgram 1.8.9) sends, every key
# every time, with filler_words=false and endpointing_ms=1200 (tests/test_livekit_deepgram.py)
LIVEKIT = ("model=nova-3&punctuate=true&smart_format=false&no_delay=true&interim_results=true"
           "&encoding=linear16&vad_events=true&sample_rate=16000&channels=1&endpointing=1200"
           "&filler_words=false&profanity_filter=false&numerals=false&mip_opt_out=false"
           "&language=en-US")


def test_livekit_plugins_query():
    options, settings = parse_deepgram_query(parse_qs(LIVEKIT), search=SearchConfig())
    assert (options.sample_rate, options.encoding, options.channels) == (16000, "s16le", 1)
    assert options.text_format == "punct" and options.search is None
    assert options.endpoint == EndpointConfig(rule2=EndpointRule(True, 1.2, 0.0))
    assert settings == DeepgramSettings(interim_results=True, vad_events=True,
                                        model="nova-3")


@pytest.mark.parametrize("extra", [{"no_delay": "true"}, {"no_delay": "false"},
                                   {"filler_words": "false"}])
def test_options_without_effect(extra):
    assert parse(**extra) == parse()


def test_keywords_switch_a_greedy_server_to_its_beam_search():
    options, _ = parse(keywords="call")
    assert options.search.method == "modified_beam"


@pytest.mark.parametrize("value, enabled, silence", [("300", True, 0.3), ("0", True, 0.0),
                                                      ("false", False, 1.2)])
def test_endpointing_sets_the_silence_after_speech(value, enabled, silence):
    options, _ = parse(endpointing=value)
    assert options.endpoint.enabled == enabled
    assert options.endpoint.rule2.min_trailing_silence == silence
    assert options.endpoint.rule1 == EndpointConfig().rule1


@pytest.mark.parametrize("query, message", [
    ({"encoding": [], "sample_rate": []}, "encoding is required"),
    ({"encoding": ["opus"]}, "unsupported encoding 'opus'"),
    ({"encoding": ["g729"]}, "unsupported encoding 'g729'"),
    ({"sample_rate": []}, "sample_rate is required"),
    ({"sample_rate": ["4000"]}, "unsupported sample_rate 4000"),
    ({"channels": ["2"]}, "channels > 1 needs multichannel=true"),
    ({"channels": ["3"], "multichannel": ["true"]}, r"channels must be in \[1, 2\]"),
    ({"language": ["multi"]}, "language 'multi' is not supported"),
    ({"diarize": ["true"]}, "diarize is not supported"),
    ({"redact": ["pci"]}, "redact is not supported"),
    ({"filler_words": ["true"]}, "filler_words is not supported"),
    ({"interim_results": ["yes"]}, "interim_results must be true or false"),
    ({"utterance_end_ms": ["500"]}, r"utterance_end_ms must be in \[1000, 5000\]"),
    ({"endpointing": ["31000"]}, r"endpointing must be in \[0, 30000\]"),
    ({"keywords": ["call:-3"]}, "suppression is not supported"),
    ({"bogus": ["1"]}, "unknown query parameter 'bogus'"),
    ({"model": ["a", "b"]}, "model given 2 times"),
])
def test_refused_queries(query, message):
    with pytest.raises(OptionError, match=message):
        parse_deepgram_query({**BASE, **query}, search=SearchConfig())


def session(**extra) -> DeepgramSession:
    options, settings = parse(**extra)
    return DeepgramSession(options, settings, 0.04, request_id="req-1")


def sent(commands) -> list[dict]:
    return [json.loads(c.text) for c in commands]


def test_audio_until_close_stream_then_metadata_and_close():
    s = session()
    assert s.receive(AUDIO) == [Feed(AUDIO)]
    assert s.receive('{"type": "KeepAlive"}') == []
    assert s.receive('{"type": "CloseStream"}') == [Finish()]
    final = sent(s.result(0, result(final=True, eof=True)))
    assert [m["type"] for m in final] == ["Results"]
    assert (final[0]["is_final"], final[0]["speech_final"], final[0]["from_finalize"]) == (
        True, False, False)
    *messages, close = s.results_ended()
    metadata = sent(messages)[0]
    assert close == Close(1000, "")
    assert {k: metadata[k] for k in ("type", "request_id", "duration", "channels")} == {
        "type": "Metadata", "request_id": "req-1", "duration": 0.05, "channels": 1}


def test_results_message_fields():
    s = session(model="nova-3")
    (m,) = sent(s.result(0, result()))  # segment 2.0 .. 2.6 s, words HI and YOU
    assert m["type"] == "Results" and m["channel_index"] == [0, 1]
    assert (m["start"], m["duration"], m["is_final"], m["speech_final"]) == (2.0, 0.6, True,
                                                                              True)
    alternative = m["channel"]["alternatives"][0]
    assert alternative["transcript"] == "HI YOU"
    assert alternative["confidence"] == 0.88386  # exp(-0.1234567) to 6 decimals
    assert alternative["words"] == [
        {"word": "HI", "start": 2.04, "end": 2.12, "confidence": 0.9, "punctuated_word": "HI"},
        {"word": "YOU", "start": 2.2, "end": 2.32, "confidence": 0.75,
         "punctuated_word": "YOU"}]
    assert m["metadata"]["model_info"]["name"] == "nova-3"


def test_partials_only_with_interim_results():
    assert session().result(0, result(final=False)) == []
    (m,) = sent(session(interim_results="true").result(0, result(final=False)))
    assert (m["is_final"], m["speech_final"]) == (False, False)


def test_speech_started_once_per_utterance_and_utterance_end_after_speech_final():
    s = session(vad_events="true", utterance_end_ms="1000")
    assert sent(s.result(0, result(final=False))) == [
        {"type": "SpeechStarted", "channel": [0, 1], "timestamp": 2.04}]
    assert s.result(0, result(final=False)) == []
    out = sent(s.result(0, result()))
    assert [m["type"] for m in out] == ["Results", "UtteranceEnd"]
    assert out[1] == {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": 2.32}
    assert [m["type"] for m in sent(s.result(0, result(final=False)))] == ["SpeechStarted"]


def test_finalize_marks_the_final_that_ends_at_its_audio():
    s = session(utterance_end_ms="1000")
    for _ in range(40):  # 2 s of audio
        s.receive(AUDIO)
    assert s.receive('{"type": "Finalize"}') == [ForceFinal("Finalize")]
    early = sent(s.result(0, result(start=0.0, end=1.2)))  # an endpoint before it
    assert early[0]["from_finalize"] is False and early[0]["speech_final"] is True
    forced = sent(s.result(0, result(start=1.2, end=2.0)))
    assert len(forced) == 1  # no UtteranceEnd: not an endpoint
    assert (forced[0]["from_finalize"], forced[0]["speech_final"]) == (True, False)


@pytest.mark.parametrize("messages, kind, text", [
    (["hello"], "bad_json", "text message is not JSON"),
    (['{"type": "Configure"}'], "bad_message", "unknown message"),
    (['[1]'], "bad_message", "unknown message"),
    ([AUDIO, '{"type": "CloseStream"}', AUDIO], "bad_message", "audio after CloseStream"),
    ([b"", '{"type": "Finalize"}'], "bad_message", "Finalize after CloseStream"),
])
def test_protocol_errors(messages, kind, text):
    s = session()
    for message in messages[:-1]:
        s.receive(message)
    with pytest.raises(ClientError, match=text) as e:
        s.receive(messages[-1])
    assert e.value.kind == kind


def test_drain_finishes_and_ignores_later_messages():
    s = session()
    assert s.receive(DRAIN) == [Finish()]
    assert s.receive(AUDIO) == [] and s.receive('{"type": "CloseStream"}') == []


@pytest.mark.parametrize("kind, code, reason", [("bad_audio", 1008, "DATA-0000"),
                                                ("idle_timeout", 1011, "NET-0001"),
                                                ("bad_message", 1003, "bad_message"),
                                                ("too_big", 1009, "too_big")])
def test_errors_as_deepgram_sends_them(kind, code, reason):
    text, got_code, got_reason = deepgram_error(ClientError(kind, "what went wrong"))
    assert json.loads(text) == {"type": "Error", "variant": kind,
                                "description": "what went wrong", "message": "what went wrong"}
    assert (got_code, got_reason) == (code, reason)


# -- pre-recorded ------------------------------------------------------------------------------
def test_prerecorded_query_reads_a_file_by_its_header_or_raw_audio_by_the_query():
    from streamdec.server.deepgram_files import prerecorded_query
    options, settings, utterances, raw = prerecorded_query(
        {"model": ["nova-3"], "utterances": ["true"], "punctuate": ["true"]},
        search=SearchConfig())
    assert (utterances, raw, options.text_format, settings.model) == (True, False, "punct",
                                                                      "nova-3")
    options, _, utterances, raw = prerecorded_query(
        {"encoding": ["mulaw"], "sample_rate": ["8000"]}, search=SearchConfig())
    assert (options.encoding, options.sample_rate, utterances, raw) == ("mulaw", 8000, False,
                                                                        True)


@pytest.mark.parametrize("query, message", [
    ({"interim_results": ["true"]}, "for live streaming only"),
    ({"summarize": ["v2"]}, "summarize is not supported"),
    ({"multichannel": ["true"]}, "multichannel is not supported for files"),
    ({"utterances": ["maybe"]}, "utterances must be true or false"),
    ({"diarize": ["true"]}, "diarize is not supported"),
])
def test_prerecorded_refused_queries(query, message):
    from streamdec.server.deepgram_files import prerecorded_query
    with pytest.raises(ConfigError, match=message):
        prerecorded_query(query, search=SearchConfig())


def test_prerecorded_response_fields():
    from streamdec.server.deepgram_files import prerecorded_response
    body = prerecorded_response([result(), result(text="", tokens=(), timestamps=(), words=())],
                                3.0, "ab" * 32, "nova-3", True, request_id="req-1")
    meta = body["metadata"]
    assert (meta["request_id"], meta["sha256"], meta["duration"], meta["channels"]) == (
        "req-1", "ab" * 32, 3.0, 1)
    assert meta["model_info"][meta["models"][0]]["name"] == "nova-3"
    alternative = body["results"]["channels"][0]["alternatives"][0]
    assert alternative["transcript"] == "HI YOU" and len(alternative["words"]) == 2
    (utterance,) = body["results"]["utterances"]  # the empty final is no utterance
    assert (utterance["start"], utterance["end"], utterance["transcript"]) == (2.04, 2.32,
                                                                               "HI YOU")
