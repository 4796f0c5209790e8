"""``streamdec serve --ray``: the daemon as a Ray Serve application on a Ray instance of
this machine that the command starts (every Ray server on loopback) and stops again, only
its own processes. Two fixed replicas: twenty clients spread over both, each with its own
transcript; the vendors' protocols (Deepgram's and OpenAI's SDKs) served through Serve's
proxy as by the daemon; a full application queues, then refuses with 503; a replica killed mid-stream
closes only its own clients, cleanly, while the rest finish and new clients are served.
Autoscaling: a ramp of streams brings a second replica up; when streams leave, a replica
is drained (its stream finishes) and the count goes back down."""

from __future__ import annotations

import asyncio
import collections
import io
import json
import os
import re
import signal
import time

import numpy as np
import pytest
import soundfile as sf
import soxr
import websockets

from server_utils import (UNIT, ServerProcess, get, read_sherpa_results, run, sherpa_client,
                          sherpa_text, vosk_client, vosk_text)
from streamdec.audio.pcm import decode_pcm
from streamdec.files.transcribe import transcribe_files
from test_deepgram import client as dg_client
from test_deepgram import finals as dg_finals
from test_deepgram import g711, pcm16, speech, stream  # noqa: F401  (speech: real utterances)
from test_openai_realtime import COMPLETED, SERVER_VAD, sherpa_finals
from test_openai_realtime import transcribe as realtime
from test_server import clips, rec  # noqa: F401  (the same 20 clips, the same recognizer)

pytestmark = pytest.mark.slow

PIECE = 1600  # samples a message: 100 ms


# -- the server and its processes ----------------------------------------------------------
def _parent(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


def descendants(root: int) -> set[int]:
    children = collections.defaultdict(list)
    for name in os.listdir("/proc"):
        if name.isdigit():
            parent = _parent(name)
            if parent is not None:
                children[parent].append(int(name))
    found, todo = set(), [root]
    while todo:
        for child in children[todo.pop()]:
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class RayServer(ServerProcess):
    """``streamdec serve --ray --config CONFIG ARGS --port 0``: it starts its own Ray."""

    def __init__(self, config, *args: str) -> None:
        super().__init__("--ray", "--config", str(config), *args, start_timeout=240)

    def health(self) -> dict:
        return json.loads(get(self.http("/health"))[1])

    def wait_health(self, check, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout * UNIT
        while True:
            health = self.health()
            if check(health):
                return health
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout} s; /health {health}")
            time.sleep(0.25)

    def stop_with_ray(self) -> tuple[int, list[int]]:
        """SIGTERM; returns the exit status and the processes it started that outlived it
        (killed here, by their ids)."""
        tree = descendants(self.proc.pid)
        code = self.stop()
        deadline = time.monotonic() + 20 * UNIT
        while any(running(p) for p in tree) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = sorted(p for p in tree if running(p))
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        return code, left


def connections_by_replica(server: RayServer) -> dict[str, int]:
    """``streamdec_connections_total`` of /metrics, summed per ``replica`` label."""
    counts = collections.Counter()
    for labels, value in re.findall(r"^streamdec_connections_total\{(.*)\} (\S+)$",
                                    get(server.http("/metrics"))[1], re.M):
        replica = dict(re.findall(r'(\w+)="([^"]*)"', labels))["replica"]
        counts[replica] += int(float(value))
    return dict(counts)


def file_text(rec, path) -> str:
    item = next(transcribe_files(rec, [path]))
    assert item.error is None
    return " ".join(f.text for f in item.finals if f.text)


# -- two replicas ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
    config = tmp_path_factory.mktemp("ray") / "two.toml"
    config.write_text("[ray]\ntarget_streams = 10\nmax_streams = 10\nmax_queued = 20\n")
    server = RayServer(config, "--replicas", "2")
    yield server
    code, left = server.stop_with_ray()
    assert code == 0 and left == []


def test_twenty_clients_spread_over_two_replicas_each_get_their_own_transcript(
        two_replicas, rec, clips):
    server = two_replicas
    want = [" ".join(f.text for f in item.finals if f.text)
            for item in transcribe_files(rec, clips, batch_size=20)]
    assert len(set(want)) == 20

    async def one(n, path):
        if n % 2:  # half speak Vosk (16 kHz via the URL), half sherpa
            out = await vosk_client(server.url("/vosk?sample_rate=16000"),
                                    sf.read(path, dtype="int16")[0], PIECE)
            return vosk_text(out["replies"]), out["replica"]
        out = await sherpa_client(server.url("/sherpa"), sf.read(path, dtype="float32")[0],
                                  PIECE)
        assert out["done"]
        return sherpa_text(out["results"]), out["replica"]

    async def main():
        return await asyncio.gather(*[one(n, p) for n, p in enumerate(clips)])

    got = run(main())
    assert [text for text, _ in got] == want
    served = collections.Counter(replica for _, replica in got)
    # both replicas served (ten streams at most at once each: with twenty clients at once,
    # the second ten went to the other replica), named alike by /health and /metrics
    assert set(served) == set(server.health()["replica_health"])
    assert len(served) == 2 and min(served.values()) >= 5, served
    deadline = time.monotonic() + 10 * UNIT  # replicas report every second
    while connections_by_replica(server) != served and time.monotonic() < deadline:
        time.sleep(0.25)
    assert connections_by_replica(server) == served


def test_the_vendor_protocols_are_served_through_serves_proxy(two_replicas, speech):
    """Deepgram's live and pre-recorded ``/v1/listen`` (its SDK) and OpenAI's
    ``/v1/realtime`` (the ``openai`` SDK, u-law at 8 kHz) reach the replicas (the daemon's
    one route table): the finals of the sherpa-onnx protocol for the same audio."""
    server = two_replicas
    pcm = pcm16(speech)
    sherpa = sherpa_finals(server, np.frombuffer(pcm, "<i2"), 16000)
    assert len(sherpa) == 2
    texts = [r.channel.alternatives[0].transcript for r in dg_finals(stream(server, pcm))]
    assert [t for t in texts if t] == sherpa
    wav = io.BytesIO()
    sf.write(wav, speech, 16000, subtype="PCM_16", format="WAV")
    response = dg_client(server).listen.v1.media.transcribe_file(
        request=wav.getvalue(), model="nova-3", utterances=True)
    assert [u.transcript for u in response.results.utterances] == sherpa
    pcm8 = np.clip(np.round(soxr.resample(speech, 16000, 8000) * 32767), -32768,
                   32767).astype("<i2")
    ulaw = g711(pcm8, "mulaw")
    session = json.loads(json.dumps(SERVER_VAD))
    session["audio"]["input"]["format"] = {"type": "audio/pcmu"}
    events = realtime(server, ulaw, session, piece=1600)
    completed = [e.transcript for e in events if e.type == COMPLETED]
    decoded = np.round(decode_pcm(ulaw, "mulaw") * 32768).astype("<i2")
    assert completed == sherpa_finals(server, decoded, 8000) and len(completed) == 2


def test_a_full_application_queues_new_streams_then_refuses_with_503(two_replicas):
    server = two_replicas

    async def main():
        held = [await websockets.connect(server.url("/")) for _ in range(20)]
        health = server.wait_health(lambda h: h["connections"] == 20, 10, "20 connections")
        assert sorted(r["connections"] for r in health["replica_health"].values()) == [10, 10]
        waiting = [asyncio.ensure_future(websockets.connect(server.url("/"), open_timeout=60))
                   for _ in range(20)]  # the proxy's queue: max_queued = 20
        await asyncio.sleep(2 * UNIT)
        assert not any(w.done() for w in waiting)  # no replica at its limit got one
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(server.url("/"), open_timeout=10 * UNIT)
        for ws in held:
            await ws.close()
        admitted = [await asyncio.wait_for(w, 30 * UNIT) for w in waiting]
        for ws in admitted:
            await ws.close()
        return refused.value.response, len(admitted)

    response, admitted = run(main())
    assert response.status_code == 503
    reason = response.body.decode()
    assert "max_queued_requests=20" in reason
    assert response.headers["Hint"] == reason
    assert admitted == 20


def _speech(clips, n: int, pieces: int = 3) -> np.ndarray:
    """``pieces`` clips in a row, half a second apart: about two seconds each."""
    parts = []
    for k in range(pieces):
        parts += [sf.read(clips[(n + 7 * k) % 20], dtype="float32")[0],
                  np.zeros(8000, np.float32)]
    return np.concatenate(parts)


async def paced_client(url: str, audio: np.ndarray, out: dict, answered: asyncio.Event):
    """Streams ``audio`` in real time, then ``Done``; ``out`` gets the replica at once, then
    every message until the close, and the close code and reason."""
    out.update(messages=[], done=False)
    async with websockets.connect(url, max_size=None) as ws:
        out["replica"] = ws.response.headers["x-streamdec-replica"]

        async def read():
            try:
                async for m in ws:
                    if m == "Done!":
                        out["done"] = True
                    else:
                        out["messages"].append(json.loads(m))
                        answered.set()
            except websockets.ConnectionClosedError:
                pass

        reader = asyncio.ensure_future(read())
        try:
            for i in range(0, len(audio), PIECE):
                await ws.send(audio[i:i + PIECE].tobytes())
                await asyncio.sleep(PIECE / 16000)
            await ws.send("Done")
        except websockets.ConnectionClosed:
            pass
        await asyncio.wait_for(reader, 60 * UNIT)
    out["close"] = (ws.close_code, ws.close_reason)


async def served_after_retries(url: str, audio: np.ndarray) -> dict:
    """A new client; a handshake that Serve routed to the lost replica before it knew is
    refused with 503: the client retries, as the reason asks."""
    for _ in range(10):
        try:
            return await sherpa_client(url, audio, PIECE)
        except websockets.InvalidStatus as e:
            assert e.response.status_code == 503, e
            await asyncio.sleep(UNIT)
    raise AssertionError("no replica served a new client")


def test_a_killed_replica_closes_only_its_own_clients_and_new_ones_are_served(
        two_replicas, rec, clips, tmp_path):
    server = two_replicas
    # up to twelve clients of about twelve seconds each, opened one after another until both
    # replicas hold some: Serve routes each handshake on both replicas' stream counts, but a
    # count that does not answer in time (a loaded machine) sends it to the other replica
    audios = [_speech(clips, n, pieces=6) for n in range(12)]
    fresh_audio = sf.read(clips[5], dtype="float32")[0]

    async def scenario():
        results, answered, clients = [], [], []
        for audio in audios:
            results.append({})
            answered.append(asyncio.Event())
            clients.append(asyncio.ensure_future(
                paced_client(server.url("/"), audio, results[-1], answered[-1])))
            while "replica" not in results[-1] and not clients[-1].done():
                await asyncio.sleep(0.01)
            if clients[-1].done():  # a failed handshake fails the test
                clients[-1].result()
            if len(results) >= 6 and len({r["replica"] for r in results}) == 2:
                break
        await asyncio.wait_for(asyncio.gather(*[e.wait() for e in answered]), 30 * UNIT)
        victim = results[0]["replica"]
        os.kill(server.health()["replica_health"][victim]["pid"], signal.SIGKILL)
        await asyncio.gather(*clients)
        fresh = await served_after_retries(server.url("/"), fresh_audio)
        return victim, results, fresh

    victim, results, fresh = run(scenario())
    lost = [n for n, r in enumerate(results) if r["replica"] == victim]
    kept = [n for n, r in enumerate(results) if r["replica"] != victim]
    assert lost and kept, [r["replica"] for r in results]
    for n in lost:  # a clean close with a reason, after the error message
        r = results[n]
        assert r["close"][0] == 1012 and "reconnect" in r["close"][1]
        assert r["messages"][-1]["kind"] == "replica_lost"
        assert not r["done"]
    for n in kept:  # the other replica's clients finish as if nothing happened
        r = results[n]
        assert r["done"] and r["close"] == (1000, "done")
        sf.write(tmp_path / f"{n}.wav", audios[n], 16000, subtype="FLOAT")
        assert sherpa_text(r["messages"]) == file_text(rec, tmp_path / f"{n}.wav")
    assert fresh["done"] and sherpa_text(fresh["results"]) == file_text(rec, clips[5])
    # Ray starts a replica in place of the lost one
    server.wait_health(lambda h: h["replicas"] == 2 and victim not in h["replica_health"],
                       90, "a new replica")


# -- autoscaling -------------------------------------------------------------------------------
async def holding_client(url: str, speech: np.ndarray, stop: asyncio.Event, out: dict):
    """Streams ``speech`` in real time, then silence until ``stop``, then ``Done``. ``out``
    gets the replica at once; then the results, the audio sent and the close code."""
    out.update(results=[], done=False)
    async with websockets.connect(url, max_size=None) as ws:
        out["replica"] = ws.response.headers["x-streamdec-replica"]
        reader = read_sherpa_results(ws, out)
        pieces = [speech[i:i + PIECE] for i in range(0, len(speech), PIECE)]
        silence = np.zeros(PIECE, np.float32)
        start = time.monotonic()
        while pieces or not stop.is_set():
            piece = pieces.pop(0) if pieces else silence
            out.setdefault("sent", []).append(piece)
            await ws.send(piece.tobytes())
            await asyncio.sleep(max(0.0, start + len(out["sent"]) * PIECE / 16000
                                    - time.monotonic()))
        await ws.send("Done")
        await asyncio.wait_for(reader, 60 * UNIT)
    out["close"] = ws.close_code


def test_autoscaling_follows_active_streams_and_drains_a_replica_on_scale_down(
        rec, clips, tmp_path):
    config = tmp_path / "autoscale.toml"
    config.write_text("[ray]\nmin_replicas = 1\nmax_replicas = 2\ntarget_streams = 2\n"
                      "max_streams = 8\nlook_back_seconds = 2.0\nupscale_delay_seconds = 1.0\n"
                      "downscale_delay_seconds = 3.0\n")
    server = RayServer(config)
    try:
        server.wait_health(lambda h: h["replicas"] == 1, 10, "one replica reporting")

        async def scenario():
            outs = [{} for _ in range(6)]
            stops = [asyncio.Event() for _ in range(6)]
            speech = [sf.read(clips[n], dtype="float32")[0] for n in range(6)]

            def start(n):
                return asyncio.ensure_future(
                    holding_client(server.url("/"), speech[n], stops[n], outs[n]))

            tasks = []
            for n in range(5):  # a ramp of five streams, target two a replica
                tasks.append(start(n))
                await asyncio.sleep(0.5)
            await asyncio.to_thread(
                server.wait_health, lambda h: h["replicas"] == 2
                and h["serve_replicas"].get("RUNNING") == 2, 90, "a second replica")
            await asyncio.sleep(1.0)  # Serve tells its proxy of a running replica by long poll
            tasks.append(start(5))  # the new stream goes to the least loaded replica
            while "replica" not in outs[5] and not tasks[5].done():
                await asyncio.sleep(0.05)
            for n in range(1, 5):  # three leave: one stream on each replica remains
                stops[n].set()
            await asyncio.gather(*tasks[1:5])
            health = await asyncio.to_thread(
                server.wait_health, lambda h: h["serve_replicas"].get("STOPPING") == 1, 90,
                "a replica draining")
            during = health["replica_health"]
            stops[0].set()
            stops[5].set()
            await asyncio.gather(tasks[0], tasks[5])
            return outs, during

        outs, during = run(scenario())
        first, second = outs[0]["replica"], outs[5]["replica"]
        assert second != first  # the least loaded: the first replica had four or five
        assert set(during) == {first, second}  # one stream each while one was stopping
        assert during[first]["connections"] == during[second]["connections"] == 1
        for n, out in enumerate(outs):  # the drained replica's stream finished too
            assert out["done"] and out["close"] == 1000
            audio = np.concatenate(out["sent"])
            sf.write(tmp_path / f"{n}.wav", audio, 16000, subtype="FLOAT")
            assert sherpa_text(out["results"]) == file_text(rec, tmp_path / f"{n}.wav")
        server.wait_health(lambda h: h["replicas"] == 1 and h["serve_replicas"] ==
                           {"RUNNING": 1}, 60, "back to one replica")
    finally:
        code, left = server.stop_with_ray()
    assert code == 0 and left == []
