"""Fuzz target: an OpenAI Realtime transcription client (``RealtimeSession``): its events
(``harness.messages``) and their audio as the connection feeds it, and results handed
back at each ``Reply``. Invariants: a bad event is answered in band (an ``error`` event;
nothing is raised); audio is fed only as whole samples of the session's format; every
command is one the protocol gives; every message out is JSON of one of OpenAI's types."""

from __future__ import annotations

import json

from harness import feed_audio, fuzz, instrumented, messages, word_result

with instrumented():
    from streamdec.core.endpoint import EndpointConfig
    from streamdec.server.options import StreamOptions
    from streamdec.server.realtime import RealtimeSession
    from streamdec.server.session import (DRAIN, Close, Feed, Finish, ForceFinal, Reopen,
                                          Reply, Retune, Send)

TYPES = ("session.created", "session.updated", "transcription_session.updated", "error",
         "input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
         "input_audio_buffer.committed", "input_audio_buffer.cleared",
         "conversation.item.input_audio_transcription.delta",
         "conversation.item.input_audio_transcription.completed")


def _check(commands: list) -> None:
    for command in commands:
        assert isinstance(command, Send), command
        assert json.loads(command.text)["type"] in TYPES, command


def TestOneInput(data: bytes) -> None:
    session = RealtimeSession(StreamOptions(24000, "s16le"), EndpointConfig())
    _check(session.opening())
    for n, item in enumerate(messages(data, DRAIN)):
        commands = session.receive(item)  # never raises: errors are events
        for command in commands:
            assert isinstance(command, (Feed, Finish, ForceFinal, Reply, Send, Reopen, Retune,
                                        Close)), command
            if isinstance(command, Feed):
                feed_audio(command.data, session.options.encoding, 1)  # whole samples
            elif isinstance(command, Reply):
                _check(session.reply(0, [word_result(n, False), word_result(n, n % 2 == 0)], n))
            elif isinstance(command, Send):
                _check([command])
        if item is DRAIN:
            return


if __name__ == "__main__":
    fuzz(TestOneInput)
