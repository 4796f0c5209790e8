#!/usr/bin/env python3
"""Live transcription from the microphone over the Vosk protocol (8 kHz int16, one reply
per message, as telephony bridges send it).

    python clients/vosk_mic.py                          # ws://127.0.0.1:6006/vosk
    python clients/vosk_mic.py --url ws://127.0.0.1:2700/ --rate 16000

The partial text is rewritten in place; each final gets its own line. Ctrl-C sends
``{"eof" : 1}`` and prints the last final.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal

import websockets

from common import add_connection_args, connect_kwargs, microphone


def show(reply: dict) -> None:
    if "error" in reply:
        raise SystemExit(f"\nserver: {reply['error']} ({reply['kind']})")
    if "partial" in reply:
        print("\r\033[K" + reply["partial"], end="", flush=True)
    else:
        print("\r\033[K" + reply.get("text", ""), flush=True)


async def main(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    async with websockets.connect(args.url, **connect_kwargs(args)) as ws:
        await ws.send(json.dumps({"config": {"sample_rate": args.rate}}))
        async for block in microphone(args.rate, 0.2, args.device):
            if stop.is_set():
                break
            await ws.send((block[:, 0].clip(-1, 1) * 32767).astype("<i2").tobytes())
            show(json.loads(await ws.recv()))
        await ws.send('{"eof" : 1}')
        show(json.loads(await ws.recv()))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=int, default=8000, help="sample rate to send (default 8000)")
    p.add_argument("--device", help="input device (name or index; default: the system's)")
    add_connection_args(p, "ws://127.0.0.1:6006/vosk")
    asyncio.run(main(p.parse_args()))
