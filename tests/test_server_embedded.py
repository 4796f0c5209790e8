"""The app built by the factory and hosted in-process (as another ASGI host would): a
model whose decode fails for one client's audio ends only that client (close 1011) while
the others get their transcripts; the app's lifespan starts and stops the engine."""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvicorn
import websockets

from conftest import make_recognizer
from decode_utils import decode_in_pieces, finals
from model_factory import test_audio
from server_utils import UNIT, messages_until_closed, sherpa_client
from streamdec import Recognizer
from streamdec.server.app import create_app
from streamdec.engine import EngineConfig
from streamdec.server.config import ServerConfig
from streamdec.server.context import ServerContext
from test_decode_steps import FailsOnLoudAudio, noise_after


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["zipformer2"])


async def host(app) -> tuple[uvicorn.Server, asyncio.Future, int]:
    """``app`` served by uvicorn in this loop on a free loopback port, once it listens:
    (the server, its task, the port); set ``server.should_exit`` and await the task."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    return server, serving, port


def test_a_failing_decode_ends_only_its_client(rec):
    failing = Recognizer(rec.config, model=FailsOnLoudAudio(rec.model), symbols=rec.symbols)
    context = ServerContext.create(failing, ServerConfig(engine=EngineConfig(max_wait_ms=20)))
    app = create_app(context)
    audios = [test_audio(2.0 + 0.3 * n, seed=400 + n) for n in range(3)]
    want = [[r.text for r in finals(decode_in_pieces(rec, a, len(a))) if r.text]
            for a in audios]

    async def main():
        server, serving, port = await host(app)
        assert context.engine.running  # the lifespan started it
        url = f"ws://127.0.0.1:{port}/"

        async def bad():
            async with websockets.connect(url) as ws:
                await ws.send(noise_after(0.5, 2.0).tobytes())
                messages = await messages_until_closed(ws)
            return messages, ws.close_code

        got = await asyncio.gather(bad(), *[sherpa_client(url, a, 1600) for a in audios])
        server.should_exit = True
        await asyncio.wait_for(serving, 30 * UNIT)
        return got

    (messages, code), *good = asyncio.run(main())
    assert code == 1011
    assert messages[-1]["kind"] == "decode_failed"
    assert "simulated runtime failure" in messages[-1]["error"]
    for out, texts in zip(good, want):
        assert out["done"]
        assert [r["text"] for r in out["results"] if r["is_final"] and r["text"]] == texts
    assert not context.engine.running  # and the lifespan stopped it
    assert context.engine.active_streams == 0


class Slow:
    """The real model, with each encode call taking ``seconds`` longer (a busy machine)."""

    def __init__(self, model, seconds: float) -> None:
        self._model, self._seconds = model, seconds
        self.meta, self.state_layout = model.meta, model.state_layout

    def encode(self, features, states):
        import time

        time.sleep(self._seconds)
        return self._model.encode(features, states)

    def decode(self, contexts):
        return self._model.decode(contexts)

    def join(self, encoder_out, decoder_out):
        return self._model.join(encoder_out, decoder_out)


def test_stall_diagnostics_paused_reads_the_loops_lag_and_the_engines_queue(rec, caplog):
    """A client sending far faster than it is decoded has its reads paused (counted in the
    metrics and its connection's log line); a stalled loop is measured and logged."""
    import json
    import logging
    import re
    import time

    caplog.set_level(logging.INFO, logger="streamdec.server")
    slow = Recognizer(rec.config, model=Slow(rec.model, 0.02), symbols=rec.symbols)
    context = ServerContext.create(slow,
                                   ServerConfig(engine=EngineConfig(max_pending_seconds=0.1)))
    app = create_app(context)
    audio = test_audio(6.0, seed=450)

    async def main():
        server, serving, port = await host(app)
        async with websockets.connect(f"ws://127.0.0.1:{port}/") as ws:
            for i in range(0, len(audio), 8000):  # 0.5 s messages, as fast as it can
                await ws.send(audio[i:i + 8000].astype("<f4").tobytes())
            await ws.send("Done")
            await messages_until_closed(ws)
        # the loop stalls 1 s: the watch's 250 ms timer runs 0.75-1 s late
        asyncio.get_running_loop().call_soon(time.sleep, 1.0)
        await asyncio.sleep(1.5)
        text = context.metrics.render().decode()
        server.should_exit = True
        await asyncio.wait_for(serving, 30 * UNIT)
        return text

    text = asyncio.run(main())

    def sample(name):
        return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))

    assert sample("streamdec_read_pauses_total") >= 3
    assert sample("streamdec_read_paused_seconds_total") > 0
    assert sample('streamdec_loop_lag_seconds_bucket{le="0.5"}') < sample(
        "streamdec_loop_lag_seconds_count")  # the stall, in the histogram
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.getMessage().startswith("{")]
    connection = [e for e in lines if e["event"] == "connection"]
    assert len(connection) == 1 and connection[0]["reads_paused"] >= 3
    assert connection[0]["reads_paused"] == sample("streamdec_read_pauses_total")
    lags = [e for e in lines if e["event"] == "loop_lag"]
    # the stall made after the client left (a busy machine may add others)
    assert [e for e in lags if e["active_streams"] == 0 and 0.74 <= e["seconds"] < 5]
    assert all(set(e) == {"event", "seconds", "active_streams", "ready_streams",
                          "batches_in_flight"} for e in lags)
