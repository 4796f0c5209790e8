#!/usr/bin/env python3
"""Live captions from the microphone through a streamdec server, sherpa-onnx protocol.

    python clients/sherpa_mic.py                       # ws://127.0.0.1:6006/, Ctrl-C ends
    python clients/sherpa_mic.py --url wss://host:6006/ --token T --cafile cert.pem

The partial text is rewritten in place on one line; each final result gets its own line.
On Ctrl-C it sends ``Done`` and prints the last result.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import websockets

from common import add_connection_args, connect_kwargs, microphone, sherpa_results, with_query

RATE = 16000


async def main(args: argparse.Namespace) -> None:
    url = with_query(args.url, search=args.search)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    async with websockets.connect(url, **connect_kwargs(args)) as ws:
        async def send():
            async for block in microphone(RATE, 0.1, args.device):
                if stop.is_set():
                    break
                await ws.send(block[:, 0].astype("<f4").tobytes())
            await ws.send("Done")

        sender = asyncio.ensure_future(send())
        async for r in sherpa_results(ws):
            print("\r\033[K" + r["text"], end="\n" if r["is_final"] else "", flush=True)
        await sender


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", help="input device (name or index; default: the system's)")
    p.add_argument("--search", help="search method for this stream (e.g. modified_beam)")
    add_connection_args(p, "ws://127.0.0.1:6006/")
    asyncio.run(main(p.parse_args()))
