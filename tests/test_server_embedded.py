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
from streamdec.server.config import ServerConfig
from streamdec.server.context import ServerContext
from test_decode_steps import FailsOnLoudAudio, noise_after


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["zipformer2"])


def test_a_failing_decode_ends_only_its_client(rec):
    failing = Recognizer(rec.config, model=FailsOnLoudAudio(rec.model), symbols=rec.symbols)
    context = ServerContext.create(failing, ServerConfig(max_wait_ms=20))
    app = create_app(context)
    audios = [test_audio(2.0 + 0.3 * n, seed=400 + n) for n in range(3)]
    want = [[r.text for r in finals(decode_in_pieces(rec, a, len(a))) if r.text]
            for a in audios]

    async def main():
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
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
