"""Per-connection endpoint rules, force-final and stable partials over a real server
(``streamdec serve`` on a loopback port, its bounds set by environment:
``STREAMDEC_MAX_ENDPOINT_SILENCE=5``, ``STREAMDEC_MAX_ENDPOINT_UTTERANCE=60``).

The audio: three espeak sentences with 1.5 s and 0.8 s of silence between them.

- sherpa-onnx protocol: ``ruleN_...`` query parameters change where finals fall (the exact
  segment counts the core gives with the same rules); values past the server's bounds are
  refused at the handshake (HTTP 400, with the reason);
- ``Finalize`` returns the open utterance's final, with all the audio sent, before any more
  audio is sent; the next audio goes on in the next segment from where that audio ended;
  the same however the client cuts;
- every partial's ``stable`` prefix is kept by every later message of its segment;
- Vosk: the same rules as config keys; out of bounds: ``bad_config`` (close 1008);
- the transcription endpoint: the same rules as form fields (segments of the file);
  out of bounds: HTTP 400.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import websockets

from server_utils import UNIT, ServerProcess, messages_until_closed, pieces, run, vosk_client
from streamdec import Recognizer
from streamdec.core.drive import accept, decode_audio, decode_ready, finish
from streamdec.core.endpoint import EndpointConfig, EndpointRule
from test_builtin_transcribe import speak

GAP = 24000  # 1.5 s of silence
SHORT_GAP = 12800  # 0.8 s


@pytest.fixture(scope="module")
def server():
    s = ServerProcess(env={"STREAMDEC_MAX_ENDPOINT_SILENCE": "5",
                           "STREAMDEC_MAX_ENDPOINT_UTTERANCE": "60"})
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def sentences(tmp_path_factory):
    d = tmp_path_factory.mktemp("endpointing")
    return (speak("please call me back tomorrow morning", d / "a.wav"),
            speak("the store closes at five", d / "b.wav", voice="en-us+f2"),
            speak("turn left at the next corner", d / "c.wav"))


@pytest.fixture(scope="module")
def audio(sentences):
    a, b, c = sentences
    return np.concatenate([a, np.zeros(GAP, np.float32), b, np.zeros(SHORT_GAP, np.float32), c])


def core_finals(audio, endpoint):
    """The finals with text that the core gives with these rules (all audio at once)."""
    rec = Recognizer()
    events = decode_audio(rec, rec.create_stream(endpoint=endpoint), 16000, [audio])
    return [e.text for e in events if e.is_final and e.text]


def core_forced(before, after, endpoint):
    """The finals (text or not) that the core gives when a final is forced once ``before``
    is accepted (``Recognizer.request_final``, what the server does on ``Finalize``) and
    ``after`` follows as the input's rest."""
    rec = Recognizer()
    s = rec.create_stream(endpoint=endpoint)
    events = accept(rec, s, 16000, before)
    if not rec.request_final(s):  # else its final is queued already
        decode_ready(rec, [s])
    events += accept(rec, s, 16000, after) + finish(rec, s)
    return [e.text for e in events if e.is_final]


async def sherpa_session(url, steps, piece=4000):
    """Send ``steps`` (float32 arrays as audio in pieces, or text messages); after each text
    message other than ``Done`` wait for a final before sending on. Returns the messages,
    each with the index of the step after which it arrived."""
    out = []
    async with websockets.connect(url, max_size=None) as ws:
        async def read():
            async for m in ws:
                if m != "Done!":
                    out.append(json.loads(m))

        reader = asyncio.ensure_future(read())
        for step in steps:
            if isinstance(step, str):
                n = sum(m["is_final"] for m in out)
                await ws.send(step)
                deadline = asyncio.get_running_loop().time() + 10 * UNIT
                while step != "Done" and sum(m["is_final"] for m in out) == n:
                    # its final comes before any more audio is sent
                    assert asyncio.get_running_loop().time() < deadline and not reader.done()
                    await asyncio.sleep(0.01)
                continue
            for part in pieces(step.astype("<f4").tobytes(), piece * 4):
                await ws.send(part)
        await asyncio.wait_for(reader, 60 * UNIT)
    return out


LONG = "?rule1_min_trailing_silence=5&rule2_min_trailing_silence=5"
LONG_RULES = EndpointConfig(rule1=EndpointRule(False, 5.0, 0.0), rule2=EndpointRule(True, 5.0, 0.0))
RULES = [  # (query, rules for the core, finals with text)
    ("", None, 2),
    (LONG, LONG_RULES, 1),
    ("?rule2_min_trailing_silence=0.4", EndpointConfig(rule2=EndpointRule(True, 0.4, 0.0)), 3),
]


@pytest.mark.parametrize("query, rules, count", RULES, ids=["server", "long", "short"])
def test_sherpa_connection_sets_its_endpoint_rules(server, audio, query, rules, count):
    out = run(sherpa_session(server.url("/" + query), [audio, "Done"]))
    finals = [m["text"] for m in out if m["is_final"] and m["text"]]
    assert len(finals) == count
    assert finals == core_finals(audio, rules)


BAD = [  # (query, reason part)
    ("rule2_min_trailing_silence=5.5", "rule2_min_trailing_silence must be in [0, 5] seconds"),
    ("rule3_min_utterance_length=61", "rule3_min_utterance_length must be in [0, 60] seconds"),
    ("rule1_min_trailing_silence=-1", "rule1_min_trailing_silence must be in [0, 5] seconds"),
    ("rule1_min_trailing_silence=abc", "rule1_min_trailing_silence must be a number"),
]


@pytest.mark.parametrize("query, reason", BAD, ids=[b[0].split("=")[0] for b in BAD])
def test_sherpa_rules_out_of_bounds_are_refused(server, query, reason):
    async def connect():
        async with websockets.connect(server.url("/?" + query)):
            pass

    with pytest.raises(websockets.InvalidStatus) as e:
        run(connect())
    assert e.value.response.status_code == 400
    assert reason in e.value.response.body.decode()


@pytest.mark.parametrize("piece", [1234, 4000, 16000])
def test_sherpa_finalize_returns_the_final_at_once(server, sentences, piece):
    a, b, _ = sentences
    out = run(sherpa_session(server.url("/" + LONG),
                             [a, "Finalize", np.zeros(GAP, np.float32), b, "Done"], piece))
    finals = [m for m in out if m["is_final"]]
    assert [(m["segment"], m["is_eof"]) for m in finals] == [(0, False), (1, True)]
    first, second = finals
    # every sample sent before Finalize is in its final: the core's final of that audio
    assert first["text"] == core_finals(a, None)[0]
    # the next segment starts where that audio ended
    assert second["start_time"] == round(len(a) / 16000, 2)
    # and is what the core hears there (not empty: the model hears words in it)
    gap_b = np.concatenate([np.zeros(GAP, np.float32), b])
    assert [first["text"], second["text"]] == core_forced(a, gap_b, LONG_RULES)
    assert len(second["text"].split()) >= 3
    assert all(m["segment"] == 1 for m in out[out.index(first) + 1:])


def test_sherpa_finalize_is_chunk_invariant(server, sentences):
    a, b, _ = sentences
    runs = []
    for piece in (777, 16000):
        out = run(sherpa_session(server.url("/"), [a, "Finalize", b, "Done"], piece))
        runs.append([(m["segment"], m["text"], m["timestamps"], m["start_time"])
                     for m in out if m["is_final"]])
    assert runs[0] == runs[1] and len(runs[0]) == 2


def test_sherpa_finalize_of_nothing_is_an_empty_final(server, sentences):
    out = run(sherpa_session(server.url("/"), ["Finalize", sentences[1], "Done"]))
    finals = [(m["segment"], m["text"], m["is_eof"]) for m in out if m["is_final"]]
    assert finals == [(0, "", False), (0, core_finals(sentences[1], None)[0], True)]


def test_sherpa_stable_prefix_is_kept(server, audio):
    for search in ("greedy", "modified_beam"):
        out = run(sherpa_session(server.url(f"/?search={search}"), [audio, "Done"], 1600))
        partials_seen = unstable = 0
        for i, m in enumerate(out):
            stable = m["text"][:m["stable"]]
            assert 0 <= m["stable"] <= len(m["text"])
            if m["is_final"]:
                assert m["stable"] == len(m["text"])
                continue
            partials_seen += 1
            unstable += m["stable"] < len(m["text"])
            for later in out[i + 1:]:
                if later["segment"] != m["segment"]:
                    break
                assert later["text"].startswith(stable)
        assert partials_seen >= 5 and unstable > 0


def test_vosk_config_sets_the_endpoint_rules(server, audio):
    """Messages of 0.1 s (less than a chunk): one final per reply at most."""
    pcm = (audio * 32767).astype(np.int16)
    for config, rules, count in [
            ({"rule1_min_trailing_silence": 5, "rule2_min_trailing_silence": 5}, RULES[1][1], 1),
            ({"rule2_min_trailing_silence": 0.4}, RULES[2][1], 3)]:
        out = run(vosk_client(server.url("/vosk"), pcm, 1600,
                              config={"sample_rate": 16000, **config}))
        texts = [r["text"] for r in out["replies"] if r.get("text")]
        assert len(texts) == count
        assert texts == core_finals(pcm.astype(np.float32) / 32768, rules)
        partials = [r for r in out["replies"] if "partial" in r]
        assert partials and all(0 <= r["stable"] <= len(r["partial"]) for r in partials)


@pytest.mark.parametrize("config, reason", [
    ({"rule2_min_trailing_silence": 6}, "rule2_min_trailing_silence must be in [0, 5] seconds"),
    ({"rule3_min_utterance_length": "10"}, "rule3_min_utterance_length must be a number"),
])
def test_vosk_rules_out_of_bounds_are_bad_config(server, config, reason):
    async def session():
        async with websockets.connect(server.url("/vosk")) as ws:
            await ws.send(json.dumps({"config": config}))
            return await messages_until_closed(ws), ws.close_code

    messages, code = run(session())
    assert code == 1008
    assert messages[-1]["kind"] == "bad_config" and reason in messages[-1]["error"]


@pytest.mark.parametrize("fields, count", [({}, 2), ({"rule2_min_trailing_silence": "0.4"}, 3),
                                           ({"rule1_min_trailing_silence": "5",
                                             "rule2_min_trailing_silence": "5"}, 1)],
                         ids=["server", "short", "long"])
def test_transcription_endpoint_takes_the_rules(server, audio, tmp_path, fields, count):
    import httpx
    import soundfile as sf

    path = tmp_path / "three.wav"
    sf.write(path, audio, 16000, subtype="FLOAT")
    with open(path, "rb") as f:
        r = httpx.post(server.http("/v1/audio/transcriptions"), timeout=60 * UNIT,
                       files={"file": ("three.wav", f, "audio/wav")},
                       data={"response_format": "verbose_json", **fields})
    assert r.status_code == 200, r.text
    assert len(r.json()["segments"]) == count


def test_transcription_endpoint_refuses_rules_out_of_bounds(server, audio, tmp_path):
    import httpx
    import soundfile as sf

    path = tmp_path / "three.wav"
    sf.write(path, audio[:16000], 16000, subtype="FLOAT")
    with open(path, "rb") as f:
        r = httpx.post(server.http("/v1/audio/transcriptions"), timeout=60 * UNIT,
                       files={"file": ("three.wav", f, "audio/wav")},
                       data={"rule2_min_trailing_silence": "7"})
    assert r.status_code == 400
    assert "rule2_min_trailing_silence must be in [0, 5] seconds" in r.json()["error"]["message"]
