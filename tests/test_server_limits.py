"""Limits and protection of ``streamdec serve``: one server with TLS (a self-signed
certificate made here), bearer tokens and tight limits, configured through a config
file's ``[server]`` table, a ``STREAMDEC_*`` variable and a flag."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
import time

import numpy as np
import pytest
import websockets

from server_utils import (ServerProcess, UNIT, get, messages_until_closed, run, sherpa_client,
                          sherpa_text)
from streamdec import Recognizer
from streamdec.files.transcribe import transcribe_files
from test_builtin_transcribe import speak

TOKEN = "s3cret-token"
MAX_MESSAGE = 64000


def self_signed(folder):
    """A certificate for 127.0.0.1 / localhost and its key, PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "streamdec test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(d)
    context = ssl.create_default_context(cafile=str(cert))
    return cert, key, context


@pytest.fixture(scope="module")
def server(tmp_path_factory, tls):
    d = tmp_path_factory.mktemp("limits")
    (d / "tokens").write_text(f"# clients\n{TOKEN}\nother-token\n")
    cert, key, _ = tls
    (d / "server.toml").write_text(
        "[server]\n"
        f'token_file = "{d / "tokens"}"\n'
        f'tls_cert = "{cert}"\n'
        f'tls_key = "{key}"\n'
        "max_connections = 50\n"  # the environment variable below wins
        f"max_message_bytes = {MAX_MESSAGE}\n"
        "max_stream_seconds = 2.5\n"
        "idle_timeout_seconds = 30.0\n")  # the flag below wins
    s = ServerProcess("--config", str(d / "server.toml"), "--idle-timeout", str(1.0 * UNIT),
                      env={"STREAMDEC_MAX_CONNECTIONS": "2"})
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """A short utterance (under the 2.5 s limit) and its file-API transcript."""
    path = tmp_path_factory.mktemp("speech") / "a.wav"
    audio = speak("hello there", path)
    assert len(audio) < 2.0 * 16000
    text = " ".join(f.text for f in next(transcribe_files(Recognizer(), [path])).finals
                    if f.text)
    return audio, text


def authorized(url: str) -> str:
    return url + ("&" if "?" in url else "?") + f"token={TOKEN}"


def test_wss_with_a_token_in_the_header_or_the_query(server, tls, speech):
    assert server.scheme == "https"
    audio, text = speech
    context = tls[2]
    out = run(sherpa_client(server.url("/"), audio, 1600, ssl=context,
                            additional_headers={"Authorization": f"Bearer {TOKEN}"}))
    assert out["done"] and sherpa_text(out["results"]) == text
    out = run(sherpa_client(authorized(server.url("/sherpa")), audio, 1600, ssl=context))
    assert out["done"] and sherpa_text(out["results"]) == text
    status, body = get(server.http("/health"), context=tls[2])
    assert status == 200 and json.loads(body)["status"] == "ok"


@pytest.mark.parametrize("how", ["no token", "wrong token", "wrong scheme"])
def test_missing_or_wrong_token_is_refused(server, tls, how):
    headers = {"no token": {}, "wrong token": {"Authorization": "Bearer nope"},
               "wrong scheme": {"Authorization": f"Basic {TOKEN}"}}[how]

    async def main():
        await websockets.connect(server.url("/"), ssl=tls[2], additional_headers=headers)

    with pytest.raises(websockets.InvalidStatus) as e:
        run(main())
    assert e.value.response.status_code == 401
    assert b"bearer token" in e.value.response.body


def test_connection_cap_answers_503_and_the_admitted_go_on(server, tls, speech):
    audio, text = speech
    context = tls[2]

    async def main():
        first = await websockets.connect(authorized(server.url("/")), ssl=context)
        second = await websockets.connect(authorized(server.url("/vosk")), ssl=context)
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(authorized(server.url("/")), ssl=context)
        await first.send(audio.tobytes())
        await first.send("Done")
        results = [json.loads(m) async for m in first if m != "Done!"]
        await second.close()
        return refused.value.response, results

    response, results = run(main())
    assert response.status_code == 503
    assert b"limit of 2 connections" in response.body
    assert sherpa_text(results) == text


def test_oversized_messages_are_refused(server, tls):
    async def send(size):
        async with websockets.connect(authorized(server.url("/")), ssl=tls[2],
                                      max_size=None) as ws:
            await ws.send(b"\0" * size)
            replies = await messages_until_closed(ws)
        return replies, ws.close_code

    replies, code = run(send(MAX_MESSAGE + 4))
    assert code == 1009 and replies[-1]["kind"] == "too_big"
    assert f"limit of {MAX_MESSAGE} bytes" in replies[-1]["error"]
    # far past the limit, the WebSocket layer refuses the frame before reading it
    replies, code = run(send(4 * MAX_MESSAGE + 4))
    assert code == 1009 and replies == []


def test_an_idle_client_is_closed(server, tls):
    async def main():
        async with websockets.connect(authorized(server.url("/")), ssl=tls[2]) as ws:
            t0 = time.monotonic()
            messages = await messages_until_closed(ws)
        return messages, time.monotonic() - t0, ws.close_code

    messages, waited, code = run(main())
    assert messages[-1]["kind"] == "idle_timeout" and "no message for" in messages[-1]["error"]
    assert code == 1008
    assert waited >= 0.9 * UNIT
    assert [m["is_eof"] for m in messages[:-1]] == [True]  # its (empty) last result first


def test_a_stream_past_its_length_gets_its_results_then_an_error(server, tls, speech):
    audio, _ = speech
    gap = np.zeros(8000, np.float32)
    long = np.concatenate([audio, gap, audio, gap, audio, gap])
    assert len(long) > 2.5 * 16000

    async def main():
        async with websockets.connect(authorized(server.url("/")), ssl=tls[2]) as ws:
            reader = asyncio.ensure_future(messages_until_closed(ws))
            try:
                for i in range(0, len(long), 1600):
                    await ws.send(long[i:i + 1600].tobytes())
                await ws.send("Done")
            except websockets.ConnectionClosed:  # the server closed it past the limit
                pass
            results = await asyncio.wait_for(reader, 30 * UNIT)
        return results, ws.close_code

    results, code = run(main())
    assert code == 1008
    assert results[-1]["kind"] == "too_long"
    finals = [r for r in results[:-1] if r.get("is_final")]
    assert finals and finals[-1]["is_eof"]  # the audio before the limit was decoded
