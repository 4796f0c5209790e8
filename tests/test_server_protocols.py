"""The daemon's pure parts, table-driven: sherpa-onnx and Vosk messages, Vosk config,
connection options, admission, the [server] config and its environment overrides, the
transcription endpoint's formats."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest

from streamdec import ConfigError, SearchConfig
from streamdec.appconfig import parse_config
from streamdec.core.endpoint import EndpointConfig, EndpointRule
from streamdec.core.results import Result, Word
from streamdec.server.access import Access, overload_check, read_tokens
from streamdec.engine import EngineConfig
from streamdec.server.config import ServerConfig, env_overrides
from streamdec.server.connection import CLOSE_CODES, ClientError, error_json
from streamdec.server.endpointing import EndpointLimits
from streamdec.server.options import OptionError, StreamOptions, parse_options
from streamdec.server.sherpa import sherpa_message, trailing_blanks
from streamdec.server.transcription import UploadError, check_fields, render
from streamdec.server.vosk import VoskSettings, parse_vosk_config, vosk_final, vosk_partial

FRAME = 0.04  # encoder frame seconds of these results


def result(text="HI YOU", tokens=("H", "I", "\u2581", "Y", "O", "U"),
           timestamps=(0.04, 0.08, 0.12, 0.2, 0.24, 0.28), segment=1, start=2.0, end=2.6,
           final=True, eof=False, score=-3.5, words=None, alternatives=()):
    if words is None:
        words = (Word("HI", 2.04, 2.12, 0.9), Word("YOU", 2.2, 2.32, 0.75))
    return Result(text=text, tokens=tuple(tokens), token_ids=tuple(range(len(tokens))),
                  timestamps=tuple(timestamps), log_probs=tuple(-0.1234567 for _ in tokens),
                  segment=segment, start_time=start, end_time=end, is_final=final,
                  is_eof=eof, score=score, words=words, alternatives=alternatives)


EMPTY = result(text="", tokens=(), timestamps=(), words=(), final=True, eof=True, start=0.0,
               end=1.2, segment=0)


# -- sherpa-onnx -----------------------------------------------------------------------------
def test_sherpa_message_has_the_reference_fields_in_order():
    """sherpa-onnx's fields in its order, then streamdec's ``stable``."""
    m = json.loads(sherpa_message(result(), FRAME))
    assert list(m) == ["text", "tokens", "timestamps", "ys_probs", "lm_probs",
                       "context_scores", "segment", "words", "num_trailing_blanks",
                       "start_time", "is_final", "is_eof", "stable"]
    assert m == {"text": "HI YOU", "tokens": ["H", "I", " ", "Y", "O", "U"],
                 "timestamps": [0.04, 0.08, 0.12, 0.2, 0.24, 0.28],
                 "ys_probs": [-0.123457] * 6, "lm_probs": [], "context_scores": [],
                 "segment": 1, "words": [], "num_trailing_blanks": 7, "start_time": 2.0,
                 "is_final": True, "is_eof": False, "stable": 0}


@pytest.mark.parametrize("r, channel, extra", [
    (result(final=False), None, {}),
    (result(), 1, {"channel": 1}),
    (EMPTY, 0, {"channel": 0}),
])
def test_sherpa_message_channel_tag_comes_last(r, channel, extra):
    m = json.loads(sherpa_message(r, FRAME, channel))
    assert {k: m[k] for k in list(m)[13:]} == extra
    assert m["is_final"] == r.is_final and m["is_eof"] == r.is_eof


@pytest.mark.parametrize("r, blanks", [
    (result(), 7),  # last token at 2.28 s, decoded to 2.6 s: frames 2.32 .. 2.56
    (result(end=2.32), 0),  # nothing after the last token
    (EMPTY, 30),  # no token: every frame of the segment
])
def test_trailing_blanks(r, blanks):
    assert trailing_blanks(r, FRAME) == blanks


def test_sherpa_timestamps_have_two_decimals():
    m = json.loads(sherpa_message(result(timestamps=(0.123456, 0.2, 0.25, 0.3, 0.31, 0.4)), FRAME))
    assert m["timestamps"] == [0.12, 0.2, 0.25, 0.3, 0.31, 0.4]


def test_sherpa_rounding_is_pythons_round():
    """The message rounds times (2 decimals) and log-probs (6) vectorised: the same numbers
    as ``round`` on every token time of a 20-minute segment and on 20,000 log-probs."""
    times = tuple(round(k * 0.04, 6) for k in range(30_000))
    log_probs = tuple(float(p) for p in -np.random.default_rng(5).exponential(2.0, 30_000))
    r = replace(result(tokens=("A",) * 30_000, timestamps=times), log_probs=log_probs)
    m = json.loads(sherpa_message(r, FRAME))
    assert m["timestamps"] == [round(t, 2) for t in times]
    assert m["ys_probs"] == [round(p, 6) for p in log_probs]


# -- Vosk --------------------------------------------------------------------------------------
WORDS = [{"word": "HI", "start": 2.04, "end": 2.12, "conf": 0.9},
         {"word": "YOU", "start": 2.2, "end": 2.32, "conf": 0.75}]
SECOND = result(text="BYE", tokens=("B", "Y", "E"), timestamps=(0.0, 0.04, 0.08),
                words=(Word("BYE", 5.0, 5.12, 0.5),), score=-1.0, start=5.0, end=5.4)
ALTS = result(alternatives=(result(), result(text="HI YOUR", score=-4.0, words=(
    Word("HI", 2.04, 2.12, 0.9), Word("YOUR", 2.2, 2.36, 0.5)))))
ON, OFF = VoskSettings(8000), VoskSettings(8000, words=False)
ALT2 = VoskSettings(8000, max_alternatives=2)

VOSK_FINALS = [  # (finals, settings, offset, channel, reply)
    ([result()], ON, 0.0, None, {"text": "HI YOU", "result": WORDS}),
    ([result()], OFF, 0.0, None, {"text": "HI YOU"}),
    ([EMPTY], ON, 0.0, None, {"text": ""}),
    ([result()], ON, 10.0, 1, {"text": "HI YOU", "result": [
        {**w, "start": round(w["start"] + 10, 6), "end": round(w["end"] + 10, 6)}
        for w in WORDS], "channel": 1}),
    ([result(), EMPTY, SECOND], ON, 0.0, None, {"text": "HI YOU BYE", "result": WORDS + [
        {"word": "BYE", "start": 5.0, "end": 5.12, "conf": 0.5}]}),
    ([ALTS], ALT2, 0.0, None, {"alternatives": [
        {"text": "HI YOU", "confidence": -3.5, "result": WORDS},
        {"text": "HI YOUR", "confidence": -4.0, "result": [
            WORDS[0], {"word": "YOUR", "start": 2.2, "end": 2.36, "conf": 0.5}]}]}),
    ([result()], ALT2, 0.0, None, {"alternatives": [  # a greedy final: its one hypothesis
        {"text": "HI YOU", "confidence": -3.5, "result": WORDS}]}),
    ([ALTS, SECOND], VoskSettings(8000, words=False, max_alternatives=1), 0.0, None,
     {"alternatives": [{"text": "HI YOU BYE", "confidence": -4.5}]}),
]


@pytest.mark.parametrize("finals, settings, offset, channel, reply", VOSK_FINALS)
def test_vosk_final(finals, settings, offset, channel, reply):
    assert vosk_final(finals, settings, offset, channel) == reply


def test_vosk_partial():
    assert vosk_partial("HI Y") == {"partial": "HI Y"}
    assert vosk_partial("", 0) == {"partial": "", "channel": 0}
    assert vosk_partial("HI Y", None, 2) == {"partial": "HI Y", "stable": 2}
    assert vosk_partial("HI Y", 1, 0) == {"partial": "HI Y", "stable": 0, "channel": 1}


VOSK_CONFIGS = [  # (config, settings or (kind, message part))
    ({}, VoskSettings(8000)),
    ({"sample_rate": 16000}, VoskSettings(16000)),
    ({"sample_rate": 16000.0, "words": 0, "max_alternatives": 3},
     VoskSettings(16000, False, 3)),
    ({"words": True, "phrase_list": []}, VoskSettings(8000)),  # an empty list: no grammar
    ({"sample_rate": "8000"}, ("bad_config", "sample_rate must be an integer")),
    ({"sample_rate": 44100.5}, ("bad_config", "sample_rate must be an integer")),
    ({"sample_rate": 4000}, ("bad_config", "must be in [8000, 96000]")),
    ({"words": 2}, ("bad_config", "words must be 0/1")),
    ({"max_alternatives": -1}, ("bad_config", "max_alternatives must be in [0, 20]")),
    ({"max_alternatives": True}, ("bad_config", "max_alternatives must be an integer")),
    ({"phrase_list": "yes no"}, ("bad_config", "phrase_list must be a list of non-empty")),
    ({"phrase_list": ["yes", " "]}, ("bad_config", "phrase_list must be a list of non-empty")),
    ({"phrase_list": ["yes", " no ", "[unk]"]},
     VoskSettings(8000, phrases=("yes", "no", "[unk]"))),
    ({"model": "en"}, ("bad_config", "unknown config key(s) model")),
    ([1, 2], ("bad_config", "config must be an object")),
    # endpoint rules: over the server's (the defaults), within the default limits
    ({"rule2_min_trailing_silence": 0.5, "rule3_min_utterance_length": 8},
     VoskSettings(8000, endpoint=EndpointConfig(rule2=EndpointRule(True, 0.5, 0.0),
                                                rule3=EndpointRule(False, 0.0, 8.0)))),
    ({"rule1_min_trailing_silence": 0, "rule1_min_utterance_length": 600},
     VoskSettings(8000, endpoint=EndpointConfig(rule1=EndpointRule(False, 0.0, 600.0)))),
    ({"rule2_min_trailing_silence": 30.5},
     ("bad_config", "rule2_min_trailing_silence must be in [0, 30] seconds")),
    ({"rule3_min_utterance_length": 601},
     ("bad_config", "rule3_min_utterance_length must be in [0, 600] seconds")),
    ({"rule1_min_trailing_silence": -0.1},
     ("bad_config", "rule1_min_trailing_silence must be in [0, 30] seconds")),
    ({"rule1_min_trailing_silence": "1"},
     ("bad_config", "rule1_min_trailing_silence must be a number of seconds")),
    ({"rule1_min_trailing_silence": True},
     ("bad_config", "rule1_min_trailing_silence must be a number of seconds")),
    ({"rule4_min_trailing_silence": 1}, ("bad_config", "unknown config key(s) rule4_")),
]


def test_vosk_endpoint_config_within_server_limits():
    """The server's own rules are the base; its limits bound what a client may set."""
    base = EndpointConfig(rule1=EndpointRule(False, 5.0, 1.0))
    got = parse_vosk_config({"rule1_min_utterance_length": 2}, VoskSettings(8000), base,
                            EndpointLimits(max_silence=1.0, max_utterance=2.0))
    assert got.endpoint == EndpointConfig(rule1=EndpointRule(False, 5.0, 2.0))
    with pytest.raises(ClientError, match=re.escape(
            "rule2_min_trailing_silence must be in [0, 1] seconds")):
        parse_vosk_config({"rule2_min_trailing_silence": 1.5}, VoskSettings(8000), base,
                          EndpointLimits(max_silence=1.0, max_utterance=2.0))


@pytest.mark.parametrize("config, want", VOSK_CONFIGS)
def test_vosk_config(config, want):
    if isinstance(want, VoskSettings):
        assert parse_vosk_config(config, VoskSettings(8000)) == want
        return
    with pytest.raises(ClientError, match=re.escape(want[1])) as e:
        parse_vosk_config(config, VoskSettings(8000))
    assert e.value.kind == want[0]


def test_client_errors_have_their_close_codes():
    assert CLOSE_CODES == {"bad_audio": 1007, "bad_json": 1007, "bad_message": 1003,
                           "bad_config": 1008, "unsupported": 1003, "too_big": 1009,
                           "too_long": 1008, "idle_timeout": 1008, "decode_failed": 1011,
                           "replica_lost": 1012}
    e = ClientError("too_big", "message of 9 bytes")
    assert e.code == 1009 and not e.after_results
    assert ClientError("too_long", "x").after_results
    assert json.loads(error_json(e)) == {"error": "message of 9 bytes", "kind": "too_big"}
    with pytest.raises(ValueError):
        ClientError("oops", "no such kind")


# -- options -------------------------------------------------------------------------------
BASE = SearchConfig()
OPTIONS = [  # (query, options)
    ({}, StreamOptions(16000, "f32le")),
    ({"sample_rate": ["8000"], "encoding": ["mulaw"]}, StreamOptions(8000, "mulaw")),
    ({"sample_rate": ["8000"], "encoding": ["alaw"]}, StreamOptions(8000, "alaw")),
    ({"channels": ["2"], "token": ["x"]}, StreamOptions(16000, "f32le", 2)),
    ({"search": ["modified_beam"], "beam": ["8"]},
     StreamOptions(16000, "f32le", search=SearchConfig(method="modified_beam", beam=8))),
    ({"search": ["alsd"], "hotwords": ["ACME CORP :2.0,NEW YORK", "BOSTON"]},
     StreamOptions(16000, "f32le", search=SearchConfig(method="alsd"),
                   hotwords=("ACME CORP :2.0", "NEW YORK", "BOSTON"))),
    # grammar mode: a greedy (default) search becomes modified beam search, others stay
    ({"phrases": ["yes, no,[unk]"]},
     StreamOptions(16000, "f32le", search=SearchConfig(method="modified_beam"),
                   phrases=("yes", "no", "[unk]"))),
    ({"search": ["alsd"], "phrases": ["one", "two"]},
     StreamOptions(16000, "f32le", search=SearchConfig(method="alsd"), phrases=("one", "two"))),
    ({"rule1_min_trailing_silence": ["1.5"], "rule2_min_utterance_length": ["0.25"]},
     StreamOptions(16000, "f32le", endpoint=EndpointConfig(
         rule1=EndpointRule(False, 1.5, 0.0), rule2=EndpointRule(True, 1.2, 0.25)))),
]
BAD_OPTIONS = [  # (query, message part)
    ({"sample_rate": ["96001"]}, "unsupported sample_rate 96001"),
    ({"sample_rate": ["7999"]}, "unsupported sample_rate 7999"),
    ({"sample_rate": ["16k"]}, "sample_rate must be an integer"),
    ({"sample_rate": ["8000", "16000"]}, "sample_rate given 2 times"),
    ({"encoding": ["s24le"]}, "unsupported encoding 's24le'"),
    ({"channels": ["0"]}, "channels must be in [1, 2]"),
    ({"search": ["fast"]}, "unknown search 'fast'"),
    ({"search": ["modified_beam"], "beam": ["0"]}, "beam must be in [1, 64]"),
    ({"beam": ["4"]}, "beam needs a beam search"),
    ({"hotwords": ["ACME"]}, "hotwords need a beam search"),
    ({"rate": ["8000"]}, "unknown option(s) rate"),
    ({"phrases": ["yes,,no"]}, "phrases must be comma-separated, non-empty phrases"),
    ({"search": ["greedy"], "phrases": ["yes"]}, "phrases (grammar mode) need a beam search"),
    ({"rule2_min_trailing_silence": ["31"]},
     "rule2_min_trailing_silence must be in [0, 30] seconds (the server's limit), got '31'"),
    ({"rule3_min_utterance_length": ["1e9"]}, "rule3_min_utterance_length must be in [0, 600]"),
    ({"rule1_min_trailing_silence": ["nan"]}, "rule1_min_trailing_silence must be in [0, 30]"),
    ({"rule1_min_trailing_silence": ["soon"]},
     "rule1_min_trailing_silence must be a number of seconds, got 'soon'"),
    ({"rule1_min_trailing_silence": ["1", "2"]}, "rule1_min_trailing_silence given 2 times"),
]


@pytest.mark.parametrize("query, want", OPTIONS)
def test_options(query, want):
    assert parse_options(query, sample_rate=16000, encoding="f32le", search=BASE) == want


@pytest.mark.parametrize("query, message", BAD_OPTIONS)
def test_bad_options(query, message):
    with pytest.raises(OptionError, match=re.escape(message)):
        parse_options(query, sample_rate=16000, encoding="f32le", search=BASE)


# -- access ----------------------------------------------------------------------------------
ACCESS = [  # (tokens, open, draining, headers, query, status or None)
    (None, 0, False, {}, {}, None),
    (frozenset({"t1", "t2"}), 0, False, {"authorization": "Bearer t2"}, {}, None),
    (frozenset({"t1"}), 0, False, {}, {"token": "t1"}, None),
    (frozenset({"t1"}), 0, False, {}, {}, 401),
    (frozenset({"t1"}), 0, False, {"authorization": "Bearer t2"}, {"token": "t1"}, 401),
    (frozenset({"t1"}), 0, False, {"authorization": "Basic t1"}, {}, 401),
    (None, 3, False, {}, {}, 503),
    (None, 0, True, {}, {}, 503),
    (frozenset({"t1"}), 3, False, {}, {}, 401),  # who you are first
]


@pytest.mark.parametrize("tokens, open_, draining, headers, query, status", ACCESS)
def test_access(tokens, open_, draining, headers, query, status):
    access = Access(tokens, max_connections=3)
    access.open, access.draining = open_, draining
    refusal = access.check(headers, query)
    assert (refusal.status if refusal else None) == status


def test_a_server_behind_its_audio_refuses_what_would_decode_and_only_that():
    delay = [0.0]  # seconds the longest-waiting ready stream has waited (Engine.decode_delay)
    access = Access(None, 3, behind=overload_check(lambda: delay[0], 250))
    assert access.check({}, {}) is None
    delay[0] = 0.25  # at the limit: still admitted
    assert access.check({}, {}) is None
    delay[0] = 0.4
    refusal = access.check({}, {})
    assert (refusal.status, refusal.reason) == (503, (
        "server is behind its audio: a stream has waited 400 ms for its decode "
        "(server.max_decode_delay_ms = 250); retry later"))
    assert access.capacity_refusal() == refusal.reason  # AudioSocket's (close 1013)
    assert access.check({}, {}, decodes=False) is None  # a call's subscriber brings no audio
    access.open = 3  # the cap and the drain say so first
    assert "limit of 3 connections" in access.check({}, {}).reason
    access.draining = True
    assert access.check({}, {}, decodes=False).reason == "server is shutting down"
    assert overload_check(lambda: 99.0, 0) is None  # 0: never refused for it
    with pytest.raises(ConfigError, match="max_decode_delay_ms must be >= 0"):
        ServerConfig(max_decode_delay_ms=-1)
    assert ServerConfig().max_decode_delay_ms == 1000.0  # as docs/server.md and default.toml say


def test_token_file(tmp_path):
    p = tmp_path / "tokens"
    p.write_text("# ops\n  abc  \n\ndef\n")
    assert read_tokens(p) == frozenset({"abc", "def"})
    p.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no token"):
        read_tokens(p)
    with pytest.raises(ConfigError, match="token_file"):
        read_tokens(tmp_path / "missing")


# -- [server] config ---------------------------------------------------------------------------
def test_server_table_and_environment_overrides():
    app = parse_config({"server": {"port": 7000, "vosk_port": 2700, "workers": 1}})
    assert app.server == ServerConfig(port=7000, vosk_port=2700, engine=EngineConfig(workers=1))
    env = {"STREAMDEC_PORT": "7100", "STREAMDEC_MAX_WAIT_MS": "2.5",
           "STREAMDEC_TOKEN_FILE": "/run/tokens", "STREAMDEC_VOSK_PORT": "2701",
           "HOME": "/root"}
    assert env_overrides(env) == {"port": 7100, "max_wait_ms": 2.5, "token_file": "/run/tokens",
                                  "vosk_port": 2701}
    with pytest.raises(ConfigError, match="STREAMDEC_PORT: expected int"):
        env_overrides({"STREAMDEC_PORT": "http"})


@pytest.mark.parametrize("table, message", [
    ({"prot": 1}, "unknown key"),
    ({"port": 70000}, "server.port must be in"),
    ({"max_connections": 0}, "server.max_connections must be >= 1"),
    ({"idle_timeout_seconds": 0}, "server.idle_timeout_seconds must be > 0"),
    ({"tls_cert": "c.pem"}, "tls_cert and server.tls_key go together"),
    ({"max_batch": 0}, "max_batch and workers must be >= 1"),
])
def test_server_table_is_validated(table, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"server": table})


def test_serve_flags_override_the_environment_which_overrides_the_file():
    from streamdec.cli.main import build_parser
    from streamdec.cli.serve import server_config

    args = build_parser().parse_args(["serve", "--port", "7001", "--decode-threads", "1"])
    config = server_config(args,
                           ServerConfig(port=6000, engine=EngineConfig(max_batch=8, workers=2)),
                           {"STREAMDEC_PORT": "7000", "STREAMDEC_MAX_BATCH": "4"})
    assert (config.port, config.engine.max_batch, config.engine.workers) == (7001, 4, 1)


# -- transcription formats -------------------------------------------------------------------
FINALS = [result(start=0.0, end=0.6, segment=0, words=(Word("HI", 0.04, 0.12, 0.9),
                                                      Word("YOU", 0.2, 0.32, 0.75))),
          result(text="BYE", tokens=("B", "Y", "E"), timestamps=(0.0, 0.04, 0.08),
                 words=(Word("BYE", 5.0, 5.12, 0.5),), start=5.0, end=5.6, segment=1),
          EMPTY]


@pytest.mark.parametrize("fmt, media, body", [
    ("json", "application/json", '{"text": "HI YOU BYE"}'),
    ("text", "text/plain; charset=utf-8", "HI YOU BYE\n"),
    ("srt", "application/x-subrip; charset=utf-8",
     "1\n00:00:00,040 --> 00:00:01,040\nHI YOU\n\n2\n00:00:05,000 --> 00:00:06,000\nBYE\n\n"),
    ("vtt", "text/vtt; charset=utf-8",
     "WEBVTT\n\n00:00:00.040 --> 00:00:01.040\nHI YOU\n\n"
     "00:00:05.000 --> 00:00:06.000\nBYE\n\n"),
])
def test_transcription_formats(fmt, media, body):
    assert render(FINALS, fmt, 6.0) == (body, media)


def test_verbose_json():
    body, media = render(FINALS, "verbose_json", 6.0, "en")
    data = json.loads(body)
    assert media == "application/json"
    assert {k: data[k] for k in ("task", "language", "duration", "text")} == {
        "task": "transcribe", "language": "en", "duration": 6.0, "text": "HI YOU BYE"}
    assert [(s["id"], s["start"], s["end"], s["text"]) for s in data["segments"]] == [
        (0, 0.04, 0.32, "HI YOU"), (1, 5.0, 5.12, "BYE")]
    assert data["segments"][0]["tokens"] == [0, 1, 2, 3, 4, 5]
    assert data["segments"][0]["avg_logprob"] == -0.123457
    assert data["words"] == [{"word": "HI", "start": 0.04, "end": 0.12},
                             {"word": "YOU", "start": 0.2, "end": 0.32},
                             {"word": "BYE", "start": 5.0, "end": 5.12}]


def test_transcription_request_checks():
    check_fields(["file", "model", "response_format", "timestamp_granularities[]"])
    with pytest.raises(UploadError, match="unknown field"):
        check_fields(["file", "diarize"])
    with pytest.raises(UploadError, match="unsupported response_format"):
        render(FINALS, "docx", 1.0)


# -- n-best finals (the core side of Vosk alternatives) ----------------------------------------
@pytest.mark.parametrize("method, nbest", [("modified_beam", 3), ("modified_beam", 1),
                                           ("greedy", 2)])
def test_nbest_finals_carry_their_alternatives(model_dirs, method, nbest):
    from conftest import make_recognizer
    from decode_utils import decode_in_pieces, finals
    from model_factory import test_audio

    rec = make_recognizer(model_dirs["zipformer2"],
                          search=SearchConfig(method=method, nbest=nbest))
    results = finals(decode_in_pieces(rec, test_audio(3.0, seed=5), 1600))
    assert results
    for r in results:
        if nbest == 1:
            assert r.alternatives == ()
            continue
        best = r.alternatives[0]
        assert (best.token_ids, best.alternatives, best.is_final) == (r.token_ids, (), True)
        assert 1 <= len(r.alternatives) <= (nbest if method != "greedy" else 1)
        assert all(a.segment == r.segment and a.is_eof == r.is_eof for a in r.alternatives)
        assert len({a.token_ids for a in r.alternatives}) == len(r.alternatives)


# -- serve refuses unusable settings before it listens ---------------------------------------
@pytest.mark.parametrize("case", ["bad certificate", "missing token file", "cert without key",
                                  "port in use"])
def test_serve_refuses_unusable_settings(tmp_path, capsys, case):
    import socket

    from streamdec.cli.main import main

    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    argv, message = {
        "bad certificate": (["--tls-cert", str(bad), "--tls-key", str(bad)],
                            "cannot start the server"),
        "missing token file": (["--token-file", str(tmp_path / "none")], "token_file"),
        "cert without key": (["--tls-cert", str(bad)], "tls_cert and server.tls_key go"),
        "port in use": (["--port", str(busy.getsockname()[1])], "cannot listen on"),
    }[case]
    try:
        code = main(["serve", "--port", "0", *argv])
    finally:
        busy.close()
    assert code == 2
    assert message in capsys.readouterr().err
