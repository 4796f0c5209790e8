"""``CallHub``: where a call's messages go — subscribers of the call and the webhook.

    hub = CallHub(config, metrics)
    hub.begin(call_id, start_message)       # a session of the call started
    hub.publish(call_id, message)           # a result or event: never waits
    hub.end(call_id, end_message)           # the session ended
    sub = hub.subscribe(call_id)            # WebSocket /calls/{id}: before or during the call
    ... await sub.wait(); sub.take() ...; hub.unsubscribe(sub)

Nothing here waits on a consumer: each subscriber has a queue of at most
``subscriber_queue`` messages; one that falls that far behind is dropped (its socket is
closed with 1008, ``streamdec_subscriber_drops_total`` counts it, a log line says so) and
the call goes on. A subscriber who joins during a call first gets the call's start, finals
and events so far (the backlog: at most the last ``subscriber_queue // 2`` of them;
partials are not kept), then everything live. Several
sessions may share a call id (e.g. one Twilio ``<Stream>`` per track): the call ends for
its subscribers when the last one ends. Finals with text also go to the webhook, if one is
configured (``webhook.Webhook``).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from typing import Any

from .webhook import Webhook

__all__ = ["CallHub", "Subscriber"]

log = logging.getLogger("streamdec.server")


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
        self.sessions = 0
        self.subscribers: set[Subscriber] = set()
        self.backlog: collections.deque[dict] = collections.deque(maxlen=backlog)


class CallHub:
    def __init__(self, config, metrics=None) -> None:
        self.capacity = config.subscriber_queue
        self.metrics = metrics
        self._calls: dict[str, _Call] = {}
        self.webhook = (Webhook(config.webhook_url, queue=config.webhook_queue,
                                timeout=config.webhook_timeout_seconds,
                                attempts=config.webhook_max_attempts,
                                backoff=config.webhook_backoff_seconds, metrics=metrics)
                        if config.webhook_url else None)

    def _call(self, call_id: str) -> _Call:
        call = self._calls.get(call_id)
        if call is None:
            call = self._calls[call_id] = _Call(max(1, self.capacity // 2))
        return call

    @property
    def active(self) -> list[str]:
        """Ids of the calls streaming now."""
        return [k for k, c in self._calls.items() if c.sessions]

    # -- producers (call sessions) ----------------------------------------------------------
    def begin(self, call_id: str, message: dict) -> None:
        self._call(call_id).sessions += 1
        self.publish(call_id, message)

    def publish(self, call_id: str, message: dict) -> None:
        """To every subscriber of the call (and its backlog unless a partial; to the webhook
        if a final with text). Never waits."""
        call = self._calls.get(call_id)
        partial = message.get("type") == "result" and not message.get("is_final")
        if call is not None:
            if not partial:
                call.backlog.append(message)
            for sub in list(call.subscribers):
                if not sub.put(message):
                    self._drop(call, sub)
        if (self.webhook is not None and message.get("type") == "result"
                and message.get("is_final") and message.get("text")):
            self.webhook.submit(message)

    def end(self, call_id: str, message: dict) -> None:
        self.publish(call_id, message)
        call = self._calls.get(call_id)
        if call is None:
            return
        call.sessions -= 1
        if call.sessions == 0:
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
        call's backlog already."""
        call = self._call(call_id)
        sub = Subscriber(call_id, self.capacity)
        for message in call.backlog:
            sub.put(message)
        call.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        call = self._calls.get(sub.call_id)
        if call is not None:
            call.subscribers.discard(sub)
            if not call.sessions and not call.subscribers:
                del self._calls[sub.call_id]

    def waiting(self, sub: Subscriber) -> bool:
        """The subscriber's call has not started (or has ended)."""
        call = self._calls.get(sub.call_id)
        return call is None or call.sessions == 0

    async def close(self) -> None:
        if self.webhook is not None:
            await self.webhook.close()

    def stats(self) -> dict[str, Any]:
        return {"calls": len(self.active),
                "subscribers": sum(len(c.subscribers) for c in self._calls.values())}
