"""Faults that must lose no transcript: a real ``streamdec serve`` (built-in model) taking
live audio fork calls (FreeSWITCH mod_audio_fork's protocol, whose socket carries each
final back to the caller), while something breaks:

- ``kill``: SIGKILL of the server mid-call, then a restart on the same store;
- ``kill-worker``: ``--workers 2``, SIGKILL of the worker holding some of the calls (the
  supervisor starts it again; the other worker's calls go on);
- ``postgres-restart``: the store on a real PostgreSQL server (``tests/postgres_utils``),
  restarted (``pg_ctl restart``) mid-call;
- ``disk-full``: the SQLite store on a 4 MB tmpfs, filled up mid-call (needs root, for the
  mount), then freed;
- ``webhook-down``: the webhook's receiver (a local HTTP server that keeps the first body
  of each ``Idempotency-Key``) down, its port closed, from the start for
  ``--webhook-down`` seconds, and the server SIGKILLed mid-call and started again on the
  same store meanwhile: every stored final must reach the receiver, each key once after
  its deduplication (``delivered``; ``duplicates``: posts of a key already kept), in
  order per call (``out_of_order``), none missing (``undelivered``).

For each: finals the clients received (``received``), stored, stored twice
(``duplicated``: the store's key makes it impossible, the report checks), received but not
stored (``lost``), and the calls' statuses after the fault. The clients pace the audio at
real time. Usage (writes one JSON per scenario and ``faults.json`` with them all):

    python bench/daemon/faults.py --calls 20 --out bench/results/2026-12-07-faults
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import soundfile as sf
import websockets

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from postgres_utils import PostgresServer  # noqa: E402
from server_utils import ServerProcess  # noqa: E402
from test_records_outbox import Receiver  # noqa: E402

TOKEN = "faults-token"
SENTENCES = ("please call me back tomorrow morning", "my account number is four five six",
             "thank you for calling have a nice day", "i would like to change my address",
             "the package arrived yesterday afternoon")


def speech(folder: Path) -> np.ndarray:
    parts = []
    for n, text in enumerate(SENTENCES):
        raw, wav = folder / f"s{n}.raw.wav", folder / f"s{n}.wav"
        subprocess.run(["espeak-ng", "-v", ("en-us+m3", "en-us+f2")[n % 2], "-w", str(raw),
                        text], check=True)
        subprocess.run(["sox", "-D", str(raw), "-r", "16000", str(wav)], check=True)
        parts += [sf.read(wav, dtype="float32")[0], np.zeros(32000, np.float32)]
    return np.concatenate(parts)


def fetch(server: ServerProcess, path: str) -> dict:
    request = urllib.request.Request(server.http(path),
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return {"status_code": e.code, "body": e.read().decode()}


async def fork_call(url: str, call_id: str, audio: np.ndarray, heard: list, replicas: dict):
    """A call paced at real time; each final sent back goes into ``heard``."""
    pcm = np.clip(np.round(audio * 32768), -32768, 32767).astype("<i2").tobytes()
    try:
        async with websockets.connect(
                f"{url}?call_id={call_id}&mix=mono&rate=16000&token={TOKEN}",
                subprotocols=["audio.drachtio.org"], max_size=None,
                close_timeout=None) as ws:
            replicas[call_id] = ws.response.headers.get("x-streamdec-replica")
            await ws.send(json.dumps({"callSid": call_id}))

            async def read():
                try:
                    async for message in ws:
                        m = json.loads(message)
                        if m.get("type") == "transcription":
                            heard.append((call_id, m["data"]["segment"], m["data"]["text"]))
                except websockets.ConnectionClosed:
                    pass

            reader = asyncio.ensure_future(read())
            start = time.monotonic()
            for n, at in enumerate(range(0, len(pcm), 3200)):  # 100 ms
                await ws.send(pcm[at:at + 3200])
                await asyncio.sleep(max(0.0, start + (n + 1) * 0.1 - time.monotonic()))
            await asyncio.sleep(3.0)  # the last finals come back, then the caller hangs up
            await ws.close()
            await asyncio.wait_for(reader, 60)
    except (websockets.ConnectionClosed, OSError, asyncio.TimeoutError):
        pass


async def run_calls(server, ids, audio, fault, fault_after: float):
    """The calls, with ``fault()`` once every call has had a final and ``fault_after``
    seconds have passed; (heard, replicas, fault's result)."""
    heard, replicas, result = [], {}, {}
    holder = getattr(fault, "holder", None)
    if holder is not None:
        holder["replicas"] = replicas
    tasks = [asyncio.ensure_future(fork_call(server.url("/audiofork"), i, audio, heard,
                                             replicas)) for i in ids]
    began = time.monotonic()
    while (len({h[0] for h in heard}) < len(ids) or time.monotonic() - began < fault_after):
        await asyncio.sleep(0.05)
    result = await fault()
    await asyncio.gather(*tasks)
    return heard, replicas, result


def tally(server, ids, heard) -> dict:
    stored, statuses = [], {}
    for call_id in ids:
        record = fetch(server, f"/calls/{call_id}/transcript")
        statuses[call_id] = record.get("status", f"missing: {record}")
        stored += [(call_id, f["segment"], f["text"]) for f in record.get("finals", [])]
    lost = sorted(set(heard) - set(stored))
    counts = {}
    for s in statuses.values():
        counts[s] = counts.get(s, 0) + 1
    return {"calls": len(ids), "received": len(heard), "received_distinct": len(set(heard)),
            "stored": len(stored), "duplicated": len(stored) - len(set(stored)),
            "lost": len(lost), "lost_finals": lost, "statuses": counts}


def wait_settled(server, ids, timeout=30.0) -> None:
    """Until no call of ``ids`` is running (the restarted server cut the dead ones)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listing = fetch(server, "/transcripts?kind=call&status=running&limit=1000")
        if not [s for s in listing.get("sessions", []) if s["id"] in ids]:
            return
        time.sleep(0.2)


def scenario_kill(args, audio, folder: Path) -> dict:
    store = f"sqlite:///{folder}/kill.sqlite3"
    ids = [f"kill-{n}" for n in range(args.calls)]
    server = ServerProcess("--token-file", str(folder / "tokens"), "--store", store,
                           env=ENV)

    async def fault():
        server.proc.send_signal(signal.SIGKILL)
        return {"killed": "server", "pid": server.proc.pid}

    heard, _, info = asyncio.run(run_calls(server, ids, audio, fault, args.fault_after))
    server.proc.wait()
    again = ServerProcess("--token-file", str(folder / "tokens"), "--store", store, env=ENV)
    try:
        wait_settled(again, ids)
        return {**info, **tally(again, ids, heard)}
    finally:
        again.stop()


def scenario_kill_worker(args, audio, folder: Path) -> dict:
    store = f"sqlite:///{folder}/kill-worker.sqlite3"
    ids = [f"kw-{n}" for n in range(args.calls)]
    server = ServerProcess("--token-file", str(folder / "tokens"), "--store", store,
                           "--workers", "2", env=ENV, start_timeout=120)
    deadline = time.monotonic() + 120
    while (sum('"event": "listening"' in line for line in list(server.log)) < 2
           and time.monotonic() < deadline):  # both workers take calls
        time.sleep(0.05)
    pids = {}

    holder = {}

    async def fault():
        for line in list(server.log):
            if '"event": "worker_started"' in line:
                event = json.loads(line[line.index("{"):])
                pids[event["worker"]] = event["pid"]
        # the worker holding the first call (the kernel may give one worker them all)
        worker = int(holder["replicas"][ids[0]].rpartition("-")[2])
        holder["killed"] = f"worker-{worker}"
        os.kill(pids[worker], signal.SIGKILL)
        return {"killed": f"worker {worker} of 2", "pid": pids[worker]}

    fault.holder = holder
    try:
        heard, replicas, info = asyncio.run(run_calls(server, ids, audio, fault,
                                                      args.fault_after))
        wait_settled(server, ids)
        result = {**info, **tally(server, ids, heard)}
        on = {i: replicas.get(i) for i in ids}
        result["calls_on_killed_worker"] = sum(r == holder["killed"] for r in on.values())
        result["statuses_by_worker"] = {
            w: sorted({fetch(server, f"/calls/{i}/transcript")["status"]
                       for i in ids if on[i] == w}) for w in ("worker-0", "worker-1")}
        return result
    finally:
        server.stop()


def scenario_postgres(args, audio, folder: Path) -> dict:
    ids = [f"pg-{n}" for n in range(args.calls)]
    with PostgresServer() as pg:
        server = ServerProcess("--token-file", str(folder / "tokens"), "--store", pg.url,
                               env=ENV)
        seen = {}

        async def fault():
            began = time.monotonic()
            await asyncio.to_thread(pg.restart)
            seen["restart_seconds"] = round(time.monotonic() - began, 2)
            return {"killed": "PostgreSQL (pg_ctl restart -m fast)", **seen}

        try:
            heard, _, info = asyncio.run(run_calls(server, ids, audio, fault,
                                                   args.fault_after))
            errors = sum('"event": "store_error"' in line for line in server.log)
            recovered = sum('"event": "store_recovered"' in line for line in server.log)
            time.sleep(2)
            return {**info, **tally(server, ids, heard), "store_errors_logged": errors,
                    "store_recoveries_logged": recovered}
        finally:
            server.stop()


def scenario_disk_full(args, audio, folder: Path) -> dict:
    if os.geteuid() != 0:
        return {"skipped": "mounting a tmpfs needs root"}
    mount = folder / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    ids = [f"full-{n}" for n in range(args.calls)]
    try:
        server = ServerProcess("--token-file", str(folder / "tokens"), "--store",
                               f"sqlite:///{mount}/store.sqlite3", env=ENV)
        health = {}

        async def fault():
            filler = mount / "filler"
            with open(filler, "wb") as f:  # fill the disk
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass
            received_before = len(heard_ref)
            await asyncio.sleep(args.full_seconds)
            health["during"] = fetch(server, "/health").get("store")
            health["finals_received_while_full"] = len(heard_ref) - received_before
            filler.unlink()
            await asyncio.sleep(3)
            health["after"] = fetch(server, "/health").get("store")
            return {"killed": f"disk space ({args.full_seconds:g} s full)", **health}

        heard_ref: list = []

        async def main():
            nonlocal heard_ref
            heard, replicas = heard_ref, {}
            tasks = [asyncio.ensure_future(fork_call(server.url("/audiofork"), i, audio,
                                                     heard, replicas)) for i in ids]
            while len({h[0] for h in heard}) < len(ids):
                await asyncio.sleep(0.05)
            info = await fault()
            await asyncio.gather(*tasks)
            return heard, info

        try:
            heard, info = asyncio.run(main())
            time.sleep(2)
            errors = [json.loads(line[line.index("{"):])["error"] for line in server.log
                      if '"event": "store_error"' in line]
            result = {**info, **tally(server, ids, heard), "store_errors_logged": errors[:3]}
            # the report names no path of the machine that ran it
            return json.loads(json.dumps(result).replace(str(mount), "<tmpfs>"))
        finally:
            server.stop()
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def scenario_webhook_down(args, audio, folder: Path) -> dict:
    store = f"sqlite:///{folder}/webhook.sqlite3"
    ids = [f"hook-{n}" for n in range(args.calls)]
    receiver = Receiver()
    port, url = receiver.httpd.server_address[1], receiver.url
    receiver.close()  # down from the start
    down_since = time.monotonic()
    env = {**ENV, "STREAMDEC_WEBHOOK_URL": url}
    server = ServerProcess("--token-file", str(folder / "tokens"), "--store", store, env=env)

    async def fault():
        server.proc.send_signal(signal.SIGKILL)
        return {"killed": "server", "pid": server.proc.pid,
                "receiver_down_seconds": args.webhook_down}

    heard, _, info = asyncio.run(run_calls(server, ids, audio, fault, args.fault_after))
    server.proc.wait()
    again = ServerProcess("--token-file", str(folder / "tokens"), "--store", store, env=env)
    try:
        wait_settled(again, ids)
        time.sleep(max(0.0, down_since + args.webhook_down - time.monotonic()))
        receiver = Receiver(port=port)
        result = {**info, **tally(again, ids, heard)}
        want = {}  # key -> the stored final's segment, for every call
        for call_id in ids:
            for f in fetch(again, f"/calls/{call_id}/transcript").get("finals", []):
                want[f"{call_id}/{f['leg']}/{f['segment']}"] = f["segment"]
        back = time.monotonic()
        while set(want) - set(receiver.kept) and time.monotonic() - back < 300:
            time.sleep(0.2)
        result["delivery_seconds_after_receiver_back"] = round(time.monotonic() - back, 1)
        out_of_order = 0
        for call_id in ids:
            segments = [want[k] for k in receiver.order if k.startswith(call_id + "/")]
            out_of_order += sum(a > b for a, b in zip(segments, segments[1:]))
        posts = len(receiver.requests)
        result.update(delivered=len(set(want) & set(receiver.kept)),
                      duplicates=sum(1 for _, k, _ in receiver.requests if k in receiver.kept)
                      - len(receiver.kept), posts=posts, out_of_order=out_of_order,
                      undelivered=len(set(want) - set(receiver.kept)),
                      unknown_keys=len(set(receiver.kept) - set(want)))
        return result
    finally:
        receiver.close()
        again.stop()


SCENARIOS = {"kill": scenario_kill, "kill-worker": scenario_kill_worker,
             "postgres-restart": scenario_postgres, "disk-full": scenario_disk_full,
             "webhook-down": scenario_webhook_down}
ENV = {"STREAMDEC_CALL_TEXT_FORMAT": "raw"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--fault-after", type=float, default=10.0,
                   help="seconds into the calls (and after each has had a final)")
    p.add_argument("--full-seconds", type=float, default=5.0)
    p.add_argument("--webhook-down", type=float, default=120.0,
                   help="seconds the webhook's receiver is down (webhook-down)")
    p.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    p.add_argument("--out", default=str(REPO / "bench/results/2026-12-07-faults"))
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"what": "finals received by live calls vs stored, across faults",
              "date": time.strftime("%Y-%m-%d", time.gmtime()), "calls": args.calls,
              "python": platform.python_version(), "cpus": os.cpu_count(), "scenarios": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "tokens").write_text(TOKEN + "\n")
        audio = speech(folder)
        report["call_seconds"] = round(len(audio) / 16000, 2)
        for name in args.only or list(SCENARIOS):
            began = time.monotonic()
            result = SCENARIOS[name](args, audio, folder)
            result["seconds"] = round(time.monotonic() - began, 1)
            result["date"] = report["date"]
            report["scenarios"][name] = result
            (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
            print(name, json.dumps({k: v for k, v in result.items() if k != "lost_finals"}),
                  flush=True)
    previous = out / "faults.json"
    if args.only and previous.exists():  # the other scenarios' results are kept
        kept = json.loads(previous.read_text())
        kept["scenarios"].update(report["scenarios"])
        report = {**kept, "scenarios": kept["scenarios"]}
    previous.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
