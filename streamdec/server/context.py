"""``ServerContext``: what every listener of one server shares.

    context = ServerContext.create(recognizer, ServerConfig(), AudioConfig())
    app = create_app(context)                     # and create_app(context, vosk_at_root=True)
    ...                                           # an ASGI host runs the app(s)
    await context.drain(timeout)                  # on shutdown: every stream gets its finals

It holds the engine (with the metrics as its observer), admission (tokens, the connection
cap), the protocols' default audio format and the open WebSocket connections, so that a
drain reaches them all. The recognizer comes built; only the voice activity detector's
model is loaded here when calls use it (``call_vad``), so that a missing package fails the
start, and the calls' keywords (``call_keywords``) are checked against the model here, so
that a bad line fails it. ``replica``
names this server among several (Ray Serve's replica id): every accepted WebSocket then
carries it in an ``X-Streamdec-Replica`` header.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

from .. import __version__, allocator
from ..appconfig import AudioConfig
from ..core.recognizer import Recognizer
from ..engine import Engine
from ..errors import ConfigError, ModelLoadError
from ..records.config import StoreConfig
from ..records.delivery import Deliverer, DeliveryConfig
from ..records.recorder import Recorder
from .access import Access, Refusal, TwilioAuth, overload_check, read_secret, read_tokens
from .call_keywords import server_keywords
from .call_relay import CallRelay
from .config import ServerConfig
from .connection import Connection
from .metrics import Metrics
from .redaction import server_rules
from .subscribers import CallHub

if TYPE_CHECKING:
    from .share import ServerShare

__all__ = ["ServerContext"]

log = logging.getLogger("streamdec.server")

#: how often the loop's lag is measured (and the engine's queue sampled for the metrics)
LAG_TICK_SECONDS = 0.25
#: a lag this long is logged (the loop ran nothing else meanwhile: every client waited)
LAG_LOG_SECONDS = 0.5
#: no stream for this long after streams ran: the decode's memory pools are handed back
#: (``Engine.release_memory``, then ``allocator.trim``) until the next one comes
IDLE_RELEASE_SECONDS = 10.0


class ServerContext:
    def __init__(self, engine: Engine, config: ServerConfig, audio: AudioConfig,
                 metrics: Metrics, access: Access, replica: str | None = None,
                 share: "ServerShare | None" = None, records: Recorder | None = None) -> None:
        self.engine = engine
        self.records = records  # the transcript store (None: finals are not stored)
        self.redaction = server_rules(config)  # every result's, before it leaves
        self.replica = replica
        # what every accepted WebSocket answers with: the replica's name, when it has one
        self.accept_headers = ([(b"x-streamdec-replica", replica.encode())]
                               if replica else None)
        self.share = share  # one worker of several (``server.workers``): what they share
        self.config = config
        self.audio = audio
        self.metrics = metrics
        self.access = access
        self.connections: set[Connection] = set()
        # the webhook as the store's outbox (store on and a webhook), else the hub's queue
        outbox = records is not None and bool(config.webhook_url)
        self.calls = CallHub(config, metrics, webhook=not outbox)  # subscribers, webhook
        self.deliverer: Deliverer | None = None
        if outbox:
            self.deliverer = Deliverer(records.config, DeliveryConfig(
                config.webhook_url, timeout=config.webhook_timeout_seconds,
                backoff=config.webhook_backoff_seconds,
                retention=config.webhook_retention_seconds), count=self._delivery_count)
            records.on_delivery = self.deliverer.wake
        self._idle = asyncio.Event()  # nothing admitted is open
        self._idle.set()
        self._started_engine = False
        self._watch: asyncio.Task | None = None
        self._relay: CallRelay | None = None

    @classmethod
    def create(cls, recognizer: Recognizer, config: ServerConfig | None = None,
               audio: AudioConfig | None = None, replica: str | None = None,
               share: "ServerShare | None" = None,
               store: StoreConfig | None = None) -> "ServerContext":
        """A context over a built recognizer: the engine, metrics and admission made from
        ``config`` (the token files are read here: ConfigError when unusable); ``share``:
        this server is one worker of several (``streamdec.server.workers``); ``store``:
        the transcript store's config (opened and migrated here: StoreError when it cannot
        be; None or not ``enabled``: finals are not stored)."""
        config = config or ServerConfig()
        if config.call_vad:  # loaded now: a missing package fails the start, not each call
            try:
                recognizer.vad_gate
            except (ConfigError, ModelLoadError) as e:
                raise type(e)(f"{e} (calls use the voice activity detector: [server] "
                              f"call_vad = true; false serves calls without it)") from None
        if config.call_keywords:  # checked now: a bad line fails the start, naming it
            lines = server_keywords(config.call_keywords, recognizer.symbols,
                                    recognizer.keyword_search.config)
            recognizer.resources.keywords(lines, recognizer.keyword_search.config)
        meta = recognizer.meta
        chunk_seconds = meta.chunk_shift * recognizer.config.features.frame_shift_ms / 1000
        engine: Engine
        metrics = Metrics(chunk_seconds, lambda: engine.active_streams,
                          multiprocess=share is not None)
        engine = Engine(recognizer, config.engine, metrics)
        tokens = read_tokens(config.token_file) if config.token_file else None
        readers = read_tokens(config.read_token_file, "server.read_token_file") \
            if config.read_token_file else None
        twilio = None
        if config.twilio_auth_token_file:
            twilio = TwilioAuth(read_secret(config.twilio_auth_token_file,
                                            "server.twilio_auth_token_file"),
                                config.twilio_stream_url)
        behind = overload_check(lambda: engine.decode_delay, config.max_decode_delay_ms)
        records = Recorder.open(store) if store is not None and store.enabled else None
        return cls(engine, config, audio or AudioConfig(), metrics,
                   Access(tokens, config.max_connections, share, twilio, behind, readers),
                   replica, share, records)

    def _delivery_count(self, outcome: str, n: int) -> None:
        self.metrics.webhook.labels(outcome).inc(n)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the engine on the running loop unless it runs already (idempotent), and
        the watch of the loop's lag."""
        if not self.engine.running:
            self.engine.start()
            self._started_engine = True
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(self._watch_loop())
        if self.records is not None:
            self.records.start()
        if self.deliverer is not None:
            self.deliverer.start()

    async def warm_up(self) -> None:
        """Warm the engine up (``Engine.warm_up``: its memory at its mark before any client),
        hand the free memory the load and the warm-up left back (``allocator.trim``) and log
        it as ``warmed_up`` with the seconds it took."""
        began = time.perf_counter()
        await self.engine.warm_up()
        # the done-callbacks of the warm-up's decodes, queued on the loop, still hold their
        # results (the states of every warm-up stream: 29 MB with k2-fsa's 3.3 M zipformer2)
        # until the loop runs them
        await asyncio.sleep(0)
        await self.engine.release_memory()  # the warm-up's runs paid their first-run costs
        allocator.trim()
        log.info(json.dumps({"event": "warmed_up", "batches": self.engine.workers,
                             "max_batch": self.engine.max_batch,
                             "seconds": round(time.perf_counter() - began, 3)}))

    async def link_calls(self) -> None:
        """One worker of several: link this worker's call hub to the other workers' (the
        subscribers of a call on any worker get its messages: ``call_relay``)."""
        if self.share is not None and self.share.calls_dir and self._relay is None:
            relay = CallRelay(self.calls, self.share.calls_dir, self.share.worker,
                              self.share.workers)
            try:
                await relay.start()
            except OSError as e:  # e.g. a TMPDIR too long for a Unix socket's path
                await relay.close()
                raise ConfigError(f"cannot link the workers' calls in "
                                  f"{self.share.calls_dir}: {e}") from None
            self._relay = relay
            self.calls.links = relay

    async def stop(self) -> None:
        """Stop the engine if this context started it; close the call hub's links."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._started_engine:
            self._started_engine = False
            await self.engine.stop()
        if self._relay is not None:
            await self._relay.close()
            self._relay = None
        await self.calls.close()
        if self.deliverer is not None:
            await self.deliverer.close()
        if self.records is not None:  # after the calls: their last finals are written
            await self.records.close()

    async def _watch_loop(self) -> None:
        """Every ``LAG_TICK_SECONDS``: how late the loop ran the timer (a stall shows
        here), and the engine's queue and decode delay; a lag over ``LAG_LOG_SECONDS`` is
        logged with them."""
        loop = asyncio.get_running_loop()
        metrics, engine = self.metrics, self.engine
        idle_since = None  # when the last stream ended (None: streams run, or released)
        while True:
            due = loop.time() + LAG_TICK_SECONDS
            await asyncio.sleep(LAG_TICK_SECONDS)
            lag = max(0.0, loop.time() - due)
            if engine.active_streams:
                idle_since = loop.time()
            elif idle_since is not None and loop.time() - idle_since >= IDLE_RELEASE_SECONDS:
                idle_since = None
                await self._release_memory()
            metrics.loop_lag.observe(lag)
            metrics.ready.set(engine.ready_streams)
            metrics.in_flight.set(engine.batches_in_flight)
            metrics.decode_delay.set(engine.decode_delay)
            if self.deliverer is not None:
                for status, rows in self.deliverer.rows.items():
                    metrics.outbox.labels(status).set(rows)
            if lag >= LAG_LOG_SECONDS:
                log.warning(json.dumps({
                    "event": "loop_lag", "seconds": round(lag, 3),
                    "active_streams": engine.active_streams,
                    "ready_streams": engine.ready_streams,
                    "batches_in_flight": engine.batches_in_flight}))

    async def _release_memory(self) -> None:
        """The idle engine's memory pools and the heaps' free pages back to the system,
        logged as ``memory_released`` with the process's resident memory after."""
        before = allocator.rss_mb()
        await self.engine.release_memory()
        allocator.trim()
        log.info(json.dumps({"event": "memory_released", "rss_mb_before": before,
                             "rss_mb": allocator.rss_mb()}))

    @property
    def draining(self) -> bool:
        return self.access.draining

    async def drain(self, timeout: float) -> bool:
        """Refuse new connections and have every open one finish: each stream gets its last
        results (sherpa ``Done!``, the Vosk final) before its connection closes. True when
        all ended within ``timeout`` seconds."""
        self.access.draining = True
        for connection in list(self.connections):
            connection.request_drain()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            log.warning("drain: %d connection(s) still open after %g s", self.access.open,
                        timeout)
            return False

    # -- admission -------------------------------------------------------------------------
    def refusal(self, headers, query, decodes: bool = True) -> Refusal | None:
        return self.access.check(headers, query, decodes)

    async def refuse(self, websocket, refusal: Refusal) -> None:
        """Refuse a WebSocket's handshake: HTTP ``refusal.status`` with the reason as its body
        and its ``Hint`` header, counted as ``bad_options`` (400) or ``refused_STATUS``."""
        from starlette.responses import PlainTextResponse

        kind = "bad_options" if refusal.status == 400 else f"refused_{refusal.status}"
        self.metrics.errors.labels(kind).inc()
        await websocket.send_denial_response(PlainTextResponse(
            refusal.reason, refusal.status, headers=refusal.headers))

    def twilio_refusal(self, websocket) -> Refusal | None:
        return self.access.check_twilio(websocket.headers, websocket.query_params,
                                        websocket.scope["path"],
                                        websocket.scope.get("query_string", b"").decode("latin-1"))

    def admit(self, protocol: str, connection: Connection | None = None) -> None:
        self.access.admit()
        self._share_streams()
        self._idle.clear()
        self.metrics.connections.labels(protocol).inc()
        self.metrics.open.labels(protocol).inc()
        if connection is not None:
            self.connections.add(connection)

    def release(self, protocol: str, connection: Connection | None = None) -> None:
        self.access.release()
        self._share_streams()
        self.metrics.open.labels(protocol).dec()
        if connection is not None:
            self.connections.discard(connection)
        if self.access.open == 0:
            self._idle.set()

    # -- the whole server ------------------------------------------------------------------
    def _share_streams(self) -> None:
        if self.share is not None:
            self.share.set_streams(self.engine.active_streams)
            self.metrics.refresh()

    def health(self) -> dict:
        """What ``/health`` answers (``status``, the package's ``version``, ...): for the
        whole server (every worker's connections and streams when it has several, with
        ``workers`` and the answering ``worker``, and ``call_links``: the other workers its
        call hub is linked to now, and those it is not: a worker restarting, or one that
        stopped reading)."""
        if self.share is None:
            health = {"status": "ok", "version": __version__,
                      "active_streams": self.engine.active_streams,
                      "connections": self.access.open}
            if self.records is not None:
                health["store"] = self.records.health()
            if self.deliverer is not None:
                health["outbox"] = self.deliverer.health()
            return health
        self._share_streams()
        health = {"status": "ok", "version": __version__,
                  "active_streams": self.share.active_streams,
                  "connections": self.share.connections, "workers": self.share.workers,
                  "worker": self.share.worker}
        if self._relay is not None:
            health["call_links"] = self._relay.state()
        if self.records is not None:
            health["store"] = self.records.health()
            if self.deliverer is not None:
                health["outbox"] = self.deliverer.health()
        return health
