"""AssemblyAI's universal streaming protocol without a server (``streamdec.server.assemblyai``):
the handshake query table-driven, and the session driven directly: client messages and
results in, commands and AssemblyAI's messages out."""

from __future__ import annotations

import dataclasses
import json

import pytest

from streamdec import SearchConfig
from streamdec.core.endpoint import EndpointConfig
from streamdec.core.results import Word
from streamdec.errors import ClientError, OptionError
from streamdec.server.access import Access
from streamdec.server.assemblyai import (IGNORED, REFUSED, AssemblyAISession,
                                         AssemblyAISettings, assemblyai_error,
                                         parse_assemblyai_query)
from streamdec.server.session import DRAIN, Close, Feed, Finish, ForceFinal, Retune
from test_server_protocols import result

BASE = {"sample_rate": ["16000"]}
AUDIO = b"\x00\x01" * 800  # 0.05 s at 16 kHz


def parse(**extra):
    return parse_assemblyai_query({**BASE, **{k: [v] for k, v in extra.items()}},
                                  search=SearchConfig())


def test_sdk_default_query_keeps_the_servers_choices():
    options = parse(speech_model="universal-streaming-english")
    assert (options.sample_rate, options.encoding, options.channels) == (16000, "s16le", 1)
    assert options.search is None and options.endpoint is None and options.hotwords == ()
    assert options.text_format is None  # the server's text_format


@pytest.mark.parametrize("extra, field, value", [
    ({"format_turns": "True"}, "text_format", "full"),  # the SDK writes Python's booleans
    ({"format_turns": "false"}, "text_format", "raw"),
    ({"encoding": "pcm_mulaw", "sample_rate": "8000"}, "encoding", "mulaw"),
    ({"encoding": "pcm_mulaw", "sample_rate": "8000"}, "sample_rate", 8000),
    ({"keyterms_prompt": '["streamdec", " call me "]'}, "hotwords", ("streamdec", "call me")),
    ({"language_code": "en"}, "hotwords", ()),
    ({"language_codes": '["en"]'}, "hotwords", ()),
])
def test_query_options(extra, field, value):
    assert getattr(parse(**extra), field) == value


def test_keyterms_switch_a_greedy_server_to_its_beam_search():
    assert parse(keyterms_prompt='["call"]').search.method == "modified_beam"


@pytest.mark.parametrize("value, silence", [("300", 0.3), ("0", 0.0), ("1280", 1.28)])
def test_max_turn_silence_sets_the_silence_after_speech(value, silence):
    options = parse(max_turn_silence=value)
    assert options.endpoint.enabled is True
    assert options.endpoint.rule2.min_trailing_silence == silence
    assert options.endpoint.rule1 == EndpointConfig().rule1


def test_every_ignored_parameter_is_taken_without_effect():
    assert len(IGNORED) == 19
    for name in IGNORED:
        assert parse(**{name: "1"}) == parse(), name


@pytest.mark.parametrize("query, message", [
    ({"sample_rate": []}, "sample_rate is required"),
    ({"sample_rate": ["4000"]}, "unsupported sample_rate 4000"),
    ({"sample_rate": ["fast"]}, "sample_rate must be an integer"),
    ({"encoding": ["opus"]}, "unsupported encoding 'opus'"),
    ({"encoding": ["aac"]}, "unsupported encoding 'aac'"),
    ({"language_code": ["es"]}, "language 'es' is not supported"),
    ({"language_codes": ['["en", "fr"]']}, "language 'fr' is not supported"),
    ({"format_turns": ["yes"]}, "format_turns must be true or false"),
    ({"keyterms_prompt": ["call"]}, "keyterms_prompt must be a JSON list of strings"),
    ({"keyterms_prompt": ["[1]"]}, "keyterms_prompt must be a list of strings"),
    ({"keyterms_prompt": [json.dumps(["w"] * 101)]}, "at most 100"),
    ({"keyterms_prompt": [json.dumps(["x" * 51])]}, "over 50 characters"),
    ({"max_turn_silence": ["31000"]}, r"max_turn_silence must be in \[0, 30000\]"),
    ({"max_turn_silence": ["1.5"]}, "max_turn_silence must be an integer"),
    ({"speaker_labels": ["True"]}, "speaker_labels is not supported"),
    ({"redact_pii": ["true"]}, "redact_pii is not supported"),
    ({"webhook_url": ["https://example.com/x"]}, "webhook_url is not supported"),
    ({"llm_gateway": ['{"model": "x"}']}, "llm_gateway is not supported"),
    ({"bogus": ["1"]}, "unknown query parameter 'bogus'"),
    ({"format_turns": ["true", "false"]}, "format_turns given 2 times"),
])
def test_refused_queries(query, message):
    with pytest.raises(OptionError, match=message):
        parse_assemblyai_query({**BASE, **query}, search=SearchConfig())


def test_refused_features_off_are_taken():
    assert len(REFUSED) == 14
    for name in REFUSED:
        assert parse(**{name: "False"}) == parse(), name


def test_the_api_key_alone_in_authorization_is_a_token():
    access = Access(frozenset({"aai-key"}), 10)
    assert access.authorized({"authorization": "aai-key"}, {})
    assert not access.authorized({"authorization": "other"}, {})
    assert access.authorized({"authorization": "Bearer aai-key"}, {})
    assert not access.authorized({"authorization": "Basic aai-key"}, {})


# -- the session -------------------------------------------------------------------------------
def session(clock=lambda: 1000.0, **extra) -> AssemblyAISession:
    return AssemblyAISession(parse(**extra), AssemblyAISettings(expires_in=60.0),
                             session_id="s-1", clock=clock)


def sent(commands) -> list[dict]:
    return [json.loads(c.text) for c in commands]


def test_begin_audio_terminate_then_termination_and_close():
    times = iter([1000.0, 1002.6])
    s = session(clock=lambda: next(times))
    assert sent(s.opening()) == [{"type": "Begin", "id": "s-1", "expires_at": 1060}]
    for _ in range(30):  # 1.5 s
        assert s.receive(AUDIO) == [Feed(AUDIO)]
    assert s.receive(b"") == []
    assert s.receive('{"type": "KeepAlive"}') == []
    assert s.receive('{"type": "Terminate"}') == [Finish()]
    *messages, close = s.results_ended()
    assert sent(messages) == [{"type": "Termination", "audio_duration_seconds": 2,
                               "session_duration_seconds": 3}]
    assert close == Close(1000, "")


def test_turns_partial_then_end_of_turn_with_word_times_in_milliseconds():
    s = session()
    assert s.result(0, result(final=False, words=())) == []  # nothing heard yet
    partial = dataclasses.replace(result(final=False), stable_chars=3)  # "HI " is stable
    (m,) = sent(s.result(0, partial))
    assert m == {"type": "Turn", "turn_order": 0, "turn_is_formatted": False,
                 "end_of_turn": False, "transcript": "HI", "end_of_turn_confidence": 0.0,
                 "words": [{"start": 2040, "end": 2120, "confidence": 0.9, "text": "HI",
                            "word_is_final": True},
                           {"start": 2200, "end": 2320, "confidence": 0.75, "text": "YOU",
                            "word_is_final": False}]}
    assert s.result(0, partial) == []  # nothing new
    (end,) = sent(s.result(0, result()))
    assert (end["turn_order"], end["end_of_turn"], end["transcript"],
            end["end_of_turn_confidence"]) == (0, True, "HI YOU", 1.0)
    assert all(w["word_is_final"] for w in end["words"])
    (nxt,) = sent(s.result(0, result(final=False)))
    assert nxt["turn_order"] == 1 and nxt["transcript"] == ""


def test_a_silent_final_makes_no_turn():
    s = session()
    assert s.result(0, result(text="", tokens=(), timestamps=(), words=())) == []
    assert s.turn_order == 0


def test_format_turns_sends_the_formatted_turn_after_the_raw_one():
    s = session(format_turns="true")
    shown = dataclasses.replace(result(), display="Hi, you.", display_words=(
        Word("Hi,", 2.04, 2.12, 0.9), Word("you.", 2.2, 2.32, 0.75)))
    raw, formatted = sent(s.result(0, shown))
    assert (raw["transcript"], raw["turn_is_formatted"]) == ("HI YOU", False)
    assert (formatted["transcript"], formatted["turn_is_formatted"]) == ("Hi, you.", True)
    assert formatted["turn_order"] == raw["turn_order"] == 0 and formatted["end_of_turn"]
    assert [(w["text"], w["start"]) for w in formatted["words"]] == [("Hi,", 2040),
                                                                      ("you.", 2200)]


def test_force_endpoint_and_update_configuration():
    s = session()
    assert s.receive('{"type": "ForceEndpoint"}') == [ForceFinal("ForceEndpoint")]
    (retune,) = s.receive('{"type": "UpdateConfiguration", "format_turns": true, '
                          '"end_of_turn_confidence_threshold": 0.7}')
    assert retune == Retune(s.options) and s.options.text_format == "full"
    assert s.receive('{"type": "UpdateConfiguration", "min_turn_silence": 100}') == []
    (retune,) = s.receive('{"type": "UpdateConfiguration", "max_turn_silence": 500}')
    assert retune.options.endpoint.rule2.min_trailing_silence == 0.5
    assert retune.options.endpoint.rule1 == EndpointConfig().rule1
    assert retune.options.text_format == "full"  # the earlier update stays
    (warning,) = sent(s.receive('{"type": "UpdateConfiguration", "keyterms_prompt": ["x"]}'))
    assert (warning["type"], warning["warning_code"]) == ("Warning", 3006)
    assert "keyterms_prompt is not applied" in warning["warning"]


@pytest.mark.parametrize("messages, kind, text", [
    (["hello"], "bad_json", "Invalid JSON"),
    (['{"type": "Configure"}'], "bad_message", "Invalid Message Type: 'Configure'"),
    (["[1]"], "bad_message", "Invalid Message"),
    ([AUDIO, '{"type": "Terminate"}', AUDIO], "bad_message", "audio after Terminate"),
    (['{"type": "Terminate"}', '{"type": "ForceEndpoint"}'], "bad_message",
     "ForceEndpoint after Terminate"),
    (['{"type": "UpdateConfiguration", "bogus": 1}'], "bad_config", "unknown field 'bogus'"),
    (['{"type": "UpdateConfiguration", "max_turn_silence": "x"}'], "bad_config",
     "max_turn_silence must be an integer"),
    (['{"type": "UpdateConfiguration", "format_turns": 1}'], "bad_config",
     "format_turns must be true or false"),
    (['{"type": "UpdateConfiguration", "speaker_labels": true}'], "unsupported",
     "speaker_labels is not supported"),
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
    assert s.receive(AUDIO) == [] and s.receive('{"type": "Terminate"}') == []


@pytest.mark.parametrize("kind, code", [("bad_json", 3006), ("bad_message", 3006),
                                        ("bad_config", 3006), ("unsupported", 3006),
                                        ("bad_audio", 3007), ("too_big", 3007),
                                        ("too_long", 3008), ("idle_timeout", 4031),
                                        ("decode_failed", 3005), ("replica_lost", 1012)])
def test_errors_as_assemblyai_sends_them(kind, code):
    text, got_code, reason = assemblyai_error(ClientError(kind, "what went wrong"))
    assert json.loads(text) == {"type": "Error", "error_code": code, "error": "what went wrong"}
    assert (got_code, reason) == (code, "what went wrong")


def test_a_long_error_points_to_its_message_in_the_close_reason():
    _, _, reason = assemblyai_error(ClientError("bad_json", "é" * 70))
    assert reason == "See Error message for details"
