"""The optional webhook: every final of every call (and every keyword heard) POSTed as JSON
to one URL.

    hook = Webhook(url, queue=1000, timeout=5.0, attempts=6, backoff=0.5, metrics=metrics)
    hook.submit(message)        # never waits: queued, or dropped (counted, logged) when full
    await hook.close()          # at shutdown: what is still queued is logged as lost

One worker task posts the queue in order, one request at a time, in a thread of its own
(``urllib``: the event loop, and so decoding, never waits on the network). A request that
fails (no connection, a timeout, a status other than 2xx) is retried after ``backoff``
seconds, doubling each time up to ``MAX_BACKOFF``, at most ``attempts`` times in all; then
the message is given up (counted ``failed``, logged). While the webhook is down or slow the
queue fills; past ``queue`` messages new ones are dropped (counted ``dropped``, logged every
``LOG_EVERY`` drops). Outcomes: ``streamdec_webhook_messages_total{outcome}`` with
``delivered``, ``retried``, ``failed``, ``dropped``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["Webhook", "MAX_BACKOFF", "LOG_EVERY"]

log = logging.getLogger("streamdec.server")

MAX_BACKOFF = 30.0  # seconds between two attempts at most
LOG_EVERY = 100  # a log line for the first drop, then every this many


class Webhook:
    def __init__(self, url: str, *, queue: int, timeout: float, attempts: int,
                 backoff: float, metrics=None) -> None:
        self.url = url
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff
        self.metrics = metrics
        self.capacity = queue
        self._queue: collections.deque[dict] = collections.deque()
        self._ready: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="streamdec-webhook")
        self.counts = collections.Counter()

    def _count(self, outcome: str, n: int = 1) -> None:
        self.counts[outcome] += n
        if self.metrics is not None:
            self.metrics.webhook.labels(outcome).inc(n)

    def submit(self, message: dict[str, Any]) -> bool:
        """Queue one message (loop thread; never waits). False when the queue is full and
        the message was dropped."""
        if self._worker is None:
            self._ready = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._run())
        if len(self._queue) >= self.capacity:
            self._count("dropped")
            if self.counts["dropped"] % LOG_EVERY == 1 or LOG_EVERY == 1:
                log.warning(json.dumps({
                    "event": "webhook_drop", "call_id": message.get("call_id"),
                    "queue": self.capacity, "dropped_total": self.counts["dropped"]}))
            return False
        self._queue.append(message)
        self._ready.set()
        return True

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        if self._queue:
            log.warning(json.dumps({"event": "webhook_lost", "messages": len(self._queue)}))
        self._pool.shutdown(wait=False)

    # -- worker ---------------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            message = self._queue[0]
            body = json.dumps(message, ensure_ascii=False).encode()
            delay = self.backoff
            for attempt in range(1, self.attempts + 1):
                error = await loop.run_in_executor(self._pool, self._post, body)
                if error is None:
                    self._count("delivered")
                    break
                if attempt == self.attempts:
                    self._count("failed")
                    log.warning(json.dumps({
                        "event": "webhook_failed", "call_id": message.get("call_id"),
                        "attempts": attempt, "error": error}))
                    break
                self._count("retried")
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF)
            self._queue.popleft()

    def _post(self, body: bytes) -> str | None:
        """One POST (worker thread): None when the server answered 2xx, else what failed."""
        request = urllib.request.Request(self.url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                response.read()
                return None
        except urllib.error.HTTPError as e:
            return f"HTTP {e.code}"
        except (OSError, ValueError) as e:  # refused, reset, timeout, bad URL
            return repr(e)
