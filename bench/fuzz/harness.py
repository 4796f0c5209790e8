"""What every fuzz target shares: the one error a door may raise, the framing that turns
a fuzzer's bytes into a WebSocket peer's messages, and the invariants of a call's events.

A target module ``fuzz_NAME.py`` has ``TestOneInput(data: bytes)``: it feeds ``data`` to
one door (a protocol session, a parser, a file reader) as the server or the command line
would, lets the project's own typed errors (``streamdec.errors.StreamdecError``) pass
as the door's answer, and fails (raises ``AssertionError``) when an invariant of what
came out is broken. Any other exception is a crash: a bug.

Messages of a WebSocket peer (``messages`` / ``encode_messages``): each is one tag byte
(``tag % 3``: 0 binary, 1 text, 2 the server's drain, which carries nothing), a 2-byte
big-endian length and the payload (the input's last message takes what is left); text
is the payload read as UTF-8 with undecodable bytes replaced (a WebSocket text frame is
always valid UTF-8).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Iterable

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

__all__ = ["DRAIN_TAG", "messages", "encode_messages", "drive", "check_call_events",
           "instrumented", "fuzz", "feed_audio", "word_result", "scratch_file", "FUZZING_ENV"]

#: set (to 1) by ``run.py`` in a target's process: its imports of the project are
#: instrumented for coverage and ``fuzz`` runs libFuzzer's engine
FUZZING_ENV = "STREAMDEC_FUZZING"
#: the folder ``run.py`` gives a target's scratch files (``scratch_file``)
SCRATCH_ENV = "STREAMDEC_FUZZ_SCRATCH"

BINARY_TAG, TEXT_TAG, DRAIN_TAG = 0, 1, 2


def messages(data: bytes, drain=None) -> list:
    """The peer's messages in ``data``: bytes, str, or ``drain`` for the drain."""
    out, i = [], 0
    while i < len(data):
        tag = data[i] % 3
        if tag == DRAIN_TAG:
            out.append(drain)
            i += 1
            continue
        length = int.from_bytes(data[i + 1:i + 3], "big")
        payload = data[i + 3:i + 3 + length]
        i += 3 + length
        out.append(payload if tag == BINARY_TAG else payload.decode("utf-8", "replace"))
    return out


def encode_messages(items: Iterable) -> bytes:
    """The inverse of ``messages``: bytes / str items, anything else the drain."""
    out = bytearray()
    for item in items:
        if isinstance(item, (bytes, bytearray)):
            payload, tag = bytes(item), BINARY_TAG
        elif isinstance(item, str):
            payload, tag = item.encode("utf-8"), TEXT_TAG
        else:
            out.append(DRAIN_TAG)
            continue
        if len(payload) > 0xFFFF:
            raise ValueError(f"a message of {len(payload)} bytes does not fit the framing")
        out += bytes([tag]) + len(payload).to_bytes(2, "big") + payload
    return bytes(out)


def instrumented(*extra: str):
    """The context a target imports the project (and ``extra`` modules of the door:
    ``tomllib``, ``tarfile``) in: instrumented for coverage when fuzzing, else nothing."""
    if not os.environ.get(FUZZING_ENV):
        return contextlib.nullcontext()
    import atheris

    return atheris.instrument_imports(include=["streamdec", *extra])


def fuzz(test_one_input) -> None:
    """Run libFuzzer's engine on ``test_one_input`` with this process's arguments (a
    corpus folder, ``-max_total_time=``, ``-timeout=``, ``-rss_limit_mb=``: ``run.py``)."""
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


def scratch_file(name: str) -> Path:
    """A path ``name`` in a folder of its own for this process: where a file target
    writes each input as the file its door reads (a config, tokens.txt, an archive). The
    folder is under ``SCRATCH_ENV``'s (``run.py``'s work folder, which it removes) or else
    a temporary one removed when the process ends."""
    import atexit
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="streamdec-fuzz-", dir=os.environ.get(SCRATCH_ENV)))
    atexit.register(shutil.rmtree, folder, True)
    return folder / name


def feed_audio(data: bytes, encoding: str, channels: int) -> list:
    """A Feed's audio as the connection takes it (``Connection``'s feed): decoded, split
    into channels, each checked as a stream accepts it. AudioInputError for unusable
    audio (the connection's ``bad_audio``); empty data is no audio."""
    from streamdec.audio.features import as_float_samples
    from streamdec.audio.pcm import decode_pcm, deinterleave

    if not data:
        return []
    samples = decode_pcm(data, encoding, channels)
    return [as_float_samples(c) for c in deinterleave(samples, channels)]


def word_result(n: int, final: bool):
    """The ``n``-th result a stream hands a protocol session: the word "yes" at 0.1 n s
    (a partial's stable part varies with n), for the sessions' reply and push paths."""
    from streamdec.core.results import Result, Word

    word = Word("yes", 0.1 * n, 0.1 * n + 0.08, 0.9)
    return Result(text="yes", tokens=("\u2581yes",), token_ids=(1,), timestamps=(0.0,),
                  log_probs=(-0.1,), segment=n, start_time=0.1 * n, end_time=0.1 * n + 0.1,
                  is_final=final, words=(word,), stable_chars=3 if final else n % 4)


def drive(receive, items) -> tuple[list, object]:
    """``receive`` each item in turn as the connection does: until the first ClientError,
    which ends the connection. (what came out, per message; the error or None)"""
    from streamdec.errors import ClientError

    outputs = []
    for item in items:
        try:
            outputs.append(receive(item))
        except ClientError as e:
            return outputs, e
    return outputs, None


def check_call_events(events: list, legs_of=None) -> dict:
    """The invariants of one call's events (``streamdec.server.call_events``), in order: a
    call starts at most once and first of all; it ends (``CallEnded`` / ``CallFailed``) at
    most once and nothing follows the end; audio names a leg of the call and is float32 in
    [-1, 1]. Returns the samples per leg."""
    from streamdec.server.call_events import CallAudio, CallEnded, CallFailed, CallStarted

    started, ended, samples = None, False, {}
    for n, event in enumerate(events):
        assert not ended, f"event {event!r} after the call ended"
        if isinstance(event, CallStarted):
            assert started is None and n == 0, "a second start, or a start after other events"
            started = event
            samples = {leg: 0 for leg in range(len(event.legs))}
        elif isinstance(event, (CallEnded, CallFailed)):
            ended = True
        else:
            assert started is not None, f"{event!r} before the call started"
        if isinstance(event, CallAudio):
            assert event.leg in samples, f"audio of leg {event.leg} of a {len(samples)}-leg call"
            assert event.samples.dtype.name == "float32" and event.samples.ndim == 1
            if event.samples.size:
                assert float(abs(event.samples).max()) <= 1.0
            samples[event.leg] += event.samples.size
    return {"started": started, "ended": ended, "samples": samples}
