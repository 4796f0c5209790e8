"""Fuzz target: a sherpa-onnx WebSocket client (``SherpaSession``), its messages
(``harness.messages``; the first byte picks 1 or 2 channels) and their audio as the
connection feeds it. Invariants: audio is fed exactly as sent until ``Done`` or the drain,
never after; every command is one the protocol gives; a finished session ends with
``Done!`` and a normal close."""

from __future__ import annotations

from harness import feed_audio, fuzz, instrumented, messages

with instrumented():
    from streamdec.errors import AudioInputError, ClientError
    from streamdec.server.session import DRAIN, Close, Feed, Finish, ForceFinal, Send
    from streamdec.server.sherpa import SherpaSession


def TestOneInput(data: bytes) -> None:
    channels = 1 + (data[0] % 2 if data else 0)
    session = SherpaSession(channels, 0.04)
    finished = False
    for item in messages(data[1:], DRAIN):
        try:
            commands = session.receive(item)
        except ClientError:
            break
        for command in commands:
            assert isinstance(command, (Feed, Finish, ForceFinal)), command
            if isinstance(command, Feed):
                assert not finished and command.data is item, "audio fed after Done"
                try:
                    feed_audio(command.data, "f32le", channels)
                except AudioInputError:
                    return  # the connection ends with bad_audio
            elif isinstance(command, Finish):
                finished = True
        assert session.finished == finished
    if finished:
        assert session.results_ended() == [Send("Done!"), Close(1000, "done")]


if __name__ == "__main__":
    fuzz(TestOneInput)
