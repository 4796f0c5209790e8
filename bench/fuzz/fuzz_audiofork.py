"""Fuzz target: FreeSWITCH mod_audio_fork (``AudioForkProtocol``): the URL's query (the
first message's text, as ``key=value&...``) and the frames of a call (the rest:
``harness.messages``). Invariants (``harness.check_call_events``): the metadata frame
starts the call once; every audio frame gives each leg the same number of samples, its
bytes / 2 / channels; the rate is 8 or 16 kHz."""

from __future__ import annotations

from urllib.parse import parse_qsl

from harness import check_call_events, fuzz, instrumented, messages

with instrumented():
    from streamdec.errors import ClientError
    from streamdec.server.audiofork import AudioForkProtocol, RATES
    from streamdec.server.call_events import CallAudio


def TestOneInput(data: bytes) -> None:
    items = [m for m in messages(data, None) if m is not None]
    query = items.pop(0) if items and isinstance(items[0], str) else ""
    try:
        protocol = AudioForkProtocol(dict(parse_qsl(query)), "fuzz-call")
    except ClientError:
        return
    events, audio_bytes = [], 0
    for item in items:
        try:
            got = protocol.receive(item)
        except ClientError:
            break
        if isinstance(item, bytes):
            audio_bytes += len(item)
            assert len({e.samples.size for e in got}) <= 1, "legs got different lengths"
            assert all(isinstance(e, CallAudio) and e.sample_rate in RATES.values()
                       for e in got)
        events += got
    facts = check_call_events(events)
    if facts["started"] is not None:
        assert sum(facts["samples"].values()) * 2 == audio_bytes


if __name__ == "__main__":
    fuzz(TestOneInput)
