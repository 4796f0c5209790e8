"""SIGTERM while clients are mid-utterance: the server stops accepting, every client gets
its last results (sherpa: the ``is_eof`` final and ``Done!``; Vosk: its final reply), then
the process exits 0."""

from __future__ import annotations

import asyncio
import json
import signal

import numpy as np
import websockets

from server_utils import ServerProcess, UNIT, run
from test_builtin_transcribe import speak

SENTENCES = ["please call me back tomorrow morning", "the meeting starts at nine thirty",
             "my account number is four five six", "thank you for calling have a nice day",
             "the weather is cold today"]


async def stream_on(ws, data: np.ndarray, started: asyncio.Event) -> list:
    """Sends ``data`` on ``ws`` at about twice real time until the server ends the stream;
    returns every message received."""
    received = []

    async def read():
        try:
            async for m in ws:
                received.append(m if m == "Done!" else json.loads(m))
        except websockets.ConnectionClosedError:
            received.append("closed with an error")

    reader = asyncio.ensure_future(read())
    try:
        for n, i in enumerate(range(0, len(data), 800)):
            await ws.send(data[i:i + 800].tobytes())
            if n == 20:  # 1 s of audio sent: mid-utterance
                started.set()
            await asyncio.sleep(0.025)
    except websockets.ConnectionClosed:
        pass
    await asyncio.wait_for(reader, 30 * UNIT)
    return received


async def streaming_client(url: str, audio: np.ndarray, started: asyncio.Event,
                           vosk: bool) -> list:
    """``stream_on`` a new connection; the close code comes last."""
    data = (audio * 32767).astype("<i2") if vosk else audio.astype("<f4")
    async with websockets.connect(url) as ws:
        received = await stream_on(ws, data, started)
    received.append(ws.close_code)
    return received


def sigterm_mid_stream(server, count: int, start) -> tuple[list, int]:
    """``await start(events)`` gives ``count`` client coroutines, each setting its event
    once mid-utterance; SIGTERM goes to the server when all are. Returns what each client
    returned and the server's exit status."""
    async def main():
        events = [asyncio.Event() for _ in range(count)]
        clients = [asyncio.ensure_future(c) for c in await start(events)]
        await asyncio.wait_for(asyncio.gather(*[e.wait() for e in events]), 30 * UNIT)
        server.proc.send_signal(signal.SIGTERM)
        return await asyncio.gather(*clients)

    try:
        got = run(main())
        code = server.proc.wait(timeout=30 * UNIT)
    finally:
        server.stop()
    return got, code


def test_sigterm_gives_every_client_its_final_then_exits_0(tmp_path):
    audios = []
    for n, sentence in enumerate(SENTENCES):
        a = speak(sentence, tmp_path / f"{n}.wav")
        audios.append(np.concatenate([a, a, a]))  # long enough to be cut mid-utterance
    server = ServerProcess()

    async def start(events):
        return [streaming_client(server.url("/vosk?sample_rate=16000" if n == 4 else "/"), a,
                                 e, vosk=n == 4)
                for n, (a, e) in enumerate(zip(audios, events))]

    got, code = sigterm_mid_stream(server, len(audios), start)
    for received in got[:4]:  # sherpa clients
        assert received[-1] == 1000, received[-3:]
        assert received[-2] == "Done!"
        last = received[-3]
        assert last["is_final"] and last["is_eof"] and last["text"]
    vosk = got[4]
    assert vosk[-1] == 1000 and "text" in vosk[-2] and vosk[-2]["text"]
    assert code == 0
    assert any('"event": "draining"' in line for line in server.log)
