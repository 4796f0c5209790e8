"""Fuzz target: a Vosk WebSocket client (``VoskSession``), its messages
(``harness.messages``) and their audio as the connection feeds it; each ``Reply`` is
answered with the channel's (empty) results. Invariants: every audio message gets
exactly one reply per channel; a config message comes only before the audio and its
options are valid ones (rate in range, alternatives within the limit); eof and the drain
close the session."""

from __future__ import annotations

from harness import feed_audio, fuzz, instrumented, messages

with instrumented():
    from streamdec import SearchConfig
    from streamdec.errors import AudioInputError, ClientError
    from streamdec.server.options import MAX_RATE, MIN_RATE, StreamOptions
    from streamdec.server.session import (DRAIN, Close, Feed, Finish, Reopen, Reply, Retune,
                                          Send)
    from streamdec.server.vosk import MAX_ALTERNATIVES, VoskSession

GREEDY = SearchConfig()


def TestOneInput(data: bytes) -> None:
    channels = 1 + (data[0] % 2 if data else 0)
    session = VoskSession(StreamOptions(8000, "s16le", channels=channels), GREEDY)
    seconds = 0.0
    for item in messages(data[1:], DRAIN):
        try:
            commands = session.receive(item)
        except ClientError:
            return
        kinds = [type(c) for c in commands]
        if isinstance(item, bytes):
            assert commands == [Feed(item), Reply()]
            try:
                fed = feed_audio(item, "s16le", channels)
            except AudioInputError:
                return  # the connection ends with bad_audio
            seconds += len(fed[0]) / session.options.sample_rate if fed else 0.0
        for command in commands:
            if isinstance(command, Reply):
                for channel in range(channels):
                    [send] = session.reply(channel, [], seconds)
                    assert isinstance(send, Send) and send.text.startswith("{")
            elif isinstance(command, (Reopen, Retune)):
                options = command.options
                assert MIN_RATE <= options.sample_rate <= MAX_RATE
                search = options.search or GREEDY
                assert 1 <= search.nbest <= max(1, MAX_ALTERNATIVES)
        if Close in kinds:
            assert kinds[-1] is Close and Finish in kinds
            return


if __name__ == "__main__":
    fuzz(TestOneInput)
