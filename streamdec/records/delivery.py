"""``Deliverer``: posts the store's outbox to the webhook, at least once, across restarts.

    deliverer = Deliverer(StoreConfig(...), DeliveryConfig(url, retention=86400.0),
                          count=lambda outcome, n: ...)
    deliverer.start()           # on the running loop: its own store connection and threads
    deliverer.wake()            # new rows were committed (``Recorder.on_delivery``)
    deliverer.counts            # delivered, retried, dead (this process); rows by status
    deliverer.health()          # for /health: ok or the store's error, rows by status
    await deliverer.close()     # what it holds goes back when its lease expires

Each final to deliver is an outbox row written with its final (``Store.add_finals``).
A deliverer claims the due rows (``Store.claim``: pending, its back-off passed, and the
first pending row of its call, so a call's finals go out in order), holding each under a
lease of ``lease`` seconds: several processes (``--workers``, several hosts on one
PostgreSQL) share the outbox and a row is posted by one of them at a time; the lease of a
killed process expires and another takes the row. Each row is POSTed as JSON with an
``Idempotency-Key`` header (the body carries the same key, ``idempotency_key``): the
receiver keeps the first of each key. A 2xx answer marks it ``delivered``; anything else
(no connection, a timeout, another status) is tried again after ``backoff`` seconds,
doubling up to ``max_backoff``, until ``retention`` seconds have passed since the row was
written (or replayed): then it is ``dead``, kept to be listed and replayed
(``Store.replay``). Outcomes go to ``count(outcome, n)``: ``delivered``, ``retried``,
``dead``; ``rows`` holds the outbox's rows by status, read every ``COUNT_SECONDS``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from ..errors import ConfigError, StoreError
from .config import StoreConfig
from .store import DELIVERY_STATUSES, Delivery, Store, process_owner

__all__ = ["Deliverer", "DeliveryConfig", "IDEMPOTENCY_HEADER", "COUNT_SECONDS"]

log = logging.getLogger("streamdec.server")

IDEMPOTENCY_HEADER = "Idempotency-Key"
COUNT_SECONDS = 5.0  # how often the outbox's rows are counted by status


@dataclass(frozen=True)
class DeliveryConfig:
    url: str  # the webhook (http:// or https://)
    timeout: float = 5.0  # seconds one POST may take
    backoff: float = 0.5  # seconds before the second attempt, doubled after each failure
    max_backoff: float = 30.0  # seconds between two attempts at most
    retention: float = 86400.0  # seconds a row is tried for before it is dead
    poll: float = 1.0  # seconds between two looks at the outbox when nothing woke it
    parallel: int = 4  # POSTs at once (each to a different call)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"the webhook must be an http:// or https:// URL, got "
                              f"{self.url!r}")
        for name in ("timeout", "backoff", "max_backoff", "retention", "poll"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"delivery {name} must be > 0, got {getattr(self, name)}")
        if self.parallel < 1:
            raise ConfigError(f"delivery parallel must be >= 1, got {self.parallel}")

    @property
    def lease(self) -> float:
        """Seconds a claimed row is held: longer than its POST may take."""
        return 2 * self.timeout + 5.0

    def delay(self, attempts: int) -> float:
        """Seconds before the next attempt after ``attempts`` failed ones (>= 1)."""
        return min(self.backoff * 2 ** (attempts - 1), self.max_backoff)


class Deliverer:
    def __init__(self, store: StoreConfig, config: DeliveryConfig,
                 count: Callable[[str, int], None] | None = None) -> None:
        self.store_config = store
        self.config = config
        self.owner = process_owner()
        self._count_cb = count
        self.counts = collections.Counter()
        self.rows = dict.fromkeys(DELIVERY_STATUSES, 0)
        self.error: str | None = None
        self._store: Store | None = None
        self._db = ThreadPoolExecutor(1, thread_name_prefix="streamdec-outbox")
        self._posts = ThreadPoolExecutor(config.parallel, thread_name_prefix="streamdec-post")
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._store is not None:
            await asyncio.get_running_loop().run_in_executor(self._db, self._store.close)
        self._db.shutdown(wait=False)
        self._posts.shutdown(wait=False)

    def health(self) -> dict:
        """For ``/health``: ``status`` ``ok`` or ``error`` (the store's message, while its
        reads fail) and the outbox's rows by status (sampled)."""
        out = {"status": "ok" if self.error is None else "error", **self.rows}
        if self.error is not None:
            out["error"] = self.error
        return out

    def _count(self, outcome: str, n: int = 1) -> None:
        self.counts[outcome] += n
        if self._count_cb is not None:
            self._count_cb(outcome, n)

    async def _db_call(self, method: Callable, *args):
        return await asyncio.get_running_loop().run_in_executor(
            self._db, lambda: method(self._store, *args))

    # -- the loop ----------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        counted = 0.0
        while True:
            try:
                if self._store is None:
                    self._store = await loop.run_in_executor(
                        self._db, Store.open, self.store_config)
                if time.monotonic() - counted >= COUNT_SECONDS:
                    self.rows = await self._db_call(Store.outbox_counts)
                    counted = time.monotonic()
                rows = await self._db_call(Store.claim, self.owner, time.time(),
                                           self.config.lease, self.config.parallel)
                if rows:
                    await asyncio.gather(*(self._deliver(row) for row in rows))
                if self.error is not None:
                    log.warning(json.dumps({"event": "outbox_recovered", "after": self.error}))
                    self.error = None
                if rows:
                    continue  # more may be due (the next final of each call)
            except StoreError as e:
                if self.error is None:
                    log.error(json.dumps({"event": "outbox_store_error", "error": str(e)}))
                self.error = str(e)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self.config.poll)
            except asyncio.TimeoutError:
                pass

    async def _deliver(self, row: Delivery) -> None:
        loop = asyncio.get_running_loop()
        error = await loop.run_in_executor(self._posts, self._post, row)
        now = time.time()
        if error is None:
            if await self._db_call(Store.delivered, row.delivery_id, self.owner, now):
                self._count("delivered")
            return
        next_at = now + self.config.delay(row.attempts + 1)
        dead = next_at - row.since > self.config.retention
        if await self._db_call(Store.failed, row.delivery_id, self.owner, error, next_at,
                               dead):
            self._count("dead" if dead else "retried")
            if dead:
                log.warning(json.dumps({"event": "webhook_dead", "id": row.delivery_id,
                                        "key": row.idem_key, "attempts": row.attempts + 1,
                                        "error": error}))

    def _post(self, row: Delivery) -> str | None:
        """One POST (a post thread): None when the receiver answered 2xx, else what failed."""
        request = urllib.request.Request(
            self.config.url, data=row.body.encode(), method="POST",
            headers={"Content-Type": "application/json", IDEMPOTENCY_HEADER: row.idem_key})
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout) as response:
                response.read()
                return None
        except urllib.error.HTTPError as e:
            return f"HTTP {e.code}"
        except (OSError, ValueError) as e:  # refused, reset, timeout, bad URL
            return repr(e)
