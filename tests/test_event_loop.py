"""``[server] event_loop``: the daemon runs on uvloop where installed (the server extra
installs it), on asyncio when asked, and says which in its ``listening`` line."""

from __future__ import annotations

import json
import sys

import pytest
import soundfile as sf

from server_utils import REPO, ServerProcess, run, sherpa_client, sherpa_text
from streamdec import ConfigError
from streamdec.server.config import ServerConfig
from streamdec.server.run import run_loop


def listening(server: ServerProcess) -> dict:
    line = next(x for x in server.log if '"event": "listening"' in x)
    return json.loads(line[line.index("{"):])


def test_each_loop_serves_the_same_transcript():
    audio, rate = sf.read(str(REPO / "examples" / "hello.wav"), dtype="float32")
    assert rate == 16000
    texts = {}
    for args, expected in (((), "uvloop"), (("--event-loop", "asyncio"), "asyncio"),
                           (("--event-loop", "uvloop"), "uvloop")):
        server = ServerProcess("--search", "greedy", *args)
        try:
            assert listening(server)["event_loop"] == expected
            serves = " ".join(listening(server)["serves"])
            for door in ("/sherpa", "/vosk", "/v1/audio/transcriptions", "/v1/listen",
                         "/v1/realtime", "/v3/ws", "/twilio", "/audiofork", "/calls/"):
                assert door in serves, (door, serves)
            out = run(sherpa_client(server.url(), audio, 1600))
        finally:
            assert server.stop() == 0
        assert out["done"] and out["close"] == 1000
        texts[args] = sherpa_text(out["results"])
    assert len(set(texts.values())) == 1 and next(iter(texts.values())), texts


def test_an_unknown_loop_is_refused():
    with pytest.raises(ConfigError, match="server.event_loop must be one of auto, uvloop, "
                                          "asyncio, got 'trio'"):
        ServerConfig(event_loop="trio")


def test_uvloop_by_name_without_the_package_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError

    async def main() -> int:
        return 7

    with pytest.raises(ConfigError, match="uvloop package is not installed"):
        run_loop(main(), "uvloop")
    assert run_loop(main(), "auto") == 7  # auto falls back to asyncio
    assert run_loop(main(), "asyncio") == 7
