"""Fuzz target: a Deepgram live client (``DeepgramSession``): its handshake query (the
first message's text, read as a URL query string by ``parse_deepgram_query``), then its
messages (``harness.messages``) and their audio as the connection feeds it; and results
handed back for each Feed. Invariants: a refused query is an ``OptionError``; audio is fed
exactly as sent until ``CloseStream`` (or the drain), never after; every command is one
the protocol gives; every message out is JSON of a Deepgram type; a finished session
ends with ``Metadata`` and a normal close."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from harness import feed_audio, fuzz, instrumented, messages, word_result

with instrumented():
    from streamdec import SearchConfig
    from streamdec.errors import AudioInputError, ClientError, OptionError
    from streamdec.server.deepgram import DeepgramSession, parse_deepgram_query
    from streamdec.server.session import DRAIN, Close, Feed, Finish, ForceFinal, Send

TYPES = ("Results", "SpeechStarted", "UtteranceEnd", "Metadata")


def _check(commands: list) -> None:
    for command in commands:
        if isinstance(command, Send):
            assert json.loads(command.text)["type"] in TYPES, command


def TestOneInput(data: bytes) -> None:
    items = messages(data, DRAIN)
    if not items or not isinstance(items[0], str):
        return
    try:
        options, settings = parse_deepgram_query(parse_qs(items[0], keep_blank_values=True),
                                                 search=SearchConfig())
    except OptionError:
        return
    session = DeepgramSession(options, settings, 0.04, request_id="fuzz")
    finished = False
    for n, item in enumerate(items[1:]):
        try:
            commands = session.receive(item)
        except ClientError:
            break
        for command in commands:
            assert isinstance(command, (Feed, Finish, ForceFinal)), command
            if isinstance(command, Feed):
                assert not finished and command.data is item, "audio fed after CloseStream"
                try:
                    feed_audio(command.data, options.encoding, options.channels)
                except AudioInputError:
                    return  # the connection ends with bad_audio
                for channel in range(options.channels):
                    _check(session.result(channel, word_result(n, final=n % 3 == 0)))
            elif isinstance(command, Finish):
                finished = True
        assert session.finished == finished
    if finished:
        out = session.results_ended()
        _check(out)
        assert out[-1] == Close(1000, "")


if __name__ == "__main__":
    fuzz(TestOneInput)
