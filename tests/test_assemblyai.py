"""AssemblyAI's universal streaming protocol (v3) at ``/v3/ws``, end to end: AssemblyAI's own
Python SDK (``assemblyai`` from PyPI, unchanged: only its host, a ``ws://`` URL as its
``api_host`` takes one, and its API key point here) against a real ``streamdec serve`` on
loopback, on real recorded speech (LibriSpeech, read from ``../shared/data/real-en``).

- the SDK's turns end with the same texts and word start times as the sherpa-onnx
  protocol's finals for the same audio, one ``end_of_turn`` per utterance, after partial
  turns; ``Begin`` first, ``Termination`` last; so too ``pcm_mulaw`` at 8 kHz;
- ``ForceEndpoint`` ends a turn at its audio; ``format_turns`` adds the formatted turn;
- the API key is checked as a streamdec token (``Authorization: KEY``; a temporary token
  there or in ``?token=``); a feature only AssemblyAI has is refused at the handshake (the
  SDK's error with 400); audio that cannot be decoded gets AssemblyAI's ``Error`` message
  and close 3007; an update of ``max_turn_silence`` applies to the audio after it, one
  that cannot apply gets a ``Warning``;
- ``bench/daemon/load.py --protocol assemblyai`` runs (a seconds-long smoke).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
from call_common import mulaw_encode  # noqa: E402  (G.711 as the telephony clients send it)

from assemblyai.streaming.v3 import (StreamingClient, StreamingClientOptions,
                                     StreamingEvents, StreamingParameters,
                                     StreamingSessionParameters)
from server_utils import REPO, UNIT, run, sherpa_client, token_server
from streamdec.audio.pcm import decode_pcm
# the same two real utterances, and the sherpa-onnx protocol's results for them (over this
# module's server, whose token is the Deepgram tests' KEY), as the Deepgram tests use
from test_deepgram import (CLIPS, KEY, RATE, SPEECH, pcm16, sherpa,  # noqa: F401
                           sherpa_words, speech)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from token_server(tmp_path_factory.mktemp("aai"), KEY)


def stream(server, audio: bytes, piece: int = 3200, force_at: int | None = None,
           key: str = KEY, temporary: bool = False, **params) -> list:
    """The SDK's streaming client sends ``audio`` in pieces, ``ForceEndpoint`` before piece
    ``force_at``, then ``Terminate``; returns every event it dispatched, in order (an
    error as the SDK's ``StreamingError``). ``temporary``: ``key`` given to the SDK as a
    temporary token, not as the API key."""
    events: list = []
    done = threading.Event()
    client = StreamingClient(StreamingClientOptions(
        api_key=None if temporary else key, token=key if temporary else None,
        api_host=f"ws://127.0.0.1:{server.port}", connect_timeout=10 * UNIT,
        terminate_timeout=60 * UNIT))
    for kind in (StreamingEvents.Begin, StreamingEvents.Turn, StreamingEvents.Termination,
                 StreamingEvents.Warning):
        client.on(kind, lambda _, event: events.append(event))
    client.on(StreamingEvents.Error, lambda _, error: (events.append(error), done.set()))
    client.on(StreamingEvents.Termination, lambda *_: done.set())
    client.connect(StreamingParameters(**{"sample_rate": RATE, **params}))
    for n, start in enumerate(range(0, len(audio), piece)):
        if n == force_at:
            client.force_endpoint()
        client.stream(audio[start:start + piece])
    client.disconnect(terminate=True)
    assert done.is_set(), f"neither Termination nor an error: {events[-3:]}"
    return events


def ends(events) -> list:
    return [e for e in events if getattr(e, "type", None) == "Turn" and e.end_of_turn
            and not e.turn_is_formatted]


def words(turns) -> list[tuple[str, float]]:
    return [(w.text, round(w.start / 1000, 2)) for t in turns for w in t.words]


def test_sdk_turns_match_the_sherpa_protocol(server, speech, sherpa):
    events = stream(server, pcm16(speech))
    assert events[0].type == "Begin" and events[-1].type == "Termination"
    got = ends(events)
    texts = [r["text"] for r in sherpa if r["is_final"] and r["text"]]
    assert len(texts) == 2
    assert [t.transcript for t in got] == texts
    assert [t.turn_order for t in got] == [0, 1]
    ours, theirs = words(got), sherpa_words(sherpa)
    assert [w for w, _ in ours] == [w for w, _ in theirs]
    assert np.allclose([t for _, t in ours], [t for _, t in theirs], atol=0.0101)
    partial = [e for e in events if e.type == "Turn" and not e.end_of_turn]
    assert partial and {p.turn_order for p in partial} == {0, 1}
    for turn in partial:  # a partial turn's transcript: its final words
        assert turn.transcript == " ".join(w.text for w in turn.words if w.word_is_final)
    for turn in got:
        assert turn.end_of_turn_confidence == 1.0
        for w in turn.words:
            assert 0 <= w.start < w.end and 0 < w.confidence <= 1 and w.word_is_final
    assert events[-1].audio_duration_seconds == round(len(speech) / RATE)


def first_utterance(speech: np.ndarray) -> np.ndarray:
    """The first utterance and the 2 s of silence after it (its end of turn comes there)."""
    return speech[:sf.info(SPEECH / CLIPS[0]).frames + 2 * RATE]


def test_the_documented_client_runs(server, speech, sherpa, tmp_path):
    """clients/assemblyai_live.py, the docs' example, prints the turns with word times."""
    wav = tmp_path / "one.wav"
    audio = first_utterance(speech)
    sf.write(wav, audio, RATE, subtype="PCM_16")
    done = subprocess.run(
        [sys.executable, str(REPO / "clients" / "assemblyai_live.py"), str(wav),
         "--url", f"ws://127.0.0.1:{server.port}", "--key", KEY],
        capture_output=True, text=True, timeout=120 * UNIT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    first = next(r for r in sherpa if r["is_final"] and r["text"])
    (turn,) = lines[:-1]
    text, times = turn.split("    [")
    assert text == first["text"]
    ours = [(w.rsplit("@", 1)[0], float(w.rsplit("@", 1)[1])) for w in times[:-1].split()]
    theirs = sherpa_words([first])
    assert [w for w, _ in ours] == [w for w, _ in theirs]
    assert np.allclose([t for _, t in ours], [t for _, t in theirs], atol=0.0101)
    assert lines[-1] == f"({round(len(audio) / RATE)} s of audio)"


def test_sdk_mulaw_at_8k_matches_the_sherpa_protocol(server, speech):
    """``pcm_mulaw`` at 8 kHz (G.711 as the telephony clients encode it): the same finals
    and word times as the sherpa-onnx protocol on the samples the server decodes."""
    pcm8 = soxr.resample(first_utterance(speech), RATE, 8000)
    ulaw = mulaw_encode(np.clip(np.round(pcm8 * 32767), -32768, 32767).astype("<i2"))
    events = stream(server, ulaw, piece=800, encoding="pcm_mulaw", sample_rate=8000)
    decoded = decode_pcm(ulaw, "mulaw")
    sherpa8 = run(sherpa_client(server.url("/sherpa?sample_rate=8000"), decoded, 800,
                                additional_headers={"Authorization": f"Bearer {KEY}"}))
    theirs = [r for r in sherpa8["results"] if r["is_final"] and r["text"]]
    got = ends(events)
    assert [t.transcript for t in got] == [r["text"] for r in theirs] and len(got) == 1
    ours = words(got)
    assert [w for w, _ in ours] == [w for w, _ in sherpa_words(theirs)]
    assert np.allclose([t for _, t in ours], [t for _, t in sherpa_words(theirs)],
                       atol=0.0101)


def test_sdk_force_endpoint_and_formatted_turns(server, speech):
    first = len(speech) // 4  # inside the first utterance
    events = stream(server, pcm16(speech), force_at=first * 2 // 3200, format_turns=True)
    raw = ends(events)
    formatted = [e for e in events if e.type == "Turn" and e.turn_is_formatted]
    assert len(raw) == 3  # the forced turn, then the two ends of the utterances' rest
    assert [t.turn_order for t in formatted] == [t.turn_order for t in raw] == [0, 1, 2]
    assert raw[0].words[-1].end / 1000 <= first / RATE + 0.35  # its audio, padded at most
    for r, f in zip(raw, formatted):
        assert f.end_of_turn and f.transcript and f.transcript != r.transcript
        assert f.transcript.lower().strip(".?!,") != ""
        assert [w.start for w in f.words] == [w.start for w in r.words]


def test_sdk_update_configuration_changes_the_silence_that_ends_a_turn(server, speech,
                                                                        sherpa):
    """``set_params`` (UpdateConfiguration) with a ``max_turn_silence`` longer than the 2 s
    between the utterances, sent after the stream began: the first turn goes on past the
    silence into the second utterance."""
    events: list = []
    client = StreamingClient(StreamingClientOptions(
        api_key=KEY, api_host=f"ws://127.0.0.1:{server.port}", connect_timeout=10 * UNIT,
        terminate_timeout=60 * UNIT))
    client.on(StreamingEvents.Turn, lambda _, event: events.append(event))
    client.on(StreamingEvents.Error, lambda _, error: events.append(error))
    client.connect(StreamingParameters(sample_rate=RATE))
    audio = pcm16(speech[:len(first_utterance(speech)) + 3 * RATE])  # 3 s of the second
    client.stream(audio[:3200])
    client.set_params(StreamingSessionParameters(max_turn_silence=5000))
    client.stream(audio[3200 + n:3200 + n + 3200] for n in range(0, len(audio) - 3200, 3200))
    client.disconnect(terminate=True)
    texts = [r["text"] for r in sherpa if r["is_final"] and r["text"]]
    got = [e.transcript for e in ends(events)]
    assert got and got[0].startswith(texts[0] + " ") and got[0] != texts[0], got


@pytest.mark.parametrize("params, key, status", [
    ({"speaker_labels": True}, KEY, 400),  # a feature only AssemblyAI has
    ({"encoding": "opus"}, KEY, 400),  # a codec
    ({"language_code": "es"}, KEY, 400),
    ({}, "wrong-key", 401),
])
def test_sdk_refused_handshakes(server, params, key, status):
    (error,) = stream(server, b"\0\0" * 1600, key=key, **params)
    assert error.code == status and f"HTTP {status}" in str(error)


def test_sdk_with_a_temporary_token(server, speech):
    events = stream(server, pcm16(speech[:RATE]), temporary=True)
    assert [e.type for e in (events[0], events[-1])] == ["Begin", "Termination"]
    assert events[-1].audio_duration_seconds == 1
    (error,) = stream(server, b"\0\0" * 1600, key="expired", temporary=True)
    assert error.code == 401


def test_temporary_token_in_the_query_and_update_configuration(server):
    async def go():
        url = server.url(f"/v3/ws?sample_rate=16000&token={KEY}")
        async with websockets.connect(url) as ws:
            begin = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "UpdateConfiguration",
                                      "keyterms_prompt": ["call"]}))
            warning = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "Terminate"}))
            termination = json.loads(await ws.recv())
            with pytest.raises(websockets.ConnectionClosedOK):
                await ws.recv()
            return begin, warning, termination, ws.close_code
    begin, warning, termination, code = run(go())
    assert begin["type"] == "Begin" and begin["expires_at"] > 0
    assert (warning["type"], warning["warning_code"]) == ("Warning", 3006)
    assert termination == {"type": "Termination", "audio_duration_seconds": 0,
                           "session_duration_seconds": termination["session_duration_seconds"]}
    assert code == 1000


def test_bad_audio_gets_assemblyai_error_and_close(server):
    """Half a sample: AssemblyAI's Error message, then the close with its code, 3007; the
    SDK reports it as its error with that code."""
    async def go(url):
        async with websockets.connect(url, additional_headers={"Authorization": KEY}) as ws:
            assert json.loads(await ws.recv())["type"] == "Begin"
            await ws.send(b"\0\0\0")
            message = json.loads(await ws.recv())
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            return message, ws.close_code
    message, code = run(go(server.url("/v3/ws?sample_rate=16000")))
    assert message["type"] == "Error" and message["error_code"] == 3007
    assert "whole number" in message["error"] and code == 3007
    events = stream(server, b"\0\0\0")
    assert events[0].type == "Begin" and events[-1].code == 3007


@pytest.mark.slow
def test_load_generator_speaks_assemblyai(tmp_path):
    """``bench/daemon/load.py --protocol assemblyai``, seconds long: two real-time clients
    against a server it starts; every utterance's end of turn comes, none late, and the
    words' times are timed as chunk latencies."""
    from test_perf_bench import run_bench
    report = run_bench("daemon/load.py", tmp_path / "load.json", "--peer", "streamdec",
                       "--streams", "2", "--seconds", "3", "--warmup", "0", "--grace", "20",
                       "--protocol", "assemblyai")
    assert report["setup"]["protocol"] == "assemblyai"
    (conf,) = report["configurations"]
    figures = conf["streamdec"]
    assert figures["unfinished"]["median"] == 0 and figures["client_errors"] == [[]]
    finals = figures["finals"]
    assert finals["utterances"]["median"] >= 2
    assert finals["received"]["median"] == finals["utterances"]["median"]
    assert finals["lost"]["median"] == finals["late"]["median"] == finals["split"]["median"] == 0
    assert figures["unmatched_tokens"]["median"] == 0
    assert figures["chunk_latency_ms"]["results"]["median"] >= 1
