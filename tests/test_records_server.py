"""The transcript store through a real ``streamdec serve`` (built-in model, SQLite store in
a temporary folder, bearer tokens and a read-only token file), driven by real clients:

- a sherpa-onnx stream: its handshake names its id (``X-Streamdec-Stream-Id``); every final
  the client got is stored (segment and text exact); the stored transcript reads back as
  JSON, text (equal to the client's), SRT and VTT, whole or from a segment on; a read-only
  token reads but cannot delete (403); no token: 401; a delete with a full token erases it
  (then 404);
- a Twilio call (the replay client of ``clients/``): its stored finals equal the finals its
  ``/calls/{id}`` subscriber got, its record holds Twilio's customParameters and says
  ``ended``; the listing finds it by a nested metadata key;
- redaction: a card number read aloud on a connection that asks for it (``?redact=cards``)
  and a social security number under the server's ``redact = "ssn"``, which a connection
  cannot turn off, are redacted in what is sent and stored, partials too;
- SIGKILL of the server in the middle of live calls (audio fork, whose socket carries each
  final back): after a restart on the same store every final any client had received is
  stored, none twice, and every call is marked ``cut``;
- SIGKILL of one worker of ``serve --workers 2`` in the middle of live calls on both: the
  same, its calls ``cut`` and the other worker's ended, and the worker started again
  writes a new call to the same store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import websockets

from server_utils import (UNIT, ServerProcess, connect_on, get, read_sherpa_results, pieces,
                          run)
from test_builtin_transcribe import speak
from test_server_workers import listening, start_workers, worker_pids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
import twilio_replay  # noqa: E402

FULL, READER = "full-token-1", "reader-token-1"
SENTENCES = ("please call me back tomorrow morning", "my account number is four five six",
             "thank you for calling have a nice day")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("records")
    (d / "tokens").write_text(FULL + "\n")
    (d / "readers").write_text(READER + "\n")
    speech = [speak(s, d / f"s{n}.wav", voice=("en-us+m3", "en-us+f2")[n % 2])
              for n, s in enumerate(SENTENCES)]
    gap = np.zeros(40000, np.float32)  # 2.5 s: past the default endpoint rules
    audio = np.concatenate([x for s in speech for x in (s, gap)])
    sf.write(d / "call.wav", audio, 16000, subtype="PCM_16")
    env = {"STREAMDEC_READ_TOKEN_FILE": str(d / "readers"),
           "STREAMDEC_CALL_TEXT_FORMAT": "raw", "STREAMDEC_REDACT": "ssn"}
    return d, audio, env


@pytest.fixture(scope="module")
def server(setup):
    d, _, env = setup
    s = ServerProcess("--token-file", str(d / "tokens"), "--store",
                      f"sqlite:///{d}/store.sqlite3", env=env)
    yield s
    assert s.stop() == 0


def fetch(server, path: str, token: str | None = FULL, method: str = "GET"
          ) -> tuple[int, str, str]:
    """(status, content type, body)."""
    request = urllib.request.Request(server.http(path), method=method, headers=(
        {"Authorization": f"Bearer {token}"} if token else {}))
    try:
        with urllib.request.urlopen(request, timeout=10 * UNIT) as r:
            return r.status, r.headers["content-type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["content-type"], e.read().decode()


def settled(server, path: str) -> dict:
    """The stored transcript at ``path`` once it is no longer ``running`` (a session's end
    is written just after its clients hear of it), or as it is after 10 s."""
    deadline = time.monotonic() + 10 * UNIT
    while True:
        record = json.loads(fetch(server, path, READER)[2])
        if record["status"] != "running" or time.monotonic() > deadline:
            return record
        time.sleep(0.05)


async def sherpa_stream(url: str, audio: np.ndarray) -> tuple[str, dict]:
    out = {"results": [], "done": False}
    async with websockets.connect(url, max_size=None, additional_headers={
            "Authorization": f"Bearer {FULL}"}) as ws:
        stream_id = ws.response.headers["x-streamdec-stream-id"]
        reader = read_sherpa_results(ws, out)
        for part in pieces(audio.astype("<f4").tobytes(), 3200 * 4):
            await ws.send(part)
        await ws.send("Done")
        await asyncio.wait_for(reader, 60 * UNIT)
    return stream_id, out


def test_a_streams_finals_are_stored_and_read_back_in_every_format(server, setup):
    _, audio, _ = setup
    stream_id, out = run(sherpa_stream(server.url("/"), audio))
    got = [(r["segment"], r["text"]) for r in out["results"] if r["is_final"] and r["text"]]
    assert len(got) == 3, got
    path = f"/streams/{stream_id}/transcript"
    status, kind, body = fetch(server, path, READER)
    assert (status, kind) == (200, "application/json")
    record = json.loads(body)
    assert [(f["segment"], f["text"]) for f in record["finals"]] == got
    assert record["status"] == "ended" and record["kind"] == "stream"
    assert record["sessions"][0]["metadata"]["options"]["sample_rate"] == 16000
    word = record["finals"][0]["words"][0]
    assert set(word) == {"word", "start", "end", "conf"} and 0 < word["conf"] <= 1
    status, kind, text = fetch(server, path + "?format=text", READER)
    assert (status, kind, text) == (200, "text/plain; charset=utf-8",
                                    " ".join(t for _, t in got) + "\n")
    status, _, srt = fetch(server, path + "?format=srt", READER)
    assert status == 200 and srt.startswith("1\n00:00:0") and " --> " in srt
    status, _, vtt = fetch(server, path + "?format=vtt", READER)
    assert status == 200 and vtt.startswith("WEBVTT\n\n00:00:0")
    status, _, body = fetch(server, path + f"?from_segment={got[1][0]}", READER)
    assert [f["text"] for f in json.loads(body)["finals"]] == [t for _, t in got[1:]]
    cases = [  # (path, token, method, status, error)
        (path, None, "GET", 401, "missing or invalid bearer token (Authorization: Bearer "
                                 "TOKEN)"),
        (path, "wrong", "GET", 401, None),
        (path + "?format=doc", READER, "GET", 400, "format must be one of json, text, srt, "
                                                   "vtt, got 'doc'"),
        (path + "?from_segment=-1", READER, "GET", 400, None),
        ("/streams/nope/transcript", READER, "GET", 404,
         "no stream 'nope' in the transcript store"),
        (path, READER, "DELETE", 403, "this token may only read transcripts"),
        ("/transcripts?status=lost", READER, "GET", 400, None),
        ("/transcripts?colour=red", READER, "GET", 400, None),
    ]
    for where, token, method, want, error in cases:
        status, _, body = fetch(server, where, token, method)
        assert status == want, (where, token, method, body)
        if error is not None:
            assert json.loads(body) == {"error": error}
    status, _, body = fetch(server, path, FULL, "DELETE")
    assert (status, json.loads(body)) == (200, {"deleted": {"sessions": 1, "finals": 3}})
    assert fetch(server, path, READER)[0] == 404
    assert any('"event": "transcript_deleted"' in line and stream_id in line
               for line in server.log)


def test_a_twilio_calls_finals_are_stored_with_its_custom_parameters(server, setup):
    d, _, _ = setup
    call_id = "CA" + "7" * 32
    args = argparse.Namespace(
        file=str(d / "call.wav"), url=server.url("/twilio"), token=FULL, cafile=None,
        realtime=False, json=True, partials=False, call_id=call_id, frame_ms=20, dtmf=[],
        no_subscribe=False, param=["agent=7"])
    messages = run(twilio_replay.main(args))
    heard = [(m["segment"], m["text"]) for m in messages
             if m["type"] == "result" and m["is_final"] and m["text"]]
    assert len(heard) >= 2, messages
    record = settled(server, f"/calls/{call_id}/transcript")
    assert [(f["segment"], f["text"]) for f in record["finals"]] == heard
    assert {f["leg"] for f in record["finals"]} == {"inbound"}
    (session,) = record["sessions"]
    assert (record["status"], session["protocol"], session["reason"]) == (
        "ended", "twilio", "stop")
    assert session["metadata"]["customParameters"] == {"agent": "7"}
    status, _, body = fetch(server, "/transcripts?kind=call&meta.customParameters.agent=7",
                            READER)
    listing = json.loads(body)
    assert status == 200 and [s["id"] for s in listing["sessions"]] == [call_id]
    assert listing["next"] is None


# -- SIGKILL mid-call --------------------------------------------------------------------------
CALLS = 6


async def fork_call(url: str, call_id: str, audio: np.ndarray, heard: list, started,
                    worker: str | None = None) -> str | None:
    """An audio fork call paced at twice real time; every final it is sent back goes into
    ``heard`` as (call id, segment, text). Ends when the server goes away, or a second
    after its audio, closing as FreeSWITCH does at the end of a fork. ``worker``: the
    worker of a ``--workers`` server it must reach (``connect_on``). Returns the worker it
    reached (None for a server without workers)."""
    pcm = np.clip(np.round(audio * 32768), -32768, 32767).astype("<i2").tobytes()
    target = f"{url}?call_id={call_id}&mix=mono&rate=16000&token={FULL}"
    connect = {"subprotocols": ["audio.drachtio.org"], "max_size": None}
    reached = None
    try:
        ws = await (connect_on(target, worker, **connect) if worker
                    else websockets.connect(target, **connect))
        reached = ws.response.headers.get("x-streamdec-replica")
        async with ws:
            await ws.send(json.dumps({"callSid": call_id}))

            async def read():
                with contextlib.suppress(websockets.ConnectionClosed):  # its server died
                    async for message in ws:
                        m = json.loads(message)
                        if m.get("type") == "transcription":
                            heard.append((call_id, m["data"]["segment"], m["data"]["text"]))
                            started.set()

            reader = asyncio.ensure_future(read())
            for part in pieces(pcm, 3200):  # 100 ms
                await ws.send(part)
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0 * UNIT)  # the last words' finals
            await ws.close()
            await asyncio.wait_for(reader, 60 * UNIT)
    except (websockets.ConnectionClosed, OSError):
        pass
    return reached


def test_sigkill_mid_call_loses_no_final_a_client_received_and_marks_the_calls_cut(setup):
    d, audio, env = setup
    store = f"sqlite:///{d}/killed.sqlite3"
    server = ServerProcess("--token-file", str(d / "tokens"), "--store", store, env=env)
    heard: list = []
    ids = [f"kill-{n}" for n in range(CALLS)]

    async def calls():
        started = asyncio.Event()
        tasks = [asyncio.ensure_future(fork_call(server.url("/audiofork"), i, audio, heard,
                                                 started)) for i in ids]
        await asyncio.wait_for(started.wait(), 60 * UNIT)
        while len({h[0] for h in heard}) < CALLS:  # every call has had a final
            await asyncio.sleep(0.05)
        server.proc.send_signal(signal.SIGKILL)
        await asyncio.gather(*tasks)

    try:
        run(calls())
    finally:
        server.stop(signal.SIGKILL)
    assert server.proc.returncode == -signal.SIGKILL
    again = ServerProcess("--token-file", str(d / "tokens"), "--store", store, env=env)
    try:
        deadline = time.monotonic() + 10 * UNIT
        while True:  # the dead process's sessions are cut first thing after the start
            status, _, body = fetch(again, "/transcripts?kind=call", READER)
            sessions = json.loads(body)["sessions"]
            if all(s["status"] == "cut" for s in sessions) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert sorted(s["id"] for s in sessions) == sorted(ids)
        assert {s["status"] for s in sessions} == {"cut"}
        stored = []
        for call_id in ids:
            record = json.loads(fetch(again, f"/calls/{call_id}/transcript", READER)[2])
            assert record["status"] == "cut"
            stored += [(call_id, f["segment"], f["text"]) for f in record["finals"]]
        assert len(stored) == len(set(stored))  # none twice
        missing = sorted(set(heard) - set(stored))
        assert missing == [], missing  # every final a client received
        assert len(heard) >= CALLS
    finally:
        assert again.stop() == 0


#: live calls under ``--workers 2``, half on each worker (the fault benchmark runs 20:
#: ``bench/daemon/faults.py --only kill-worker``; four keep this test's cost down)
WORKER_CALLS = 4


@pytest.mark.slow
def test_sigkill_of_one_worker_loses_no_final_and_its_restart_writes_to_the_same_store(setup):
    """``--workers 2`` on one SQLite store: SIGKILL of worker 0 while every call has had a
    final. Every final any client received is stored once; worker 0's calls are ``cut``,
    worker 1's go on and end; the worker the supervisor starts again serves a new call
    whose finals land in the same store."""
    d, audio, env = setup
    server = start_workers("--token-file", str(d / "tokens"), "--store",
                           f"sqlite:///{d}/workers.sqlite3", env=env)
    try:
        victim = worker_pids(server)[0]
        placed = {f"kw-{n}": f"worker-{n % 2}" for n in range(WORKER_CALLS)}
        heard: list = []

        async def calls():
            started = asyncio.Event()
            tasks = [asyncio.ensure_future(fork_call(server.url("/audiofork"), i, audio,
                                                     heard, started, w))
                     for i, w in placed.items()]
            await asyncio.wait_for(started.wait(), 60 * UNIT)
            while len({h[0] for h in heard}) < WORKER_CALLS:  # every call has had a final
                await asyncio.sleep(0.05)
            os.kill(victim, signal.SIGKILL)
            return await asyncio.gather(*tasks)

        assert run(asyncio.wait_for(calls(), 120 * UNIT)) == list(placed.values())
        deadline = time.monotonic() + 60 * UNIT
        while True:  # worker 0 started again cuts its dead predecessor's sessions
            sessions = json.loads(fetch(server, "/transcripts?kind=call", READER)[2])[
                "sessions"]
            statuses = {s["id"]: s["status"] for s in sessions}
            if "running" not in statuses.values() or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert statuses == {i: "cut" if w == "worker-0" else "ended"
                            for i, w in placed.items()}, "".join(server.log)
        stored = []
        for call_id in placed:
            record = json.loads(fetch(server, f"/calls/{call_id}/transcript", READER)[2])
            stored += [(call_id, f["segment"], f["text"]) for f in record["finals"]]
        assert len(stored) == len(set(stored))  # none twice
        missing = sorted(set(heard) - set(stored))
        assert missing == [], missing  # every final a client received
        deadline = time.monotonic() + 60 * UNIT  # the new worker cuts, then it listens
        while listening(server) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listening(server) == 3 and worker_pids(server)[0] != victim
        after: list = []
        one = np.concatenate([speak(SENTENCES[0], d / "after.wav", voice="en-us+m3"),
                              np.zeros(40000, np.float32)])  # the call's first sentence
        assert run(fork_call(server.url("/audiofork"), "kw-after", one, after,
                             asyncio.Event(), "worker-0")) == "worker-0"
        record = settled(server, "/calls/kw-after/transcript")
        assert record["status"] == "ended" and len(after) == 1
        assert [("kw-after", f["segment"], f["text"]) for f in record["finals"]] == after
    finally:
        assert server.stop() == 0, "".join(server.log)


def test_a_card_number_read_aloud_is_redacted_in_what_is_sent_and_stored(server, setup):
    """``?redact=cards``: the card number (4111 1111 1111 1111, read digit by digit) never
    leaves the server nor reaches the store, in finals or partials; its words keep their
    times."""
    d, _, _ = setup
    card = ", ".join(["four one one one"] + ["one one one one"] * 3)
    speech = speak(f"my card number is {card}", d / "card.wav")
    audio = np.concatenate([speech, np.zeros(40000, np.float32)])
    stream_id, out = run(sherpa_stream(server.url("/?redact=cards"), audio))
    finals = [r for r in out["results"] if r["is_final"] and r["text"]]
    assert len(finals) == 1 and "[redacted]" in finals[0]["text"], finals
    for r in out["results"]:  # partials too: no run of more than 5 digit words
        run_length = longest = 0
        for word in r["text"].split():
            run_length = run_length + 1 if word in ("ONE", "FOUR") else 0
            longest = max(longest, run_length)
        assert longest <= 5, r["text"]
    record = json.loads(fetch(server, f"/streams/{stream_id}/transcript", READER)[2])
    assert [f["text"] for f in record["finals"]] == [finals[0]["text"]]
    stored = [w["word"] for w in record["finals"][0]["words"]]
    assert stored.count("[redacted]") == 16, stored
    times = [(w["start"], w["end"]) for w in record["finals"][0]["words"]]
    assert times == sorted(times) and all(a < b for a, b in times)


def test_the_servers_redaction_holds_for_a_connection_that_asks_for_none(server, setup):
    d, _, _ = setup
    ssn = "one two three, four five, six seven eight nine"
    speech = speak(f"my social security number is {ssn}", d / "ssn.wav")
    audio = np.concatenate([speech, np.zeros(40000, np.float32)])
    stream_id, out = run(sherpa_stream(server.url("/?redact=off"), audio))
    finals = [r for r in out["results"] if r["is_final"] and r["text"]]
    assert len(finals) == 1 and finals[0]["text"].count("[redacted]") == 9, finals
    record = json.loads(fetch(server, f"/streams/{stream_id}/transcript", READER)[2])
    assert [f["text"] for f in record["finals"]] == [finals[0]["text"]]
