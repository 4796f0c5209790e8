"""``streamdec serve --workers 2``: two server processes answering on one port
(SO_REUSEPORT), one /health and one /metrics for the whole server, the connection cap
counted over both, SIGTERM draining both (streams in progress get their finals), a
killed worker restarted while the server keeps serving (its clients see 1006), TLS,
tokens, a Vosk port and config-file settings in every worker, and a call's subscribers
on the other worker getting what one process gives them (a call whose worker is killed
ends for them with ``worker_stopped``)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import signal
import ssl
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import websockets

from server_utils import (UNIT, ServerProcess, connect_on, get, run, sherpa_client,
                          sherpa_text, vosk_client, vosk_text, wait_for_idle)
from streamdec import Recognizer
from streamdec.files.transcribe import transcribe_files
from test_builtin_transcribe import speak
from test_server_drain import sigterm_mid_stream, stream_on
from test_telephony import (call, finals_of, leg_finals, not_partial, rec,  # noqa: F401
                            vad_rec)  # (call, rec, vad_rec: fixtures)
from twilio_replay import twilio_messages

SENTENCES = ["please call me back tomorrow morning", "the meeting starts at nine thirty",
             "my account number is four five six", "thank you for calling have a nice day"]


def start_workers(*args: str, listeners: int = 1, env: dict | None = None,
                  **process) -> ServerProcess:
    """A two-worker server (``--workers 2`` unless ``args`` set it), once both listen;
    ``process``: more ``ServerProcess`` arguments."""
    workers = () if any("processes" in a or "--workers" in a for a in args) else (
        "--workers", "2")
    server = ServerProcess(*workers, *args, env=env, **process)
    deadline = time.monotonic() + 60 * UNIT
    while listening(server) < 2 * listeners:
        if time.monotonic() > deadline or server.proc.poll() is not None:
            server.stop()
            raise RuntimeError("workers did not start:\n" + "".join(server.log))
        time.sleep(0.05)
    return server


def listening(server: ServerProcess) -> int:
    return sum('"event": "listening"' in line for line in list(server.log))


def worker_pids(server: ServerProcess) -> dict[int, int]:
    """worker index -> pid of its latest start (from the supervisor's log)."""
    pids = {}
    for line in list(server.log):
        if '"event": "worker_started"' in line:
            event = json.loads(line[line.index("{"):])
            pids[event["worker"]] = event["pid"]
    return pids


def health_workers(server: ServerProcess, count: int) -> collections.Counter:
    """Which worker answered each of ``count`` /health requests (each a new connection)."""
    seen = collections.Counter()
    for _ in range(count):
        status, body = get(server.http("/health"))
        assert status == 200, body
        health = json.loads(body)
        assert health["workers"] == 2
        seen[health["worker"]] += 1
    return seen


def wait_call_links(server: ServerProcess) -> dict[int, dict]:
    """Each worker's ``call_links`` in /health once both report the other linked (a worker
    links once the other listens: one may answer before)."""
    links: dict[int, dict] = {}
    deadline = time.monotonic() + 30 * UNIT
    while not (len(links) == 2 and all(v["unlinked"] == [] for v in links.values())):
        assert time.monotonic() < deadline, links
        health = json.loads(get(server.http("/health"))[1])
        links[health["worker"]] = health["call_links"]
    return links


def metric(text: str, name: str) -> list[float]:
    """Every sample of ``name`` (any labels) in a Prometheus text exposition."""
    return [float(m.group(1)) for m in re.finditer(
        rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)]


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """(wav path, samples) of each sentence."""
    root = tmp_path_factory.mktemp("speech")
    return [(root / f"{n}.wav", speak(s, root / f"{n}.wav")) for n, s in enumerate(SENTENCES)]


@pytest.fixture(scope="module")
def audios(speech):
    return [audio for _, audio in speech]


@pytest.fixture(scope="module")
def texts(speech):
    """What one process (the same built-in model and settings) transcribes."""
    rec = Recognizer()
    return [" ".join(r.text for r in item.finals if r.text)
            for item in transcribe_files(rec, [path for path, _ in speech])]


def test_two_workers_share_the_port_one_health_one_metrics_one_connection_cap(audios, texts):
    server = start_workers("--max-connections", "3")
    try:
        seen = health_workers(server, 40)
        assert set(seen) == {0, 1}, seen  # the kernel spread the connections over both
        assert wait_call_links(server) == {0: {"linked": [1], "unlinked": []},
                                           1: {"linked": [0], "unlinked": []}}

        async def transcribe_all():  # twice three clients (the cap is 3)
            got = []
            for _ in range(2):
                got += await asyncio.gather(*[sherpa_client(server.url("/"), a, 1600)
                                              for a in audios[:3]])
            return got

        got = run(transcribe_all())
        for out, text in zip(got, texts[:3] * 2):
            assert out["close"] == 1000 and out["done"]
            assert sherpa_text(out["results"]) == text
        replicas = {out["replica"] for out in got}
        assert replicas <= {"worker-0", "worker-1"}

        # one /metrics, whichever worker answers: every worker's series summed
        for _ in range(4):
            status, text = get(server.http("/metrics"))
            assert status == 200
            assert metric(text, "streamdec_connections_total") == [6.0]
            assert metric(text, "streamdec_decode_batch_size_count")[0] > 0
            assert len(metric(text, "streamdec_real_time_factor")) == 2  # one per worker

        # the cap holds for the whole server: 3 open connections, wherever they landed
        async def hold_three_then_try_more():
            held = [await websockets.connect(server.url("/")) for _ in range(3)]
            health = json.loads(get(server.http("/health"))[1])
            refused = 0
            for _ in range(6):  # each a new connection: they reach both workers
                try:
                    extra = await websockets.connect(server.url("/"))
                except websockets.InvalidStatus as e:
                    assert e.response.status_code == 503
                    refused += 1
                else:
                    await extra.close()
            for ws in held:
                await ws.close()
            return health, refused

        assert wait_for_idle(server)["connections"] == 0
        health, refused = run(hold_three_then_try_more())
        assert health["connections"] == 3 and health["active_streams"] == 3
        assert refused == 6
    finally:
        assert server.stop() == 0


def test_a_killed_worker_is_restarted_and_the_server_keeps_serving(audios, texts):
    server = start_workers()
    try:
        victim = worker_pids(server)[0]

        async def killed_under_a_client():
            ws = await connect_on(server.url("/"), "worker-0")
            await ws.send(audios[0][:8000].astype("<f4").tobytes())
            os.kill(victim, signal.SIGKILL)
            try:
                await asyncio.wait_for(ws.recv(), 10 * UNIT)
                await asyncio.wait_for(ws.recv(), 10 * UNIT)
            except websockets.ConnectionClosed:
                pass
            return ws.close_code

        # a process that dies sends no close frame: its clients see 1006
        assert run(killed_under_a_client()) == 1006
        deadline = time.monotonic() + 60 * UNIT
        while listening(server) < 3:  # worker 0 started again and listens
            assert time.monotonic() < deadline, "".join(server.log)
            time.sleep(0.05)
        assert any('"event": "worker_died"' in line for line in server.log)
        assert worker_pids(server)[0] != victim
        assert set(health_workers(server, 40)) == {0, 1}
        wait_call_links(server)  # the new worker 0 and worker 1 linked again
        out = run(sherpa_client(server.url("/"), audios[1], 1600))
        assert sherpa_text(out["results"]) == texts[1]
        # the dead worker's connection no longer counts against the cap
        assert wait_for_idle(server)["connections"] == 0
    finally:
        assert server.stop() == 0


async def streaming_client(ws, audio: np.ndarray, started: asyncio.Event) -> dict:
    """``stream_on`` an open connection: what it received, its close code, its worker."""
    received = await stream_on(ws, audio.astype("<f4"), started)
    return {"received": received, "close": ws.close_code,
            "replica": ws.response.headers["x-streamdec-replica"]}


async def two_on_each_worker(url: str) -> list:
    """Four connections, two on each worker (the kernel picks: extra ones are closed)."""
    held: dict[str, list] = {"worker-0": [], "worker-1": []}
    for _ in range(100):
        ws = await websockets.connect(url)
        mine = held[ws.response.headers["x-streamdec-replica"]]
        if len(mine) < 2:
            mine.append(ws)
        else:
            await ws.close()
        if all(len(v) == 2 for v in held.values()):
            return held["worker-0"] + held["worker-1"]
    raise AssertionError(f"connections did not reach both workers: {held}")


def test_sigterm_drains_every_worker(audios):
    server = start_workers()
    long = [np.concatenate([a, a, a]) for a in audios]

    async def start(events):
        sockets = await two_on_each_worker(server.url("/"))
        return [streaming_client(ws, a, e) for ws, a, e in zip(sockets, long, events)]

    got, code = sigterm_mid_stream(server, 4, start)
    assert {out["replica"] for out in got} == {"worker-0", "worker-1"}
    for out in got:
        received = out["received"]
        assert out["close"] == 1000, received[-3:]
        assert received[-1] == "Done!"
        last = received[-2]
        assert last["is_final"] and last["is_eof"] and last["text"]
    assert code == 0
    assert sum('"event": "draining"' in line for line in server.log) == 2


def test_tls_tokens_a_vosk_port_and_config_file_settings_hold_in_every_worker(tmp_path, speech,
                                                                              texts):
    from test_server_limits import TOKEN, self_signed

    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(cafile=str(cert))
    (tmp_path / "tokens").write_text(f"{TOKEN}\n")
    (tmp_path / "server.toml").write_text(
        "[server]\n"
        "processes = 2\n"
        f'token_file = "{tmp_path / "tokens"}"\n'
        f'tls_cert = "{cert}"\n'
        f'tls_key = "{key}"\n')
    server = start_workers("--config", str(tmp_path / "server.toml"), "--vosk-port", "0",
                           listeners=2)
    try:
        assert server.scheme == "https"
        seen = collections.Counter()
        for _ in range(40):
            status, body = get(server.http("/health"), context=context)
            assert status == 200
            seen[json.loads(body)["worker"]] += 1
        assert set(seen) == {0, 1}
        audio = speech[0][1]
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async def six_clients():
            return await asyncio.gather(*[sherpa_client(server.url("/"), audio, 1600,
                                                        ssl=context, additional_headers=headers)
                                          for _ in range(6)])

        got = run(six_clients())
        assert [sherpa_text(out["results"]) for out in got] == [texts[0]] * 6
        # the WAV's own 16-bit samples (read as x / 32768): the same audio as the file
        pcm = np.clip(np.round(audio * 32768), -32768, 32767).astype("<i2")
        events = [json.loads(line[line.index("{"):]) for line in list(server.log)
                  if '"event": "listening"' in line]
        vosk_ports = {e["port"] for e in events if e["serves"] == ["vosk at /"]}
        assert len(vosk_ports) == 1 and len(events) == 4  # one Vosk port, both workers on it
        url = server.url("/?sample_rate=16000", port=vosk_ports.pop())
        out = run(vosk_client(url, pcm, 1600, ssl=context, additional_headers=headers))
        assert vosk_text(out["replies"]) == texts[0]

        async def no_token():
            await websockets.connect(server.url("/"), ssl=context)

        for _ in range(4):
            with pytest.raises(websockets.InvalidStatus) as e:
                run(no_token())
            assert e.value.response.status_code == 401
    finally:
        assert server.stop() == 0


def test_a_worker_that_cannot_start_stops_the_server_with_its_error(tmp_path):
    """No restart loop: a worker that exits before it ever listened (here: no model) stops
    the server, which exits 2 with the error in plain words."""
    import subprocess
    import sys

    from server_utils import REPO

    proc = subprocess.run([sys.executable, "-m", "streamdec", "serve", "--port", "0",
                           "--workers", "2", "--model", str(tmp_path / "missing")],
                          cwd=REPO, capture_output=True, text=True, timeout=60 * UNIT)
    assert proc.returncode == 2
    assert f"streamdec: error: {tmp_path / 'missing'}: model directory not found" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count('"event": "worker_started"') == 2  # started once, not again


# -- calls and their subscribers on different workers ---------------------------------------------
async def listen(url: str, worker: str, out: list, joined: asyncio.Event) -> int:
    """A ``/calls/{id}`` subscriber on ``worker``: its messages into ``out``; returns its
    close code."""
    ws = await connect_on(url, worker)
    joined.set()
    async for text in ws:
        out.append(json.loads(text))
    return ws.close_code


def test_a_calls_subscribers_on_the_other_worker_get_what_its_own_worker_gives(vad_rec, call):
    left, right, stereo = call["ulaw", 8000]
    pcm = sf.read(stereo, dtype="int16")[0]
    server = start_workers()
    try:
        messages = [m for _, m in twilio_messages(pcm, "CA-two", "MZ1")]
        half = 3 * len(messages) // 4  # past the first final (channel 0's endpoint)
        url = server.url("/calls/CA-two")

        async def main():
            early, local, late = [], [], []
            joined = [asyncio.Event() for _ in range(3)]
            listeners = [asyncio.ensure_future(listen(url, "worker-1", early, joined[0])),
                         asyncio.ensure_future(listen(url, "worker-0", local, joined[1]))]
            await asyncio.gather(*(j.wait() for j in joined[:2]))
            ws = await connect_on(server.url("/twilio"), "worker-0")
            for m in messages[:half]:
                await ws.send(json.dumps(m))
            while not any(m.get("is_final") and m.get("text") for m in early):
                await asyncio.sleep(0.05)
            listeners.append(asyncio.ensure_future(listen(url, "worker-1", late, joined[2])))
            await joined[2].wait()
            for m in messages[half:]:
                await ws.send(json.dumps(m))
            await ws.wait_closed()
            return early, local, late, await asyncio.gather(*listeners)

        early, local, late, codes = run(asyncio.wait_for(main(), 120 * UNIT))
        assert codes == [1000, 1000, 1000]
        # the subscriber on the other worker: every message the call's own worker gives, in
        # order (partials included), and each leg's finals those of decoding it alone
        assert early == local
        for leg, path in (("inbound", left), ("outbound", right)):
            assert leg_finals(early, leg) == leg_finals(late, leg) == finals_of(vad_rec, path)
        assert late[0]["type"] == "call_start" and late[-1]["type"] == "call_end"
        assert not_partial(early) == not_partial(late)
    finally:
        assert server.stop() == 0


def test_a_call_whose_worker_is_killed_ends_for_its_subscribers_on_the_other(call):
    pcm = sf.read(call["ulaw", 8000][2], dtype="int16")[0]
    server = start_workers()
    try:
        messages = [m for _, m in twilio_messages(pcm, "CA-kill", "MZ1")]
        victim = worker_pids(server)[0]

        async def main():
            got, joined = [], asyncio.Event()
            listener = asyncio.ensure_future(
                listen(server.url("/calls/CA-kill"), "worker-1", got, joined))
            await joined.wait()
            ws = await connect_on(server.url("/twilio"), "worker-0")
            for m in messages[:3 * len(messages) // 4]:  # past the first final
                await ws.send(json.dumps(m))
            while not any(m.get("is_final") and m.get("text") for m in got):
                await asyncio.sleep(0.05)
            os.kill(victim, signal.SIGKILL)
            code = await listener
            with contextlib.suppress(websockets.ConnectionClosed):
                await ws.recv()
            return got, code, ws.close_code

        got, code, call_code = run(asyncio.wait_for(main(), 120 * UNIT))
        assert call_code == 1006  # the call's own socket died with its worker
        assert code == 1000
        assert got[0]["type"] == "call_start"
        assert got[-1] == {"type": "call_end", "call_id": "CA-kill", "reason": "worker stopped",
                           "error": "the worker process holding this call stopped",
                           "kind": "worker_stopped"}
        assert any(m.get("is_final") and m.get("text") for m in got)
    finally:
        # SIGTERM while worker 0 is started again: it too gets the signal (it once missed
        # it and the server ran on) and the server stops: with 0 (the new worker drained, or
        # the signal ended it while it started: -15, as asked), or 1 when the supervisor saw
        # the killed worker only after the signal (it died: not a clean drain)
        status = server.stop()
        exited = [json.loads(line[line.index("{"):])["exitcode"] for line in server.log
                  if '"event": "worker_exited"' in line]
        assert set(exited) <= {-9, -signal.SIGTERM}, "".join(server.log)
        assert status == (1 if -9 in exited else 0), "".join(server.log)


@pytest.mark.parametrize("spot, status, died, exited", [
    # the supervisor had just reaped the killed worker: it stops with 1 (that worker died,
    # not drained); the other worker drains
    ("reaped", 1, False, [-9]),
    # it had just forked the killed worker's replacement: that one gets the signal too and
    # ends by it (still starting), the other drains: 0
    ("launch:3", 0, True, [-signal.SIGTERM]),
], ids=["reaped", "restarting"])
def test_sigterm_at_each_spot_of_a_workers_restart_stops_the_server(spot, status, died,
                                                                    exited):
    """SIGTERM to the supervisor at one exact spot of its handling of a killed worker
    (``signal_at.py``: the same instant on every run). The supervisor once reaped workers
    from its signal handler as well: at the ``reaped`` spot the handler took the worker
    its loop had just reaped for alive, its SIGTERM to that pid raised ProcessLookupError
    out of the supervisor, and the supervisor hung at exit waiting for the other worker,
    never told to stop."""
    server = start_workers(launcher=(str(Path(__file__).with_name("signal_at.py")), spot))
    os.kill(worker_pids(server)[0], signal.SIGKILL)
    try:
        got = server.proc.wait(timeout=60 * UNIT)
    except subprocess.TimeoutExpired:
        got = "still running after 60 s"
    finally:
        server.stop(signal.SIGKILL)  # (a hung one: its workers stop with it)
    time.sleep(0.2)  # the last lines
    log = "".join(server.log)
    assert got == status, log
    assert ('"event": "worker_died"' in log) == died, log
    assert [json.loads(line[line.index("{"):])["exitcode"] for line in server.log
            if '"event": "worker_exited"' in line] == exited, log
    assert '"event": "stopped", "workers": 2' in log and "Traceback" not in log, log
    assert re.search(r'\[worker 1\] .*"event": "stopped", "drained": true', log), log


def test_workers_whose_call_links_cannot_be_made_stop_the_server_saying_why(tmp_path):
    """A temporary folder whose path is too long for a Unix socket (TMPDIR): the workers
    cannot link their calls; the server exits 2 with that error, not a traceback."""
    import subprocess
    import sys

    from server_utils import REPO

    long = tmp_path / ("d" * 110)
    long.mkdir()
    proc = subprocess.run([sys.executable, "-m", "streamdec", "serve", "--port", "0",
                           "--workers", "2"], cwd=REPO, capture_output=True, text=True,
                          timeout=60 * UNIT, env={**os.environ, "TMPDIR": str(long)})
    assert proc.returncode == 2, proc.stderr
    assert "streamdec: error: cannot link the workers' calls in " in proc.stderr
    assert "AF_UNIX path too long" in proc.stderr
    assert "Traceback" not in proc.stderr
