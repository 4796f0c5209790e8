"""``CallHub``: where a call's messages go — subscribers of the call and the webhook.

    hub = CallHub(config, metrics)
    hub.begin(call_id, start_message)       # a session of the call started
    hub.publish(call_id, message)           # a result or event: never waits
    hub.end(call_id, end_message)           # the session ended
    sub = hub.subscribe(call_id)            # WebSocket /calls/{id}: before or during the call
    await hub.in_step(sub)                  # several workers: each has answered for it
    ... await sub.wait(); sub.take() ...; hub.unsubscribe(sub)

Nothing here waits on a consumer: each subscriber has a queue of at most
``subscriber_queue`` messages; one that falls that far behind is dropped (its socket is
closed with 1008, ``streamdec_subscriber_drops_total`` counts it, a log line says so) and
the call goes on. A subscriber who joins during a call first gets the call's start, finals
and events so far (the backlog: at most the last ``subscriber_queue // 2`` of them;
partials are not kept), then everything live. Several
sessions may share a call id (e.g. one Twilio ``<Stream>`` per track): the call ends for
its subscribers when the last one ends. Finals with text and keywords heard also go to the
webhook, if one is configured and the transcript store is off (``webhook.Webhook``; with the
store on, the store's outbox posts them: ``streamdec.records.delivery``).

Several worker processes (``serve --workers N``): a call and its subscribers may sit on
different workers (the kernel spreads connections). Each hub then has ``links`` to the
other workers' hubs (``call_relay.CallRelay``: the I/O; this module only decides what goes
where) and the server behaves as one hub:

- a worker whose first subscriber of a call arrives asks every other worker for it
  (``{"want": call_id, "request": n}``); each answers with its own sessions of that call and
  its own backlog (``{"state": ...}``), then sends it the call's messages live, partials
  included, until told ``{"unwant": call_id}`` (its last subscriber of the call left);
- a worker applies another worker's messages of a call only once that worker's answer to
  its latest request has come (what came before is in the answer): a subscriber never
  sees a message twice or loses one, whatever crosses on the links; its socket opens once
  every worker has answered (``in_step``), so it gets all a subscriber on the call's own
  worker that opened at the same moment gets, partials included;
- the call ends for subscribers when its sessions on every worker have ended; a worker
  whose link closes (it died) ends its calls there with a ``call_end`` of ``kind``
  ``worker_stopped``, and is asked again once it is back;
- the webhook gets each final and keyword once, from the worker that decoded it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
from typing import Any, Iterable, Protocol

from .call_events import call_message
from .webhook import Webhook

__all__ = ["CallHub", "Subscriber", "Links", "LOCAL", "IN_STEP_SECONDS", "worker_stopped"]

log = logging.getLogger("streamdec.server")

#: the origin of a worker's own messages in its calls' backlogs (others: a worker index)
LOCAL = -1
#: how long a new subscriber waits for the other workers' answers before it is let in
#: without them (``in_step``; a worker that does not answer is stalled or stopping)
IN_STEP_SECONDS = 5.0


class Links(Protocol):
    """The hub's links to the other workers' hubs (``call_relay.CallRelay``)."""

    @property
    def peers(self) -> Iterable[int]:
        """The workers linked now."""

    @property
    def others(self) -> Iterable[int]:
        """Every other worker of the server, linked now or not."""

    def send(self, worker: int, message: dict) -> None:
        """Send to ``worker``'s hub (never waits; nothing when it is not linked)."""


class _NoLinks:
    peers: tuple[int, ...] = ()
    others: tuple[int, ...] = ()

    def send(self, worker: int, message: dict) -> None:
        pass


def worker_stopped(call_id: str) -> dict:
    """The ``call_end`` of a call whose worker stopped (its link closed) mid-call."""
    return call_message("call_end", call_id, reason="worker stopped",
                        error="the worker process holding this call stopped",
                        kind="worker_stopped")


def _partial(message: dict) -> bool:
    return message.get("type") == "result" and not message.get("is_final")


class Subscriber:
    """One consumer of a call's messages (loop thread only)."""

    def __init__(self, call_id: str, capacity: int) -> None:
        self.call_id = call_id
        self.capacity = capacity
        self.messages: collections.deque[dict] = collections.deque()
        self.ended = False  # the call ended: close after the messages queued
        self.dropped = False  # fell ``capacity`` messages behind: close now
        self._changed = asyncio.Event()

    def put(self, message: dict) -> bool:
        """Queue a message; False (and ``dropped``) when the queue is full."""
        if len(self.messages) >= self.capacity:
            self.dropped = True
            self._changed.set()
            return False
        self.messages.append(message)
        self._changed.set()
        return True

    def finish(self) -> None:
        self.ended = True
        self._changed.set()

    async def wait(self) -> None:
        """Until a message, the call's end or a drop."""
        while not self.messages and not self.ended and not self.dropped:
            self._changed.clear()
            await self._changed.wait()

    def take(self) -> list[dict]:
        out = list(self.messages)
        self.messages.clear()
        return out


class _Call:
    def __init__(self, backlog: int) -> None:
        self.sessions = 0  # this worker's sessions of the call
        self.remote: dict[int, int] = {}  # another worker -> its sessions, once in step
        self.pending: dict[int, int] = {}  # another worker -> the request it must answer
        self.subscribers: set[Subscriber] = set()
        # (origin, message): LOCAL or the worker that sent it
        self.backlog: collections.deque[tuple[int, dict]] = collections.deque(maxlen=backlog)

    @property
    def live(self) -> int:
        """Sessions of the call on every worker known."""
        return self.sessions + sum(self.remote.values())


class CallHub:
    def __init__(self, config, metrics=None, webhook: bool = True) -> None:
        """``webhook`` False: finals do not go to ``config.webhook_url`` from here (the
        store's outbox posts them)."""
        self.capacity = config.subscriber_queue
        self.metrics = metrics
        self.links: Links = _NoLinks()  # set by a worker of several (call_relay)
        self._calls: dict[str, _Call] = {}
        self._watched: collections.Counter[str] = collections.Counter()  # our subscribers
        self._wanted: dict[str, set[int]] = {}  # call -> workers whose subscribers want it
        self._requests = itertools.count(1)
        self._answered = asyncio.Event()  # an answer came, or a link closed (in_step)
        self.webhook = (Webhook(config.webhook_url, queue=config.webhook_queue,
                                timeout=config.webhook_timeout_seconds,
                                attempts=config.webhook_max_attempts,
                                backoff=config.webhook_backoff_seconds, metrics=metrics)
                        if config.webhook_url and webhook else None)

    def _call(self, call_id: str) -> _Call:
        call = self._calls.get(call_id)
        if call is None:
            call = self._calls[call_id] = _Call(max(1, self.capacity // 2))
        return call

    @property
    def active(self) -> list[str]:
        """Ids of the calls streaming now (on this worker)."""
        return [k for k, c in self._calls.items() if c.sessions]

    # -- producers (call sessions) ----------------------------------------------------------
    def begin(self, call_id: str, message: dict) -> None:
        self._call(call_id).sessions += 1
        self._local("begin", call_id, message)

    def publish(self, call_id: str, message: dict) -> None:
        """To every subscriber of the call (and its backlog unless a partial; to the webhook
        if a final with text or a keyword). Never waits."""
        self._local("publish", call_id, message)

    def end(self, call_id: str, message: dict) -> None:
        self._local("end", call_id, message)
        call = self._calls.get(call_id)
        if call is not None:
            call.sessions -= 1
            self._over_if_ended(call_id, call)

    def _local(self, kind: str, call_id: str, message: dict) -> None:
        call = self._calls.get(call_id)
        if call is not None:
            self._deliver(call, LOCAL, message)
        wanted = self._wanted.get(call_id)
        if wanted:  # (a copy: a send may cut a link)
            for worker in list(wanted):
                self.links.send(worker, {"event": kind, "call": call_id, "message": message})
        if self.webhook is not None and (message.get("type") == "keyword" or (
                message.get("type") == "result" and message.get("is_final")
                and message.get("text"))):
            self.webhook.submit(message)

    def _deliver(self, call: _Call, origin: int, message: dict) -> None:
        if not _partial(message):
            call.backlog.append((origin, message))
        for sub in list(call.subscribers):
            if not sub.put(message):
                self._drop(call, sub)

    def _over_if_ended(self, call_id: str, call: _Call) -> None:
        """After a session ended: with none left on any worker, the call is over."""
        if call.live <= 0:
            for sub in call.subscribers:
                sub.finish()
            del self._calls[call_id]

    def _drop(self, call: _Call, sub: Subscriber) -> None:
        call.subscribers.discard(sub)
        if self.metrics is not None:
            self.metrics.subscriber_drops.inc()
        log.warning(json.dumps({"event": "subscriber_dropped", "call_id": sub.call_id,
                                "queue": sub.capacity}))

    # -- consumers ---------------------------------------------------------------------------
    def subscribe(self, call_id: str) -> Subscriber:
        """A subscriber of the call ``call_id``, live or not started yet; it holds the
        call's backlog already (and asks the other workers for theirs)."""
        call = self._call(call_id)
        sub = Subscriber(call_id, self.capacity)
        for _, message in call.backlog:
            sub.put(message)
        call.subscribers.add(sub)
        self._watched[call_id] += 1
        for worker in self.links.peers:
            if worker not in call.remote and worker not in call.pending:
                self._request(call_id, call, worker)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        call_id = sub.call_id
        call = self._calls.get(call_id)
        if call is not None:
            call.subscribers.discard(sub)
        self._watched[call_id] -= 1
        if self._watched[call_id] <= 0:  # our last one: the other workers' messages stop
            del self._watched[call_id]
            for worker in self.links.peers:
                self.links.send(worker, {"unwant": call_id})
            if call is not None:
                call.remote.clear()
                call.pending.clear()
                call.backlog = collections.deque(
                    ((o, m) for o, m in call.backlog if o == LOCAL), maxlen=call.backlog.maxlen)
        if call is not None and not call.sessions and not call.subscribers:
            del self._calls[call_id]

    async def in_step(self, sub: Subscriber, timeout: float | None = None) -> bool:
        """Wait until every other worker has answered for the subscriber's call (from then
        on each sends it every message of the call; a worker not linked yet is asked once
        it is), at most ``timeout`` seconds (``IN_STEP_SECONDS`` by default); False when
        one did not (logged)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (IN_STEP_SECONDS if timeout is None else timeout)
        while True:
            call = self._calls.get(sub.call_id)
            missing = [] if call is None else [w for w in self.links.others
                                               if w not in call.remote]
            if not missing:
                return True
            left = deadline - loop.time()
            if left <= 0:
                log.warning(json.dumps({"event": "call_link_slow", "call_id": sub.call_id,
                                        "workers": missing}))
                return False
            self._answered.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._answered.wait(), left)

    def waiting(self, sub: Subscriber) -> bool:
        """The subscriber's call has not started (or has ended)."""
        call = self._calls.get(sub.call_id)
        return call is None or call.live <= 0

    # -- the other workers (``links``) -------------------------------------------------------
    def _request(self, call_id: str, call: _Call, worker: int) -> None:
        request = next(self._requests)
        call.pending[worker] = request
        self.links.send(worker, {"want": call_id, "request": request})

    def linked(self, worker: int) -> None:
        """A link to ``worker`` is up: ask it for every call our subscribers watch."""
        for call_id in self._watched:
            call = self._calls.get(call_id)
            if call is not None:
                self._request(call_id, call, worker)

    def unlinked(self, worker: int) -> None:
        """The link to ``worker`` closed: it wants nothing; its sessions of our calls are
        over (``worker_stopped``), and what it sent no longer counts."""
        for call_id in list(self._wanted):
            self._unwant(call_id, worker)
        self._answered.set()
        for call_id, call in list(self._calls.items()):
            call.pending.pop(worker, None)
            if call.remote.pop(worker, 0) > 0:
                self._deliver(call, worker, worker_stopped(call_id))
                self._over_if_ended(call_id, call)

    def received(self, worker: int, message: dict) -> None:
        """A message from ``worker``'s hub (``links``); a malformed one raises
        ValueError (the link is then closed)."""
        call_id = next((message[k] for k in ("want", "unwant", "state", "call")
                        if k in message), None)
        if not isinstance(call_id, str):
            raise ValueError(f"not a call relay message: {str(message)[:200]}")
        if "want" in message:  # its subscribers want this call: our part of it, then live
            self._wanted.setdefault(call_id, set()).add(worker)
            call = self._calls.get(call_id)
            self.links.send(worker, {
                "state": call_id, "request": message["request"],
                "sessions": call.sessions if call else 0,
                "backlog": [m for o, m in call.backlog if o == LOCAL] if call else []})
        elif "unwant" in message:
            self._unwant(call_id, worker)
        elif "state" in message:
            call = self._calls.get(call_id)
            if call is None or call.pending.get(worker) != message["request"]:
                return  # the answer to an earlier request
            del call.pending[worker]
            self._answered.set()
            call.remote[worker] = int(message["sessions"])
            for m in message["backlog"]:
                self._deliver(call, worker, m)
        else:
            self._remote_event(worker, message["event"], call_id, message["message"])

    def _unwant(self, call_id: str, worker: int) -> None:
        wanted = self._wanted.get(call_id)
        if wanted is not None:
            wanted.discard(worker)
            if not wanted:
                del self._wanted[call_id]

    def _remote_event(self, worker: int, kind: str, call_id: str, message: dict) -> None:
        call = self._calls.get(call_id)
        if call is None or worker not in call.remote:
            return  # not in step with it: its answer holds this
        if kind == "begin":
            call.remote[worker] += 1
        self._deliver(call, worker, message)
        if kind == "end":
            call.remote[worker] -= 1
            self._over_if_ended(call_id, call)

    async def close(self) -> None:
        if self.webhook is not None:
            await self.webhook.close()

    def stats(self) -> dict[str, Any]:
        return {"calls": len(self.active),
                "subscribers": sum(len(c.subscribers) for c in self._calls.values())}
