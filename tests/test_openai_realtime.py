"""OpenAI's Realtime transcription sessions at ``/v1/realtime?intent=transcription``, end
to end: the ``openai`` package's own realtime client (from PyPI, unchanged: only its base
URL and API key point here) against a real ``streamdec serve`` on loopback, on real
recorded speech (LibriSpeech, from ``../shared/data/real-en``).

- with server VAD, each utterance gives ``speech_started``, deltas, ``speech_stopped``,
  ``committed`` and ``completed``, whose transcripts are the sherpa-onnx protocol's finals
  for the same audio; the deltas joined are each transcript;
- with turn detection off, only ``commit`` ends an utterance; ``clear`` drops one;
- g711 u-law and A-law at 8 kHz; a bad event gets OpenAI's ``error`` event and the session goes on;
  a wrong key is refused (401).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr
import websockets
from openai import OpenAI

from server_utils import run, sherpa_client, token_server
from streamdec.audio.pcm import decode_pcm
from test_deepgram import CLIPS, SPEECH, g711

KEY = "oa-test-key"
RATE = 24000
COMPLETED = "conversation.item.input_audio_transcription.completed"
DELTA = "conversation.item.input_audio_transcription.delta"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from token_server(tmp_path_factory.mktemp("oa"), KEY)


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    """Two real utterances, 2 s of silence between them, as int16 at 24 kHz."""
    parts = []
    for clip in CLIPS:
        path = SPEECH / clip
        assert path.is_file(), f"real speech missing: {path} (../shared/data/real-en)"
        audio, rate = sf.read(path, dtype="float32")
        parts += [soxr.resample(audio, rate, RATE), np.zeros(2 * RATE, np.float32)]
    audio = np.concatenate(parts[:-1])
    return np.clip(np.round(audio * 32767), -32768, 32767).astype("<i2")


def client(server, key: str = KEY) -> OpenAI:
    return OpenAI(api_key=key, base_url=f"http://127.0.0.1:{server.port}/v1")


def transcribe(server, pcm: bytes, session: dict, piece: int = 4800, commit: bool = True,
               clear_at: int | None = None, extra: list | None = None) -> list:
    """The SDK's realtime client: a session update, the audio appended in pieces (a
    ``clear`` before piece ``clear_at``), a commit; every event until the completions
    asked for have come (or the server has been quiet for 10 s)."""
    events = []
    with client(server).realtime.connect(extra_query={"intent": "transcription"}) as conn:
        events.append(conn.recv())
        conn.session.update(session=session)
        for event in extra or []:
            conn.send(event)
        for n, start in enumerate(range(0, len(pcm), piece)):
            if n == clear_at:
                conn.input_audio_buffer.clear()
            conn.input_audio_buffer.append(audio=base64.b64encode(
                pcm[start:start + piece]).decode())
        if commit:
            conn.input_audio_buffer.commit()
        conn.send({"type": "mark", "event_id": "last"})
        # the error event of that unknown event is the mark that everything before it is
        # answered (the server answers events in order)
        while True:
            event = conn.recv()
            events.append(event)
            if event.type == "error" and event.error.event_id == "last":
                return events


def sherpa_finals(server, pcm16: np.ndarray, rate: int) -> list[str]:
    audio = pcm16.astype(np.float32) / 32768  # the same samples the server decodes
    out = run(sherpa_client(server.url(f"/sherpa?sample_rate={rate}"), audio, 2400,
                            additional_headers={"Authorization": f"Bearer {KEY}"}))
    return [r["text"] for r in out["results"] if r["is_final"] and r["text"]]


SERVER_VAD = {"type": "transcription", "audio": {"input": {
    "format": {"type": "audio/pcm", "rate": 24000},
    "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
    "turn_detection": {"type": "server_vad"}}}}


def test_sdk_server_vad_matches_the_sherpa_protocol(server, speech):
    events = transcribe(server, speech.tobytes(), SERVER_VAD)
    types = [e.type for e in events]
    assert types[0] == "session.created" and types[1] == "session.updated"
    completed = [e for e in events if e.type == COMPLETED]
    assert [e.transcript for e in completed] == sherpa_finals(server, speech, RATE)
    # the first utterance: its events in order, one item
    item = completed[0].item_id
    mine = [e.type for e in events if getattr(e, "item_id", None) == item]
    assert mine[0] == "input_audio_buffer.speech_started"
    assert mine[-3:] == ["input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
                         COMPLETED]
    for c in completed:
        deltas = "".join(e.delta for e in events if e.type == DELTA and e.item_id == c.item_id)
        assert c.transcript.startswith(deltas) and deltas
    assert completed[0].item_id != completed[1].item_id
    committed = [e for e in events if e.type == "input_audio_buffer.committed"]
    assert committed[1].previous_item_id == committed[0].item_id


def test_sdk_no_turn_detection_commit_and_clear(server, speech):
    session = json.loads(json.dumps(SERVER_VAD))
    session["audio"]["input"]["turn_detection"] = None
    pcm = speech.tobytes()
    half = len(speech) // 2 * 2  # bytes: the first utterance and part of the silence
    events = transcribe(server, pcm[:half], session)
    completed = [e for e in events if e.type == COMPLETED]
    assert len(completed) == 1  # silence ended nothing: the commit did
    assert not any(e.type == "input_audio_buffer.speech_stopped" for e in events)
    cleared = transcribe(server, pcm[:half], session, commit=False,
                         clear_at=len(range(0, half, 4800)) - 1)
    assert [e.type for e in cleared].count("input_audio_buffer.cleared") == 1
    assert not any(e.type == COMPLETED for e in cleared)


@pytest.mark.parametrize("fmt, encoding", [("audio/pcmu", "mulaw"), ("audio/pcma", "alaw")])
def test_sdk_g711_at_8k(server, speech, fmt, encoding):
    pcm8 = np.clip(np.round(soxr.resample(speech.astype(np.float32) / 32768, RATE, 8000)
                            * 32767), -32768, 32767).astype("<i2")
    data = g711(pcm8, encoding)
    assert len(data) == len(pcm8)
    session = json.loads(json.dumps(SERVER_VAD))
    session["audio"]["input"]["format"] = {"type": fmt}
    events = transcribe(server, data, session, piece=1600)
    assert events[1].type == "session.updated"
    assert events[1].session.audio.input.format.type == fmt
    completed = [e.transcript for e in events if e.type == COMPLETED]
    decoded = np.round(decode_pcm(data, encoding) * 32768).astype("<i2")
    assert completed == sherpa_finals(server, decoded, 8000) and len(completed) == 2


def test_bad_events_get_error_events_and_the_session_goes_on(server, speech):
    extra = [{"type": "input_audio_buffer.append", "audio": "%%%", "event_id": "e1"},
             {"type": "response.create", "event_id": "e2"},
             {"type": "session.update", "event_id": "e3", "session": {
                 "type": "transcription", "audio": {"input": {"format": {
                     "type": "audio/pcm", "rate": 16000}}}}}]
    events = transcribe(server, speech[:RATE * 3].tobytes(), SERVER_VAD, extra=extra)
    errors = {e.error.event_id: e.error for e in events if e.type == "error"}
    assert errors["e1"].code == "invalid_audio"
    assert errors["e2"].code == "invalid_request" and "response.create" in errors["e2"].message
    assert errors["e3"].code == "invalid_value" and "24000 Hz" in errors["e3"].message
    assert any(e.type == COMPLETED and e.transcript for e in events)


def test_wrong_key_and_intent_are_refused(server):
    async def status(path, key):
        try:
            async with websockets.connect(server.url(path), additional_headers={
                    "Authorization": f"Bearer {key}"}):
                return 101
        except websockets.InvalidStatus as e:
            return e.response.status_code
    assert run(status("/v1/realtime?intent=transcription", "wrong")) == 401
    assert run(status("/v1/realtime?model=gpt-4o-realtime", KEY)) == 400
    assert run(status("/v1/realtime?intent=transcription", KEY)) == 101


def test_the_documented_client_runs(server, speech, tmp_path):
    """clients/openai_realtime.py, the docs' example (turn detection off, one commit),
    prints the sherpa-onnx protocol's transcript of the same audio with no endpoint."""
    wav = tmp_path / "two.wav"
    sf.write(wav, speech, RATE, subtype="PCM_16")
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parents[1] / "clients" /
                             "openai_realtime.py"), str(wav),
         "--url", f"http://127.0.0.1:{server.port}/v1", "--key", KEY],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    never = "rule1_min_trailing_silence=30&rule2_min_trailing_silence=30" \
            "&rule3_min_utterance_length=600"
    audio = speech.astype(np.float32) / 32768
    out = run(sherpa_client(server.url(f"/sherpa?sample_rate={RATE}&{never}"), audio, 2400,
                            additional_headers={"Authorization": f"Bearer {KEY}"}))
    finals = [r["text"] for r in out["results"] if r["is_final"] and r["text"]]
    assert len(finals) == 1 and done.stdout.strip() == finals[0]
