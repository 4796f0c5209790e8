#!/usr/bin/env python3
"""Stream an audio file with LiveKit Agents' Deepgram plugin (``pip install
livekit-plugins-deepgram``) to streamdec's ``/v1/listen``, outside a LiveKit room: the
plugin's ``STT.stream()`` as an agent uses it, with the base URL and the key changed (the
key is one of the server's tokens, or anything when the server has none) and two of the
plugin's defaults set (``filler_words``, ``endpointing_ms``: see docs/deepgram.md).

    python clients/livekit_deepgram.py call.wav                 # http://127.0.0.1:6006
    python clients/livekit_deepgram.py call.wav --url http://10.0.0.5:6006 --key TOKEN

Prints each final transcript with its word times.
"""

from __future__ import annotations

import argparse
import asyncio

import aiohttp
import numpy as np
import soundfile as sf
from livekit import rtc
from livekit.agents import stt
from livekit.plugins import deepgram


#: the plugin's options set here besides the URL and the key
OPTIONS = {
    "filler_words": False,  # its default, true, asks for Deepgram's fillers: refused here
    "endpointing_ms": 1200,  # the server's rule for silence after speech (its default: 25)
}


async def transcribe(pcm: np.ndarray, rate: int, url: str, key: str,
                     **options) -> list[stt.SpeechEvent]:
    """Every event of the plugin's stream for ``pcm`` (int16 mono samples at ``rate`` Hz,
    pushed as 100 ms ``rtc.AudioFrame``s, then the end of input), in order. ``options``:
    the plugin's, over ``OPTIONS``."""
    async with aiohttp.ClientSession() as http:
        engine = deepgram.STT(base_url=f"{url}/v1/listen", api_key=key, http_session=http,
                              **{**OPTIONS, **options})
        stream = engine.stream()
        step = rate // 10
        for start in range(0, len(pcm), step):
            piece = np.ascontiguousarray(pcm[start:start + step], dtype="<i2")
            stream.push_frame(rtc.AudioFrame(piece.tobytes(), rate, 1, len(piece)))
        stream.end_input()  # Finalize, then CloseStream
        events = [event async for event in stream]
        await stream.aclose()
    return events


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--url", default="http://127.0.0.1:6006", help="the server's base URL")
    p.add_argument("--key", default="streamdec", help="a server token (Deepgram's API key)")
    args = p.parse_args()
    audio, rate = sf.read(args.file, dtype="int16", always_2d=True)
    pcm = audio.mean(axis=1).round().astype("<i2")
    for event in asyncio.run(transcribe(pcm, rate, args.url, args.key)):
        if event.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
            speech = event.alternatives[0]
            words = " ".join(f"{w}@{w.start_time:.2f}" for w in speech.words or [])
            print(f"{speech.text}    [{words}]", flush=True)


if __name__ == "__main__":
    main()
