#!/usr/bin/env python3
"""Transcribe a file with a streamdec server's OpenAI-compatible endpoint (standard library
only).

    python clients/transcribe_http.py talk.wav                          # plain text
    python clients/transcribe_http.py talk.wav --format srt > talk.srt  # also vtt, json,
                                                                        # verbose_json
    python clients/transcribe_http.py a.wav --url https://host:6006 --token T --cafile c.pem

The same request works with the ``openai`` package:
``OpenAI(base_url="http://127.0.0.1:6006/v1", api_key="T").audio.transcriptions.create(
model="streamdec", file=open("talk.wav", "rb"))``.
"""

from __future__ import annotations

import argparse
import ssl
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path


def multipart(fields: dict[str, str], file: Path) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
             .encode() for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                 f'filename="{file.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                 .encode() + file.read_bytes() + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", type=Path)
    p.add_argument("--format", default="text",
                   choices=("json", "text", "srt", "vtt", "verbose_json"))
    p.add_argument("--url", default="http://127.0.0.1:6006", help="server base URL")
    p.add_argument("--token", help="bearer token, when the server asks for one")
    p.add_argument("--cafile", help="CA or self-signed certificate to trust for https://")
    args = p.parse_args()
    body, content_type = multipart({"model": "streamdec", "response_format": args.format},
                                   args.file)
    request = urllib.request.Request(args.url.rstrip("/") + "/v1/audio/transcriptions",
                                     data=body, headers={"Content-Type": content_type})
    if args.token:
        request.add_header("Authorization", f"Bearer {args.token}")
    context = ssl.create_default_context(cafile=args.cafile) if args.cafile else None
    try:
        with urllib.request.urlopen(request, context=context) as r:
            sys.stdout.write(r.read().decode())
    except urllib.error.HTTPError as e:
        print(f"server: HTTP {e.code}: {e.read().decode()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
