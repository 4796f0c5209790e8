"""Fuzz target: an AssemblyAI streaming client (``AssemblyAISession``): its handshake query
(the first message's text, read as a URL query string by ``parse_assemblyai_query``),
then its messages (``harness.messages``) and their audio as the connection feeds it; and
results handed back for each Feed. Invariants: a refused query is an ``OptionError``; the
session opens with ``Begin``; audio is fed exactly as sent until ``Terminate`` (or the
drain), never after; every command is one the protocol gives; every message out is JSON of
an AssemblyAI type, its turns numbered in order; a finished session ends with
``Termination`` and a normal close."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from harness import feed_audio, fuzz, instrumented, messages, word_result

with instrumented():
    from streamdec import SearchConfig
    from streamdec.errors import AudioInputError, ClientError, OptionError
    from streamdec.server.assemblyai import AssemblyAISession, parse_assemblyai_query
    from streamdec.server.session import DRAIN, Close, Feed, Finish, ForceFinal, Retune, Send

TYPES = ("Begin", "Turn", "Termination", "Warning")


def _check(commands: list, turns: list[int]) -> None:
    """Each Send is JSON of an AssemblyAI type; ``turns``: the turn orders seen so far."""
    for command in commands:
        if isinstance(command, Send):
            message = json.loads(command.text)
            assert message["type"] in TYPES, command
            if message["type"] == "Turn":
                assert not turns or message["turn_order"] in (turns[-1], turns[-1] + 1)
                turns.append(message["turn_order"])


def TestOneInput(data: bytes) -> None:
    items = messages(data, DRAIN)
    if not items or not isinstance(items[0], str):
        return
    try:
        options = parse_assemblyai_query(parse_qs(items[0], keep_blank_values=True),
                                         search=SearchConfig())
    except OptionError:
        return
    session = AssemblyAISession(options, session_id="fuzz")
    (begin,) = session.opening()
    assert json.loads(begin.text)["type"] == "Begin"
    finished, turns = False, []
    for n, item in enumerate(items[1:]):
        try:
            commands = session.receive(item)
        except ClientError:
            break
        for command in commands:
            assert isinstance(command, (Feed, Finish, ForceFinal, Retune, Send)), command
            if isinstance(command, Feed):
                assert not finished and command.data is item, "audio fed after Terminate"
                try:
                    feed_audio(command.data, options.encoding, options.channels)
                except AudioInputError:
                    return  # the connection ends with bad_audio
                _check(session.result(0, word_result(n, final=n % 3 == 0)), turns)
            elif isinstance(command, Finish):
                finished = True
            elif isinstance(command, Retune):
                assert command.options.sample_rate == options.sample_rate
            _check([command], turns)
        assert session.finished == finished
    if finished:
        out = session.results_ended()
        assert json.loads(out[0].text)["type"] == "Termination"
        assert out[-1] == Close(1000, "")


if __name__ == "__main__":
    fuzz(TestOneInput)
