"""Property-based tests of the cloud vendors' protocols, as state machines without I/O
(hypothesis; the profile is tests/conftest.py's), in the manner of
test_properties_protocols.py:

- Deepgram's handshake query: any names and values give the stream options (a rate, an
  encoding and channels the connection can use) or an ``OptionError``, nothing else;
- a Deepgram session feeds the audio exactly as sent until ``CloseStream``, an empty
  binary message or the drain, never after; its errors are ``bad_message`` / ``bad_json``;
  every message it sends is JSON of one of Deepgram's types;
- AssemblyAI's handshake query likewise; an AssemblyAI session feeds the audio exactly as
  sent until ``Terminate`` or the drain, never after; its errors are ``bad_message`` /
  ``bad_json`` / ``bad_config`` / ``unsupported``; every message it sends is JSON of one of
  AssemblyAI's types, its turns numbered in order;
- an OpenAI Realtime session answers any events, valid ones with bad ones and mutated ones
  interleaved, without raising: a bad event gets an ``error`` event naming the client's
  ``event_id``; the audio fed is the appended audio, exactly, in whole samples.
"""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from streamdec import SearchConfig
from streamdec.errors import OptionError
from streamdec.server import assemblyai
from streamdec.server.deepgram import ENCODINGS, KNOWN, DeepgramSession, parse_deepgram_query
from streamdec.server.options import MAX_RATE, MIN_RATE, StreamOptions
from streamdec.server.session import DRAIN, Feed, Finish, ForceFinal, Send
from streamdec.core.endpoint import EndpointConfig
from streamdec.server.realtime import RealtimeSession
from streamdec.server.session import Reopen, Reply, Retune
from test_properties_protocols import _interleave, drive, mutated, noise
from test_server_protocols import result

VALUES = st.text(max_size=12) | st.sampled_from(
    ["true", "false", "True", "linear16", "mulaw", "alaw", "opus", "16000", "8000", "2", "1",
     "300", "1000", "nova-3", "en", "en-US", "fr", "hello:2", "hi:-1", ":", "nan", "1e400"])
queries = st.dictionaries(st.sampled_from(KNOWN) | st.text(max_size=6),
                          st.lists(VALUES, min_size=1, max_size=2), max_size=8)
valid_query = {"encoding": ["linear16"], "sample_rate": ["16000"]}


@given(queries, st.booleans())
def test_deepgram_query_gives_usable_options_or_option_error(query, with_audio_format):
    if with_audio_format:
        query = {**query, **valid_query}
    try:
        options, settings = parse_deepgram_query(query, search=SearchConfig())
    except OptionError:
        return
    assert isinstance(options, StreamOptions)
    assert MIN_RATE <= options.sample_rate <= MAX_RATE
    assert options.encoding in ENCODINGS.values() and options.channels in (1, 2)
    assert settings.utterance_end_ms is None or 1000 <= settings.utterance_end_ms <= 5000


deepgram_texts = st.sampled_from(['{"type": "KeepAlive"}', '{"type": "Finalize"}',
                                  '{"type": "CloseStream"}'])
s16_audio = st.binary(min_size=2, max_size=64).map(lambda b: b[:len(b) // 2 * 2])


@given(st.data(), st.integers(1, 2), st.booleans())
def test_deepgram_feeds_exactly_the_audio_sent_until_close_stream(data, channels, interim):
    query = {**valid_query, "channels": [str(channels)], "multichannel": ["true"],
             "interim_results": [str(interim).lower()], "vad_events": ["true"],
             "utterance_end_ms": ["1000"]}
    options, settings = parse_deepgram_query(query, search=SearchConfig())
    session = DeepgramSession(options, settings, 0.04, request_id="test")
    valid = data.draw(st.lists(s16_audio | deepgram_texts.filter(lambda t: "Close" not in t),
                               max_size=8))
    valid.append(data.draw(st.sampled_from(['{"type": "CloseStream"}', b""])))
    items = _interleave(data, valid, noise | deepgram_texts)
    outputs, error = drive(session.receive, items)
    fed, finished = [], False
    for item, commands in zip(items, outputs):
        for command in commands:
            assert isinstance(command, (Feed, Finish, ForceFinal))
            if isinstance(command, Feed):
                assert not finished and command.data is item and item
                fed.append(item)
                for channel in range(channels):
                    for final in (False, True):
                        for sent in session.result(channel, result(final=final)):
                            assert isinstance(sent, Send)
                            assert json.loads(sent.text)["type"] in (
                                "Results", "SpeechStarted", "UtteranceEnd")
            finished = finished or isinstance(command, Finish)
    taken = items[:len(outputs)]
    ends = (DRAIN, b"", '{"type": "CloseStream"}')
    first_end = next((n for n, m in enumerate(taken) if any(m is e or m == e and
                                                           type(m) is type(e) for e in ends)),
                     len(taken))
    assert fed == [m for m in taken[:first_end] if isinstance(m, bytes)]
    if error is None:
        assert finished
    else:
        assert error.kind in ("bad_message", "bad_json")


# -- OpenAI Realtime ---------------------------------------------------------------------------
def _append(data: bytes) -> str:
    import base64
    return json.dumps({"type": "input_audio_buffer.append", "event_id": "a",
                       "audio": base64.b64encode(data).decode()})


def _event_id(item) -> str | None:
    """The ``event_id`` a client's message gave (None: none, or not a JSON object)."""
    try:
        event = json.loads(item) if isinstance(item, str) else None
    except (ValueError, RecursionError):
        return None
    return event.get("event_id") if isinstance(event, dict) else None


realtime_valid = [json.dumps({"type": "session.update", "event_id": "u", "session": {
    "type": "transcription", "audio": {"input": {"format": {"type": "audio/pcmu"},
                                                 "turn_detection": None}}}}),
    json.dumps({"type": "session.update", "event_id": "p", "session": {
        "type": "transcription", "audio": {"input": {"format": {"type": "audio/pcma"}}}}}),
    '{"type": "input_audio_buffer.commit", "event_id": "c"}',
    '{"type": "input_audio_buffer.clear", "event_id": "x"}']


@given(st.data())
def test_realtime_answers_every_event_and_feeds_exactly_the_appended_audio(data):
    import base64
    valid = data.draw(st.lists(st.binary(max_size=32).map(_append)
                               | st.sampled_from(realtime_valid), max_size=8))
    items = _interleave(data, valid, noise | mutated(realtime_valid + [_append(b"ab")]))
    session = RealtimeSession(StreamOptions(24000, "s16le"), EndpointConfig())
    outputs, error = drive(session.receive, items)
    assert error is None  # errors are events
    for item, commands in zip(items, outputs):
        encoding = session.options.encoding
        for command in commands:
            assert isinstance(command, (Feed, Finish, ForceFinal, Reply, Send, Reopen,
                                        Retune)) or item is DRAIN, command
            if isinstance(command, Feed):
                sent = base64.b64decode(json.loads(item)["audio"])
                assert command.data == sent and len(sent) % (2 if encoding == "s16le"
                                                             else 1) == 0
            if isinstance(command, Send):
                event = json.loads(command.text)
                if event["type"] == "error":
                    assert event["error"]["event_id"] in (_event_id(item), None)
        if item is DRAIN:
            break


# -- AssemblyAI --------------------------------------------------------------------------------
AAI_VALUES = VALUES | st.sampled_from(
    ["pcm_s16le", "pcm_mulaw", "False", "[]", '["call"]', '["en"]', '["es"]', "500",
     "universal-streaming-english", "0.4", "-1"])
aai_queries = st.dictionaries(st.sampled_from(assemblyai.KNOWN) | st.text(max_size=6),
                              st.lists(AAI_VALUES, min_size=1, max_size=2), max_size=8)


@given(aai_queries, st.booleans())
def test_assemblyai_query_gives_usable_options_or_option_error(query, with_rate):
    if with_rate:
        query = {**query, "sample_rate": ["16000"]}
    try:
        options = assemblyai.parse_assemblyai_query(query, search=SearchConfig())
    except OptionError:
        return
    assert isinstance(options, StreamOptions)
    assert MIN_RATE <= options.sample_rate <= MAX_RATE
    assert options.encoding in assemblyai.ENCODINGS.values() and options.channels == 1
    assert options.text_format in (None, "raw", "full")
    assert not options.hotwords or options.search.method != "greedy"


aai_texts = st.sampled_from(['{"type": "KeepAlive"}', '{"type": "ForceEndpoint"}',
                             '{"type": "Terminate"}',
                             '{"type": "UpdateConfiguration", "format_turns": true}',
                             '{"type": "UpdateConfiguration", "max_turn_silence": 400}'])


@given(st.data())
def test_assemblyai_feeds_exactly_the_audio_sent_until_terminate(data):
    options = assemblyai.parse_assemblyai_query({"sample_rate": ["16000"]},
                                                search=SearchConfig())
    session = assemblyai.AssemblyAISession(options, session_id="test")
    valid = data.draw(st.lists(s16_audio | aai_texts.filter(lambda t: "Terminate" not in t),
                               max_size=8))
    valid.append('{"type": "Terminate"}')
    items = _interleave(data, valid, noise | aai_texts | mutated(valid[-1:]))
    outputs, error = drive(session.receive, items)
    fed, finished, turns = [], False, []
    for item, commands in zip(items, outputs):
        for command in commands:
            assert isinstance(command, (Feed, Finish, ForceFinal, Retune, Send))
            sent = [command] if isinstance(command, Send) else []
            if isinstance(command, Feed):
                assert not finished and command.data is item and item
                fed.append(item)
                for final in (False, True):
                    sent += session.result(0, result(final=final))
            for message in (json.loads(c.text) for c in sent):
                assert message["type"] in ("Turn", "Warning")
                if message["type"] == "Turn":
                    turns.append(message["turn_order"])
            finished = finished or isinstance(command, Finish)
    assert turns == sorted(turns) and all(b - a <= 1 for a, b in zip(turns, turns[1:]))
    taken = items[:len(outputs)]
    first_end = next((n for n, m in enumerate(taken) if m is DRAIN or (
        isinstance(m, str) and m == '{"type": "Terminate"}')), len(taken))
    assert fed == [m for m in taken[:first_end] if isinstance(m, bytes) and m]
    if error is None:
        assert finished
    else:
        assert error.kind in ("bad_message", "bad_json", "bad_config", "unsupported")
