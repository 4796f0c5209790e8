"""Running a server: uvicorn listeners over one context, signals, graceful drain.

``serve(context)`` binds the listeners (``port``; ``vosk_port`` with Vosk at its root;
``audiosocket_port``: Asterisk AudioSocket calls over TCP),
starts the engine, warms it up (``Engine.warm_up``, logged as ``warmed_up``) and serves
until SIGTERM or SIGINT. Then, in this order: stop accepting
(close the listening sockets), drain (every open stream gets its last results and its
connection closes; at most ``drain_timeout_seconds``), stop the listeners, stop the engine,
return 0. A second signal exits at once (status 128 + signal number).

``run_loop(serve(context), config.event_loop)`` runs it on uvloop where installed.

uvicorn's own signal handling is turned off: it would close WebSockets with 1012 before
their last results are sent. Its WebSocket protocol is ``wsframes.FastBinaryProtocol``
(websockets-sansio, with audio frames read directly; a peer that reads nothing is cut off
after ``idle_timeout_seconds``), its HTTP protocol ``deadlines.HeadDeadline`` (a request
head not whole after ``idle_timeout_seconds`` is answered 408).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import socket
from typing import Callable, Coroutine

import uvicorn

from ..errors import ConfigError
from .app import create_app
from .calls import serve_audiosocket
from .context import ServerContext
from .deadlines import HeadDeadline
from .wsframes import FastBinaryProtocol

__all__ = ["serve", "bind", "run_loop"]

log = logging.getLogger("streamdec.server")


class _Listener(uvicorn.Server):
    """A uvicorn server that leaves signals to ``serve`` and reports when it listens."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    @contextlib.contextmanager
    def capture_signals(self):
        yield

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets=sockets)
        self._on_started()


def bind(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A listening-ready socket on host:port (port 0: any free port); ``reuse_port``: with
    SO_REUSEPORT, so that several processes listen on the port (``server.workers``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def run_loop(main: Coroutine[object, object, int], kind: str = "auto") -> int:
    """Run ``main`` on a new event loop of ``kind`` (``ServerConfig.event_loop``): uvloop,
    asyncio, or auto (uvloop when it can be imported). ConfigError when uvloop is asked for
    by name and is not installed."""
    if kind != "asyncio":
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                main.close()
                raise ConfigError("server.event_loop uvloop: the uvloop package is not "
                                  "installed (python3 -m pip install -e '.[server]' in the "
                                  "streamdec folder)") from None
        else:
            return uvloop.run(main)
    return asyncio.run(main)


def _uvicorn_config(app, context: ServerContext) -> uvicorn.Config:
    config = context.config
    return uvicorn.Config(
        app, lifespan="on", log_level="warning", access_log=False,
        # the app refuses messages over max_message_bytes with an error message; the
        # WebSocket layer cuts off anything far larger before reading it
        ws_max_size=4 * config.max_message_bytes, ws_per_message_deflate=False,
        # websockets-sansio, whole binary frames read directly; a peer that reads nothing
        # for idle_timeout_seconds is cut off
        ws=functools.partial(FastBinaryProtocol, write_timeout=config.idle_timeout_seconds),
        # a request head (a handshake too) not whole in idle_timeout_seconds: 408, closed
        http=functools.partial(HeadDeadline, head_timeout=config.idle_timeout_seconds),
        ssl_certfile=config.tls_cert, ssl_keyfile=config.tls_key,
        timeout_graceful_shutdown=5)


async def serve(context: ServerContext, reuse_port: bool = False,
                on_listening: Callable[[], None] | None = None) -> int:
    """Serve until a signal; returns the exit status (0 after a graceful drain).
    ``reuse_port``: bind with SO_REUSEPORT (a worker of ``server.workers``);
    ``on_listening``: called once every listener accepts connections."""
    config = context.config
    scheme = "https" if config.tls else "http"
    plan = [(config.port, create_app(context), [
        "sherpa at / and /sherpa", "vosk at /vosk", "POST /v1/audio/transcriptions",
        "deepgram at /v1/listen (live and POST)", "openai realtime at /v1/realtime",
        "assemblyai at /v3/ws", "twilio at /twilio", "audio fork at /audiofork",
        "call subscribers at /calls/{call_id}"])]
    if config.vosk_port is not None:
        plan.append((config.vosk_port, create_app(context, vosk_at_root=True),
                     ["vosk at /"]))
    sockets = [bind(config.host, port, reuse_port) for port, _, _ in plan]
    started = asyncio.Event()
    listeners: list[_Listener] = []

    def on_started() -> None:
        if all(listener.started for listener in listeners):
            started.set()

    try:
        for _, app, _ in plan:
            listeners.append(_Listener(_uvicorn_config(app, context), on_started))
        for listener in listeners:
            listener.config.load()  # TLS files are read here
    except (OSError, ValueError) as e:
        for sock in sockets:
            sock.close()
        raise ConfigError(f"cannot start the server: {e}") from None
    context.start()
    await context.warm_up()
    await context.link_calls()
    tasks = [asyncio.ensure_future(listener.serve(sockets=[sock]))
             for listener, sock in zip(listeners, sockets)]
    await asyncio.wait([asyncio.ensure_future(started.wait()), *tasks],
                       return_when=asyncio.FIRST_COMPLETED)
    if not started.is_set():  # a listener failed to start
        for listener in listeners:
            listener.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
        await context.stop()
        return 1
    loop_name = "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") \
        else "asyncio"
    for (port, _, protocols), sock in zip(plan, sockets):
        host, bound = sock.getsockname()[:2]
        log.info(json.dumps({"event": "listening", "url": f"{scheme}://{host}:{bound}",
                             "port": bound, "serves": protocols, "event_loop": loop_name}))
    audiosocket = None  # Asterisk AudioSocket calls: plain TCP, its own port
    if config.audiosocket_port is not None:
        sock = bind(config.host, config.audiosocket_port, reuse_port)
        audiosocket = await serve_audiosocket(context, sock)
        host, bound = sock.getsockname()[:2]
        log.info(json.dumps({"event": "listening", "url": f"tcp://{host}:{bound}",
                             "port": bound, "serves": ["audiosocket"]}))
    if on_listening is not None:
        on_listening()

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def on_signal(signum: int) -> None:
        if stopping.is_set():
            log.warning("second signal: exiting at once")
            os._exit(128 + signum)
        log.info(json.dumps({"event": "draining", "signal": signal.Signals(signum).name}))
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await asyncio.wait([asyncio.ensure_future(stopping.wait()), *tasks],
                           return_when=asyncio.FIRST_COMPLETED)
        for listener in listeners:  # stop accepting
            for server in getattr(listener, "servers", []):
                server.close()
        if audiosocket is not None:
            audiosocket.close()
        drained = await context.drain(config.drain_timeout_seconds)
        for listener in listeners:
            listener.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
        await context.stop()
        log.info(json.dumps({"event": "stopped", "drained": drained}))
        return 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
