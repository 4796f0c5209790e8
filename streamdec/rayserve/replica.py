"""The Ray Serve deployments of ``streamdec serve --ray``.

- ``StreamdecReplica``: one recognizer and one engine, serving the daemon's own ASGI app
  (``create_app``: its one route table, every protocol of the daemon's main port: sherpa
  and Vosk, Deepgram's and OpenAI's, the telephony calls, the transcription endpoints, the
  stored transcripts, the page) through Serve's ingress. It reports its metrics and health
  to the collector every ``REPORT_SECONDS`` and drains when the reply says so.
- ``StatusEndpoint``: ``/metrics`` or ``/health`` of the whole application, read from the
  collector (``/health`` adds Serve's count of replicas in each state). They are
  applications of their own (route prefixes ``/metrics`` and ``/health``), so a scrape or a
  probe never waits behind streams for a replica's slot.

Importing this module needs Ray (the ``ray`` extra).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys

import ray
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import allocator
from ..appconfig import AppConfig
from ..core.recognizer import Recognizer
from ..server.app import create_app
from ..server.context import ServerContext
from ..server.metrics import CONTENT_TYPE_LATEST
from .collector import REPORT_SECONDS, ReplicaHealth

__all__ = ["StreamdecReplica", "StatusEndpoint", "collector_handle"]

log = logging.getLogger("streamdec.rayserve")


def collector_handle(name: str, namespace: str):
    return ray.get_actor(name, namespace=namespace)


def _log_to_stderr() -> None:
    """The daemon's JSON log lines (one per connection) go to the replica's stderr, which
    Ray forwards to the driver's."""
    root = logging.getLogger("streamdec")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False


@serve.ingress()
class StreamdecReplica:
    """One replica: ``app`` is the whole config (the ``[ray]`` table's ``max_streams`` is
    this replica's connection cap); ``collector`` names the collector actor."""

    def __init__(self, app: AppConfig, collector: str, namespace: str) -> None:
        _log_to_stderr()
        allocator.configure()  # a replica is a process of its own
        self.name = serve.get_replica_context().replica_tag
        server = dataclasses.replace(app.server, max_connections=app.ray.max_streams)
        self.context = ServerContext.create(Recognizer(app.recognizer), server, app.audio,
                                            replica=self.name, store=app.store)
        self._collector = (collector, namespace)
        self._node = ray.get_runtime_context().get_node_id()[:12]
        self._reporting: asyncio.Task | None = None

    async def __serve_build_asgi_app__(self):
        # runs on the loop that serves the app (and starts the engine in its lifespan)
        self._reporting = asyncio.get_running_loop().create_task(self._report_forever())
        return create_app(self.context)

    async def _report_forever(self) -> None:
        collector, warned = None, False
        drain_timeout = self.context.config.drain_timeout_seconds
        while True:
            try:
                collector = collector or collector_handle(*self._collector)
                reply = await collector.report.remote(self.name, self._families(),
                                                      self._health())
                warned = False
                if reply["drain"] and not self.context.draining:
                    asyncio.get_running_loop().create_task(self.context.drain(drain_timeout))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the collector is (re)starting: metrics wait, streams go on
                collector = None
                if not warned:
                    log.warning("replica %s: cannot report to the collector: %r", self.name, e)
                    warned = True
            await asyncio.sleep(REPORT_SECONDS)

    def _families(self) -> list:
        return list(self.context.metrics.registry.collect())

    def _health(self) -> ReplicaHealth:
        return ReplicaHealth(active_streams=self.context.engine.active_streams,
                             connections=self.context.access.open, pid=os.getpid(),
                             node=self._node, draining=self.context.draining)

    async def __del__(self) -> None:
        """Serve stops this replica (after its streams ended): leave the collector."""
        if self._reporting is not None:
            self._reporting.cancel()
        try:
            await collector_handle(*self._collector).forget.remote(self.name)
        except Exception:  # the collector went first (the application is being deleted)
            pass


class StatusEndpoint:
    """``what`` is "metrics" or "health"; any path under the route prefix answers it."""

    def __init__(self, what: str, collector: str, namespace: str) -> None:
        if what not in ("metrics", "health"):
            raise ValueError(f"unknown status endpoint {what!r}")
        self.what = what
        self._collector = (collector, namespace)

    async def __call__(self, request: Request) -> Response:
        collector = collector_handle(*self._collector)
        if self.what == "metrics":
            return Response(await collector.metrics.remote(), media_type=CONTENT_TYPE_LATEST)
        health = await collector.health.remote()
        health["serve_replicas"] = await asyncio.get_running_loop().run_in_executor(
            None, _replica_states)
        return JSONResponse(health, 200 if health["status"] == "ok" else 503)


def _replica_states() -> dict[str, int]:
    """How many replicas Serve has in each state (RUNNING, STARTING, STOPPING, ...): a
    replica being scaled down is STOPPING while its streams finish."""
    try:
        app = serve.status().applications["streamdec"]
        states = app.deployments["StreamdecReplica"].replica_states
    except Exception:  # the application is being deployed or deleted
        return {}
    return {str(getattr(k, "value", k)): n for k, n in states.items()}
