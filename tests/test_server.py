"""``streamdec serve`` end to end: one real server process (built-in model) on a loopback
port for the whole module, real clients (websockets, the sherpa-onnx C++ client, urllib).

- both protocols give the file API's transcript, however the client cuts its messages;
- the sherpa-onnx C++ client works unchanged; 20 concurrent clients get their own
  transcripts; stereo calls give one tagged transcript per channel;
- every kind of bad input gets its error and close code while a healthy client streaming
  at the same time gets its full transcript; an abrupt disconnect frees the stream;
- per-connection options, Vosk alternatives and reset, /metrics, /health, the
  transcription endpoint, the page at /, one log line per connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import websockets

from server_utils import (ServerProcess, UNIT, get, messages_until_closed,
                          read_sherpa_results, run, sherpa_client, sherpa_text, vosk_client,
                          vosk_text, wait_for_idle, wait_for_logged)
from streamdec import Recognizer
from streamdec.search.config import with_method
from streamdec.textfmt import default_formatter
from streamdec.files.transcribe import transcribe_files
from test_builtin_transcribe import speak

SENTENCES = ["please call me back tomorrow morning", "the meeting starts at nine thirty",
             "my account number is four five six", "thank you for calling have a nice day",
             "the weather is cold today", "send the report before noon",
             "where is the train station", "i would like a cup of tea",
             "turn left at the next corner", "we will arrive at seven",
             "open the window please", "the store closes at five",
             "my phone number has changed", "can you hear me now",
             "the package arrived yesterday", "please hold the line",
             "our office is on the third floor", "the flight was delayed again",
             "i forgot my password", "good morning how are you"]
VOICES = ["en-us+m3", "en-us+f2"]


@pytest.fixture(scope="module")
def server():
    s = ServerProcess("--vosk-port", "0")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def rec():
    return Recognizer()


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """20 different sentences (two voices in turn), 16 kHz mono WAV files."""
    d = tmp_path_factory.mktemp("clips")
    paths = []
    for n, sentence in enumerate(SENTENCES):
        p = d / f"{n}.wav"
        speak(sentence, p, voice=VOICES[n % 2])
        paths.append(p)
    return paths


@pytest.fixture(scope="module")
def two_utterances(clips, tmp_path_factory):
    """Two utterances with 1.5 s of silence between them (two segments), 16 and 8 kHz."""
    a = sf.read(clips[0], dtype="float32")[0]
    b = sf.read(clips[11], dtype="float32")[0]
    audio = np.concatenate([a, np.zeros(24000, np.float32), b])
    d = tmp_path_factory.mktemp("two")
    sf.write(d / "16k.wav", audio, 16000, subtype="FLOAT")
    sf.write(d / "8k.wav", audio[::2], 8000, subtype="PCM_16")  # espeak has nothing > 4 kHz
    return d / "16k.wav", d / "8k.wav"


def file_finals(rec, path, **search):
    """The finals of ``path`` decoded here, with the server's rule for a connection's
    ``search=`` (``with_method``) and the other ``search`` settings on top."""
    if search:
        chosen = with_method(rec.config.search, search.pop("method", rec.config.search.method))
        rec = Recognizer(rec.config.__class__(search=replace(chosen, **search)))
    item = next(transcribe_files(rec, [path]))
    assert item.error is None
    return item.finals


def sherpa_key(finals):
    return [(r["segment"], r["text"], r["timestamps"], r["start_time"], r["is_eof"])
            for r in finals]


def file_key(finals):
    return [(r.segment, r.text, [round(t, 2) for t in r.timestamps], round(r.start_time, 2),
             r.is_eof) for r in finals]


def vosk_words(replies):
    return [(w["word"], w["start"], w["end"]) for r in replies for w in r.get("result", [])]


def file_words(finals):
    return [(w.text, w.start, w.end) for r in finals for w in r.words]


# -- transcripts ---------------------------------------------------------------------------------
CUTS = [1, 160, 777, 16000, None]  # samples per message; None: the whole file in one


@pytest.mark.parametrize("cut", CUTS, ids=[str(c) for c in CUTS])
def test_sherpa_gives_the_file_transcript_however_the_client_cuts(server, rec, two_utterances,
                                                                   cut):
    path = two_utterances[0]
    audio = sf.read(path, dtype="float32")[0]
    out = run(sherpa_client(server.url("/"), audio, cut or len(audio)))
    assert out["done"] and out["close"] == 1000
    finals = [r for r in out["results"] if r["is_final"]]
    want = file_finals(rec, path)
    assert len([f for f in want if f.text]) == 2
    assert sherpa_key(finals) == file_key(want)
    assert out["results"][-1]["is_eof"] and sum(r["is_eof"] for r in out["results"]) == 1
    assert list(out["results"][0]) == [
        "text", "tokens", "timestamps", "ys_probs", "lm_probs", "context_scores", "segment",
        "words", "num_trailing_blanks", "start_time", "is_final", "is_eof", "stable"]


@pytest.mark.parametrize("cut", CUTS, ids=[str(c) for c in CUTS])
def test_vosk_gives_the_file_transcript_however_the_client_cuts(server, rec, two_utterances,
                                                                 cut):
    path = two_utterances[1]  # 8 kHz int16: Vosk's default format
    pcm = sf.read(path, dtype="int16")[0]
    out = run(vosk_client(server.url("/vosk"), pcm, cut or len(pcm), pipelined=True))
    assert out["close"] == 1000
    assert len(out["replies"]) == out["messages"]  # exactly one reply per message
    want = file_finals(rec, path)
    assert vosk_text(out["replies"]) == " ".join(f.text for f in want if f.text)
    assert vosk_words(out["replies"]) == file_words(want)
    assert "text" in out["replies"][-1]


def test_vosk_port_serves_vosk_at_its_root_in_lockstep(server, rec, clips):
    pcm = sf.read(clips[3], dtype="int16")[0]
    out = run(vosk_client(server.url("/", port=server.ports[1]), pcm, 4000,
                          config={"sample_rate": 16000, "words": 0}))
    assert len(out["replies"]) == out["messages"]
    assert all(set(r) == {"partial", "stable"} for r in out["replies"][:-1] if "text" not in r)
    final = out["replies"][-1]
    assert final == {"text": " ".join(f.text for f in file_finals(rec, clips[3]) if f.text)}


def test_sherpa_onnx_cpp_client_decodes_a_file(server, rec, clips):
    import shutil

    import sherpa_onnx

    binary = shutil.which("sherpa-onnx-online-websocket-client")
    assert binary, "sherpa-onnx-bin is a test dependency"
    # its libraries are found through an RPATH relative to its install prefix; a virtual
    # environment over the system packages puts them elsewhere
    env = {**os.environ, "LD_LIBRARY_PATH": str(Path(sherpa_onnx.__file__).parent / "lib")}
    p = subprocess.run([binary, "--server-ip=127.0.0.1", f"--server-port={server.port}",
                        "--samples-per-message=8000", "--seconds-per-message=0.05",
                        str(clips[0])], capture_output=True, text=True, env=env,
                       timeout=60 * UNIT)
    assert p.returncode == 0, p.stderr
    messages = [json.loads(line[line.index("{"):]) for line in p.stderr.splitlines()
                if "OnMessage" in line and "{" in line]
    want = [f.text for f in file_finals(rec, clips[0]) if f.text]
    assert [m["text"] for m in messages if m["is_final"] and m["text"]] == want
    assert messages[-1]["is_eof"] and "Done!" in p.stderr


def test_twenty_concurrent_clients_each_get_their_own_transcript(server, rec, clips):
    assert len(clips) == 20
    want = [" ".join(f.text for f in item.finals if f.text)
            for item in transcribe_files(rec, clips, batch_size=20)]
    assert len(set(want)) == 20

    async def one(n, path):
        if n % 2:  # half speak Vosk (16 kHz via the URL), half sherpa
            pcm = sf.read(path, dtype="int16")[0]
            out = await vosk_client(server.url("/vosk?sample_rate=16000"), pcm, 1600)
            return vosk_text(out["replies"])
        audio = sf.read(path, dtype="float32")[0]
        out = await sherpa_client(server.url("/sherpa"), audio, 1600)
        assert out["done"]
        return sherpa_text(out["results"])

    async def main():
        return await asyncio.gather(*[one(n, p) for n, p in enumerate(clips)])

    assert run(main()) == want


def test_stereo_call_gives_one_tagged_transcript_per_channel(server, rec, clips, tmp_path):
    left = sf.read(clips[1], dtype="float32")[0]
    right = sf.read(clips[12], dtype="float32")[0]
    n = max(len(left), len(right))
    left, right = (np.pad(x, (0, n - len(x))) for x in (left, right))
    for name, x in (("l.wav", left), ("r.wav", right)):
        sf.write(tmp_path / name, x, 16000, subtype="FLOAT")
    want = [[f.text for f in file_finals(rec, tmp_path / name) if f.text]
            for name in ("l.wav", "r.wav")]
    assert want[0] != want[1]
    stereo = np.stack([left, right], axis=1).reshape(-1)  # interleaved L R L R
    out = run(sherpa_client(server.url("/?channels=2"), stereo, 2 * 1234))
    assert out["done"]
    for channel in (0, 1):
        mine = [r for r in out["results"] if r["channel"] == channel]
        assert [r["text"] for r in mine if r["is_final"] and r["text"]] == want[channel]
        assert sum(r["is_eof"] for r in mine) == 1
    pcm = (stereo * 32767).astype(np.int16)
    out = run(vosk_client(server.url("/vosk?channels=2&sample_rate=16000"), pcm, 2 * 4000))
    assert len(out["replies"]) == 2 * out["messages"]  # one per channel per message
    for channel in (0, 1):
        mine = [r for r in out["replies"] if r["channel"] == channel]
        assert [r["text"] for r in mine if r.get("text")] == want[channel]


# -- bad input -----------------------------------------------------------------------------------
def _nan_frame():
    x = np.zeros(1600, np.float32)
    x[7] = np.nan
    return x.tobytes()


def _inf_frame():
    x = np.zeros(1600, np.float32)
    x[3] = np.inf
    return x.tobytes()


VOSK_AUDIO = np.zeros(800, np.int16).tobytes()
# (path, messages sent, expected kind, expected close code)
BAD_INPUT = {
    "misaligned float32 frame": ("/", [b"\0" * 4002], "bad_audio", 1007),
    "NaN samples": ("/", [_nan_frame()], "bad_audio", 1007),
    "infinite samples": ("/", [_inf_frame()], "bad_audio", 1007),
    "text where audio is expected": ("/sherpa", ["hello"], "bad_message", 1003),
    "oversized frame": ("/", [b"\0" * (1 << 20) + b"\0" * 4096], "too_big", 1009),
    "misaligned int16 frame": ("/vosk", [b"\0\0\0"], "bad_audio", 1007),
    "invalid JSON": ("/vosk", ['{"eof" : '], "bad_json", 1007),
    "JSON that is not a command": ("/vosk", ['{"hello": 1}'], "bad_message", 1003),
    "invalid config value": ("/vosk", ['{"config": {"sample_rate": "fast"}}'],
                             "bad_config", 1008),
    "unsupported config sample rate": ("/vosk", ['{"config": {"sample_rate": 2000}}'],
                                       "bad_config", 1008),
    "unknown config key": ("/vosk", ['{"config": {"sample_rat": 8000}}'], "bad_config", 1008),
    "config after audio": ("/vosk", [VOSK_AUDIO, '{"config": {"words": 1}}'],
                           "bad_config", 1008),
    "phrase_list the model cannot spell": ("/vosk", ['{"config": {"phrase_list": ["yes", "n0"]}}'],
                                           "bad_config", 1008),
}


async def _bad_client(url, messages):
    """Send the messages; return (error message, close code)."""
    async with websockets.connect(url, max_size=None) as ws:
        for m in messages:
            await ws.send(m)
        replies = await messages_until_closed(ws)
    errors = [r for r in replies if isinstance(r, dict) and "error" in r]
    return (errors[-1] if errors else None), ws.close_code


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_gets_its_error_and_disturbs_no_other_client(server, rec, clips, case):
    path, messages, kind, code = BAD_INPUT[case]
    audio = sf.read(clips[5], dtype="float32")[0]

    async def healthy():  # streams while the bad client comes and goes
        return await sherpa_client(server.url("/"), audio, 800)

    async def main():
        good = asyncio.ensure_future(healthy())
        await asyncio.sleep(0.05)
        bad = await _bad_client(server.url(path), messages)
        return bad, await good

    (error, close), good = run(main())
    assert error is not None and error["kind"] == kind, error
    assert error["error"]
    assert close == code
    assert good["done"]
    assert sherpa_text(good["results"]) == " ".join(
        f.text for f in file_finals(rec, clips[5]) if f.text)
    assert wait_for_idle(server)["active_streams"] == 0


def decode_delay(server: ServerProcess) -> float:
    """``streamdec_decode_delay_seconds`` in the server's /metrics."""
    text = get(server.http("/metrics"))[1]
    return float(re.search(r"^streamdec_decode_delay_seconds (\S+)$", text, re.M).group(1))


def test_a_server_behind_its_audio_refuses_new_streams_and_serves_those_it_has(clips):
    """Overload: more audio than the engine decodes in real time (here 30 clients that each
    send 12 s at once to one decode thread, batches of one). While a ready stream waits
    over ``--max-decode-delay-ms`` for its decode a new connection gets HTTP 503 saying
    so (a call's subscriber, which brings no audio, is admitted); the clients already in
    get every result; once it has caught up, a new one is admitted and gets the same
    transcript."""
    audio = np.concatenate([sf.read(clips[n], dtype="float32")[0] for n in range(6)])
    data = audio.astype("<f4").tobytes()
    server = ServerProcess("--max-decode-delay-ms", "20", "--decode-threads", "1",
                           "--max-batch", "1", "--max-wait-ms", "0",
                           "--search", "greedy")  # (the cheap search: overload on purpose)

    async def main():
        clients = [await websockets.connect(server.url("/"), max_size=None) for _ in range(30)]
        outs = [{"results": [], "done": False} for _ in clients]
        readers = [read_sherpa_results(ws, out) for ws, out in zip(clients, outs)]
        for ws in clients:
            await ws.send(data)
        sends = [asyncio.ensure_future(ws.send("Done")) for ws in clients]
        refused = None
        while refused is None and not all(r.done() for r in readers):
            # a call's subscriber brings no audio: admitted just before the refusal below
            watcher = await websockets.connect(server.url("/calls/CA-overload"))
            await watcher.close()
            try:
                ws = await websockets.connect(server.url("/"))
                await ws.close()
            except websockets.InvalidStatus as e:
                refused = (e.response.status_code, e.response.body.decode())
            await asyncio.sleep(0.02)
        delays = []  # /metrics' sampled decode delay while the clients are served
        while not all(r.done() for r in readers):
            delays.append(decode_delay(server))
            await asyncio.sleep(0.1)
        await asyncio.gather(*sends)
        await asyncio.wait_for(asyncio.gather(*readers), 120 * UNIT)
        alone = await sherpa_client(server.url("/"), audio, 16000)  # admitted again
        await asyncio.sleep(0.5)  # sampled every 0.25 s
        return refused, outs, alone, delays, decode_delay(server)

    try:
        refused, outs, alone, delays, idle_delay = run(main())
    finally:
        assert server.stop() == 0
    assert refused is not None, "never refused while the engine was behind"
    assert max(delays, default=0.0) > 0.02 and idle_delay == 0.0  # what operators see
    status, reason = refused
    assert status == 503
    assert "server is behind its audio" in reason and "max_decode_delay_ms = 20" in reason
    assert alone["close"] == 1000 and alone["done"] and sherpa_text(alone["results"])
    for out in outs:  # the streams already in: every result, the same transcript
        assert out["done"] and sherpa_text(out["results"]) == sherpa_text(alone["results"])


HANDSHAKE = {  # query -> words the 400 reason must contain
    "sample_rate=1000": "unsupported sample_rate 1000",
    "sample_rate=fast": "sample_rate must be an integer",
    "encoding=opus": "unsupported encoding 'opus'",
    "encoding=%E2%96%81pcm": "unsupported encoding '\u2581pcm'",  # not latin-1: the Hint escapes it
    "channels=3": "channels must be in [1, 2]",
    "search=viterbi": "unknown search 'viterbi'",
    "search=greedy&hotwords=ACME": "hotwords need a beam search",
    "search=modified_beam&hotwords=%C3%A9t%C3%A9": "the model has no unit for",
    "search=greedy&beam=4": "beam needs a beam search",
    "sampel_rate=8000": "unknown option(s) sampel_rate",
}


@pytest.mark.parametrize("query", list(HANDSHAKE))
@pytest.mark.parametrize("path", ["/", "/vosk"])
def test_invalid_options_are_refused_at_the_handshake(server, path, query):
    async def main():
        await websockets.connect(server.url(f"{path}?{query}"))

    with pytest.raises(websockets.InvalidStatus) as e:
        run(main())
    assert e.value.response.status_code == 400
    assert HANDSHAKE[query] in e.value.response.body.decode()
    hint = e.value.response.headers["Hint"]
    assert hint == e.value.response.body.decode().encode("ascii", "backslashreplace").decode()


def test_abrupt_disconnect_mid_utterance_drops_the_stream(server, clips):
    audio = sf.read(clips[2], dtype="float32")[0]

    async def main():
        ws = await websockets.connect(server.url("/"))
        await ws.send(audio[:len(audio) // 2].tobytes())
        await asyncio.wait_for(ws.recv(), 10 * UNIT)  # a partial: it is mid-utterance
        ws.transport.abort()  # no close handshake

    run(main())
    health = wait_for_idle(server)
    assert health["active_streams"] == 0 and health["connections"] == 0


# -- options and protocol features ----------------------------------------------------------
def test_search_and_hotwords_per_connection(server, rec, clips):
    audio = sf.read(clips[4], dtype="float32")[0]
    out = run(sherpa_client(server.url("/?search=modified_beam&beam=4"), audio, 3200))
    want = file_finals(rec, clips[4], method="modified_beam", beam=4)
    assert sherpa_key([r for r in out["results"] if r["is_final"]]) == file_key(want)
    out = run(sherpa_client(server.url("/?search=modified_beam&hotwords=WEATHER%20IS%20COLD"),
                            audio, 3200))
    assert out["done"] and "WEATHER IS COLD" in sherpa_text(out["results"])


def test_vosk_alternatives_come_from_the_nbest(server, rec, clips):
    pcm = sf.read(clips[6], dtype="int16")[0]
    out = run(vosk_client(server.url("/vosk?sample_rate=16000&search=modified_beam"), pcm,
                          4000, config={"max_alternatives": 3}))
    final = out["replies"][-1]
    assert set(final) == {"alternatives"}
    alternatives = final["alternatives"]
    assert 1 < len(alternatives) <= 3
    want = file_finals(rec, clips[6], method="modified_beam", nbest=3)[-1]
    assert [a["text"] for a in alternatives] == [r.text for r in want.alternatives]
    assert all(set(a) == {"text", "confidence", "result"} for a in alternatives)


def test_vosk_reset_ends_the_utterance_and_goes_on(server, rec, clips):
    a = sf.read(clips[7], dtype="int16")[0]
    b = sf.read(clips[8], dtype="int16")[0]
    pcm = np.concatenate([a, b])
    pieces_of_a = -(-len(a) // 4000)
    a = np.pad(a, (0, pieces_of_a * 4000 - len(a)))  # the reset falls between a and b
    pcm = np.concatenate([a, b])
    out = run(vosk_client(server.url("/vosk?sample_rate=16000"), pcm, 4000,
                          commands={pieces_of_a: '{"reset" : 1}'}))
    assert len(out["replies"]) == out["messages"]
    texts = [r["text"] for r in out["replies"] if r.get("text")]
    first = " ".join(f.text for f in file_finals(rec, clips[7]) if f.text)
    assert texts[0] == first and len(texts) == 2
    after = [r for r in out["replies"] if r.get("text")][1]
    assert after["result"][0]["start"] >= len(a) / 16000  # one timeline across the reset


# -- HTTP ------------------------------------------------------------------------------------------
def test_health_page_and_metrics(server, clips):
    from prometheus_client.parser import text_string_to_metric_families

    assert get(server.http("/health"))[0] == 200
    status, page = get(server.http("/"))
    assert status == 200 and "<html" in page

    def scrape():
        status, text = get(server.http("/metrics"))
        assert status == 200
        return {s.name + json.dumps(s.labels, sort_keys=True): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    before = scrape()
    audio = sf.read(clips[9], dtype="float32")[0]
    run(sherpa_client(server.url("/"), audio, 1600))
    run(_bad_client(server.url("/"), [b"\0\0\0"]))
    after = scrape()
    moved = {k for k in after if after[k] != before.get(k)}
    for name in ('streamdec_connections_total{"protocol": "sherpa"}',
                 "streamdec_audio_seconds_total{}", "streamdec_decode_batch_size_count{}",
                 "streamdec_result_latency_seconds_count{}",
                 'streamdec_errors_total{"kind": "bad_audio"}'):
        assert name in moved, name
    audio_in = after["streamdec_audio_seconds_total{}"] - before.get(
        "streamdec_audio_seconds_total{}", 0)
    assert abs(audio_in - len(audio) / 16000) < 1e-6
    assert 0 < after["streamdec_real_time_factor{}"] < 1


@pytest.mark.parametrize("fmt", ["json", "text", "srt", "vtt", "verbose_json"])
def test_transcription_endpoint(server, rec, two_utterances, fmt):
    import httpx

    path = two_utterances[1]
    # the endpoint formats finals for people by default (text_format full)
    finals = [default_formatter().apply(f, "full") for f in file_finals(rec, path) if f.text]
    with open(path, "rb") as f:
        r = httpx.post(server.http("/v1/audio/transcriptions"), timeout=60 * UNIT,
                       files={"file": ("call.wav", f, "audio/wav")},
                       data={"model": "whisper-1", "response_format": fmt})
    assert r.status_code == 200, r.text
    text = " ".join(f.display for f in finals)
    if fmt == "json":
        assert r.json() == {"text": text}
    elif fmt == "text":
        assert r.text == text + "\n"
    elif fmt == "srt":
        blocks = r.text.strip().split("\n\n")
        assert [b.splitlines()[0] for b in blocks] == ["1", "2"]
        assert [b.splitlines()[2] for b in blocks] == [f.display for f in finals]
        assert all(" --> " in b.splitlines()[1] and "," in b.splitlines()[1] for b in blocks)
    elif fmt == "vtt":
        assert r.text.startswith("WEBVTT\n\n")
        cues = r.text.split("\n\n")[1:]
        assert [c.splitlines()[1] for c in cues if c] == [f.display for f in finals]
    else:
        body = r.json()
        assert body["text"] == text and len(body["segments"]) == 2
        assert body["words"] == [{"word": w.text, "start": w.start, "end": w.end}
                                 for f in finals for w in f.display_words]
        assert abs(body["duration"] - sf.info(str(path)).duration) < 1e-3


def test_transcription_endpoint_refuses_bad_requests(server):
    import httpx

    url = server.http("/v1/audio/transcriptions")
    r = httpx.post(url, data={"response_format": "json"}, files={"x": ("a", b"1")})
    assert r.status_code == 400 and "unknown field(s) x" in r.json()["error"]["message"]
    r = httpx.post(url, files={"file": ("a.wav", b"not audio at all")})
    assert r.status_code == 400 and "not a readable audio file" in r.json()["error"]["message"]
    r = httpx.post(url, files={"file": ("a.wav", b"x")}, data={"response_format": "docx"})
    assert r.status_code == 400 and "unsupported response_format" in r.text


def test_one_log_line_per_connection(server, clips):
    """Each connection's end is logged once, with how it ended: this test makes its own
    connections of three kinds (a sherpa client's Done, a Vosk client's eof, bad audio)
    so that it holds alone as after the others."""
    audio = sf.read(clips[2], dtype="float32")[0]
    before = len(server.connections_logged())

    async def main():
        await sherpa_client(server.url("/"), audio, 3200)
        await vosk_client(server.url("/", server.ports[1]),
                          (audio * 32767).astype(np.int16), 3200)
        await _bad_client(server.url("/"), [b"\0" * 4002])

    run(main())
    wait_for_logged(server, before, lambda lines: len(lines) >= 3)
    logged = server.connections_logged()
    for entry in logged:
        assert {"id", "peer", "protocol", "options", "audio_seconds", "duration",
                "close_code", "close_reason"} <= set(entry)
    assert len({e["id"] for e in logged}) == len(logged)
    kinds = {e["close_reason"].split(":")[0] for e in logged[before:]}
    assert {"done", "eof", "bad_audio"} <= kinds


def test_the_engine_is_warmed_up_before_the_server_listens(server):
    events = [json.loads(line[line.index("{"):]) for line in list(server.log)
              if line.count('"event": "warmed_up"') or line.count('"event": "listening"')]
    assert [e["event"] for e in events][:2] == ["warmed_up", "listening"]
    assert (events[0]["batches"], events[0]["max_batch"]) == (3, 32)  # the defaults
    assert 0 < events[0]["seconds"] < 30


# -- the clients/ folder ---------------------------------------------------------------------
def _client(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=60 * UNIT)


def test_example_clients_transcribe_a_file(server, rec, two_utterances):
    path = two_utterances[0]
    want = [f.text for f in file_finals(rec, path) if f.text]
    p = _client("clients/sherpa_file.py", str(path), "--url", server.url("/"))
    assert p.returncode == 0, p.stderr
    assert [line.split(None, 1)[1] for line in p.stdout.splitlines()] == want
    pcm16 = two_utterances[1]  # Vosk clients send int16: a 16-bit file, sent as it is
    p = _client("clients/vosk_file.py", str(pcm16), "--url", server.url("/", server.ports[1]))
    assert p.returncode == 0, p.stderr
    assert [line.split("    [")[0] for line in p.stdout.splitlines()] == [
        f.text for f in file_finals(rec, pcm16) if f.text]
    p = _client("clients/transcribe_http.py", str(path), "--url", server.http(""))
    assert p.returncode == 0, p.stderr
    assert p.stdout == " ".join(default_formatter().apply(f, "full").display
                                for f in file_finals(rec, path) if f.text) + "\n"


@pytest.mark.parametrize("script", ["clients/sherpa_mic.py", "clients/vosk_mic.py"])
def test_microphone_clients_start(script):
    p = _client(script, "--help")
    assert p.returncode == 0 and "--url" in p.stdout, p.stderr


def test_grammar_mode_through_both_protocols(server, tmp_path):
    """Vosk's phrase_list and the sherpa ``phrases`` option restrict a stream to its phrases
    (one or more in a row); anything else is [unk] (one for each stretch the model hears as
    a word: how many is the model's call, so any run of them is right). "purple elephant"
    against [unk] vs NO is a close call: the same audio every run (``speak``) gives the same
    answer (sox's random dither, not the server, made it flip once in ~25 runs)."""
    grammar = ["yes", "no", "one", "two", "three", "[unk]"]
    cases = [("yes", r"YES"), ("one two three", r"ONE TWO THREE"),
             ("purple elephant", r"\[unk\]( \[unk\])*")]
    for n, (sentence, want) in enumerate(cases):
        audio = speak(sentence, tmp_path / f"g{n}.wav", voice="en-gb")  # a voice never trained on
        pcm = (audio * 32767).astype(np.int16)
        out = run(vosk_client(server.url("/vosk"), pcm, 4000,
                              config={"sample_rate": 16000, "phrase_list": grammar}))
        assert out["close"] == 1000 and re.fullmatch(want, vosk_text(out["replies"])), out["replies"][-3:]
        query = "?phrases=" + ",".join(grammar).replace(" ", "%20")
        out = run(sherpa_client(server.url("/" + query), audio, 3200))
        assert re.fullmatch(want, sherpa_text(out["results"])), out["results"][-3:]
