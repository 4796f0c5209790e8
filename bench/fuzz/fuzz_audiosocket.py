"""Fuzz target: Asterisk AudioSocket over TCP (``AudioSocketProtocol``): the input is the
byte stream, received in pieces whose sizes the first byte picks (1 to 256 bytes each),
then the end of the connection. Invariants: the events are those of the whole stream
received at once (any split gives the same call); ``harness.check_call_events``; a call
that started ends exactly once (a connection closed inside a frame is the one typed
error ``receive_eof`` may raise)."""

from __future__ import annotations

from harness import check_call_events, fuzz, instrumented

with instrumented():
    from streamdec.errors import ClientError
    from streamdec.server.audiosocket import AudioSocketProtocol


def _events(stream: bytes, piece: int) -> tuple[list, bool]:
    protocol = AudioSocketProtocol()
    events = []
    for i in range(0, len(stream), piece):
        events += protocol.receive_data(stream[i:i + piece])
    try:
        events += protocol.receive_eof()
    except ClientError:
        return events, False
    return events, True


def _same(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if type(x) is not type(y):
            return False
        if hasattr(x, "samples"):
            if (x.leg, x.sample_rate) != (y.leg, y.sample_rate) or \
                    x.samples.tobytes() != y.samples.tobytes():
                return False
        elif hasattr(x, "error"):
            if str(x.error) != str(y.error):
                return False
        elif x != y:
            return False
    return True


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    piece, stream = data[0] + 1, data[1:]
    whole, closed = _events(stream, max(1, len(stream)))
    split, split_closed = _events(stream, piece)
    assert closed == split_closed and _same(whole, split), "a split changed the call"
    facts = check_call_events(split)
    if closed and facts["started"] is not None:
        assert facts["ended"], "a started call did not end"


if __name__ == "__main__":
    fuzz(TestOneInput)
