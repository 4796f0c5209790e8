"""Fuzz target: Twilio Media Streams (``TwilioProtocol``), the JSON text frames of a call
(``harness.messages``). Invariants (``harness.check_call_events``): the call starts once,
first; it ends once, last, and nothing is taken after ``stop``; each track's samples
are the ones placed on its timeline (audio and the silence of gaps)."""

from __future__ import annotations

from harness import check_call_events, fuzz, instrumented, messages

with instrumented():
    from streamdec.errors import ClientError
    from streamdec.server.twilio import TwilioProtocol


def TestOneInput(data: bytes) -> None:
    protocol = TwilioProtocol()
    events = []
    for item in messages(data, None):
        if item is None:
            continue  # a call has no drain message of its own
        try:
            events += protocol.receive(item)
        except ClientError:
            break
    facts = check_call_events(events)
    assert facts["ended"] == protocol.ended
    assert list(facts["samples"].values()) == protocol.placed


if __name__ == "__main__":
    fuzz(TestOneInput)
