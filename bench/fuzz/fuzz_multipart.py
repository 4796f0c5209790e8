"""Fuzz target: the OpenAI-style upload (``POST /v1/audio/transcriptions``): the request
body, parsed as the endpoint parses it (Starlette's multipart form with its limits, a
fixed boundary ``BOUNDARY``), then its checks (``transcription.read_form``) and the
uploaded file read as audio (``read_upload``: any format soundfile reads). A form
Starlette cannot parse is the endpoint's 400 (it refuses whatever the parser raises);
after it, the only error is UploadError. Invariants: an upload read is mono float32
samples, at least one, at a positive rate."""

from __future__ import annotations

import asyncio
import logging

from harness import fuzz, instrumented

with instrumented("multipart", "starlette.formparsers"):
    from starlette.requests import Request

    from streamdec.core.endpoint import EndpointConfig
    from streamdec.errors import UploadError
    from streamdec.server.config import ServerConfig
    from streamdec.server.endpointing import EndpointLimits
    from streamdec.server.transcription import read_form, read_upload

BOUNDARY = "streamdec-fuzz-boundary"
MAX_SECONDS = ServerConfig().max_stream_seconds  # the endpoint's limit of an upload's audio
# python-multipart logs each malformed part it skips (the endpoint's logs are the server's)
for _name in ("python_multipart", "multipart"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)
CONTENT_TYPE = f"multipart/form-data; boundary={BOUNDARY}"


async def parsed_form(body: bytes, content_type: str = CONTENT_TYPE):
    """``body`` parsed as the endpoint parses a request's (``request.form`` with its
    limits); None where the endpoint answers 400 for a body it cannot parse."""
    sent = False

    async def receive():
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {"type": "http", "method": "POST", "path": "/v1/audio/transcriptions",
             "headers": [(b"content-type", content_type.encode()),
                         (b"content-length", str(len(body)).encode())]}
    try:
        return await Request(scope, receive).form(max_files=1, max_fields=16)
    except Exception:  # the endpoint's 400: "expected a multipart/form-data body"
        return None


async def _request(body: bytes):
    """The uploaded file's bytes of a request the endpoint takes (None: a 400 for its
    form); UploadError for what read_form refuses."""
    form = await parsed_form(body)
    if form is None:
        return None
    try:
        upload, *_ = read_form(form, EndpointConfig(), EndpointLimits(), "full")
        return await upload.read()
    finally:
        await form.close()


def TestOneInput(data: bytes) -> None:
    try:
        audio = asyncio.run(_request(data))
        if audio is None:
            return
        rate, samples = read_upload(audio, MAX_SECONDS)
    except UploadError:
        return
    assert rate > 0 and samples.ndim == 1 and samples.size > 0
    assert samples.dtype.name == "float32"


if __name__ == "__main__":
    fuzz(TestOneInput)
