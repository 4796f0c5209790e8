"""``serve_on_ray(app)``: ``streamdec serve --ray``, the daemon as a Ray Serve application.

In this order: start a Ray instance of this machine (``[ray] address`` unset: every Ray
server on loopback, a temporary directory for its files) or join the cluster at
``address``; start Serve's HTTP proxy on the ``[server]`` host and port (TLS too); start
the collector (a named Ray actor); deploy three applications:

==========================  ==============  =================================================
application                 route prefix    what
==========================  ==============  =================================================
``streamdec``               ``/``           ``StreamdecReplica``: every path of the daemon
``streamdec-metrics``       ``/metrics``    ``StatusEndpoint``: every replica's metrics
``streamdec-health``        ``/health``     ``StatusEndpoint``: the application's health
==========================  ==============  =================================================

then log ``{"event": "listening", ...}`` and serve until SIGTERM or SIGINT. Then: every
replica drains (each stream gets its last results and its connection closes, at most
``drain_timeout_seconds``), the applications are deleted, and a Ray instance started here
is stopped (only its own processes). A second signal exits at once. With a Ray instance of
this machine, the model is loaded once first, so that a model that cannot load is an
error before Ray starts.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import time

from ..appconfig import AppConfig
from ..core.recognizer import Recognizer
from ..errors import ConfigError
from .collector import REPORT_SECONDS
from .config import RayConfig
from .proxy import CALLBACK, CALLBACK_ENV

__all__ = ["serve_on_ray", "deployment_options", "NAMESPACE", "APPS"]

log = logging.getLogger("streamdec.rayserve")

NAMESPACE = "streamdec"
COLLECTOR = "streamdec-collector"
APPS = {"streamdec": "/", "streamdec-metrics": "/metrics", "streamdec-health": "/health"}
# Ray decides which address its servers listen on from this switch: "0" keeps a Ray
# instance to one machine (its node address is 127.0.0.1; its servers listen on loopback)
LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
QUEUE_CACHE_ENV = "RAY_SERVE_QUEUE_LENGTH_CACHE_TIMEOUT_S"
PROXY_READY_ENV = "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"


def deployment_options(ray_config: RayConfig) -> dict:
    """Serve's options for ``StreamdecReplica`` from the ``[ray]`` table."""
    options = {
        "max_ongoing_requests": ray_config.max_streams,
        "max_queued_requests": ray_config.max_queued,
        "graceful_shutdown_wait_loop_s": 1.0,
        "graceful_shutdown_timeout_s": ray_config.scale_down_drain_seconds,
        "max_constructor_retry_count": 2,
        "ray_actor_options": {"num_cpus": ray_config.replica_cpus},
        "logging_config": {"enable_access_log": False},
    }
    if ray_config.autoscaling:
        options["autoscaling_config"] = {
            "min_replicas": ray_config.min_replicas,
            "max_replicas": ray_config.max_replicas,
            "initial_replicas": ray_config.min_replicas,
            "target_ongoing_requests": ray_config.target_streams,
            "look_back_period_s": ray_config.look_back_seconds,
            # how often each proxy and replica sends its counts to the autoscaler
            "metrics_interval_s": min(10.0, ray_config.look_back_seconds / 2),
            "upscale_delay_s": ray_config.upscale_delay_seconds,
            "downscale_delay_s": ray_config.downscale_delay_seconds,
        }
    else:
        options["num_replicas"] = ray_config.min_replicas
    return options


_STATUS_OPTIONS = {"num_replicas": 1, "max_ongoing_requests": 64,
                   "ray_actor_options": {"num_cpus": 0},
                   "logging_config": {"enable_access_log": False}}


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _start_ray(ray_config: RayConfig) -> str | None:
    """Start or join Ray; returns the temporary directory of a Ray instance started here."""
    import ray

    os.environ.setdefault(CALLBACK_ENV, CALLBACK)  # Serve's proxies install proxy.py
    # a stream is routed once for its whole life: ask both candidate replicas for their
    # open streams each time rather than trust the router's cached counts, which lag behind
    # a replica just started (and would send it nothing until they expire, 10 s)
    os.environ.setdefault(QUEUE_CACHE_ENV, "0")
    # Serve gives a starting proxy 5 s to answer its readiness check, three times, then kills
    # it and the deploy fails: a machine busy with other work (two cores, a test run beside)
    # needs longer; 30 s still tells a proxy that cannot start
    os.environ.setdefault(PROXY_READY_ENV, "30")
    if ray_config.address is not None:
        ray.init(address=ray_config.address, namespace=NAMESPACE,
                 logging_level=logging.WARNING)
        return None
    # short: Ray puts Unix sockets in it (at most 107 bytes a path)
    temp = tempfile.mkdtemp(prefix="streamdec-ray-", dir="/tmp" if os.name == "posix" else None)
    try:
        ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, _temp_dir=temp,
                 namespace=NAMESPACE, logging_level=logging.WARNING)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return temp


def _effective_port(requested: int) -> int:
    """The port Serve's proxies listen on: the one asked for, unless Serve was already
    running on the cluster (it keeps its own HTTP options then)."""
    try:
        from ray.serve.context import _get_global_client

        return _get_global_client().http_config.port
    except Exception:  # a private accessor of Serve's: fall back to what was asked
        return requested


def _deploy(app: AppConfig, port: int) -> object:
    """Serve's proxy, the collector and the three applications; returns the collector."""
    import ray
    from ray import serve

    from .collector import Collector
    from .replica import StatusEndpoint, StreamdecReplica

    server = app.server
    http = {"host": server.host, "port": port}
    if server.tls:
        http.update(ssl_certfile=server.tls_cert, ssl_keyfile=server.tls_key)
    serve.start(http_options=http)
    collector = ray.remote(Collector).options(name=COLLECTOR, namespace=NAMESPACE,
                                              num_cpus=0, max_restarts=-1).remote()
    replica = serve.deployment(StreamdecReplica, name="StreamdecReplica",
                               **deployment_options(app.ray))
    status = serve.deployment(StatusEndpoint, name="StatusEndpoint", **_STATUS_OPTIONS)
    targets = [serve.RunTarget(replica.bind(app, COLLECTOR, NAMESPACE) if prefix == "/" else
                               status.bind(prefix.strip("/"), COLLECTOR, NAMESPACE),
                               name=name, route_prefix=prefix)
               for name, prefix in APPS.items()]
    serve.run_many(targets)  # returns once all are running
    return collector


def _drain(collector, timeout: float) -> bool:
    """Every replica drains; True when all connections closed within ``timeout``."""
    import ray

    ray.get(collector.drain.remote())
    deadline = time.monotonic() + timeout + 2 * REPORT_SECONDS
    while time.monotonic() < deadline:
        health = ray.get(collector.health.remote())
        replicas = health["replica_health"].values()
        if all(r["draining"] for r in replicas) and health["connections"] == 0:
            return True
        time.sleep(0.2)
    log.warning("drain: connection(s) still open after %g s", timeout)
    return False


def serve_on_ray(app: AppConfig) -> int:
    """Serve until a signal; returns the exit status (0 after a graceful drain)."""
    server = app.server
    if server.vosk_port is not None:
        raise ConfigError("server.vosk_port: --ray serves one port (Vosk clients use /vosk)")
    if app.ray.address is None:
        # the replicas will load these files on this machine: a model that cannot load
        # fails here, as with the single-process server, before Ray starts
        Recognizer(app.recognizer)
        os.environ[LOCAL_ONLY_ENV] = "0"  # read when Ray is imported
    # every replica's connection log lines, even alike ones (Ray folds repeated lines)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        import ray
        from ray import serve
    except ImportError as e:
        raise ConfigError(f"--ray needs the ray extra (python3 -m pip install -e '.[ray]' "
                          f"in the streamdec folder): {e}") from None
    for name in ("ray", "ray.serve"):
        logging.getLogger(name).setLevel(logging.WARNING)

    # the signals so far: the handler only notes them (taking a lock there, a
    # threading.Event's or the log's, deadlocks when the code it interrupted holds it)
    received: list[int] = []

    def on_signal(signum, frame) -> None:
        if received:
            os.write(2, b"second signal: exiting at once\n")
            os._exit(128 + signum)
        received.append(signum)

    temp = _start_ray(app.ray)
    # after Ray's start: its own handlers would end the process at once
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        port = server.port or _free_port(server.host)
        try:
            collector = _deploy(app, port)
        except Exception as e:  # a replica that cannot start (e.g. a model it cannot load)
            log.error("cannot deploy on Ray: %s", e)
            for name in APPS:
                serve.delete(name)
            return 1
        port = _effective_port(port)
        scheme = "https" if server.tls else "http"
        rc = app.ray
        log.info(json.dumps({
            "event": "listening", "url": f"{scheme}://{server.host}:{port}", "port": port,
            "serves": ["sherpa at / and /sherpa", "vosk at /vosk",
                       "POST /v1/audio/transcriptions"],
            "ray": {"address": ray.get_runtime_context().gcs_address,
                    "replicas": [rc.min_replicas, rc.max_replicas],
                    "target_streams": rc.target_streams, "max_streams": rc.max_streams}}))
        while not received:
            time.sleep(0.5)  # checked every half second
        log.info(json.dumps({"event": "draining",
                             "signal": signal.Signals(received[0]).name}))
        drained = _drain(collector, server.drain_timeout_seconds)
        for name in APPS:
            serve.delete(name)
        log.info(json.dumps({"event": "stopped", "drained": drained}))
        return 0
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        ray.shutdown()  # a Ray instance started here stops with it (only its processes);
        if temp is not None:  # a cluster joined goes on (and Serve on it)
            shutil.rmtree(temp, ignore_errors=True)
