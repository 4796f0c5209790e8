"""One default through every door: the same recording (``examples/hello.wav``, README's
first example) with no search option gives the same final text from ``streamdec
transcribe``, the Python API (``Recognizer(RecognizerConfig())``), a real ``streamdec
serve`` process over the sherpa-onnx and Vosk WebSocket protocols, its OpenAI-style
endpoint and FreeSWITCH's audio fork (a telephony call), and ``streamdec mic`` capturing
the recording from a PulseAudio null sink.

Each door keeps its own documented presentation, and the reference is computed with it:
the OpenAI-style endpoint formats finals for people by default (``text_format=full``),
calls gate their audio by voice activity (``call_vad``, on by default), and the microphone
hears the recording resampled through PulseAudio, so its reference is the API on the
samples it captured. The search is never named: the test fails if any door searches
otherwise than the one default (``streamdec.search.config.default_search``), and the
default must still be the words search (else the doors could agree on greedy by accident).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
import soxr

from server_utils import UNIT, ServerProcess, run, sherpa_client, sherpa_text, vosk_client
from streamdec import Recognizer, RecognizerConfig
from streamdec.audio.vad import VadConfig
from streamdec.cli.main import build_parser, main
from streamdec.cli.options import DEFAULT_SEARCH_TEXT
from streamdec.search.config import WORDS_SEARCH
from streamdec.textfmt import default_formatter

REPO = Path(__file__).resolve().parents[1]
WAV = REPO / "examples" / "hello.wav"
sys.path.insert(0, str(REPO / "clients"))
sys.path.insert(0, str(REPO))

import audiofork_replay  # noqa: E402

from bench.captions.null_sink import NullSink, caption_playback  # noqa: E402


@pytest.fixture(scope="module")
def pcm16() -> np.ndarray:
    samples, rate = sf.read(str(WAV), dtype="int16")
    assert rate == 16000 and samples.ndim == 1
    return samples


@pytest.fixture(scope="module")
def rec() -> Recognizer:
    r = Recognizer(RecognizerConfig())
    assert r.config.search == WORDS_SEARCH, "the built-in model's default is its words"
    return r


def api_finals(rec: Recognizer, samples: np.ndarray, rate: int = 16000) -> list:
    """The finals with text of the Python API, as the package docstring drives it."""
    stream = rec.create_stream()
    stream.accept_waveform(rate, samples)
    stream.input_finished()
    while rec.is_ready(stream):
        rec.decode([stream])
    return [r for r in stream.pop_events() if r.is_final and r.text]


@pytest.fixture(scope="module")
def expected(rec, pcm16) -> str:
    finals = api_finals(rec, pcm16.astype(np.float32) / 32768)
    text = " ".join(r.text for r in finals)
    assert text.endswith("PLEASE CALL ME BACK AT FIVE THIRTY"), text
    return text


@pytest.fixture(scope="module")
def server():
    s = ServerProcess()
    yield s
    assert s.stop() == 0


def test_transcribe_gives_the_api_text(expected, capsys):
    assert main(["transcribe", str(WAV)]) == 0
    assert capsys.readouterr().out.strip() == expected


def test_sherpa_and_vosk_protocols_give_the_api_text(server, pcm16, expected):
    async def clients():
        sherpa = await sherpa_client(server.url("/sherpa"), pcm16.astype(np.float32) / 32768,
                                     1600)
        # (the rate as Vosk's clients declare it: the Vosk server's default is 8 kHz)
        vosk = await vosk_client(server.url("/vosk"), pcm16, 1600, config={"sample_rate": 16000})
        return sherpa, vosk

    sherpa, vosk = run(clients())
    assert sherpa["done"] and sherpa_text(sherpa["results"]) == expected
    assert " ".join(r["text"] for r in vosk["replies"] if r.get("text")) == expected


def test_openai_endpoint_gives_the_api_text(server, rec, pcm16, expected):
    async def post(**fields):
        async with httpx.AsyncClient(timeout=60 * UNIT) as client:
            return await client.post(server.http("/v1/audio/transcriptions"),
                                     files={"file": ("hello.wav", WAV.read_bytes())},
                                     data=fields)

    default = run(post())
    assert default.status_code == 200, default.text
    finals = api_finals(rec, pcm16.astype(np.float32) / 32768)
    formatted = [default_formatter().apply(r, "full").display for r in finals]
    assert default.json() == {"text": " ".join(formatted)}  # formatted by default
    raw = run(post(text_format="raw"))
    assert raw.json() == {"text": expected}


def test_a_telephony_call_gives_the_api_text(server, rec, pcm16, tmp_path):
    """FreeSWITCH's mod_audio_fork at 16 kHz, mono; calls gate by voice activity by
    default, so the reference is the API with the VAD on (and the default search)."""
    path = tmp_path / "call.wav"
    sf.write(str(path), pcm16, 16000, subtype="PCM_16")
    args = audiofork_replay_args(file=str(path), url=server.url("/audiofork"), rate=16000,
                                 linger=2.0 * UNIT, call_id="one-default")
    messages, _ = run(audiofork_replay.main(args))
    got = [m["text"] for m in messages
           if m["type"] == "result" and m["is_final"] and m["text"]]
    vad_rec = Recognizer(RecognizerConfig(vad=VadConfig(enabled=True)), model=rec.model,
                         symbols=rec.symbols)
    assert vad_rec.config.search == WORDS_SEARCH
    want = [r.text for r in api_finals(vad_rec, pcm16.astype(np.float32) / 32768)]
    assert want and got == want


def audiofork_replay_args(**kw) -> argparse.Namespace:
    base = dict(token=None, cafile=None, realtime=False, json=True, partials=False,
                call_id=None, frame_ms=20, dtmf=[], no_subscribe=False, param=[])
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.slow
def test_mic_gives_the_api_text_of_what_it_captured(rec, tmp_path, capsys):
    """The recording played into a null sink at the sink's rate; ``streamdec mic`` with no
    search option; its finals equal the API's on the samples it saved, and ``transcribe``'s
    of the saved file."""
    with NullSink(tmp_path / "pulse") as sink:
        speech, rate = sf.read(str(WAV), dtype="float32")
        played = tmp_path / "hello-sink.wav"
        lead = np.zeros(int(0.5 * sink.rate), np.float32)
        sf.write(str(played), np.concatenate([lead, soxr.resample(speech, rate, sink.rate)]),
                 sink.rate, subtype="PCM_16")
        out = caption_playback(sink, [played], ["--format", "jsonl", "--text-format", "raw",
                                                "--save", str(tmp_path / "cap")], tail=2.5)
    assert out.returncode == 0, out.stderr_text
    got = " ".join(e["text"] for e in (json.loads(line) for _, line in out.lines)
                   if e["type"] == "final" and e["text"])
    captured, cap_rate = sf.read(str(tmp_path / "cap.wav"), dtype="float32")
    want = " ".join(r.text for r in api_finals(rec, captured, cap_rate))
    assert want and got == want
    capsys.readouterr()
    assert main(["transcribe", str(tmp_path / "cap.wav")]) == 0
    assert capsys.readouterr().out.strip() == want


@pytest.mark.parametrize("command", ["transcribe", "mic", "serve"])
def test_help_states_the_default_search(command):
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    assert " ".join(DEFAULT_SEARCH_TEXT.split()) in " ".join(sub.format_help().split())
