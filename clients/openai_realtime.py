#!/usr/bin/env python3
"""Transcribe an audio file with the ``openai`` package's realtime client (``pip install
openai``) through streamdec's ``/v1/realtime?intent=transcription``: the SDK's code as
OpenAI documents a transcription session, with only the base URL and the key changed (the
key is one of the server's tokens, or anything when the server has none).

    python clients/openai_realtime.py call.wav                  # http://127.0.0.1:6006/v1
    python clients/openai_realtime.py call.wav --url http://10.0.0.5:6006/v1 --key TOKEN

Sends the file as pcm16 at 24 kHz with turn detection off, commits it, and prints the
transcript of the one item that makes (``completed``).
"""

from __future__ import annotations

import argparse
import base64

import numpy as np
import soundfile as sf
import soxr
from openai import OpenAI


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--url", default="http://127.0.0.1:6006/v1", help="the server's base URL")
    p.add_argument("--key", default="streamdec", help="a server token (OpenAI's API key)")
    args = p.parse_args()
    audio, rate = sf.read(args.file, dtype="float32", always_2d=True)
    audio = soxr.resample(audio.mean(axis=1), rate, 24000)  # pcm16 is 24 kHz mono
    pcm = np.clip(np.round(audio * 32767), -32768, 32767).astype("<i2").tobytes()

    client = OpenAI(api_key=args.key, base_url=args.url)  # the one change: where
    with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
            "turn_detection": None}}})
        for start in range(0, len(pcm), 4800):  # 100 ms events
            conn.input_audio_buffer.append(audio=base64.b64encode(
                pcm[start:start + 4800]).decode())
        conn.input_audio_buffer.commit()
        for event in conn:
            if event.type == "error":
                raise SystemExit(f"server: {event.error.message}")
            if event.type == "conversation.item.input_audio_transcription.completed":
                print(event.transcript, flush=True)
                break


if __name__ == "__main__":
    main()
