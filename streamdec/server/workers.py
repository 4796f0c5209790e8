"""``streamdec serve --workers N``: N processes, each with its own recognizer, engine and
event loop, answering on the same ports; a supervisor starts, restarts and stops them.

Sharing the port: every worker binds the listeners with ``SO_REUSEPORT`` and the Linux
kernel spreads new connections over the workers' listening sockets (by a hash of the
connection's addresses). The supervisor binds the ports first without listening: that
turns port 0 into one concrete port for all, and keeps the ports while a worker restarts.
No byte passes through the supervisor.

What is shared (``share.ServerShare``, in shared memory):

- ``max_connections`` holds for the whole server: one counter of the connections every
  worker admitted (a handshake that races another worker's may pass the cap by at most
  the handshakes in progress at that instant);
- ``/health`` answers for the server from any worker: ``connections`` and
  ``active_streams`` summed over the workers, ``workers`` and the answering ``worker``;
- ``/metrics`` from any worker shows every worker's series, summed (prometheus-client's
  multiprocess mode: each worker writes its values to files in
  ``PROMETHEUS_MULTIPROC_DIR``, a fresh temporary folder unless set).

Per worker: the engine's settings (``max_batch``, decode threads, ``max_pending_seconds``:
each worker decodes its own streams), the per-connection limits (message size, stream
length, idle timeout, as without workers) and the calls of the telephony routes, each
decoded by the worker its connection reached. Their subscribers are served as by one
process: a ``/calls/{call_id}`` subscriber on any worker gets the call's messages from
whichever workers hold it (``call_relay``: the call hubs linked by Unix sockets in a
temporary folder the supervisor makes); a call whose worker dies ends for its
subscribers with a ``call_end`` of kind ``worker_stopped``. The webhook gets each final
once, from the worker that decoded it.

Lifecycle: SIGTERM or SIGINT to the supervisor is passed to every worker, which drains as
a single server does (its streams get their last results, then it exits); the supervisor
returns when all have exited (a second signal is passed on too: the workers exit at
once). A worker that dies is started again (same index, same ports). Its clients' sockets
close with it: they see close code 1006 (no close frame), not 1012 as behind the Ray
proxy, since no other process holds their connections (they reconnect, and land on a
live worker or the restarted one). Workers in their own
process group ignore a terminal's Ctrl-C (the supervisor passes it on) and stop when the
supervisor disappears.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from multiprocessing.connection import wait

from .share import ServerShare

__all__ = ["ServerShare", "serve_workers", "MULTIPROC_ENV"]

log = logging.getLogger("streamdec.server")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def reserve(host: str, port: int | None) -> socket.socket | None:
    """Bind ``host:port`` with SO_REUSEPORT without listening: port 0 becomes a concrete
    port the workers then share (ConfigError when taken)."""
    from .run import bind

    return None if port is None else bind(host, port, reuse_port=True)


def serve_workers(app, workers: int) -> int:
    """Run ``workers`` server processes over ``app`` (an ``AppConfig``) until a signal;
    returns the exit status: 0 when every worker drained and exited cleanly (or, still
    starting, was ended by the signal itself); 1 when one died otherwise meanwhile (each
    such exit is logged as ``worker_exited``)."""
    server = app.server
    held: list[socket.socket | None] = []  # (ConfigError when a port is taken)
    try:
        for port in (server.port, server.vosk_port, server.audiosocket_port):
            held.append(reserve(server.host, port))
    except BaseException:
        for sock in held:
            if sock is not None:
                sock.close()
        raise
    made_dir = MULTIPROC_ENV not in os.environ
    metrics_dir = os.environ.get(MULTIPROC_ENV) or tempfile.mkdtemp(prefix="streamdec-metrics-")
    for name in os.listdir(metrics_dir):  # values of an earlier run would add up
        if name.endswith(".db"):
            os.unlink(os.path.join(metrics_dir, name))
    os.environ[MULTIPROC_ENV] = metrics_dir
    port, vosk, audiosocket = (None if sock is None else sock.getsockname()[1]
                               for sock in held)
    server = dataclasses.replace(server, port=port, vosk_port=vosk, audiosocket_port=audiosocket)
    app = dataclasses.replace(app, server=server)
    mp = multiprocessing.get_context("spawn")
    calls_dir = tempfile.mkdtemp(prefix="streamdec-calls-")
    share = ServerShare(mp, workers, calls_dir)
    procs: dict[int, multiprocessing.Process] = {}

    def start(index: int) -> None:
        p = mp.Process(target=_worker_main, args=(app, index, share, os.getpid()),
                       name=f"streamdec-worker-{index}")
        p.start()
        procs[index] = p
        log.info(json.dumps({"event": "worker_started", "worker": index, "pid": p.pid}))

    passed: dict[int, int] = {}  # pid -> signals passed on to it

    def pass_on(signals: list[int]) -> None:
        """Each live worker gets one SIGTERM per signal received (a worker started while
        one arrived gets it too). Only the loop below calls it: it alone reaps workers."""
        for p in list(procs.values()):
            while p.is_alive() and passed.get(p.pid, 0) < len(signals):
                passed[p.pid] = passed.get(p.pid, 0) + 1
                os.kill(p.pid, signal.SIGTERM)

    status = 0
    try:
        with _stop_signals() as (signals, wake):
            for index in range(workers):
                start(index)
            while procs:
                if wake in wait([wake, *(p.sentinel for p in procs.values())], timeout=0.5):
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake, 64)
                pass_on(signals)
                for index, p in list(procs.items()):
                    if p.is_alive():
                        continue
                    p.join()
                    del procs[index]
                    _forget(share, index, p.pid)
                    if signals:  # stopping: a drained worker exits 0, one still starting
                        # (its handlers not installed yet) ends by the SIGTERM itself: both
                        # as asked
                        status = status or (p.exitcode not in (0, -signal.SIGTERM))
                        if p.exitcode != 0:
                            log.warning(json.dumps({"event": "worker_exited", "worker": index,
                                                    "pid": p.pid, "exitcode": p.exitcode}))
                        continue
                    if not share.ready(index):  # it never listened: bad config, files, ports
                        log.error("worker %d exited with status %s before listening: "
                                  "stopping", index, p.exitcode)
                        signals.append(signal.SIGTERM)
                        pass_on(signals)
                        status = 2 if p.exitcode == 2 else 1
                        continue
                    log.warning(json.dumps({"event": "worker_died", "worker": index,
                                            "pid": p.pid, "exitcode": p.exitcode}))
                    start(index)
                    pass_on(signals)  # a signal that came while it started
        log.info(json.dumps({"event": "stopped", "workers": workers}))
        return int(status)
    finally:
        for sock in held:
            if sock is not None:
                sock.close()
        shutil.rmtree(calls_dir, ignore_errors=True)
        if made_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)
            os.environ.pop(MULTIPROC_ENV, None)


@contextlib.contextmanager
def _stop_signals():
    """SIGTERM and SIGINT noted while the block runs; yields (the signals received so far,
    a file descriptor that turns readable when one arrives). The handlers do nothing else:
    reaping and signalling workers from a handler raced the loop it interrupted (a worker
    that loop had just reaped looked alive to the handler, whose SIGTERM to its gone pid
    raised ProcessLookupError out of the supervisor, which then waited forever at exit
    for the workers it had not told to stop)."""
    wake, ring = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(ring, False)
    signals: list[int] = []

    def on_signal(signum, frame) -> None:
        signals.append(signum)
        with contextlib.suppress(BlockingIOError):  # full: it is readable already
            os.write(ring, b"\0")

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield signals, wake
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        os.close(wake)
        os.close(ring)


def _forget(share: ServerShare, index: int, pid: int) -> None:
    from prometheus_client import multiprocess

    share.forget(index)
    with contextlib.suppress(OSError):
        multiprocess.mark_process_dead(pid)  # its live gauges go; its counters stay


def _worker_main(app, index: int, share: ServerShare, supervisor: int) -> None:
    """One worker process: a recognizer, an engine and the listeners (SO_REUSEPORT)."""
    from .. import allocator
    from ..core.recognizer import Recognizer
    from ..errors import StreamdecError
    from .context import ServerContext
    from .run import run_loop, serve

    allocator.configure()  # a spawned process: its own allocator
    os.setpgrp()  # a terminal's Ctrl-C reaches the supervisor only, which passes it on
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s %(name)s[worker {index}] %(message)s")
    share.worker = index
    threading.Thread(target=_watch_supervisor, args=(supervisor,), daemon=True).start()
    try:
        context = ServerContext.create(Recognizer(app.recognizer), app.server, app.audio,
                                       replica=f"worker-{index}", share=share,
                                       store=app.store)
        status = run_loop(serve(context, reuse_port=True, on_listening=share.set_ready),
                          app.server.event_loop)
    except StreamdecError as e:  # a model, file or port it cannot use: said once, plainly
        log.error("streamdec: error: %s", e)
        status = 2
    sys.exit(status)


def _watch_supervisor(supervisor: int) -> None:
    """Drain (SIGTERM to itself) when the supervisor is gone (this worker is orphaned)."""
    while os.getppid() == supervisor:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)
