"""What the example clients share: connection options, audio from a file or a microphone.

Needs ``websockets``, ``numpy`` and ``soundfile`` (``sounddevice`` for the microphone), all
installed with ``pip install 'streamdec[server,mic]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import time
from typing import AsyncIterator

import numpy as np


def add_connection_args(p: argparse.ArgumentParser, default_url: str) -> None:
    p.add_argument("--url", default=default_url, help=f"server URL (default {default_url})")
    p.add_argument("--token", help="bearer token, when the server asks for one")
    p.add_argument("--cafile", help="CA or self-signed certificate to trust for wss://")


def connect_kwargs(args: argparse.Namespace) -> dict:
    """Keyword arguments of ``websockets.connect`` for these options."""
    kwargs: dict = {"max_size": None}
    if args.token:
        kwargs["additional_headers"] = {"Authorization": f"Bearer {args.token}"}
    if args.url.startswith("wss://") and args.cafile:
        kwargs["ssl"] = ssl.create_default_context(cafile=args.cafile)
    return kwargs


def with_query(url: str, **params) -> str:
    """``url`` with query parameters added (values that are None are left out)."""
    from urllib.parse import urlencode

    params = {k: v for k, v in params.items() if v is not None}
    if not params:
        return url
    return url + ("&" if "?" in url else "?") + urlencode(params)


async def sherpa_results(ws) -> AsyncIterator[dict]:
    """The results a sherpa-onnx-protocol server sends, until ``Done!``; an error message
    ends the program with its reason."""
    import json

    async for message in ws:
        if message == "Done!":
            return
        r = json.loads(message)
        if "error" in r:
            raise SystemExit(f"\nserver: {r['error']} ({r['kind']})")
        yield r


def read_file(path: str, dtype: str = "float32") -> tuple[np.ndarray, int]:
    """(samples (frames x channels) as ``dtype``, rate) of any file soundfile reads; int16
    keeps 16-bit files' samples exactly."""
    import soundfile as sf

    audio, rate = sf.read(path, dtype=dtype, always_2d=True)
    return audio, rate


async def file_pieces(audio: np.ndarray, rate: int, seconds: float, realtime: bool
                      ) -> AsyncIterator[np.ndarray]:
    """Blocks of ``seconds`` (frames x channels), paced like live audio when ``realtime``."""
    size = max(1, int(seconds * rate))
    start = time.monotonic()
    for n, i in enumerate(range(0, len(audio), size)):
        if realtime:
            await asyncio.sleep(max(0.0, start + n * seconds - time.monotonic()))
        yield audio[i:i + size]


async def microphone(rate: int, seconds: float, device=None) -> AsyncIterator[np.ndarray]:
    """Blocks of ``seconds`` of mono float32 from the microphone, until cancelled."""
    import sounddevice as sd

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def callback(block, frames, when, status):
        loop.call_soon_threadsafe(queue.put_nowait, block.copy())

    with sd.InputStream(samplerate=rate, channels=1, dtype="float32", device=device,
                        blocksize=int(seconds * rate), callback=callback):
        while True:
            yield await queue.get()
