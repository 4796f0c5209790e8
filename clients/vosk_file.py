#!/usr/bin/env python3
"""Stream an audio file to a Vosk-protocol server (streamdec's /vosk or --vosk-port, or a
Vosk server), one reply per message, as Vosk's own clients do.

    python clients/vosk_file.py call.wav                       # ws://127.0.0.1:6006/vosk
    python clients/vosk_file.py call.wav --url ws://127.0.0.1:2700/
    python clients/vosk_file.py call.wav --alternatives 3 --url "ws://127.0.0.1:6006/vosk?search=modified_beam"

Sends the config message (the file's rate, words on), then int16 PCM in ``--seconds``
messages, then ``{"eof" : 1}``; prints each final text with its word times.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import websockets

from common import add_connection_args, connect_kwargs, file_pieces, read_file


def show(reply: dict) -> None:
    if "error" in reply:
        raise SystemExit(f"server: {reply['error']} ({reply['kind']})")
    if reply.get("text"):
        words = " ".join(f"{w['word']}@{w['start']:.2f}" for w in reply.get("result", []))
        print(reply["text"] + (f"    [{words}]" if words else ""), flush=True)
    for n, alt in enumerate(reply.get("alternatives", [])):
        print(f"  {n + 1}. {alt['text']}  ({alt['confidence']:.2f})", flush=True)


async def main(args: argparse.Namespace) -> None:
    audio, rate = read_file(args.file, dtype="int16")
    pcm = audio[:, 0] if audio.shape[1] == 1 else audio.mean(axis=1).round().astype("<i2")
    async with websockets.connect(args.url, **connect_kwargs(args)) as ws:
        await ws.send(json.dumps({"config": {"sample_rate": rate, "words": 1,
                                             "max_alternatives": args.alternatives}}))
        async for block in file_pieces(pcm, rate, args.seconds, args.realtime):
            await ws.send(block.tobytes())
            show(json.loads(await ws.recv()))
        await ws.send('{"eof" : 1}')
        show(json.loads(await ws.recv()))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--seconds", type=float, default=0.2, help="audio per message")
    p.add_argument("--realtime", action="store_true", help="pace the audio like live audio")
    p.add_argument("--alternatives", type=int, default=0,
                   help="n-best alternatives per final (needs a beam search)")
    add_connection_args(p, "ws://127.0.0.1:6006/vosk")
    asyncio.run(main(p.parse_args()))
