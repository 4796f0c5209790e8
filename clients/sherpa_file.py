#!/usr/bin/env python3
"""Stream an audio file to a streamdec (or sherpa-onnx) server, sherpa-onnx protocol.

    python clients/sherpa_file.py call.wav                          # ws://127.0.0.1:6006/
    python clients/sherpa_file.py call.wav --realtime               # paced like live audio
    python clients/sherpa_file.py stereo-call.wav --channels 2      # one transcript per side
    python clients/sherpa_file.py a.wav --url wss://host:6006/ --token T --cafile cert.pem

Sends float32 samples at the file's own rate (``?sample_rate=``: a streamdec option;
sherpa-onnx's own server expects 16 kHz), then ``Done``; prints each final result (and,
with ``--partials``, each partial) until ``Done!``.
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np
import websockets

from common import (add_connection_args, connect_kwargs, file_pieces, read_file, sherpa_results,
                    with_query)


async def main(args: argparse.Namespace) -> None:
    audio, rate = read_file(args.file)
    channels = args.channels
    if channels == 1:
        audio = audio.mean(axis=1, keepdims=True)
    elif audio.shape[1] != channels:
        raise SystemExit(f"{args.file} has {audio.shape[1]} channel(s), not {channels}")
    url = with_query(args.url, sample_rate=rate, channels=channels if channels > 1 else None,
                     search=args.search)
    async with websockets.connect(url, **connect_kwargs(args)) as ws:
        async def send():
            async for block in file_pieces(audio, rate, args.seconds, args.realtime):
                await ws.send(np.ascontiguousarray(block, dtype="<f4").tobytes())
            await ws.send("Done")

        sender = asyncio.ensure_future(send())
        async for r in sherpa_results(ws):
            tag = f"[{r['channel']}] " if "channel" in r else ""
            if r["is_final"] and r["text"]:
                print(f"{tag}{r['start_time']:8.2f}  {r['text']}", flush=True)
            elif args.partials and not r["is_final"]:
                print(f"{tag}   ...    {r['text']}", flush=True)
        await sender


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--channels", type=int, default=1, choices=(1, 2),
                   help="2: send both channels of a stereo call (default: mix to mono)")
    p.add_argument("--search", help="search method for this stream (e.g. modified_beam)")
    p.add_argument("--seconds", type=float, default=0.1, help="audio per message")
    p.add_argument("--realtime", action="store_true", help="pace the audio like live audio")
    p.add_argument("--partials", action="store_true", help="print partial results too")
    add_connection_args(p, "ws://127.0.0.1:6006/")
    asyncio.run(main(p.parse_args()))
