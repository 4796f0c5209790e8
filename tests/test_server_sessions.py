"""The protocol sessions driven directly, without a server: client messages and results in,
commands out (``streamdec.server.session``)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from streamdec import SearchConfig
from streamdec.errors import ClientError
from streamdec.server.options import StreamOptions
from streamdec.server.session import (DRAIN, Close, Feed, Finish, ForceFinal, Reopen, Reply,
                                      Retune, Send)
from streamdec.server.sherpa import SherpaSession, sherpa_message
from streamdec.server.vosk import VoskSession
from test_server_protocols import FRAME, result

AUDIO = b"\x00\x01" * 800


# -- sherpa-onnx -------------------------------------------------------------------------------
def test_sherpa_audio_until_done_then_results_then_done_reply():
    session = SherpaSession(1, FRAME)
    assert session.receive(AUDIO) == [Feed(AUDIO)]
    assert session.receive(AUDIO[:4]) == [Feed(AUDIO[:4])]
    assert session.receive("Done") == [Finish()]
    r = result(final=True, eof=True)
    assert session.result(0, r) == [Send(sherpa_message(r, FRAME))]
    assert session.results_ended() == [Send("Done!"), Close(1000, "done")]


@pytest.mark.parametrize("messages, kind, text", [
    ([AUDIO, "Done", AUDIO], "bad_message", "audio after Done"),
    (["hello"], "bad_message",
     "expected audio (binary) or the text 'Done' or 'Finalize', got text 'hello'"),
    ([AUDIO, "Done", "Finalize"], "bad_message", "Finalize after Done"),
    ([AUDIO, "{\"eof\": 1}"], "bad_message", "expected audio (binary)"),
])
def test_sherpa_protocol_errors(messages, kind, text):
    session = SherpaSession(1, FRAME)
    for message in messages[:-1]:
        session.receive(message)
    with pytest.raises(ClientError, match=text.replace("(", r"\(").replace(")", r"\)")) as e:
        session.receive(messages[-1])
    assert e.value.kind == kind


def test_sherpa_finalize_asks_for_a_force_final():
    session = SherpaSession(1, FRAME)
    session.receive(AUDIO)
    assert session.receive("Finalize") == [ForceFinal("Finalize")]
    assert session.receive(AUDIO) == [Feed(AUDIO)]  # the next utterance goes on


def test_sherpa_drain_finishes_and_ignores_later_audio():
    session = SherpaSession(1, FRAME)
    assert session.receive(DRAIN) == [Finish()]
    assert session.receive(AUDIO) == []  # its results are on their way
    assert session.receive("Finalize") == []
    assert session.receive("Done") == [Finish()]


def test_sherpa_two_channels_tag_each_result():
    session = SherpaSession(2, FRAME)
    r = result(final=False)
    [send] = session.result(1, r)
    assert json.loads(send.text)["channel"] == 1
    assert send == Send(sherpa_message(r, FRAME, 1))


# -- Vosk ----------------------------------------------------------------------------------------
OPTIONS = StreamOptions(8000, "s16le")
GREEDY = SearchConfig()


def test_vosk_each_audio_message_gets_one_reply_per_channel():
    session = VoskSession(OPTIONS, GREEDY)
    assert session.receive(AUDIO) == [Feed(AUDIO), Reply()]
    assert session.reply(0, [replace(result(text="HI", final=False), stable_chars=1)], 0.1) == [
        Send('{"partial": "HI", "stable": 1}')]
    assert session.reply(0, [], 0.2) == [Send('{"partial": "HI", "stable": 1}')]  # no news
    [send] = session.reply(0, [result()], 0.3)
    assert json.loads(send.text) == {
        "text": "HI YOU", "result": [{"word": "HI", "start": 2.04, "end": 2.12, "conf": 0.9},
                                     {"word": "YOU", "start": 2.2, "end": 2.32, "conf": 0.75}]}
    assert session.reply(0, [], 0.4) == [Send('{"partial": "", "stable": 0}')]


def test_vosk_config_sets_the_rate_and_reopens_streams_for_alternatives_and_phrases():
    session = VoskSession(OPTIONS, GREEDY)
    assert session.receive('{"config": {"sample_rate": 16000}}') == [
        Retune(replace(OPTIONS, sample_rate=16000))]
    commands = session.receive('{"config": {"max_alternatives": 3}}')
    reopened = replace(OPTIONS, sample_rate=16000, search=replace(GREEDY, nbest=3))
    assert commands == [Reopen(reopened), Retune(reopened)]
    # a phrase list needs a beam search: the server's greedy becomes modified_beam
    [reopen, retune] = session.receive('{"config": {"phrase_list": ["yes", "no"]}}')
    assert reopen.options.phrases == ("yes", "no")
    assert (reopen.options.search.method, reopen.options.search.nbest) == ("modified_beam", 3)
    assert retune.options.sample_rate == 16000


def test_vosk_eof_reset_and_drain():
    assert VoskSession(OPTIONS, GREEDY).receive('{"eof" : 1}') == [
        Finish(), Reply(), Close(1000, "eof")]
    assert VoskSession(OPTIONS, GREEDY).receive(DRAIN) == [
        Finish(), Reply(), Close(1000, "server shutting down")]
    session = VoskSession(OPTIONS, GREEDY)
    session.receive(AUDIO)
    assert session.receive('{"reset" : 1}') == [Finish(), Reply(), Reopen(OPTIONS)]
    session.reply(0, [result()], 5.0)  # the utterance's final; the streams restart
    [send] = session.reply(0, [result()], 6.0)  # the next stream's times start at 5 s
    assert [w["start"] for w in json.loads(send.text)["result"]] == [7.04, 7.2]


@pytest.mark.parametrize("before, message, kind, text", [
    ([], '{"eof" : ', "bad_json", "text message is not JSON"),
    ([], "[1, 2]", "bad_message", "expected an object"),
    ([], '{"hello": 1}', "bad_message", "unknown command"),
    ([AUDIO], '{"config": {"words": 1}}', "bad_config", "config must come before the audio"),
    ([], '{"config": {"sample_rate": 4000}}', "bad_config", "must be in [8000, 96000]"),
    ([], '{"config": {"model": "en"}}', "bad_config", "unknown config key(s) model"),
])
def test_vosk_protocol_errors(before, message, kind, text):
    session = VoskSession(OPTIONS, GREEDY)
    for m in before:
        session.receive(m)
    with pytest.raises(ClientError) as e:
        session.receive(message)
    assert (e.value.kind, text in str(e.value)) == (kind, True)
