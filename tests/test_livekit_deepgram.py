"""LiveKit Agents' Deepgram plugin (``livekit-plugins-deepgram`` from PyPI, unchanged) against
a real ``streamdec serve`` on loopback, outside any LiveKit room: its ``STT.stream()`` fed
real recorded speech (the utterances of tests/test_deepgram.py) as ``rtc.AudioFrame``s by
clients/livekit_deepgram.py, the client docs/deepgram.md shows.

- its FINAL_TRANSCRIPT events have the sherpa-onnx protocol's finals for the same audio and
  options (the plugin asks for ``punctuate``: ``text_format=punct``): the same texts and
  words, word times within 10 ms; interim transcripts come before each final, speech starts
  and ends as Deepgram's messages say, and the stream ends with the server's close 1000
  after every sample was decoded;
- the two options the client sets: the plugin's default ``filler_words=true`` is refused at
  the handshake (the plugin's ``APIStatusError`` with 400), and its default
  ``endpointing_ms=25`` ends an utterance at pauses inside a sentence.
"""

from __future__ import annotations

import asyncio
import sys

import numpy as np
import pytest
from livekit.agents import APIStatusError, stt

from server_utils import REPO, UNIT, run, sherpa_client, wait_for_logged
from test_deepgram import KEY, RATE, pcm16, server, speech  # noqa: F401  (fixtures)

sys.path.insert(0, str(REPO / "clients"))
from livekit_deepgram import transcribe  # noqa: E402  (the docs' client)

Event = stt.SpeechEventType


def pcm(audio: np.ndarray) -> np.ndarray:
    return np.frombuffer(pcm16(audio), "<i2")


def finals(events: list[stt.SpeechEvent]) -> list[stt.SpeechData]:
    return [e.alternatives[0] for e in events if e.type == Event.FINAL_TRANSCRIPT]


async def plugin_and_sherpa(server, audio: np.ndarray, **options):
    """The plugin's events for ``audio`` and, at the same time on the same server, the
    sherpa-onnx protocol's finals with text (punctuated) for the int16 values it sends."""
    samples = pcm(audio)
    sherpa = sherpa_client(server.url("/sherpa?text_format=punct"),
                           samples.astype(np.float32) / 32768, 1600,
                           additional_headers={"Authorization": f"Bearer {KEY}"})
    plugin = transcribe(samples, RATE, f"http://127.0.0.1:{server.port}", KEY, **options)
    events, out = await asyncio.wait_for(asyncio.gather(plugin, sherpa), 120 * UNIT)
    return events, [r for r in out["results"] if r["is_final"] and r["text"]]


def test_plugin_finals_match_the_sherpa_protocol(server, speech):
    before = len(server.connections_logged())
    events, sherpa = run(plugin_and_sherpa(server, speech))
    assert len(sherpa) == 2
    got = finals(events)
    assert [f.text for f in got] == [r["display"] for r in sherpa]
    ours = [(str(w), w.start_time, w.end_time) for f in got for w in f.words]
    theirs = [(w["word"], w["start"], w["end"]) for r in sherpa for w in r["display_words"]]
    assert [w for w, _, _ in ours] == [w for w, _, _ in theirs]
    assert np.allclose([t for _, *t in ours], [t for _, *t in theirs], atol=0.0101)
    for f in got:
        assert (f.start_time, f.end_time) == (f.words[0].start_time, f.words[-1].end_time)
        assert 0 < f.confidence <= 1

    # interim transcripts before each final; speech ends where the endpoint rules ended it
    # (speech_final), not after the last final (closed by the plugin's Finalize)
    kinds = [e.type for e in events if e.type != Event.RECOGNITION_USAGE]
    assert [k for k in kinds if k != Event.INTERIM_TRANSCRIPT] == [
        Event.START_OF_SPEECH, Event.FINAL_TRANSCRIPT, Event.END_OF_SPEECH,
        Event.START_OF_SPEECH, Event.FINAL_TRANSCRIPT]
    starts = [n for n, k in enumerate(kinds) if k == Event.START_OF_SPEECH]
    ends = [n for n, k in enumerate(kinds) if k == Event.FINAL_TRANSCRIPT]
    for start, end in zip(starts, ends):
        assert Event.INTERIM_TRANSCRIPT in kinds[start:end]

    # the stream ended as Deepgram's does: every sample decoded, then the close 1000
    lines = wait_for_logged(server, before, lambda lines: len(lines) >= 2)
    [line] = [line for line in lines if line["protocol"] == "deepgram"]
    assert (line["close_code"], line["close_reason"]) == (1000, "normal")
    assert line["audio_seconds"] == pytest.approx(len(speech) / RATE, abs=1e-3)


def test_plugin_default_endpointing_ends_utterances_inside_a_sentence(server, speech):
    """``endpointing_ms=25`` (the plugin's default): the rule for silence after speech fires
    after 25 ms without a new token, at pauses inside the sentence; one final there with
    the server's rule (1200 ms, as the sherpa-onnx protocol)."""
    first = speech[:RATE * 13]  # the first utterance (12.59 s), the silence after it begun
    events, sherpa = run(plugin_and_sherpa(server, first, endpointing_ms=25))
    assert len(sherpa) == 1
    assert len(finals(events)) > 3


def test_plugin_default_filler_words_is_refused(server, speech):
    """Deepgram's ``filler_words=true`` (the plugin's default) asks for the fillers Deepgram's
    models write: refused at the handshake, as Deepgram answers an unsupported option."""
    with pytest.raises(APIStatusError) as e:
        run(asyncio.wait_for(transcribe(pcm(speech[:RATE // 10]), RATE,
                                        f"http://127.0.0.1:{server.port}", KEY,
                                        filler_words=True), 30 * UNIT))
    assert e.value.status_code == 400
