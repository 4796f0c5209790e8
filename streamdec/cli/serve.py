"""``streamdec serve``: the daemon (sherpa-onnx and Vosk WebSocket protocols, HTTP
transcription, health and metrics, calls from Twilio, FreeSWITCH and Asterisk) over the
engine; with ``--ray``, the same daemon as a
Ray Serve application of several replicas (``streamdec.rayserve``).

Settings come from the config file's ``[server]`` table, then ``STREAMDEC_*`` environment
variables, then these flags (see ``streamdec.server.config``); ``--ray``'s from the
``[ray]`` table, then ``--replicas`` and ``--ray-address``; the transcript store's from
the ``[store]`` table, then ``STREAMDEC_STORE_URL``, then ``--store``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys

from ..engine import HEAVY_MODEL_WEIGHTS, HEAVY_SIZES, LIGHT_SIZES
from ..errors import ConfigError
from .options import add_recognizer_options, announce_model, app_config_from_args


def _by_model(i: int) -> str:
    """The engine's default of ``sizes_for``'s item ``i`` (0 max_batch, 1 workers), in words."""
    return f"{LIGHT_SIZES[i]}, {HEAVY_SIZES[i]} from {HEAVY_MODEL_WEIGHTS / 1e6:g} M weights up"


_FLAGS = [  # (flag, [server] key (server.config.SETTINGS), type, help)
    ("--host", "host", str, "address to listen on (default 127.0.0.1; 0.0.0.0: all)"),
    ("--port", "port", int, "port of the sherpa-onnx protocol, Vosk at /vosk and HTTP "
                            "(default 6006; 0: any free port)"),
    ("--vosk-port", "vosk_port", int, "a second port with the Vosk protocol at its root "
                                      "(2700 by convention)"),
    ("--audiosocket-port", "audiosocket_port", int, "a TCP port for Asterisk AudioSocket "
                                                    "calls (default: off)"),
    ("--webhook-url", "webhook_url", str, "POST each final of each call here as JSON"),
    ("--max-connections", "max_connections", int, "connections at once (then HTTP 503)"),
    ("--max-decode-delay-ms", "max_decode_delay_ms", float, "refuse new connections (HTTP "
                                                            "503) while a ready stream has "
                                                            "waited this long for its decode "
                                                            "(default 1000; 0: never)"),
    ("--max-message-bytes", "max_message_bytes", int, "largest WebSocket message"),
    ("--max-stream-seconds", "max_stream_seconds", float, "longest stream (audio seconds)"),
    ("--idle-timeout", "idle_timeout_seconds", float, "close a client silent this long (s)"),
    ("--max-upload-bytes", "max_upload_bytes", int, "largest file to /v1/audio/transcriptions"),
    ("--drain-timeout", "drain_timeout_seconds", float, "on SIGTERM: time for in-flight "
                                                       "streams to finish (s)"),
    ("--token-file", "token_file", str, "bearer tokens, one per line (default: no auth)"),
    ("--twilio-auth-token-file", "twilio_auth_token_file", str, "Twilio's auth token: /twilio "
                                                               "admits handshakes it signed"),
    ("--tls-cert", "tls_cert", str, "PEM certificate: serve wss:// and https://"),
    ("--tls-key", "tls_key", str, "PEM private key of --tls-cert"),
    ("--max-batch", "max_batch", int, "streams decoded in one batch (default by the model: "
                                      f"{_by_model(0)})"),
    ("--max-wait-ms", "max_wait_ms", float, "how long a ready stream waits for a batch"),
    ("--decode-threads", "workers", int, "batches decoded at once (threads, per process; "
                                         f"default by the model: {_by_model(1)})"),
    ("--workers", "processes", int, "server processes sharing the port (SO_REUSEPORT; each "
                                    "loads the model; default 1)"),
    ("--max-pending-seconds", "max_pending_seconds", float,
     "undecoded audio per stream before its reads pause"),
    ("--event-loop", "event_loop", str, "uvloop, asyncio or auto (default: uvloop where "
                                        "installed)"),
]


def _with_default(text: str, field: str) -> str:
    """``text``, with ``ServerConfig``'s default of ``field`` where it does not say it
    (the one home of the defaults: the flags show them, never restate them)."""
    from ..server.config import ServerConfig

    if "default" in text:
        return text
    config = ServerConfig()
    value = getattr(config, field) if hasattr(config, field) else getattr(config.engine, field)
    shown = "none" if value is None else f"{value:g}" if isinstance(value, float) else value
    return f"{text} (default: {shown})"


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="run the streaming transcription daemon",
                       description="Serve live transcription over WebSocket (sherpa-onnx "
                                   "protocol at / and /sherpa, Vosk at /vosk) and HTTP "
                                   "(POST /v1/audio/transcriptions, /health, /metrics).")
    g = p.add_argument_group("server")
    for flag, field, kind, text in _FLAGS:
        g.add_argument(flag, dest=f"server_{field}", type=kind, help=_with_default(text, field),
                       metavar={int: "N", float: "X", str: "VALUE"}[kind])
    r = p.add_argument_group("ray", "Serve on Ray: the same ports, paths and options; "
                             "replicas and autoscaling from the config's [ray] table")
    r.add_argument("--ray", action="store_true",
                   help="serve as a Ray Serve application (needs the ray extra)")
    r.add_argument("--replicas", type=int, metavar="N",
                   help="a fixed number of replicas (default: [ray] min/max_replicas)")
    r.add_argument("--ray-address", metavar="ADDRESS",
                   help="join this Ray cluster (\"auto\" or HOST:PORT) instead of starting "
                        "a Ray instance of this machine (default: none)")
    g.add_argument("--store", metavar="URL",
                   help="the transcript store: sqlite:///PATH, postgresql://..., or off "
                        "(default: [store] url, else SQLite in the data directory)")
    add_recognizer_options(p)
    p.set_defaults(run=run)


def store_config(args: argparse.Namespace, file_config, environ) -> object:
    """The [store] table, then STREAMDEC_STORE_URL, then --store (``off``: no store)."""
    url = args.store if args.store is not None else environ.get("STREAMDEC_STORE_URL")
    if url is None:
        return file_config
    if url == "off":
        return dataclasses.replace(file_config, enabled=False)
    return dataclasses.replace(file_config, enabled=True, url=url)


def server_config(args: argparse.Namespace, file_config, environ) -> object:
    """The [server] table, then STREAMDEC_* variables, then flags."""
    from ..server.config import env_overrides

    flags = {field: getattr(args, f"server_{field}") for _, field, _, _ in _FLAGS
             if getattr(args, f"server_{field}") is not None}
    changes = {**env_overrides(environ), **flags}
    try:
        return file_config.updated(changes)
    except TypeError as e:
        raise ConfigError(f"server: {e}") from None


def ray_config(args: argparse.Namespace, file_config) -> object:
    """The [ray] table, then --replicas and --ray-address."""
    config = file_config
    if args.replicas is not None:
        if args.replicas < 1:
            raise ConfigError(f"--replicas must be >= 1, got {args.replicas}")
        config = config.with_replicas(args.replicas)
    if args.ray_address is not None:
        config = dataclasses.replace(config, address=args.ray_address)
    return config


def run(args: argparse.Namespace) -> int:
    if not args.ray and (args.replicas is not None or args.ray_address is not None):
        raise ConfigError("--replicas and --ray-address go with --ray")
    try:
        from ..server.context import ServerContext
        from ..server.run import run_loop, serve
    except ImportError as e:
        print("streamdec: error: serve needs the server extra "
              f"(python3 -m pip install -e '.[server]' in the streamdec folder): {e}",
              file=sys.stderr)
        return 2
    from ..core.recognizer import Recognizer

    if args.config is None:
        args.config = os.environ.get("STREAMDEC_CONFIG")
    app = app_config_from_args(args)
    config = server_config(args, app.server, os.environ)
    app = dataclasses.replace(app, store=store_config(args, app.store, os.environ))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        stream=sys.stderr)
    if args.ray:
        from ..rayserve.run import serve_on_ray

        if config.processes > 1:
            raise ConfigError("--workers is for the daemon without --ray (Ray scales with "
                              "--replicas)")
        return serve_on_ray(dataclasses.replace(app, server=config,
                                                ray=ray_config(args, app.ray)))
    if config.processes > 1:
        from ..server.workers import serve_workers

        return serve_workers(dataclasses.replace(app, server=config), config.processes)
    recognizer = Recognizer(app.recognizer)
    announce_model(recognizer)
    context = ServerContext.create(recognizer, config, app.audio, store=app.store)
    return run_loop(serve(context), config.event_loop)
