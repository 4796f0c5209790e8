"""The text_format option on each surface, with the built-in model and the shipped
formatting models: ``streamdec transcribe`` (srt formatted by default, jsonl raw by
default), the sherpa-onnx and Vosk protocols (raw by default, ``text_format`` per
connection), the OpenAI-compatible endpoint (formatted by default), and bad values."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import numpy as np
import pytest
import soundfile as sf
import uvicorn
import websockets

from decode_utils import decode_in_pieces, finals
from server_utils import UNIT, sherpa_client, vosk_client
from streamdec import Recognizer, RecognizerConfig
from streamdec.cli.main import main
from streamdec.engine import EngineConfig
from streamdec.errors import ConfigError
from streamdec.files.formats import subtitles
from streamdec.server.app import create_app
from streamdec.server.config import ServerConfig
from streamdec.server.context import ServerContext
from streamdec.server.options import OptionError, parse_options
from streamdec.search.config import SearchConfig
from streamdec.textfmt import default_formatter

WAV = "examples/hello.wav"


@pytest.fixture(scope="module")
def rec():
    return Recognizer(RecognizerConfig())


@pytest.fixture(scope="module")
def audio():
    samples, rate = sf.read(WAV, dtype="float32")
    assert rate == 16000
    return samples


@pytest.fixture(scope="module")
def expected(rec, audio):
    """The file's finals decoded here, formatted per level: what every surface must carry."""
    raw = [r for r in finals(decode_in_pieces(rec, audio, len(audio))) if r.text]
    assert raw, "the built-in model hears words in examples/hello.wav"
    return {level: [default_formatter().apply(r, level) for r in raw]
            for level in ("raw", "punct", "full")}


@pytest.fixture(scope="module")
def expected_cli(expected):
    """The same for ``streamdec transcribe``: every door has one default search
    (tests/test_one_default.py)."""
    assert expected["raw"][-1].text.endswith("PLEASE CALL ME BACK AT FIVE THIRTY")
    return expected


def test_the_example_formats_at_each_level(expected):
    raw, punct, full = (expected[k][-1] for k in ("raw", "punct", "full"))
    assert raw.display is None and raw.text.endswith("PLEASE CALL ME BACK AT FIVE THIRTY")
    assert punct.display.endswith("call me back at five thirty.")
    assert full.display.endswith("call me back at 5:30.")
    assert full.display_words[-1].text == "5:30."
    five, thirty = full.words[-2], full.words[-1]
    assert (full.display_words[-1].start, full.display_words[-1].end) == (five.start,
                                                                          thirty.end)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_transcribe_srt_is_formatted_by_default(capsys, expected_cli):
    code, out, err = run_cli(capsys, "transcribe", WAV, "--format", "srt")
    assert code == 0, err
    assert out == subtitles(expected_cli["full"], "srt")
    assert "5:30." in out
    code, out, err = run_cli(capsys, "transcribe", WAV, "--format", "srt", "--text-format",
                             "raw")
    assert out == subtitles(expected_cli["raw"], "srt") and "FIVE THIRTY" in out


def test_subtitles_of_a_core_install_get_punct_with_a_note(capsys, monkeypatch, expected_cli):
    """Without the ITN library (a core install: no ``text`` extra) the subtitles' default
    is punct, said on stderr; full asked for by name is an error naming the package."""
    import streamdec.textfmt as textfmt
    import streamdec.textfmt.itn as itn
    from streamdec.errors import ModelLoadError

    monkeypatch.setattr(textfmt, "itn_available", lambda: False)
    code, out, err = run_cli(capsys, "transcribe", WAV, "--format", "srt")
    assert code == 0, err
    assert out == subtitles(expected_cli["punct"], "srt")
    assert err.count("streamdec: note:") == 1 and "pip install -e '.[text]'" in err

    def missing(*args, **kwargs):
        raise ModelLoadError("inverse text normalisation (text_format full) needs "
                                     "the wetextprocessing package")

    monkeypatch.setattr(itn, "InverseNormalizer", missing)
    monkeypatch.setattr(textfmt, "default_formatter", textfmt.TextFormatter)
    monkeypatch.setattr("streamdec.cli.transcribe.default_formatter", textfmt.TextFormatter)
    code, out, err = run_cli(capsys, "transcribe", WAV, "--format", "srt", "--text-format",
                             "full")
    assert code == 2 and out == ""
    assert "--text-format full" in err and "wetextprocessing" in err


def test_transcribe_jsonl_is_raw_by_default_and_formatted_on_request(capsys, expected_cli):
    code, out, _ = run_cli(capsys, "transcribe", WAV, "--format", "jsonl")
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and not any("display" in e for e in events)
    code, out, _ = run_cli(capsys, "transcribe", WAV, "--format", "jsonl", "--text-format",
                           "full")
    finals_ = [e for e in map(json.loads, out.splitlines()) if e["type"] == "final" and e["text"]]
    assert code == 0
    assert [e["display"] for e in finals_] == [r.display for r in expected_cli["full"]]
    assert [[w["word"] for w in e["display_words"]] for e in finals_] == \
        [[w.text for w in r.display_words] for r in expected_cli["full"]]
    partials = [e for e in map(json.loads, out.splitlines()) if e["type"] == "partial"]
    assert partials and not any("display" in e for e in partials)


def test_transcribe_text_format_punct(capsys, expected_cli):
    code, out, _ = run_cli(capsys, "transcribe", WAV, "--text-format", "punct")
    assert code == 0
    assert out == " ".join(r.display for r in expected_cli["punct"]) + "\n"


def test_transcribe_realtime_shows_formatted_finals(capsys, expected_cli):
    code, out, _ = run_cli(capsys, "transcribe", WAV, "--realtime", "--text-format", "full")
    assert code == 0
    assert out == "".join(r.display + "\n" for r in expected_cli["full"])  # off a terminal: finals


def test_transcribe_rejects_a_bad_text_format(capsys):
    with pytest.raises(SystemExit) as e:
        main(["transcribe", WAV, "--text-format", "pretty"])
    assert e.value.code == 2
    assert "invalid choice: 'pretty'" in capsys.readouterr().err


@pytest.mark.parametrize("query,want", [
    ({}, None), ({"text_format": ["raw"]}, "raw"), ({"text_format": ["punct"]}, "punct"),
    ({"text_format": ["full"]}, "full")])
def test_connection_option(query, want):
    opts = parse_options(query, sample_rate=16000, encoding="f32le", search=SearchConfig())
    assert opts.text_format == want


@pytest.mark.parametrize("query,message", [
    ({"text_format": ["FULL"]}, "text_format must be one of raw, punct, full; got 'FULL'"),
    ({"text_format": ["raw", "full"]}, "text_format given 2 times")])
def test_bad_connection_option(query, message):
    with pytest.raises(OptionError, match=message):
        parse_options(query, sample_rate=16000, encoding="f32le", search=SearchConfig())


@pytest.mark.parametrize("field", ["text_format", "transcription_text_format",
                                   "call_text_format"])
def test_server_config_checks_text_formats(field):
    with pytest.raises(ConfigError, match=f"server.{field} must be one of raw, punct, full"):
        ServerConfig(**{field: "nice"})


def serve(rec, coroutine):
    """Run ``coroutine(port)`` against the app hosted in-process on a free loopback port."""
    context = ServerContext.create(rec, ServerConfig(engine=EngineConfig(max_wait_ms=5)))
    app = create_app(context)

    async def main_():
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            return await coroutine(port)
        finally:
            server.should_exit = True
            await asyncio.wait_for(serving, 30 * UNIT)

    return asyncio.run(main_())


def _word_fields(words, offset=0.0):
    return [{"word": w.text, "start": round(w.start + offset, 6),
             "end": round(w.end + offset, 6), "conf": w.conf} for w in words]


def test_websocket_protocols(rec, audio, expected):
    pcm16 = (np.clip(audio, -1, 1) * 32767).astype(np.int16)

    async def clients(port):
        base = f"ws://127.0.0.1:{port}"
        plain = await sherpa_client(f"{base}/sherpa", audio, 1600)
        full = await sherpa_client(f"{base}/sherpa?text_format=full", audio, 1600)
        vosk_raw = await vosk_client(f"{base}/vosk?sample_rate=16000", pcm16, 1600)
        vosk_punct = await vosk_client(f"{base}/vosk?sample_rate=16000&text_format=punct",
                                       pcm16, 1600)
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(f"{base}/sherpa?text_format=pretty"):
                pass
        return plain, full, vosk_raw, vosk_punct, refused.value.response

    plain, full, vosk_raw, vosk_punct, refused = serve(rec, clients)
    assert not any("display" in m for m in plain["results"])
    spoken = [m for m in full["results"] if m["is_final"] and m["text"]]
    assert [m["text"] for m in spoken] == [r.text for r in expected["raw"]]  # text as before
    assert [m["display"] for m in spoken] == [r.display for r in expected["full"]]
    assert [m["display_words"] for m in spoken] == \
        [_word_fields(r.display_words) for r in expected["full"]]
    assert not any("display" in m for m in full["results"] if not m["is_final"])
    texts = [r for r in vosk_raw["replies"] if "text" in r and r["text"]]
    assert texts and not any("display" in r for r in vosk_raw["replies"])
    finals_ = [r for r in vosk_punct["replies"] if "text" in r and r["text"]]
    assert " ".join(r["display"] for r in finals_) == \
        " ".join(r.display for r in expected["punct"])
    got = [w for r in finals_ for w in r["display_words"]]
    want = [w for r in expected["punct"] for w in _word_fields(r.display_words)]
    # the same words and times; confidences to 0.01 (Vosk's audio is int16, quantised)
    assert [(w["word"], w["start"], w["end"]) for w in got] == \
        [(w["word"], w["start"], w["end"]) for w in want]
    assert [w["conf"] for w in got] == pytest.approx([w["conf"] for w in want], abs=0.01)
    assert refused.status_code == 400
    assert b"text_format must be one of raw, punct, full; got 'pretty'" in refused.body


def test_transcription_endpoint(rec, expected):
    with open(WAV, "rb") as f:
        data = f.read()

    async def requests(port):
        url = f"http://127.0.0.1:{port}/v1/audio/transcriptions"
        async with httpx.AsyncClient(timeout=60 * UNIT) as client:
            def post(**fields):
                return client.post(url, files={"file": ("hello.wav", data)}, data=fields)
            return [await post(), await post(text_format="raw"),
                    await post(response_format="verbose_json"),
                    await post(text_format="nice")]

    default, raw, verbose, bad = serve(rec, requests)
    assert default.json() == {"text": " ".join(r.display for r in expected["full"])}
    assert raw.json() == {"text": " ".join(r.text for r in expected["raw"])}
    body = verbose.json()
    assert [s["text"] for s in body["segments"]] == [r.display for r in expected["full"]]
    assert [w["word"] for w in body["words"]] == \
        [w.text for r in expected["full"] for w in r.display_words]
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == \
        "text_format must be one of raw, punct, full; got 'nice'"
