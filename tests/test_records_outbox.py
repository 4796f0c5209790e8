"""The webhook's outbox in the transcript store (``Store`` outbox calls and the
``Deliverer``), on both databases like ``test_records_store``: SQLite in a temporary folder
and a real PostgreSQL server (``postgres_utils``); the receiver is a real HTTP server of the
test on loopback. Every case runs on both, listed explicitly:

- a final and its outbox row are written in one transaction; written twice, once each; a
  call's deletion deletes its rows;
- a claim takes the first pending row of each call only (a call's next row waits for the
  one before), holds it under a lease another owner cannot take until it expires, and the
  first owner's late answer then changes nothing;
- a failed attempt is tried again after its back-off; past the retention the row is dead,
  listed as dead, and a replay makes it pending again (a row that is not dead: no replay);
- the deliverer against a receiver that fails its first requests: every final arrives,
  each key once after the receiver's deduplication, in order per call, with the
  ``Idempotency-Key`` header equal to the body's key; attempts of one row are spaced by
  the doubling back-off; the counts are exact;
- two deliverers (two processes' owners) on one outbox: each row posted once, in order
  per call, both taking part;
- the deliverer against a receiver that never acknowledges, with a short retention: every
  row ends dead (counted), and replayed after the receiver recovers, is delivered.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time

import pytest

from postgres_utils import PostgresServer
from streamdec.errors import ConfigError
from streamdec.records import FinalRecord, SessionRecord, Store, StoreConfig
from streamdec.records.delivery import IDEMPOTENCY_HEADER, Deliverer, DeliveryConfig
from streamdec.records.store import Delivery

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="module")
def postgres():
    with PostgresServer() as pg:
        yield pg


@pytest.fixture(params=BACKENDS)
def config(request, tmp_path):
    if request.param == "sqlite":
        return StoreConfig(url=f"sqlite:///{tmp_path}/t.sqlite3")
    return StoreConfig(url=request.getfixturevalue("postgres").new_database("o"))


def session(record_id: str, call_id: str) -> SessionRecord:
    return SessionRecord(record_id=record_id, kind="call", ref=call_id, protocol="twilio",
                         started_at=1000.0, owner="elsewhere:1:1")


def final_and_row(record_id: str, call_id: str, segment: int
                  ) -> tuple[FinalRecord, Delivery]:
    key = f"{call_id}/inbound/{segment}"
    body = {"type": "result", "call_id": call_id, "segment": segment,
            "text": f"text {segment}", "idempotency_key": key}
    return (FinalRecord(record_id=record_id, leg="inbound", channel=0, segment=segment,
                        start_time=float(segment), end_time=segment + 0.5,
                        text=f"text {segment}"),
            Delivery(delivery_id=f"{record_id}:0:{segment}", idem_key=key, call_id=call_id,
                     record_id=record_id, body=json.dumps(body)))


def fill(store: Store, calls: dict[str, int]) -> None:
    """``calls``: call id -> finals; each call one session ``r-<call>``, its finals written
    one transaction at a time, the calls' finals interleaved."""
    for call_id in calls:
        store.begin(session(f"r-{call_id}", call_id))
    for segment in range(max(calls.values())):
        pairs = [final_and_row(f"r-{c}", c, segment) for c, n in calls.items() if segment < n]
        store.add_finals([f for f, _ in pairs], [d for _, d in pairs])


def test_a_final_and_its_row_are_written_together_and_deleted_with_the_call(config):
    store = Store.open(config)
    fill(store, {"CA1": 2, "CA2": 1})
    final, row = final_and_row("r-CA1", "CA1", 0)
    assert store.add_finals([final], [row]) == 0  # written again: kept once
    rows = store.deliveries()
    assert [(r.delivery_id, r.idem_key, r.status, r.attempts) for r in rows] == [
        ("r-CA1:0:0", "CA1/inbound/0", "pending", 0),
        ("r-CA2:0:0", "CA2/inbound/0", "pending", 0),
        ("r-CA1:0:1", "CA1/inbound/1", "pending", 0)]
    assert json.loads(rows[0].body)["idempotency_key"] == "CA1/inbound/0"
    assert store.outbox_counts() == {"pending": 3, "delivered": 0, "dead": 0}
    assert store.delete("call", "CA1", "test") == (1, 2)
    assert [r.delivery_id for r in store.deliveries()] == ["r-CA2:0:0"]
    store.close()


def test_a_claim_takes_each_calls_first_row_under_a_lease(config):
    store = Store.open(config)
    fill(store, {"CA1": 3, "CA2": 1})
    now = time.time()
    first = store.claim("a", now, 10.0, 10)
    assert [r.delivery_id for r in first] == ["r-CA1:0:0", "r-CA2:0:0"]
    assert store.claim("b", now, 10.0, 10) == []  # leased, and CA1's next waits
    assert store.delivered("r-CA2:0:0", "a", now)
    assert store.claim("b", now, 10.0, 10) == []  # CA1's first still pending
    later = now + 11.0  # a's lease expired: b takes CA1's first row
    assert [r.delivery_id for r in store.claim("b", later, 10.0, 10)] == ["r-CA1:0:0"]
    assert not store.delivered("r-CA1:0:0", "a", later)  # a's late answer changes nothing
    assert store.delivered("r-CA1:0:0", "b", later)
    assert [r.delivery_id for r in store.claim("b", later, 10.0, 10)] == ["r-CA1:0:1"]
    assert store.outbox_counts() == {"pending": 2, "delivered": 2, "dead": 0}
    store.close()


def test_a_failed_row_waits_its_back_off_then_dies_and_is_replayed(config):
    store = Store.open(config)
    fill(store, {"CA1": 2})
    now = time.time()
    (row,) = store.claim("a", now, 10.0, 10)
    assert store.failed(row.delivery_id, "a", "HTTP 500", now + 2.0, dead=False)
    assert store.claim("a", now + 1.0, 10.0, 10) == []  # its back-off, and CA1's next waits
    (again,) = store.claim("a", now + 2.0, 10.0, 10)
    assert (again.delivery_id, again.attempts, again.status) == (row.delivery_id, 1, "pending")
    assert store.failed(row.delivery_id, "a", "HTTP 503", now + 4.0, dead=True)
    (dead,) = store.deliveries("dead")
    assert (dead.delivery_id, dead.attempts, dead.last_error) == (row.delivery_id, 2,
                                                                  "HTTP 503")
    # dead, it no longer holds the call's next row back
    assert [r.delivery_id for r in store.claim("a", now + 2.0, 10.0, 10)] == ["r-CA1:0:1"]
    assert not store.replay("r-CA1:0:1", now + 3.0)  # pending, not dead
    assert not store.replay("no-such-row", now + 3.0)
    assert store.replay(row.delivery_id, now + 3.0)
    (back,) = store.deliveries("pending", after=0, limit=1)
    assert (back.delivery_id, back.attempts, back.since, back.next_at) == (
        row.delivery_id, 0, now + 3.0, now + 3.0)
    assert store.outbox_counts() == {"pending": 2, "delivered": 0, "dead": 0}
    store.close()


class Receiver:
    """A webhook receiver on loopback (``port`` 0: a free one): answers 503 to its first
    ``fail`` requests (all of them while ``down``), else 200, ``delay`` seconds after each
    request came; keeps (time, header key,
    body) of every request and the first body of each acknowledged key (its
    deduplication)."""

    def __init__(self, fail: int = 0, port: int = 0, delay: float = 0.0) -> None:
        self.fail = fail
        self.delay = delay
        self.down = False
        self.requests: list[tuple[float, str, dict]] = []
        self.kept: dict[str, dict] = {}
        self.order: list[str] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers[IDEMPOTENCY_HEADER]
                receiver.requests.append((time.monotonic(), key, body))
                time.sleep(receiver.delay)
                ok = not receiver.down and len(receiver.requests) > receiver.fail
                if ok and key not in receiver.kept:
                    receiver.kept[key] = body
                    receiver.order.append(key)
                self.send_response(200 if ok else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/finals"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


async def until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_the_deliverer_gets_every_final_through_failures_once_per_key_in_order(config):
    store = Store.open(config)
    calls = {"CA1": 4, "CA2": 3, "CA3": 2}
    fill(store, calls)
    store.close()
    receiver = Receiver(fail=5)
    outcomes: list[str] = []
    deliverer = Deliverer(config, DeliveryConfig(receiver.url, backoff=0.05, max_backoff=0.2,
                                                 poll=0.05, parallel=2),
                          count=lambda outcome, n: outcomes.extend([outcome] * n))

    async def go():
        deliverer.start()
        try:
            await until(lambda: deliverer.counts["delivered"] == 9)
        finally:
            await deliverer.close()

    try:
        asyncio.run(go())
    finally:
        receiver.close()
    keys = [f"{c}/inbound/{s}" for c, n in calls.items() for s in range(n)]
    assert sorted(receiver.kept) == sorted(keys)
    for call_id, n in calls.items():  # in order per call
        assert [k for k in receiver.order if k.startswith(call_id + "/")] == \
               [f"{call_id}/inbound/{s}" for s in range(n)]
    for _, key, body in receiver.requests:
        assert body["idempotency_key"] == key
    assert len(receiver.requests) == 9 + 5
    assert (outcomes.count("delivered"), outcomes.count("retried"),
            outcomes.count("dead")) == (9, 5, 0)
    # the back-off: a row's attempts 0.05 s, 0.1 s, 0.2 s ... apart at least
    # (10 ms tolerance for the timers)
    for key in keys:
        times = [t for t, k, _ in receiver.requests if k == key]
        for n, (a, b) in enumerate(zip(times, times[1:])):
            assert b - a >= min(0.05 * 2 ** n, 0.2) - 0.01, (key, times)
    check = Store.open(config)
    assert check.outbox_counts() == {"pending": 0, "delivered": 9, "dead": 0}
    check.close()


def test_rows_past_their_retention_are_dead_and_a_replay_delivers_them(config):
    store = Store.open(config)
    fill(store, {"CA1": 2, "CA2": 1})
    store.close()
    receiver = Receiver()
    receiver.down = True
    deliverer = Deliverer(config, DeliveryConfig(receiver.url, backoff=0.05, max_backoff=0.1,
                                                 retention=0.3, poll=0.05))

    async def go():
        deliverer.start()
        try:
            await until(lambda: deliverer.counts["dead"] == 3)
            assert receiver.kept == {}
            receiver.down = False
            replayed = Store.open(config)
            dead = replayed.deliveries("dead")
            assert [d.delivery_id for d in dead] == ["r-CA1:0:0", "r-CA2:0:0", "r-CA1:0:1"]
            assert {d.last_error for d in dead} == {"HTTP 503"}
            for d in dead:
                assert replayed.replay(d.delivery_id)
            replayed.close()
            deliverer.wake()
            await until(lambda: deliverer.counts["delivered"] == 3)
        finally:
            await deliverer.close()

    try:
        asyncio.run(go())
    finally:
        receiver.close()
    assert sorted(receiver.order) == ["CA1/inbound/0", "CA1/inbound/1", "CA2/inbound/0"]
    assert receiver.order.index("CA1/inbound/0") < receiver.order.index("CA1/inbound/1")


def test_two_deliverers_on_one_store_post_each_row_once_in_order(config):
    """Two processes' deliverers (``--workers 2``) on one outbox: the leases let one post
    each row; with a receiver that acknowledges at once, no key is posted twice."""
    store = Store.open(config)
    calls = {f"CA{n}": 5 for n in range(6)}
    fill(store, calls)
    store.close()
    receiver = Receiver(delay=0.05)  # one deliverer alone would take 0.5 s at least
    settings = DeliveryConfig(receiver.url, poll=0.02, parallel=3)
    deliverers = [Deliverer(config, settings), Deliverer(config, settings)]
    deliverers[1].owner += ":second"  # two processes: two owners

    async def go():
        for d in deliverers:
            d.start()
        try:
            await until(lambda: sum(d.counts["delivered"] for d in deliverers) == 30)
        finally:
            for d in deliverers:
                await d.close()

    try:
        asyncio.run(go())
    finally:
        receiver.close()
    assert len(receiver.requests) == 30  # each row posted once
    assert sum(d.counts["delivered"] for d in deliverers) == 30
    assert all(d.counts["delivered"] > 0 for d in deliverers), [d.counts for d in deliverers]
    for call_id, n in calls.items():
        assert [k for k in receiver.order if k.startswith(call_id + "/")] == \
               [f"{call_id}/inbound/{s}" for s in range(n)]


@pytest.mark.parametrize("field, value", [("timeout", 0.0), ("backoff", -1.0),
                                          ("retention", 0.0), ("parallel", 0)])
def test_a_bad_delivery_setting_is_refused(field, value):
    with pytest.raises(ConfigError, match=f"delivery {field} must be"):
        DeliveryConfig("http://127.0.0.1:9/x", **{field: value})
