"""The outbox through a real ``streamdec serve`` (built-in model, SQLite store in a
temporary folder, bearer tokens and a read-only token file) and a real receiver on
loopback (``test_records_outbox.Receiver``), driven by Twilio calls (the replay client):

- the receiver down (its port closed) while three calls run and the server is stopped;
  the receiver back on its port, the server started again on the same store: every final
  the calls got arrives, each key once after the receiver's deduplication, in order per
  call, its body the message the call's subscribers got plus its ``idempotency_key``;
- ``GET /deliveries`` lists them delivered (a read-only token may), 400 for a bad status,
  401 without a token; a call whose two finals find the receiver down past the retention:
  both dead, listed as dead, counted in ``/metrics``; a replay with a read-only token is
  refused (403), with a full token they are delivered, in order (then 404: not dead);
  ``/health`` and ``/metrics`` count the rows by status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import urllib.request
from pathlib import Path

from server_utils import UNIT, ServerProcess, get, run
from test_records_outbox import Receiver
from test_telephony_webhook import finals_with_text, stereo  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
import twilio_replay  # noqa: E402

FULL, READER = "full-token-2", "reader-token-2"


def fetch(server, path: str, token: str | None, method: str = "GET") -> tuple[int, dict]:
    request = urllib.request.Request(server.http(path), method=method, headers=(
        {"Authorization": f"Bearer {token}"} if token else {}))
    try:
        with urllib.request.urlopen(request, timeout=10 * UNIT) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def replay(server, path, call_id):
    """A Twilio call of ``path`` (as fast as it goes); every message its subscriber got."""
    args = argparse.Namespace(file=str(path), url=server.url("/twilio"), token=FULL,
                              cafile=None, realtime=False, json=True, partials=False,
                              call_id=call_id, frame_ms=20, dtmf=[], no_subscribe=False,
                              param=[])
    return twilio_replay.main(args)


def wait_until(condition, timeout: float, server=None, receiver=None) -> None:
    deadline = time.monotonic() + timeout * UNIT
    while not condition():
        assert time.monotonic() < deadline, ("timed out", receiver and receiver.requests,
                                             server and server.log[-20:])
        time.sleep(0.05)


def outbox_metrics(server) -> dict[str, float]:
    _, text = get(server.http("/metrics"))
    counts = {f"rows_{m[0]}": float(m[1]) for m in
              re.findall(r'streamdec_outbox_rows\{status="(\w+)"\} (\S+)', text)}
    counts.update({m[0]: float(m[1]) for m in re.findall(
        r'streamdec_webhook_messages_total\{outcome="(\w+)"\} (\S+)', text)})
    return counts


def test_finals_reach_a_receiver_down_across_a_restart_once_per_key_in_order(
        tmp_path, stereo):  # noqa: F811
    (tmp_path / "tokens").write_text(FULL + "\n")
    (tmp_path / "readers").write_text(READER + "\n")
    receiver = Receiver()
    port, url = receiver.httpd.server_address[1], receiver.url
    receiver.close()  # down: its port refuses connections
    args = ("--token-file", str(tmp_path / "tokens"), "--store",
            f"sqlite:///{tmp_path}/store.sqlite3")
    env = {"STREAMDEC_WEBHOOK_URL": url, "STREAMDEC_WEBHOOK_BACKOFF_SECONDS": "0.05",
           "STREAMDEC_WEBHOOK_TIMEOUT_SECONDS": "2",
           "STREAMDEC_READ_TOKEN_FILE": str(tmp_path / "readers")}
    first = ServerProcess(*args, env=env)
    try:
        async def calls():
            return await asyncio.gather(*[replay(first, stereo, f"CA-out-{n}")
                                          for n in range(3)])
        outs = run(calls())
    finally:
        assert first.stop() == 0
    finals = [f for out in outs for f in finals_with_text(out)]
    assert len(finals) == 6
    # the receiver back, then the second server, with a retention of 3 s (so that a final
    # that finds the receiver down later dies soon): it posts what the first one left
    receiver = Receiver(port=port)
    second = ServerProcess(*args, env={**env, "STREAMDEC_WEBHOOK_RETENTION_SECONDS": "3"})
    try:
        wait_until(lambda: len(receiver.kept) == 6, 20, second, receiver)
        want = {f"{f['call_id']}/{f['leg']}/{f['segment']}": f for f in finals}
        assert sorted(receiver.kept) == sorted(want)
        for key, body in receiver.kept.items():
            assert body == dict(want[key], idempotency_key=key)
        for n in range(3):  # in order per call
            call = [k for k in receiver.order if k.startswith(f"CA-out-{n}/")]
            assert call == [k for k in want if k.startswith(f"CA-out-{n}/")]
        status, page = fetch(second, "/deliveries?status=delivered", READER)
        assert status == 200 and sorted(d["key"] for d in page["deliveries"]) == sorted(want)
        assert page["next"] is None
        assert fetch(second, "/deliveries?status=lost", READER) == (400, {
            "error": "status must be one of pending, delivered, dead, got 'lost'"})
        assert fetch(second, "/deliveries", None)[0] == 401

        receiver.down = True  # a call whose finals find the receiver down past 3 s
        run(replay(second, stereo, "CA-dead"))
        wait_until(lambda: len(fetch(second, "/deliveries?status=dead", READER)[1][
            "deliveries"]) == 2, 20)
        status, page = fetch(second, "/deliveries?status=dead", READER)
        dead = page["deliveries"]  # the first, then the one that waited behind it
        assert status == 200 and sorted(d["key"] for d in dead) == sorted(
            f"CA-dead/{leg}/0" for leg in ("inbound", "outbound"))
        assert {d["last_error"] for d in dead} == {"HTTP 503"}
        wait_until(lambda: outbox_metrics(second).get("dead") == 2.0, 10)
        receiver.down = False
        paths = [f"/deliveries/{d['id']}/replay" for d in dead]
        assert fetch(second, paths[0], READER, "POST") == (403, {
            "error": "this token may only read deliveries"})
        for d, path in zip(dead, paths):
            assert fetch(second, path, FULL, "POST") == (200, {"replayed": d["id"]})
        wait_until(lambda: sum(k.startswith("CA-dead/") for k in receiver.kept) == 2, 20)
        assert [k for k in receiver.order if k.startswith("CA-dead/")] == [
            d["key"] for d in dead]  # replayed in order
        assert fetch(second, paths[0], FULL, "POST")[0] == 404
        wait_until(lambda: outbox_metrics(second).get("rows_delivered") == 8.0, 15)
        health = json.loads(get(second.http("/health"))[1])["outbox"]
        assert health == {"status": "ok", "pending": 0, "delivered": 8, "dead": 0}
    finally:
        receiver.close()
        assert second.stop() == 0
