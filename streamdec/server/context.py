"""``ServerContext``: what every listener of one server shares.

    context = ServerContext.create(recognizer, ServerConfig(), AudioConfig())
    app = create_app(context)                     # and create_app(context, vosk_at_root=True)
    ...                                           # an ASGI host runs the app(s)
    await context.drain(timeout)                  # on shutdown: every stream gets its finals

It holds the engine (with the metrics as its observer), admission (tokens, the connection
cap), the protocols' default audio format and the open WebSocket connections, so that a
drain reaches them all. No model is loaded here: the recognizer comes built. ``replica``
names this server among several (Ray Serve's replica id): every accepted WebSocket then
carries it in an ``X-Streamdec-Replica`` header.
"""

from __future__ import annotations

import asyncio
import logging

from ..config import AudioConfig
from ..engine import Engine
from ..recognizer import Recognizer
from .access import Access, Refusal, read_tokens
from .config import ServerConfig
from .connection import Connection
from .metrics import Metrics
from .subscribers import CallHub

__all__ = ["ServerContext"]

log = logging.getLogger("streamdec.server")


class ServerContext:
    def __init__(self, engine: Engine, config: ServerConfig, audio: AudioConfig,
                 metrics: Metrics, access: Access, replica: str | None = None) -> None:
        self.engine = engine
        self.replica = replica
        self.config = config
        self.audio = audio
        self.metrics = metrics
        self.access = access
        self.connections: set[Connection] = set()
        self.calls = CallHub(config, metrics)  # telephony calls' subscribers and webhook
        self._idle = asyncio.Event()  # nothing admitted is open
        self._idle.set()
        self._started_engine = False

    @classmethod
    def create(cls, recognizer: Recognizer, config: ServerConfig | None = None,
               audio: AudioConfig | None = None, replica: str | None = None) -> "ServerContext":
        """A context over a built recognizer: the engine, metrics and admission made from
        ``config`` (the token file is read here: ConfigError when unusable)."""
        config = config or ServerConfig()
        meta = recognizer.meta
        chunk_seconds = meta.chunk_shift * recognizer.config.features.frame_shift_ms / 1000
        engine: Engine
        metrics = Metrics(chunk_seconds, lambda: engine.active_streams)
        engine = Engine(recognizer, config.engine_config(), metrics)
        tokens = read_tokens(config.token_file) if config.token_file else None
        return cls(engine, config, audio or AudioConfig(), metrics,
                   Access(tokens, config.max_connections), replica)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the engine on the running loop unless it runs already (idempotent)."""
        if not self.engine.running:
            self.engine.start()
            self._started_engine = True

    async def stop(self) -> None:
        """Stop the engine if this context started it."""
        if self._started_engine:
            self._started_engine = False
            await self.engine.stop()
        await self.calls.close()

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
    def refusal(self, headers, query) -> Refusal | None:
        return self.access.check(headers, query)

    def admit(self, protocol: str, connection: Connection | None = None) -> None:
        self.access.admit()
        self._idle.clear()
        self.metrics.connections.labels(protocol).inc()
        self.metrics.open.labels(protocol).inc()
        if connection is not None:
            self.connections.add(connection)

    def release(self, protocol: str, connection: Connection | None = None) -> None:
        self.access.release()
        self.metrics.open.labels(protocol).dec()
        if connection is not None:
            self.connections.discard(connection)
        if self.access.open == 0:
            self._idle.set()
