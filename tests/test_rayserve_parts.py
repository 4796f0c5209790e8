"""The parts of ``streamdec serve --ray`` that need no Ray: the ``[ray]`` table and the Serve
options made from it, the collector that merges the replicas' metrics and health, and the
proxy middleware (hosted by a real uvicorn server in front of small ASGI apps that answer
the way Serve's proxy does: refusing with plain HTTP, or ending without a close when a
replica is lost)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
import uvicorn
import websockets

from server_utils import UNIT
from streamdec import ConfigError
from streamdec.cli.main import main as cli_main
from streamdec.appconfig import parse_config
from streamdec.rayserve.collector import STALE_SECONDS, Collector, ReplicaHealth
from streamdec.rayserve.config import RayConfig
from streamdec.rayserve.proxy import LOST, UNANSWERED, WebSocketGuard
from streamdec.rayserve.run import deployment_options
from streamdec.server.metrics import Metrics


# -- the [ray] table -------------------------------------------------------------------------
def test_the_ray_table_is_read_from_a_config_file():
    app = parse_config({"ray": {"address": "auto", "min_replicas": 2, "max_replicas": 4}})
    assert app.ray == RayConfig(address="auto", min_replicas=2, max_replicas=4)
    assert app.ray.autoscaling
    assert parse_config({}).ray == RayConfig()
    assert not RayConfig().autoscaling


@pytest.mark.parametrize("table, message", [
    ({"min_replicas": 0}, "ray.min_replicas must be >= 1"),
    ({"min_replicas": 3, "max_replicas": 2}, r"ray.max_replicas \(2\) must be >= ray.min_rep"),
    ({"target_streams": 0}, "ray.target_streams must be >= 1"),
    ({"target_streams": 8, "max_streams": 4}, r"ray.max_streams \(4\) must be >= ray.target"),
    ({"max_queued": 0}, "ray.max_queued must be >= 1"),
    ({"look_back_seconds": 0.0}, "ray.look_back_seconds must be > 0"),
    ({"upscale_delay_seconds": -1.0}, "ray.upscale_delay_seconds must be >= 0"),
    ({"downscale_delay_seconds": float("nan")}, "ray.downscale_delay_seconds must be a finite"),
    ({"scale_down_drain_seconds": -1.0}, "ray.scale_down_drain_seconds must be >= 0"),
    ({"replica_cpus": -0.5}, "ray.replica_cpus must be >= 0"),
    ({"address": " "}, "ray.address must name a cluster"),
    ({"replicas": 2}, r"\[ray\]: unknown key\(s\) replicas"),
])
def test_invalid_ray_settings_are_refused_up_front(table, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"ray": table})


def test_replicas_flag_without_ray_is_an_error(capsys):
    assert cli_main(["serve", "--replicas", "2"]) == 2
    assert "--replicas and --ray-address go with --ray" in capsys.readouterr().err


def test_serve_options_for_a_fixed_count_of_replicas():
    options = deployment_options(RayConfig(min_replicas=3, max_replicas=3, max_streams=40,
                                           target_streams=20, max_queued=7,
                                           scale_down_drain_seconds=90.0, replica_cpus=0.5))
    assert options == {
        "num_replicas": 3, "max_ongoing_requests": 40, "max_queued_requests": 7,
        "graceful_shutdown_wait_loop_s": 1.0, "graceful_shutdown_timeout_s": 90.0,
        "max_constructor_retry_count": 2, "ray_actor_options": {"num_cpus": 0.5},
        "logging_config": {"enable_access_log": False}}


def test_serve_options_for_autoscaling():
    options = deployment_options(RayConfig(min_replicas=1, max_replicas=5, target_streams=16,
                                           max_streams=32, look_back_seconds=6.0,
                                           upscale_delay_seconds=2.0,
                                           downscale_delay_seconds=30.0))
    assert "num_replicas" not in options
    assert options["max_ongoing_requests"] == 32
    assert options["autoscaling_config"] == {
        "min_replicas": 1, "max_replicas": 5, "initial_replicas": 1,
        "target_ongoing_requests": 16, "look_back_period_s": 6.0, "metrics_interval_s": 3.0,
        "upscale_delay_s": 2.0, "downscale_delay_s": 30.0}


# -- the collector ---------------------------------------------------------------------------
def _families(connections: int, latency: float):
    metrics = Metrics(0.32, lambda: connections)
    metrics.connections.labels("sherpa").inc(connections)
    metrics.latency.observe(latency)
    return list(metrics.registry.collect())


def _health(streams, connections, pid):
    return ReplicaHealth(active_streams=streams, connections=connections, pid=pid,
                         node="n1", draining=False)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_collector_labels_every_replica_and_leaves_out_the_silent_ones():
    clock = Clock()
    collector = Collector(clock)
    assert collector.health()["status"] == "starting"
    assert collector.report("a", _families(3, 0.02), _health(3, 3, 11)) == {"drain": False}
    collector.report("b", _families(5, 0.2), _health(5, 4, 12))
    text = collector.metrics().decode()
    assert "streamdec_replicas 2.0" in text
    assert 'streamdec_connections_total{protocol="sherpa",replica="a"} 3.0' in text
    assert 'streamdec_connections_total{protocol="sherpa",replica="b"} 5.0' in text
    assert 'streamdec_active_streams{replica="b"} 5.0' in text
    assert 'streamdec_result_latency_seconds_bucket{le="0.02",replica="a"} 1.0' in text
    assert 'streamdec_result_latency_seconds_bucket{le="0.15",replica="b"} 0.0' in text
    assert text.count("# TYPE streamdec_connections_total counter") == 1  # one family
    health = collector.health()
    assert (health["status"], health["replicas"], health["active_streams"],
            health["connections"]) == ("ok", 2, 8, 7)
    assert health["replica_health"]["b"] == {"active_streams": 5, "connections": 4,
                                             "pid": 12, "node": "n1", "draining": False}
    clock.now += STALE_SECONDS / 2
    collector.report("b", _families(6, 0.2), _health(6, 4, 12))
    clock.now += STALE_SECONDS / 2 + 0.01  # a: silent for longer than STALE_SECONDS
    assert list(collector.health()["replica_health"]) == ["b"]
    assert 'replica="a"' not in collector.metrics().decode()
    collector.forget("b")
    assert collector.health()["replicas"] == 0


def test_collector_tells_every_replica_to_drain():
    collector = Collector(Clock())
    collector.report("a", [], _health(1, 1, 11))
    collector.drain()
    assert collector.report("a", [], _health(1, 1, 11)) == {"drain": True}
    assert collector.report("b", [], _health(0, 0, 12)) == {"drain": True}
    assert collector.health()["status"] == "draining"


# -- the proxy middleware --------------------------------------------------------------------
async def refusing(scope, receive, send):  # Serve's backpressure answer, as plain HTTP
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"text/plain"), (b"retry-after", b"2")]})
    await send({"type": "http.response.body", "body": b"Request dropped due to backpressure "
                                                     b"(num_queued_requests=1, "
                                                     b"max_queued_requests=1)."})


async def lost_midstream(scope, receive, send):  # a replica that dies after two results
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    for n in range(2):
        await receive()
        await send({"type": "websocket.send", "text": json.dumps({"n": n})})


async def lost_before_answering(scope, receive, send):
    await receive()


async def closing(scope, receive, send):  # a stream that ends normally
    await receive()
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": "Done!"})
    await send({"type": "websocket.close", "code": 1000, "reason": "done"})


async def http_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def serve_guarded(app, client):
    """Runs ``client(url)`` against uvicorn hosting WebSocketGuard(app)."""
    async def main():
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(WebSocketGuard(app), log_level="critical",
                                               lifespan="off"))
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            return await asyncio.wait_for(client(f"127.0.0.1:{port}"), 20 * UNIT)
        finally:
            server.should_exit = True
            await serving

    return asyncio.run(main())


async def refused(host):
    """The HTTP response that refused a WebSocket handshake."""
    with pytest.raises(websockets.InvalidStatus) as e:
        await websockets.connect(f"ws://{host}/")
    return e.value.response


def test_a_refusal_of_serve_reaches_a_websocket_client_as_503_with_its_reason():
    response = serve_guarded(refusing, refused)
    reason = ("Request dropped due to backpressure (num_queued_requests=1, "
              "max_queued_requests=1).")
    assert response.status_code == 503
    assert response.body.decode() == reason
    assert response.headers["Hint"] == reason
    assert response.headers["Retry-After"] == "2"


def test_a_lost_replica_closes_its_client_with_1012_and_a_reason():
    async def client(host):
        messages = []
        async with websockets.connect(f"ws://{host}/") as ws:
            await ws.send(b"\0" * 8)
            await ws.send(b"\0" * 8)
            try:
                async for m in ws:
                    messages.append(json.loads(m))
            except websockets.ConnectionClosedError:
                pass
        return messages, ws.close_code, ws.close_reason

    messages, code, reason = serve_guarded(lost_midstream, client)
    assert messages == [{"n": 0}, {"n": 1}, {"error": LOST, "kind": "replica_lost"}]
    assert (code, reason) == (1012, LOST)


def test_a_replica_lost_before_the_handshake_is_answered_gives_503():
    response = serve_guarded(lost_before_answering, refused)
    assert response.status_code == 503
    assert response.headers["Hint"] == UNANSWERED


def test_normal_streams_and_http_pass_through_unchanged():
    async def client(host):
        async with websockets.connect(f"ws://{host}/") as ws:
            messages = [m async for m in ws]
        return messages, ws.close_code, ws.close_reason

    assert serve_guarded(closing, client) == (["Done!"], 1000, "done")

    async def http_client(host):
        reader, writer = await asyncio.open_connection(*host.split(":"))
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = await reader.read()
        writer.close()
        return data

    reply = serve_guarded(http_app, http_client)
    assert reply.startswith(b"HTTP/1.1 200 OK") and reply.endswith(b"\r\n\r\nok")
