"""Readable text, per-call endpoint rules and force-final on the telephony adapters, end to
end: one real ``streamdec serve`` process (built-in model, shipped formatting models) with
its AudioSocket port and a local webhook, driven by the replay tools of ``clients/`` and
raw frames.

- every final with text carries ``display`` / ``display_words`` on ``/calls/{id}``, on the
  audio fork's socket and on the webhook: exactly the raw final formatted here at the same
  level (``call_text_format``, ``full`` by default; a call's ``text_format`` wins);
- a call's endpoint rules (Twilio ``customParameters``, the audio fork's URL or metadata)
  decide where its finals fall: exact counts on a fixed call, equal to decoding it here
  with the same rules;
- a bad setting closes only that call, with its reason, while a healthy call streams on;
- the audio fork's text frame ``Finalize`` ends the open utterance at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr
import websockets

from decode_utils import decode_in_pieces, finals
from server_utils import UNIT, ServerProcess, run
from streamdec import Recognizer
from streamdec.core.endpoint import EndpointConfig, EndpointRule
from streamdec.textfmt import default_formatter
from test_builtin_transcribe import speak
from test_telephony import leg_finals, replay_args, to_int16, wait_for_log
from test_telephony_webhook import Hook, hook  # noqa: F401  (the receiver fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
import audiofork_replay  # noqa: E402
import audiosocket_replay  # noqa: E402
import twilio_replay  # noqa: E402

GAP = 0.6  # seconds between the two sentences: under the server's 1.2 s rule 2
SHORT = 0.3  # a call's rule 2 that the gap passes


@pytest.fixture(scope="module")
def server(hook):
    # the endpoint rules and Finalize under test are the endpointer's: no voice activity
    # detection on the calls' legs (``[server] call_vad``, where the server has it)
    s = ServerProcess("--audiosocket-port", "0", env={"STREAMDEC_WEBHOOK_URL": hook.url,
                                                      "STREAMDEC_CALL_VAD": "false"})
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def rec():
    return Recognizer()


@pytest.fixture(scope="module")
def call(tmp_path_factory):
    """A one-leg call at 8 kHz: two sentences 0.6 s apart, then 1.5 s of silence; as
    mu-law (Twilio) and 16-bit PCM (audio fork, AudioSocket), with the samples each file
    decodes to."""
    d = tmp_path_factory.mktemp("calltext")
    a = speak("please call me back at five thirty", d / "a.wav")
    b = speak("my account number is four five six", d / "b.wav", voice="en-us+f2")
    audio = np.concatenate([a, np.zeros(int(GAP * 16000), np.float32), b,
                            np.zeros(24000, np.float32)])
    x = to_int16(soxr.resample(audio, 16000, 8000))
    out = {}
    for name, subtype in (("ulaw", "ULAW"), ("pcm", "PCM_16")):
        path = d / f"{name}.wav"
        sf.write(path, x, 8000, subtype=subtype)
        out[name] = (path, sf.read(path, dtype="float32")[0])
    out["a"] = to_int16(soxr.resample(a, 16000, 8000))
    out["b"] = to_int16(soxr.resample(b, 16000, 8000))
    return out


def rules(rec, rule2_silence=None) -> EndpointConfig:
    """The server's endpoint rules, with rule 2's trailing silence changed when given."""
    base = rec.config.endpoint
    if rule2_silence is None:
        return base
    return dataclasses.replace(base, rule2=dataclasses.replace(
        base.rule2, min_trailing_silence=rule2_silence))


def spoken(rec, samples, endpoint=None):
    """The finals with text of decoding ``samples`` (8 kHz) here."""
    return [r for r in finals(decode_in_pieces(rec, samples, 800, rate=8000,
                                               endpoint=endpoint)) if r.text]


def said(messages, leg):
    """The result messages of a leg's finals with text."""
    return [m for m in messages if m["type"] == "result" and m["leg"] == leg
            and m["is_final"] and m["text"]]


def shown(results, level):
    """What a message of each final must carry at ``level``: the raw text and tokens, the
    formatted text and its words (None at ``raw``: no display)."""
    out = []
    for r in results:
        f = default_formatter().apply(r, level)
        words = None if f.display is None else [(w.text, round(w.start, 6), round(w.end, 6))
                                                 for w in f.display_words]
        out.append((r.text, list(r.tokens), f.display, words))
    return out


def carried(messages):
    return [(m["text"], m["tokens"], m.get("display"),
             None if "display_words" not in m else
             [(w["word"], w["start"], w["end"]) for w in m["display_words"]])
            for m in messages]


# -- both texts ------------------------------------------------------------------------------
def test_every_call_final_carries_display_at_the_default_level(server, hook, rec, call):
    (ulaw, ulaw_x), (pcm, pcm_x) = call["ulaw"], call["pcm"]
    want_twilio = shown(spoken(rec, ulaw_x), "full")
    want_pcm = shown(spoken(rec, pcm_x), "full")
    # one final, formatted (the time as digits); how the built-in model hears the second
    # sentence's digits ("four" or "for") and where it hears a sentence end (so whether a
    # full stop follows the time) is the model's business, not this test's
    assert len(want_twilio) == 1 and "number is" in want_twilio[0][2]
    assert "at 5:30" in want_twilio[0][2]
    out = run(twilio_replay.main(replay_args(file=str(ulaw), url=server.url("/twilio"),
                                             call_id="CA-display")))
    assert carried(said(out, "inbound")) == want_twilio
    fork, replies = run(audiofork_replay.main(replay_args(
        file=str(pcm), url=server.url("/audiofork"), rate=8000, linger=2.0 * UNIT,
        call_id="fork-display")))
    assert carried(said(fork, "caller")) == want_pcm
    # back on the fork's socket: the same messages, display included
    assert [r["data"] for r in replies] == said(fork, "caller")
    socket_id = str(uuid.uuid4())
    sock = run(audiosocket_replay.main(replay_args(
        file=str(pcm), host="127.0.0.1", port=server.ports[-1], rate=8000,
        url=server.url("/"), call_id=socket_id)))
    assert carried(said(sock, "0")) == want_pcm
    # the webhook gets each final with text as its subscribers do
    deadline = time.monotonic() + 10 * UNIT
    while (not [m for m in hook.received if m["call_id"] == "CA-display"]
           and time.monotonic() < deadline):
        time.sleep(0.02)
    assert carried([m for m in hook.received if m["call_id"] == "CA-display"]) == want_twilio


@pytest.mark.parametrize("params, level", [
    (["text_format=punct"], "punct"),
    (["text_format=raw"], "raw"),
])
def test_a_twilio_call_sets_its_text_format_in_custom_parameters(server, rec, call, params,
                                                                 level):
    ulaw, x = call["ulaw"]
    out = run(twilio_replay.main(replay_args(file=str(ulaw), url=server.url("/twilio"),
                                             call_id=f"CA-{level}", param=params)))
    got = said(out, "inbound")
    assert carried(got) == shown(spoken(rec, x), level)
    assert level != "raw" or not any("display" in m for m in out)
    assert out[0]["info"]["customParameters"] == dict(p.split("=") for p in params)


@pytest.mark.parametrize("query, params, level", [
    ("?text_format=punct", [], "punct"),  # the URL
    ("", ["text_format=punct"], "punct"),  # the metadata
    ("?text_format=raw", ["text_format=punct"], "punct"),  # the metadata wins
    ("?text_format=punct", ["text_format=raw"], "raw"),
])
def test_an_audio_fork_sets_its_text_format_in_the_url_or_metadata(server, rec, call, query,
                                                                   params, level):
    pcm, x = call["pcm"]
    out, _ = run(audiofork_replay.main(replay_args(
        file=str(pcm), url=server.url("/audiofork" + query), rate=8000, linger=0.0,
        call_id=f"fork-{level}-{len(query)}-{len(params)}", param=params)))
    assert carried(said(out, "caller")) == shown(spoken(rec, x), level)


# -- endpoint rules per call ----------------------------------------------------------------
def test_a_twilio_call_sets_its_endpoint_rules_in_custom_parameters(server, rec, call):
    ulaw, x = call["ulaw"]
    results = {}
    for name, params in (("server", []), ("short", [f"rule2_min_trailing_silence={SHORT}"])):
        out = run(twilio_replay.main(replay_args(file=str(ulaw), url=server.url("/twilio"),
                                                 call_id=f"CA-rule-{name}", param=params)))
        results[name] = [(m["segment"], m["text"], m["start_time"])
                         for m in said(out, "inbound")]
    # the server's 1.2 s does not end an utterance in the 0.6 s pause; the call's 0.3 s does
    assert [len(results["server"]), len(results["short"])] == [1, 2]
    for name, endpoint in (("server", rules(rec)), ("short", rules(rec, SHORT))):
        assert results[name] == [(r.segment, r.text, round(r.start_time, 3))
                                 for r in spoken(rec, x, endpoint)]
    assert " ".join(t for _, t, _ in results["short"]) == results["server"][0][1]


@pytest.mark.parametrize("query, params, count", [
    ("", [], 1),
    (f"?rule2_min_trailing_silence={SHORT}", [], 2),  # the URL (text)
    ("", [f"rule2_min_trailing_silence={SHORT}"], 2),  # the metadata (a JSON number)
    (f"?rule2_min_trailing_silence={SHORT}", ["rule2_min_trailing_silence=1.2"], 1),
])
def test_an_audio_fork_sets_its_endpoint_rules_in_the_url_or_metadata(server, rec, call,
                                                                      query, params, count):
    pcm, x = call["pcm"]
    out, _ = run(audiofork_replay.main(replay_args(
        file=str(pcm), url=server.url("/audiofork" + query), rate=8000, linger=0.0,
        call_id=f"fork-rule-{len(query)}-{len(params)}", param=params)))
    got = [(m["segment"], m["text"]) for m in said(out, "caller")]
    endpoint = rules(rec, SHORT if count == 2 else None)
    assert len(got) == count
    assert got == [(r.segment, r.text) for r in spoken(rec, x, endpoint)]


# -- bad settings close only their call -----------------------------------------------------
TWILIO_BAD = [  # (customParameters, close reason); close code 1008 (bad_config)
    ({"rule2_min_trailing_silence": "-1"},
     "customParameters: rule2_min_trailing_silence must be in [0, 30] seconds (the server's "
     "limit), got '-1'"),
    ({"rule1_min_utterance_length": "soon"},
     "customParameters: rule1_min_utterance_length must be a number of seconds, got 'soon'"),
    ({"text_format": "pretty", "agent": "7"},
     "customParameters: text_format must be one of raw, punct, full; got 'pretty'"),
]
FORK_BAD = [  # (metadata, reason)
    ({"rule2_min_trailing_silence": "0.4"},
     "metadata: rule2_min_trailing_silence must be a number of seconds, got '0.4'"),
    ({"rule3_min_utterance_length": 1e9},
     "metadata: rule3_min_utterance_length must be in [0, 600] seconds (the server's "
     "limit), got 1000000000.0"),
    ({"text_format": "FULL"}, "metadata: text_format must be one of raw, punct, full; "
                              "got 'FULL'"),
]


def test_a_bad_setting_closes_only_that_call(server, rec, call):
    ulaw, x = call["ulaw"]
    pcm = sf.read(ulaw, dtype="int16")[0][:, None]

    async def twilio_bad(n, custom):
        messages = [m for _, m in twilio_replay.twilio_messages(pcm, f"CA-bad{n}", "MZ1",
                                                                custom=custom)]
        async with websockets.connect(server.url("/twilio")) as ws:
            for m in messages[:3]:  # connected, start, one media
                await ws.send(json.dumps(m))
            await ws.wait_closed()
        return ws.close_code, ws.close_reason

    async def fork_bad(n, metadata):
        replies = []
        async with websockets.connect(server.url("/audiofork")) as ws:
            await ws.send(json.dumps({"callSid": f"fork-bad{n}", **metadata}))
            try:
                async for text in ws:
                    replies.append(json.loads(text))
            except websockets.ConnectionClosedError:
                pass
        return ws.close_code, ws.close_reason, replies

    async def fork_url():
        with pytest.raises(websockets.InvalidStatus) as e:
            async with websockets.connect(server.url(
                    "/audiofork?rule2_min_trailing_silence=31")):
                pass
        return e.value.response.status_code, e.value.response.body.decode()

    async def main():
        healthy = asyncio.ensure_future(twilio_replay.main(replay_args(
            file=str(ulaw), url=server.url("/twilio"), call_id="CA-fine", realtime=True,
            frame_ms=100)))
        await asyncio.sleep(0.5 * UNIT)
        bad = await asyncio.gather(*[twilio_bad(n, c) for n, (c, _) in enumerate(TWILIO_BAD)],
                                   *[fork_bad(n, m) for n, (m, _) in enumerate(FORK_BAD)],
                                   fork_url())
        assert not healthy.done()
        return bad, await healthy

    bad, out = run(asyncio.wait_for(main(), 120 * UNIT))
    twilio, fork, url = bad[:len(TWILIO_BAD)], bad[len(TWILIO_BAD):-1], bad[-1]
    assert twilio == [(1008, reason) for _, reason in TWILIO_BAD]
    for (_, reason), (code, got, replies) in zip(FORK_BAD, fork):
        assert (code, got) == (1008, reason)
        assert replies == [{"type": "error", "data": {"error": reason, "kind": "bad_config"}}]
    assert url == (400, "URL: rule2_min_trailing_silence must be in [0, 30] seconds (the "
                        "server's limit), got '31'")
    # the healthy call went on and got its whole transcript, formatted
    assert carried(said(out, "inbound")) == shown(spoken(rec, x), "full")
    assert out[-1] == {"type": "call_end", "call_id": "CA-fine", "reason": "stop"}


# -- force-final ----------------------------------------------------------------------------
def test_an_audio_fork_finalize_ends_the_utterance_at_once(server, rec, call):
    a, b = call["a"], call["b"]
    long = "?rule1_min_trailing_silence=5&rule2_min_trailing_silence=5"  # no endpoint here
    endpoint = EndpointConfig(rule1=EndpointRule(False, 5.0, 0.0),
                              rule2=EndpointRule(True, 5.0, 0.0))

    async def main():
        replies = []
        async with websockets.connect(server.url("/audiofork" + long),
                                      subprotocols=["audio.drachtio.org"]) as ws:
            await ws.send(json.dumps({"callSid": "fork-finalize"}))
            for i in range(0, len(a), 160):
                await ws.send(a[i:i + 160].astype("<i2").tobytes())
            await ws.send("Finalize")
            # its final comes back before any more audio is sent
            replies.append(json.loads(await asyncio.wait_for(ws.recv(), 30 * UNIT)))
            rest = np.concatenate([np.zeros(12000, np.int16), b, np.zeros(4000, np.int16)])
            for i in range(0, len(rest), 160):
                await ws.send(rest[i:i + 160].astype("<i2").tobytes())
            await ws.close()
        return replies

    [first] = run(main())
    alone = spoken(rec, a.astype(np.float32) / 32768, endpoint)
    assert len(alone) == 1
    data = first["data"]
    assert (data["segment"], data["is_final"], data["is_eof"]) == (0, True, False)
    assert (data["text"], data["tokens"]) == (alone[0].text, list(alone[0].tokens))
    assert data["end_time"] == round(len(a) / 8000, 3)
    assert data["display"] == default_formatter().apply(alone[0], "full").display
    lines = wait_for_log(server, "call", "fork-finalize")
    assert lines and lines[0]["close_code"] == 1000


def test_finalize_on_a_call_with_voice_activity_detection_is_refused_and_the_call_goes_on(
        tmp_path, call):
    """With a VAD its silence ends utterances (``Recognizer.request_final`` refuses): the
    fork is told, the call goes on and ends without an error."""
    config = tmp_path / "vad.toml"
    config.write_text("[vad]\nenabled = true\n")
    server = ServerProcess("--config", str(config))
    try:
        async def main():
            replies = []
            async with websockets.connect(server.url("/audiofork")) as ws:
                await ws.send(json.dumps({"callSid": "fork-vad"}))
                await ws.send(call["a"][:4000].astype("<i2").tobytes())
                await ws.send("Finalize")
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), 30 * UNIT)))
                await ws.send(call["a"][4000:].astype("<i2").tobytes())
                await ws.close()
            return replies, ws.close_code

        replies, code = run(main())
        assert replies == [{"type": "error", "data": {
            "error": "Finalize is not available with voice activity detection: its silence "
                     "ends utterances", "kind": "unsupported"}}]
        [line] = wait_for_log(server, "call", "fork-vad")
        assert (line["close_code"], line["reason"]) == (1000, "disconnected")
    finally:
        assert server.stop() == 0
