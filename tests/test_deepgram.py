"""Deepgram's live protocol at ``/v1/listen``, end to end: Deepgram's own Python SDK
(``deepgram-sdk`` from PyPI, unchanged: only its base URL and API key point here) against a
real ``streamdec serve`` on loopback, on real recorded speech (LibriSpeech, read from
``../shared/data/real-en``).

- the SDK's finals have the same texts and word start times as the sherpa-onnx protocol's
  for the same audio, one ``speech_final`` per utterance, then ``Metadata``;
- ``Finalize`` gives a final with ``from_finalize``; interim results, ``SpeechStarted`` and
  ``UtteranceEnd`` come when asked for; stereo audio gives one result per channel; G.711
  A-law at 8 kHz gives the sherpa-onnx protocol's finals for the same samples;
- the API key is checked as a streamdec token (``Authorization: Token KEY``); a feature
  only Deepgram has is refused at the handshake (the SDK's ``ApiError`` with 400); audio
  that cannot be decoded gets Deepgram's ``Error`` message and close 1008 ``DATA-0000``.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import numpy as np
import pytest
import soundfile as sf
import soxr
import websockets

from server_utils import REPO, UNIT, run, sherpa_client, token_server
from shared_data import REAL_EN
from streamdec.audio.pcm import decode_pcm

from deepgram import DeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.core.events import EventType
from deepgram.environment import DeepgramClientEnvironment

sys.path.insert(0, str(REPO / "clients"))
from call_common import mulaw_encode  # noqa: E402  (G.711 as the telephony clients send it)

KEY = "dg-test-key"
SPEECH = REAL_EN / "mini_librispeech_train_clean_5"
CLIPS = ("audio/LibriSpeech/train-clean-5/1088/134315/1088-134315-0002.opus",
         "audio/LibriSpeech/train-clean-5/1088/134315/1088-134315-0000.opus")
RATE = 16000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from token_server(tmp_path_factory.mktemp("dg"), KEY)


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    """Two real utterances with 2 s of silence between them (two segments), float32."""
    parts = []
    for clip in CLIPS:
        path = SPEECH / clip
        assert path.is_file(), f"real speech missing: {path} (../shared/data/real-en)"
        audio, rate = sf.read(path, dtype="float32")
        assert rate == RATE
        parts += [audio, np.zeros(2 * RATE, np.float32)]
    return np.concatenate(parts[:-1])


@pytest.fixture(scope="module")
def sherpa(server, speech) -> list[dict]:
    """The sherpa-onnx protocol's results for the same audio (int16 values, as the
    Deepgram clients send them), the reference every test here compares with."""
    audio = (np.clip(speech, -1, 1) * 32767).round().astype(np.float32) / 32768
    out = run(sherpa_client(server.url("/sherpa"), audio, 1600,
                            additional_headers={"Authorization": f"Bearer {KEY}"}))
    return out["results"]


def client(server) -> DeepgramClient:
    base = f"127.0.0.1:{server.port}"
    env = DeepgramClientEnvironment(base=f"http://{base}", production=f"ws://{base}",
                                    agent=f"ws://{base}", agent_rest=f"http://{base}")
    return DeepgramClient(api_key=KEY, environment=env)


# a refused handshake: the SDK's ApiError, or (its sync client on websockets >= 14, whose
# refusal it does not recognise) websockets' InvalidStatus
REFUSED = (ApiError, websockets.InvalidStatus)


def refused_status(error: Exception) -> int:
    return error.status_code if isinstance(error, ApiError) else error.response.status_code


def pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).round().astype("<i2").tobytes()


def stream(server, audio: bytes, piece: int = 3200, finalize_at: int | None = None,
           **params) -> list:
    """The SDK's live client (sync) sends ``audio`` in pieces, ``Finalize`` before piece
    ``finalize_at``, then ``CloseStream``; returns every message it parsed, in order."""
    messages: list = []
    params = {"model": "nova-3", "encoding": "linear16", "sample_rate": RATE, **params}
    with client(server).listen.v1.connect(**params) as socket:
        socket.on(EventType.MESSAGE, messages.append)
        listener = threading.Thread(target=socket.start_listening, daemon=True)
        listener.start()
        for n, start in enumerate(range(0, len(audio), piece)):
            if n == finalize_at:
                socket.send_finalize()
            socket.send_media(audio[start:start + piece])
        socket.send_close_stream()
        listener.join(60 * UNIT)
        assert not listener.is_alive(), "the server did not close the stream"
    return messages


def finals(messages) -> list:
    return [m for m in messages if m.type == "Results" and m.is_final]


def words(results) -> list[tuple[str, float]]:
    return [(w.word, round(w.start, 2)) for r in results
            for w in r.channel.alternatives[0].words]


def sherpa_words(results: list[dict]) -> list[tuple[str, float]]:
    """(word, start) of sherpa-onnx finals, from their tokens: a token that opens with the
    word boundary (shown as a space) starts a word, at the time of its first letter (the
    next token's when the boundary is a token of its own)."""
    out: list[list] = []
    for r in results:
        if not r["is_final"]:
            continue
        for n, (token, t) in enumerate(zip(r["tokens"], r["timestamps"])):
            at = round(r["start_time"] + t, 2)
            if n == 0 or token.startswith(" "):
                out.append([token.strip(), at if token.strip() else None])
            else:
                out[-1][0] += token
                out[-1][1] = at if out[-1][1] is None else out[-1][1]
    return [(w, t) for w, t in out if w]


def test_sdk_finals_match_the_sherpa_protocol(server, speech, sherpa):
    messages = stream(server, pcm16(speech))
    got = finals(messages)
    sherpa_finals = [r for r in sherpa if r["is_final"] and r["text"]]
    assert len(sherpa_finals) == 2
    texts = [r.channel.alternatives[0].transcript for r in got if
             r.channel.alternatives[0].transcript]
    assert texts == [r["text"] for r in sherpa_finals]
    ours, theirs = words(got), sherpa_words(sherpa)
    assert [w for w, _ in ours] == [w for w, _ in theirs]
    assert np.allclose([t for _, t in ours], [t for _, t in theirs], atol=0.0101)
    assert [r.speech_final for r in got] == [True, False]  # an endpoint, then the end
    assert not any(r.from_finalize for r in got)
    assert messages[-1].type == "Metadata" and messages[-1].channels == 1
    assert messages[-1].duration == pytest.approx(len(speech) / RATE, abs=1e-3)
    for r in got:
        assert r.channel_index == [0, 1]
        for w in r.channel.alternatives[0].words:
            assert 0 <= w.start < w.end and 0 < w.confidence <= 1


def test_the_documented_client_runs(server, speech, sherpa, tmp_path):
    """clients/deepgram_live.py, the docs' example, prints the finals with word times."""
    wav = tmp_path / "two.wav"
    sf.write(wav, speech, RATE, subtype="PCM_16")
    run_client = subprocess.run(
        [sys.executable, str(REPO / "clients" / "deepgram_live.py"), str(wav),
         "--url", f"http://127.0.0.1:{server.port}", "--key", KEY],
        capture_output=True, text=True, timeout=120 * UNIT)
    assert run_client.returncode == 0, run_client.stderr
    lines = run_client.stdout.splitlines()
    texts = [r["text"] for r in sherpa if r["is_final"] and r["text"]]
    assert [line.split("    [")[0] for line in lines[:-1]] == texts
    assert lines[-1] == f"({len(speech) / RATE:.2f} s of audio)"


def test_sdk_finalize_interim_results_and_events(server, speech):
    first = len(speech) // 4  # inside the first utterance
    messages = stream(server, pcm16(speech), finalize_at=first * 2 // 3200,
                      interim_results="true", vad_events="true", utterance_end_ms=1000)
    types = [m.type for m in messages]
    assert types[-1] == "Metadata"
    assert "SpeechStarted" in types and "UtteranceEnd" in types
    interim = [m for m in messages if m.type == "Results" and not m.is_final]
    assert interim and all(not m.speech_final for m in interim)
    forced = [m for m in finals(messages) if m.from_finalize]
    assert len(forced) == 1 and not forced[0].speech_final
    assert forced[0].start == 0.0
    end = forced[0].start + forced[0].duration
    assert end == pytest.approx(first / RATE, abs=0.35)  # padded to its chunk at most


def test_sdk_multichannel_one_result_per_channel(server, speech):
    left = speech[:len(speech) // 2]
    stereo = np.stack([left, np.zeros_like(left)], axis=1).reshape(-1)
    messages = stream(server, pcm16(stereo), piece=6400, channels=2, multichannel="true")
    by_channel = {0: [], 1: []}
    for r in finals(messages):
        assert r.channel_index[1] == 2
        by_channel[r.channel_index[0]].append(r.channel.alternatives[0].transcript)
    assert any(by_channel[0]) and not any(by_channel[1])
    assert messages[-1].type == "Metadata" and messages[-1].channels == 2


def g711(pcm: np.ndarray, encoding: str) -> bytes:
    """int16 samples as a telephone sends them: mu-law by the telephony clients' encoder,
    A-law by libsndfile's (headerless ``ALAW``)."""
    if encoding == "mulaw":
        return mulaw_encode(pcm)
    out = io.BytesIO()
    sf.write(out, pcm, 8000, format="RAW", subtype="ALAW")
    return out.getvalue()


def test_sdk_alaw_at_8k_matches_the_sherpa_protocol(server, speech):
    """``encoding=alaw`` (G.711 A-law, as European telephone lines carry it): the finals of
    the same samples sent to the sherpa-onnx protocol."""
    pcm8 = np.clip(np.round(soxr.resample(speech, RATE, 8000) * 32767), -32768,
                   32767).astype("<i2")
    data = g711(pcm8, "alaw")
    texts = [r.channel.alternatives[0].transcript for r in finals(stream(
        server, data, piece=1600, encoding="alaw", sample_rate=8000))]
    decoded = decode_pcm(data, "alaw")
    out = run(sherpa_client(server.url("/sherpa?sample_rate=8000"), decoded, 800,
                            additional_headers={"Authorization": f"Bearer {KEY}"}))
    want = [r["text"] for r in out["results"] if r["is_final"] and r["text"]]
    assert [t for t in texts if t] == want and len(want) == 2


@pytest.mark.parametrize("params, status", [
    ({"diarize": "true"}, 400),  # a feature only Deepgram has
    ({"encoding": "opus"}, 400),  # a container
    ({"language": "fr"}, 400),
    ({"channels": 2}, 400),  # channels mixed down: needs multichannel
])
def test_sdk_refused_options(server, params, status):
    with pytest.raises(REFUSED) as e:
        stream(server, b"\0\0" * 1600, **params)
    assert refused_status(e.value) == status


def test_wrong_key_is_refused_with_401(server):
    base = f"127.0.0.1:{server.port}"
    env = DeepgramClientEnvironment(base=f"http://{base}", production=f"ws://{base}",
                                    agent=f"ws://{base}", agent_rest=f"http://{base}")
    with pytest.raises(REFUSED) as e:
        with DeepgramClient(api_key="wrong", environment=env).listen.v1.connect(
                model="nova-3", encoding="linear16", sample_rate=RATE):
            pass
    assert refused_status(e.value) == 401


def test_bad_audio_gets_deepgram_error_and_close(server):
    """Half a sample: Deepgram's Error message, then close 1008 DATA-0000."""
    async def go(url):
        async with websockets.connect(url, additional_headers={
                "Authorization": f"Token {KEY}"}) as ws:
            await ws.send(b"\0\0\0")
            message = json.loads(await ws.recv())
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            return message, ws.close_code, ws.close_reason
    message, code, reason = run(go(server.url("/v1/listen?encoding=linear16&sample_rate=16000")))
    assert message["type"] == "Error" and message["variant"] == "bad_audio"
    assert (code, reason) == (1008, "DATA-0000")


# -- pre-recorded: POST /v1/listen ---------------------------------------------------------------
def test_sdk_prerecorded_file_matches_the_sherpa_protocol(server, speech, sherpa,
                                                          tmp_path):
    wav = tmp_path / "two.wav"
    sf.write(wav, speech, RATE, subtype="PCM_16")
    response = client(server).listen.v1.media.transcribe_file(
        request=wav.read_bytes(), model="nova-3", utterances=True)
    texts = [r["text"] for r in sherpa if r["is_final"] and r["text"]]
    alternative = response.results.channels[0].alternatives[0]
    assert alternative.transcript == " ".join(texts)
    assert [u.transcript for u in response.results.utterances] == texts
    got = [(w.word, round(w.start, 2)) for w in alternative.words]
    theirs = sherpa_words(sherpa)
    assert [w for w, _ in got] == [w for w, _ in theirs]
    assert np.allclose([t for _, t in got], [t for _, t in theirs], atol=0.0101)
    assert response.metadata.duration == pytest.approx(len(speech) / RATE, abs=1e-3)
    assert response.metadata.channels == 1


@pytest.mark.parametrize("query, body, content_type, status, message", [
    ("", b"not audio", "application/octet-stream", 400, "not a readable audio file"),
    ("?diarize=true", b"", "application/octet-stream", 400, "diarize is not supported"),
    ("?interim_results=true", b"", "application/octet-stream", 400, "live streaming only"),
    ("", b'{"url": "https://example.com/a.wav"}', "application/json", 400,
     "a URL to fetch is not supported"),
    ("?encoding=linear16&sample_rate=16000", b"\0\0\0", "application/octet-stream", 400,
     "not a whole number"),
])
def test_prerecorded_errors_in_deepgrams_shape(server, query, body, content_type, status,
                                               message):
    import httpx
    r = httpx.post(server.http("/v1/listen" + query), content=body,
                   headers={"Authorization": f"Token {KEY}", "Content-Type": content_type})
    assert r.status_code == status
    answer = r.json()
    assert answer["err_code"] == "Bad Request" and message in answer["err_msg"], answer
    assert set(answer) == {"err_code", "err_msg", "request_id"}


def test_prerecorded_raw_audio_and_multipart(server, speech):
    import httpx
    headers = {"Authorization": f"Token {KEY}"}
    raw = httpx.post(server.http("/v1/listen?encoding=linear16&sample_rate=16000"),
                     content=pcm16(speech), headers=headers, timeout=120 * UNIT).json()
    wav = io.BytesIO()
    sf.write(wav, speech, RATE, subtype="PCM_16", format="WAV")
    form = httpx.post(server.http("/v1/listen"), files={"audio": ("a.wav", wav.getvalue())},
                      headers=headers, timeout=120 * UNIT).json()
    transcript = raw["results"]["channels"][0]["alternatives"][0]["transcript"]
    assert transcript and form["results"]["channels"][0]["alternatives"][0][
        "transcript"] == transcript
