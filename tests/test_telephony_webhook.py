"""The webhook of a real ``streamdec serve`` with the transcript store off (its in-memory
queue; with the store on it is the store's outbox: ``test_records_outbox``) under a failing
and a slow consumer (a local HTTP server that answers 500, or sleeps before answering):
calls are decoded at full speed meanwhile, the finals are delivered once the webhook
recovers, and a full queue drops finals, counted in ``/metrics`` and logged."""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from server_utils import UNIT, ServerProcess, get, run
from test_builtin_transcribe import speak

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
import twilio_replay  # noqa: E402

QUEUE = 3  # webhook_queue of the server under test


class Hook:
    """A local webhook: ``mode`` "fail" answers 500, "sleep" answers 200 after ``delay``
    seconds, "ok" answers 200; ``received`` holds the bodies answered with 200."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.delay = 0.0
        self.received: list[dict] = []
        self.requests = 0
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.requests += 1
                if hook.mode == "sleep":
                    time.sleep(hook.delay)
                status = 500 if hook.mode == "fail" else 200
                if status == 200:
                    hook.received.append(body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/finals"

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture(scope="module")
def hook():
    """A webhook receiver for a module's server (test_telephony_text and
    test_telephony_keywords take it from here)."""
    h = Hook()
    yield h
    h.close()


@pytest.fixture(scope="module")
def server(hook):
    s = ServerProcess("--store", "off", env={
        "STREAMDEC_WEBHOOK_URL": hook.url, "STREAMDEC_WEBHOOK_QUEUE": str(QUEUE),
        "STREAMDEC_WEBHOOK_BACKOFF_SECONDS": "0.1", "STREAMDEC_WEBHOOK_MAX_ATTEMPTS": "1000",
        "STREAMDEC_WEBHOOK_TIMEOUT_SECONDS": "10"})
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def stereo(tmp_path_factory):
    """Two sides taking turns, 8 kHz mu-law: two finals with text, one per side."""
    d = tmp_path_factory.mktemp("hook")
    a = speak("please hold the line", d / "a.wav")
    b = speak("the store closes at five", d / "b.wav", voice="en-us+f2")
    tail = np.zeros(24000, np.float32)
    ch = [np.concatenate([a, np.zeros_like(b), tail]), np.concatenate([np.zeros_like(a), b, tail])]
    x = np.stack([soxr.resample(c, 16000, 8000) for c in ch], axis=1)
    sf.write(d / "call.wav", x, 8000, subtype="ULAW")
    return d / "call.wav"


def webhook_counts(server) -> dict[str, float]:
    _, text = get(server.http("/metrics"))
    return {m[0]: float(m[1]) for m in
            re.findall(r'streamdec_webhook_messages_total\{outcome="(\w+)"\} (\S+)', text)}


def replay(server, path, call_id):
    args = argparse.Namespace(file=str(path), url=server.url("/twilio"), token=None,
                              cafile=None, realtime=False, json=True, partials=False,
                              call_id=call_id, frame_ms=20, dtmf=[], no_subscribe=False,
                              param=[])
    return twilio_replay.main(args)


def finals_with_text(messages):
    return [m for m in messages if m["type"] == "result" and m["is_final"] and m["text"]]


def wait_until(condition, timeout):
    deadline = time.monotonic() + timeout * UNIT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_failing_webhook_slows_nothing_and_gets_every_final_when_it_recovers(
        server, hook, stereo):
    hook.mode = "fail"
    started = time.monotonic()
    out = run(replay(server, stereo, "CA-fail"))
    took = time.monotonic() - started
    finals = finals_with_text(out)
    assert len(finals) == 2 and out[-1]["type"] == "call_end"  # the call is over ...
    # ... while the webhook failed (it POSTs on its own: the first try may follow the end)
    wait_until(lambda: hook.requests >= 1, 10)
    assert hook.received == []
    hook.mode = "ok"
    wait_until(lambda: len(hook.received) == 2, 10)
    assert hook.received == finals  # in order, each the message subscribers got
    counts = webhook_counts(server)
    assert counts["retried"] >= 1
    assert (counts["delivered"], counts.get("dropped", 0.0), counts.get("failed", 0.0)) == (
        2.0, 0.0, 0.0)
    assert took < 20 * UNIT


def test_a_slow_webhook_drops_past_its_queue_counted_and_logged_while_calls_run_on(
        server, hook, stereo):
    hook.mode, hook.delay = "sleep", 3.0
    before = webhook_counts(server)
    hook.received.clear()

    async def calls():
        return await asyncio.gather(*[replay(server, stereo, f"CA-slow-{n}") for n in range(4)])

    outs = run(calls())
    delivered_meanwhile = len(hook.received)
    finals = [f for out in outs for f in finals_with_text(out)]
    assert len(finals) == 8 and all(out[-1]["type"] == "call_end" for out in outs)
    # every call was decoded to its end before the webhook took even half of its finals
    assert delivered_meanwhile < len(finals) // 2

    def settled():
        c = webhook_counts(server)
        done = (c.get("delivered", 0) - before.get("delivered", 0)
                + c.get("dropped", 0) - before.get("dropped", 0))
        return done == len(finals)

    wait_until(settled, 40)
    counts = webhook_counts(server)
    dropped = counts["dropped"] - before.get("dropped", 0)
    assert dropped >= 1 and len(hook.received) == len(finals) - dropped
    assert all(f in finals for f in hook.received), (hook.received, finals)
    drops = [line for line in server.log if '"event": "webhook_drop"' in line]
    assert drops and json.loads(drops[0][drops[0].index("{"):])["queue"] == QUEUE
