"""``Recorder``: the store as the server's event loop uses it: one thread does every call
of the store, in the order they were asked for; writes that wait together are written in
one transaction (group commit: at 200 streams a commit carries many finals).

    recorder = Recorder.open(StoreConfig())      # blocking: opens and migrates (StoreError)
    recorder.start()                             # on the loop: cuts orphans, the purge timer
    recorder.begin(SessionRecord(...))           # queued, never waits
    stored = await recorder.final(FinalRecord(...))   # True once committed
    await recorder.final(final, Delivery(...))   # with its outbox row, in the same commit
    await recorder.keyword(KeywordRecord(...), Delivery(...) or None)  # a keyword heard, the same
    recorder.end(record_id, "ended", reason)     # queued, never waits
    page = await recorder.read(Store.listing, query)  # any reading call, off the loop
    await recorder.close()                       # what is queued is written first

A write that fails (the disk is full, PostgreSQL restarts) loses nothing that was asked:
the writes stay queued, in order, and are tried again every ``RETRY_SECONDS`` until they
go through; meanwhile ``final`` answers False at once (the server sends the final anyway:
live results keep flowing) and ``health()`` says ``error`` with the database's message,
which is logged once per failure (``store_error``) and once on recovery
(``store_recovered``). The queue keeps at most ``MAX_BACKLOG`` writes; past that, new
writes are refused and counted (``dropped``), and logged.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from ..errors import StoreError
from .config import StoreConfig
from .store import Delivery, FinalRecord, KeywordRecord, SessionRecord, Store, process_owner

__all__ = ["Recorder", "RETRY_SECONDS", "MAX_BACKLOG", "PURGE_SECONDS"]

log = logging.getLogger("streamdec.server")

RETRY_SECONDS = 1.0  # a failed write is tried again this long after
MAX_BACKLOG = 200_000  # writes kept queued while the store fails
PURGE_SECONDS = 3600.0  # how often the retention purge runs


class Recorder:
    def __init__(self, store: Store, config: StoreConfig) -> None:
        self.store = store
        self.config = config
        self.owner = process_owner()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="streamdec-store")
        # (kind, payload, future | None) in the order asked
        self._queue: collections.deque[tuple[str, Any, asyncio.Future | None]] = \
            collections.deque()
        self._wake: asyncio.Event | None = None
        self._writer: asyncio.Task | None = None
        self._purger: asyncio.Task | None = None
        self.error: str | None = None  # the last write's failure, while it lasts
        self.counts = collections.Counter()  # finals stored, commits, failures, dropped
        # called (loop thread) after outbox rows were committed: wakes the deliverer
        self.on_delivery: Callable[[], None] | None = None

    @classmethod
    def open(cls, config: StoreConfig) -> "Recorder":
        """Open (and migrate) the store of ``config``: StoreError when it cannot."""
        return cls(Store.open(config), config)

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """On the running loop: the writer, the sessions of dead processes marked ``cut``
        (first, before any new write), the retention purge."""
        if self._writer is not None:
            return
        self._wake = asyncio.Event()
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        self._push("cut", None, None)
        if self.config.retention_days > 0:
            self._purger = asyncio.get_running_loop().create_task(self._purge_loop())

    async def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (for at most ``timeout`` seconds), then close the store."""
        if self._purger is not None:
            self._purger.cancel()
        if self._writer is not None:
            deadline = time.monotonic() + timeout
            while self._queue and time.monotonic() < deadline and self.error is None:
                await asyncio.sleep(0.01)
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
            self._writer = None
        if self._queue:
            log.error(json.dumps({"event": "store_lost", "writes": len(self._queue),
                                  "error": self.error}))
        await asyncio.get_running_loop().run_in_executor(self._pool, self.store.close)
        self._pool.shutdown(wait=False)

    # -- writes ------------------------------------------------------------------------------
    def _push(self, kind: str, payload: Any, future: asyncio.Future | None) -> bool:
        if self._writer is None:
            self.start()
        if len(self._queue) >= MAX_BACKLOG:
            self.counts["dropped"] += 1
            if self.counts["dropped"] % 1000 == 1:
                log.error(json.dumps({"event": "store_drop", "kind": kind,
                                      "backlog": len(self._queue),
                                      "dropped_total": self.counts["dropped"]}))
            return False
        self._queue.append((kind, payload, future))
        self._wake.set()
        return True

    def begin(self, record: SessionRecord) -> None:
        """Queue a session's record (never waits)."""
        self._push("begin", record, None)

    def end(self, record_id: str, status: str, reason: str) -> None:
        """Queue a session's end (never waits)."""
        self._push("end", (record_id, status, reason, time.time()), None)

    async def ended(self, record_id: str, status: str, reason: str) -> bool:
        """A session's end, committed (True) before it returns, as ``final`` stores a final:
        what a client reads once its connection has closed says the session ended."""
        return await self._write("end", (record_id, status, reason, time.time()))

    async def final(self, final: FinalRecord, delivery: Delivery | None = None) -> bool:
        """Store one final (and its outbox row, in the same transaction): True once
        committed; False at once while the store fails (the final stays queued and is
        written when the store is back)."""
        return await self._write("final", (final, delivery))

    async def keyword(self, keyword: KeywordRecord, delivery: Delivery | None = None) -> bool:
        """Store one keyword heard (and its outbox row), as ``final`` stores a final."""
        return await self._write("keyword", (keyword, delivery))

    async def _write(self, kind: str, payload: tuple) -> bool:
        if self.error is not None:
            self._push(kind, payload, None)
            return False
        future = asyncio.get_running_loop().create_future()
        if not self._push(kind, payload, future):
            return False
        return await future

    async def read(self, method: Callable, *args) -> Any:
        """``method(store, *args)`` in the store's thread (StoreError when it fails)."""
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, lambda: method(self.store, *args))

    def health(self) -> dict[str, Any]:
        """For ``/health``: ``status`` ``ok`` or ``error`` (with ``error``), the writes
        queued (``backlog``) and the backend."""
        out = {"status": "ok" if self.error is None else "error", "backend": self.store.backend,
               "backlog": len(self._queue)}
        if self.error is not None:
            out["error"] = self.error
        return out

    # -- the writer --------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            batch = list(self._queue)
            try:
                await loop.run_in_executor(self._pool, self._apply, batch)
            except StoreError as e:
                self.counts["failures"] += 1
                if self.error is None:
                    log.error(json.dumps({"event": "store_error", "error": str(e),
                                          "backlog": len(self._queue)}))
                self.error = str(e)
                for _, _, future in batch:
                    if future is not None and not future.done():
                        future.set_result(False)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            for _ in batch:
                self._queue.popleft()
            if self.error is not None:
                log.warning(json.dumps({"event": "store_recovered", "after": self.error,
                                        "written": len(batch)}))
                self.error = None
            self.counts["commits"] += 1
            if self.on_delivery is not None and any(
                    kind in ("final", "keyword") and payload[1] is not None
                    for kind, payload, _ in batch):
                self.on_delivery()
            for kind, _, future in batch:
                if kind == "final":
                    self.counts["finals"] += 1
                if future is not None and not future.done():
                    future.set_result(True)

    def _apply(self, batch: list[tuple[str, Any, Any]]) -> None:
        """The store's thread: the writes of ``batch`` in order, finals and keywords grouped
        into one transaction between the records' begins and ends around them."""
        finals: list[FinalRecord] = []
        keywords: list[KeywordRecord] = []
        deliveries: list[Delivery] = []
        for kind, payload, _ in batch:
            if kind in ("final", "keyword"):
                (finals if kind == "final" else keywords).append(payload[0])
                if payload[1] is not None:
                    deliveries.append(payload[1])
                continue
            if finals or keywords:
                self.store.add_finals(finals, deliveries, keywords)
                finals, keywords, deliveries = [], [], []
            if kind == "begin":
                self.store.begin(payload)
            elif kind == "end":
                self.store.end(*payload)
            elif kind == "cut":
                cut = self.store.cut_orphans()
                if cut:
                    log.warning(json.dumps({"event": "store_cut", "sessions": len(cut)}))
        if finals or keywords:
            self.store.add_finals(finals, deliveries, keywords)

    async def _purge_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = time.time() - self.config.retention_days * 86400
            try:
                sessions, finals = await loop.run_in_executor(
                    self._pool, self.store.purge, before)
                if sessions:
                    log.info(json.dumps({"event": "store_purge", "sessions": sessions,
                                         "finals": finals, "before": round(before, 3)}))
            except StoreError as e:
                log.error(json.dumps({"event": "store_purge_failed", "error": str(e)}))
            await asyncio.sleep(PURGE_SECONDS)
