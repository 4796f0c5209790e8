"""The call hubs of several workers behaving as one (``subscribers.CallHub`` across
``call_relay.CallRelay`` links): a subscriber on any worker gets exactly the messages a
subscriber on the call's own worker gets, joining before or during the call, whatever
crosses on the links; a call ends when its sessions on every worker have; a worker that
stops ends its calls for the others' subscribers (``worker_stopped``) and is asked again
when it is back; nothing goes over a link for a call nobody elsewhere watches.

The hubs' decisions are checked over an in-process wire that delivers what each hub
sends when the test says (so races can be set up exactly); the links themselves over
real Unix sockets, three relays in one event loop."""

from __future__ import annotations

import asyncio
import collections
import json
import logging

import pytest

from streamdec.server.call_relay import CallRelay
from streamdec.server.config import ServerConfig
from streamdec.server.subscribers import IN_STEP_SECONDS, CallHub, worker_stopped
from test_telephony_protocols import result


class Wire:
    """Links between in-process hubs: what a hub sends waits in a queue per (sender,
    receiver) until ``deliver`` hands it over (through JSON, as a real link does)."""

    def __init__(self, count: int, queue: int = 100) -> None:
        self.hubs = [CallHub(ServerConfig(subscriber_queue=queue)) for _ in range(count)]
        self.queues: dict[tuple[int, int], collections.deque] = collections.defaultdict(
            collections.deque)
        self.up = {(a, b) for a in range(count) for b in range(count) if a != b}
        self.sent = 0
        for me, hub in enumerate(self.hubs):
            hub.links = self._links(me)
        for a, b in sorted(self.up):
            self.hubs[a].linked(b)

    def _links(self, me: int):
        wire = self

        class Links:
            @property
            def peers(self):
                return [b for a, b in sorted(wire.up) if a == me]

            @property
            def others(self):
                return [n for n in range(len(wire.hubs)) if n != me]

            def send(self, worker, message):
                if (me, worker) in wire.up:
                    wire.queues[me, worker].append(json.dumps(message))
                    wire.sent += 1

        return Links()

    def deliver(self, sender: int | None = None, receiver: int | None = None,
                count: int | None = None) -> int:
        """Hand over the queued messages (of one pair, or all, until none is left; at most
        ``count``); returns how many."""
        done = 0
        while True:
            pairs = [k for k, q in self.queues.items() if q
                     and sender in (None, k[0]) and receiver in (None, k[1])]
            if not pairs or (count is not None and done >= count):
                return done
            a, b = pairs[0]
            self.hubs[b].received(a, json.loads(self.queues[a, b].popleft()))
            done += 1

    def cut(self, worker: int) -> None:
        """``worker`` stops: its links close on both sides."""
        for a, b in list(self.up):
            if worker in (a, b):
                self.up.discard((a, b))
                self.queues.pop((a, b), None)
        for other in range(len(self.hubs)):
            if other != worker:
                self.hubs[other].unlinked(worker)

    def restart(self, worker: int) -> None:
        """``worker`` comes back as a new process (an empty hub) and links up again."""
        self.hubs[worker] = CallHub(ServerConfig(subscriber_queue=100))
        self.hubs[worker].links = self._links(worker)
        for other in range(len(self.hubs)):
            if other != worker:
                self.up |= {(worker, other), (other, worker)}
                self.hubs[worker].linked(other)
                self.hubs[other].linked(worker)


def start(call_id):
    return {"type": "call_start", "call_id": call_id}


def end(call_id):
    return {"type": "call_end", "call_id": call_id, "reason": "stop"}


def seen(sub):
    return [m.get("text", m["type"]) for m in sub.take()]


def test_a_subscriber_on_another_worker_gets_what_one_on_the_calls_worker_gets():
    wire = Wire(2)
    a, b = wire.hubs
    remote_early, local_early = a.subscribe("c"), b.subscribe("c")  # before the call
    wire.deliver()
    b.begin("c", start("c"))
    b.publish("c", result("c", "HEL", final=False))
    b.publish("c", result("c", "HELLO"))
    wire.deliver()
    remote_late, local_late = a.subscribe("c"), b.subscribe("c")  # during it
    wire.deliver()
    b.publish("c", result("c", "BYE"))
    b.end("c", end("c"))
    wire.deliver()
    assert seen(remote_early) == seen(local_early) == [
        "call_start", "HEL", "HELLO", "BYE", "call_end"]
    # joining during the call: its start and finals so far (no partials), then live
    assert seen(remote_late) == seen(local_late) == ["call_start", "HELLO", "BYE", "call_end"]
    assert all(s.ended for s in (remote_early, remote_late, local_early, local_late))


def test_a_subscriber_waits_for_a_call_that_has_not_started_anywhere():
    wire = Wire(3)
    sub = wire.hubs[0].subscribe("later")
    wire.deliver()
    assert wire.hubs[0].waiting(sub) and not sub.ended
    wire.hubs[2].begin("later", start("later"))
    wire.deliver()
    assert not wire.hubs[0].waiting(sub)
    wire.hubs[2].end("later", end("later"))
    wire.deliver()
    assert seen(sub) == ["call_start", "call_end"] and sub.ended


def test_a_call_with_sessions_on_two_workers_ends_with_the_last_of_them():
    wire = Wire(3)
    a, b, c = wire.hubs
    on_a, on_b = a.subscribe("c"), b.subscribe("c")
    wire.deliver()
    b.begin("c", start("c"))  # one track on worker 1, the other on worker 2
    c.begin("c", start("c"))
    wire.deliver()
    b.publish("c", result("c", "ONE"))
    c.publish("c", result("c", "TWO"))
    b.end("c", end("c"))
    wire.deliver()
    assert not on_a.ended and not on_b.ended  # worker 2's session goes on
    c.end("c", end("c"))
    wire.deliver()
    assert on_a.ended and on_b.ended
    for sub in (on_a, on_b):
        got = seen(sub)
        assert sorted(got) == sorted(["call_start", "call_start", "ONE", "TWO", "call_end",
                                      "call_end"])
        assert got[-1] == "call_end"


def test_unsubscribing_and_subscribing_again_while_messages_cross_loses_and_repeats_none():
    wire = Wire(2)
    a, b = wire.hubs
    b.begin("c", start("c"))
    b.publish("c", result("c", "ONE"))
    first = a.subscribe("c")
    wire.deliver()  # in step: ONE in its backlog
    assert seen(first) == ["call_start", "ONE"]
    b.publish("c", result("c", "TWO"))  # on its way to worker 0...
    a.unsubscribe(first)  # ...when its last subscriber leaves and a new one comes
    again = a.subscribe("c")
    b.publish("c", result("c", "THREE"))
    wire.deliver(sender=1, count=2)  # TWO, THREE: sent before the unwant reached worker 1
    wire.deliver(receiver=1)  # unwant, want
    b.publish("c", result("c", "FOUR"))
    wire.deliver()
    b.end("c", end("c"))
    wire.deliver()
    assert seen(again) == ["call_start", "ONE", "TWO", "THREE", "FOUR", "call_end"]


def test_an_old_answer_that_arrives_after_a_new_request_is_not_taken():
    wire = Wire(2)
    a, b = wire.hubs
    b.begin("c", start("c"))
    first = a.subscribe("c")
    wire.deliver(sender=0)  # worker 1 answers; the answer is on its way
    a.unsubscribe(first)
    again = a.subscribe("c")
    b.publish("c", result("c", "ONE"))  # sent: worker 1 has not read the unwant yet
    wire.deliver()  # unwant, want; the old answer, ONE (not in step), the new answer
    b.end("c", end("c"))
    wire.deliver()
    assert seen(again) == ["call_start", "ONE", "call_end"]


def test_a_worker_that_stops_ends_its_calls_for_the_others_and_is_asked_again_when_back():
    wire = Wire(2)
    a, b = wire.hubs
    live, waiting = a.subscribe("live"), a.subscribe("next")
    wire.deliver()
    b.begin("live", start("live"))
    b.publish("live", result("live", "HELLO"))
    wire.deliver()
    wire.cut(1)
    assert seen(live) == ["call_start", "HELLO", "call_end"] and live.ended
    assert not waiting.ended and a.waiting(waiting)
    wire.restart(1)
    wire.deliver()
    wire.hubs[1].begin("next", start("next"))
    wire.hubs[1].end("next", end("next"))
    wire.deliver()
    assert seen(waiting) == ["call_start", "call_end"] and waiting.ended


def test_worker_stopped_is_a_call_end_naming_its_kind():
    assert worker_stopped("c") == {
        "type": "call_end", "call_id": "c", "reason": "worker stopped",
        "error": "the worker process holding this call stopped", "kind": "worker_stopped"}


def test_nothing_crosses_for_a_call_nobody_elsewhere_watches_and_finals_reach_the_webhook_once():
    wire = Wire(2)
    a, b = wire.hubs
    posted = {0: [], 1: []}
    for n, hub in enumerate(wire.hubs):
        hub.webhook = type("Hook", (), {"submit": posted[n].append})()
    b.begin("c", start("c"))
    for n in range(20):
        b.publish("c", result("c", str(n), final=n % 5 == 4))
    assert wire.sent == 0
    sub = a.subscribe("c")
    wire.deliver()
    b.publish("c", result("c", "LAST"))
    b.end("c", end("c"))
    wire.deliver()
    assert seen(sub) == ["call_start", "4", "9", "14", "19", "LAST", "call_end"]
    assert [m["text"] for m in posted[1]] == ["4", "9", "14", "19", "LAST"]
    assert posted[0] == []
    assert wire.sent == 4  # want, its answer, LAST, call_end
    a.unsubscribe(sub)
    wire.deliver()
    b.begin("d", start("d"))
    b.publish("d", result("d", "X", final=False))
    assert wire.sent == 5 and a.stats()["subscribers"] == 0  # the unwant only


def test_a_subscriber_that_falls_behind_on_another_worker_is_dropped_alone():
    wire = Wire(2, queue=4)
    a, b = wire.hubs
    slow, fast = a.subscribe("c"), a.subscribe("c")
    wire.deliver()
    b.begin("c", start("c"))
    for n in range(6):
        b.publish("c", result("c", str(n)))
        wire.deliver()
        fast.take()
    assert slow.dropped and not fast.dropped


def test_a_new_subscriber_is_in_step_once_every_worker_answered_or_after_its_timeout(caplog):
    wire = Wire(3)
    hub = wire.hubs[0]

    async def main():
        sub = hub.subscribe("c")
        waiting = asyncio.ensure_future(hub.in_step(sub, timeout=5))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # nobody answered yet
        wire.deliver(sender=0)
        wire.deliver(sender=1)
        await asyncio.sleep(0.05)
        assert not waiting.done()  # worker 2 has not answered
        wire.deliver()
        assert await asyncio.wait_for(waiting, 1) is True
        stalled = hub.subscribe("d")  # worker 2 never reads its request
        wire.deliver(sender=0, receiver=1)
        wire.deliver(sender=1)
        assert await hub.in_step(stalled, timeout=0.2) is False
        wire.cut(1)  # worker 1 stopped: not linked, it is waited for until it is back
        late = asyncio.ensure_future(hub.in_step(hub.subscribe("e"), timeout=5))
        wire.deliver()
        await asyncio.sleep(0.05)
        assert not late.done()
        wire.restart(1)
        wire.deliver()
        return await asyncio.wait_for(late, 1)

    with caplog.at_level(logging.INFO, logger="streamdec.server"):
        assert asyncio.run(main()) is True
    slow = [json.loads(r.message) for r in caplog.records if "call_link_slow" in r.message]
    assert slow == [{"event": "call_link_slow", "call_id": "d", "workers": [2]}]
    assert IN_STEP_SECONDS == 5.0  # the wait docs/server.md states


# -- the links: real Unix sockets -----------------------------------------------------------------
async def until(condition, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_relays_link_every_pair_carry_a_call_and_link_again_after_a_worker_restarts(
        tmp_path, caplog):
    async def main():
        hubs = [CallHub(ServerConfig()) for _ in range(3)]
        relays = [CallRelay(h, str(tmp_path), n, 3) for n, h in enumerate(hubs)]
        for hub, relay in zip(hubs, relays):
            hub.links = relay
        assert relays[1].state() == {"linked": [], "unlinked": [0, 2]}  # what /health shows
        for relay in reversed(relays):  # the upper ones first: they wait for the lower ones
            await relay.start()
        await until(lambda: all(len(r.peers) == 2 for r in relays))
        assert [r.state() for r in relays] == [{"linked": [1, 2], "unlinked": []},
                                               {"linked": [0, 2], "unlinked": []},
                                               {"linked": [0, 1], "unlinked": []}]
        hubs[0].begin("c", start("c"))
        sub = hubs[2].subscribe("c")
        await until(lambda: len(sub.messages) == 1)  # worker 0 answered: it knows
        hubs[0].publish("c", result("c", "HEL", final=False))
        hubs[0].publish("c", result("c", "HELLO"))
        await until(lambda: len(sub.messages) == 3)
        waiting = hubs[2].subscribe("d")
        await relays[0].close()  # worker 0 stops mid-call
        await until(lambda: sub.ended)
        await until(lambda: relays[1].state() == {"linked": [2], "unlinked": [0]})
        assert relays[2].state() == {"linked": [1], "unlinked": [0]}
        assert [m.get("text", m["type"]) for m in sub.take()][-1] == "call_end"
        assert not waiting.ended
        hubs[0] = CallHub(ServerConfig())  # it comes back
        relays[0] = CallRelay(hubs[0], str(tmp_path), 0, 3)
        hubs[0].links = relays[0]
        await relays[0].start()
        await until(lambda: all(len(r.peers) == 2 for r in relays))
        hubs[0].begin("d", start("d"))
        await until(lambda: len(waiting.messages) == 1)  # live, or in worker 0's answer
        hubs[0].end("d", end("d"))
        await until(lambda: waiting.ended)
        assert seen(waiting) == ["call_start", "call_end"]
        # a line that is no relay message closes that link only, and it is made again
        old = relays[2]._writers[1]
        relays[1]._writers[2].write(b'["no"]\n')
        await until(lambda: any("call_link_error" in r.message for r in caplog.records))
        await until(lambda: relays[2]._writers.get(1) not in (None, old))
        for relay in relays:
            await relay.close()
        assert all(r.peers == [] for r in relays)

    with caplog.at_level(logging.INFO, logger="streamdec.server"):
        asyncio.run(asyncio.wait_for(main(), 30))


def test_a_link_that_says_it_is_no_worker_above_is_refused(tmp_path, caplog):
    async def main():
        hub = CallHub(ServerConfig())
        relay = CallRelay(hub, str(tmp_path), 0, 2)
        hub.links = relay
        await relay.start()
        for hello in (b'{"hello": 0}\n', b'{"hello": 5}\n', b'nonsense\n'):
            reader, writer = await asyncio.open_unix_connection(str(tmp_path / "worker-0.sock"))
            writer.write(hello)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed
            writer.close()
        assert relay.peers == []
        await relay.close()

    with caplog.at_level(logging.INFO, logger="streamdec.server"):
        asyncio.run(main())
    assert sum("call_link_refused" in r.message for r in caplog.records) == 3


def test_a_worker_that_does_not_read_is_cut_off_and_the_call_goes_on(tmp_path, caplog,
                                                                     monkeypatch):
    from streamdec.server import call_relay

    monkeypatch.setattr(call_relay, "MAX_BUFFER_BYTES", 64 << 10)

    async def main():
        hub = CallHub(ServerConfig())
        relay = CallRelay(hub, str(tmp_path), 0, 2)
        hub.links = relay
        await relay.start()
        local = hub.subscribe("c")
        # worker 1 links, wants the call, then reads nothing more
        reader, writer = await asyncio.open_unix_connection(str(tmp_path / "worker-0.sock"))
        writer.write(b'{"hello": 1}\n{"want": "c", "request": 1}\n')
        await until(lambda: relay.peers == [1])
        await asyncio.sleep(0.05)
        hub.begin("c", start("c"))
        text = "x" * 10_000
        for n in range(500):  # 5 MB: far more than the socket and the limit hold
            hub.publish("c", result("c", text))
            if not relay.peers:
                break
            await asyncio.sleep(0)
        assert relay.peers == []  # cut off
        assert relay.state() == {"linked": [], "unlinked": [1]}
        hub.end("c", end("c"))
        got = local.take()
        writer.close()
        await relay.close()
        return got, n

    with caplog.at_level(logging.INFO, logger="streamdec.server"):
        got, sent = asyncio.run(asyncio.wait_for(main(), 30))
    assert sent < 499
    assert len(got) == sent + 3 and got[-1]["type"] == "call_end"  # the local one has all
    assert any("call_link_cut" in r.message for r in caplog.records)


@pytest.mark.parametrize("size", [1, 3])
def test_a_hub_alone_behaves_as_before(size):
    """One worker (no links): the single-process hub, unchanged."""
    wire = Wire(size)
    hub = wire.hubs[0]
    sub = hub.subscribe("c")
    hub.begin("c", start("c"))
    hub.publish("c", result("c", "HELLO"))
    hub.end("c", end("c"))
    wire.deliver()
    assert seen(sub) == ["call_start", "HELLO", "call_end"] and sub.ended


def test_a_server_without_workers_links_no_calls():
    """One process, or a Ray replica (its context is made as here: a replica name, no
    ``ServerShare``): its hub has no other workers to wait for or send to (docs/scale-out.md:
    replicas do not link their calls)."""
    from streamdec import Recognizer
    from streamdec.server.context import ServerContext

    context = ServerContext.create(Recognizer(), ServerConfig(), replica="replica-1")

    async def main():
        await context.link_calls()
        sub = context.calls.subscribe("c")
        return list(context.calls.links.others), await context.calls.in_step(sub, timeout=0)

    assert asyncio.run(main()) == ([], True)
    assert context.accept_headers == [(b"x-streamdec-replica", b"replica-1")]
