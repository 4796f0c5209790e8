"""Twilio's own authentication on ``/twilio``: Twilio cannot send a bearer token, it signs
its handshake (``X-Twilio-Signature``: base64 HMAC-SHA1 of the stream URL with the account's
auth token). The signature is checked against the Twilio SDK's computation, then a real
``streamdec serve`` admits a call signed as Twilio signs it, refuses unsigned or wrongly
signed ones with 403, and keeps the other routes behind their bearer tokens."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import pytest
import websockets
from twilio.request_validator import RequestValidator

from server_utils import ServerProcess
from streamdec.errors import ConfigError
from streamdec.server.access import Access, TwilioAuth, read_secret, twilio_signature
from streamdec.server.config import ServerConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
import twilio_replay  # noqa: E402

AUTH_TOKEN = "12345678901234567890123456789012"
BEARER = "bearer-secret"
HELLO = Path(__file__).resolve().parents[1] / "examples" / "hello.wav"


@pytest.mark.parametrize("url", ["wss://asr.example.com/twilio",
                                 "wss://asr.example.com:8443/twilio",
                                 "ws://127.0.0.1:6006/twilio?tenant=a%20b&x=1",
                                 "wss://x.example/calls/twilio/stream"])
def test_the_signature_is_twilios(url):
    assert twilio_signature(AUTH_TOKEN, url) == RequestValidator(AUTH_TOKEN).compute_signature(url, {})
    assert RequestValidator(AUTH_TOKEN).validate(url, {}, twilio_signature(AUTH_TOKEN, url))


def headers(url: str, token: str = AUTH_TOKEN, host: str = "asr.example.com") -> dict:
    return {"host": host, "x-twilio-signature": twilio_signature(token, url)}


def test_access_admits_a_signed_handshake_only():
    access = Access(frozenset({BEARER}), 10, twilio=TwilioAuth(AUTH_TOKEN))
    ok = access.check_twilio(headers("wss://asr.example.com/twilio"), {}, "/twilio", "")
    assert ok is None
    for bad in (headers("wss://asr.example.com/twilio", token="other"),  # wrong auth token
                headers("wss://asr.example.com/elsewhere"),             # another URL signed
                {"host": "asr.example.com"}):                           # no signature
        refusal = access.check_twilio(bad, {}, "/twilio", "")
        assert refusal.status == 403 and "X-Twilio-Signature" in refusal.reason
        assert "wss://asr.example.com/twilio" in refusal.reason
    # a bearer token still admits (test clients); the query string is part of what is signed
    assert access.check_twilio({"host": "h", "authorization": f"Bearer {BEARER}"}, {},
                               "/twilio", "") is None
    assert access.check_twilio(headers("wss://asr.example.com/twilio?a=1"), {"a": "1"},
                               "/twilio", "a=1") is None
    # the other routes are not opened by a Twilio signature
    assert access.check(headers("wss://asr.example.com/"), {}).status == 401


def test_behind_a_proxy_the_configured_url_is_the_one_signed():
    access = Access(None, 10, twilio=TwilioAuth(AUTH_TOKEN, "wss://public.example/twilio"))
    signed = headers("wss://public.example/twilio", host="10.0.0.5:6006")
    assert access.check_twilio(signed, {}, "/internal", "") is None
    assert access.check_twilio(headers("wss://10.0.0.5:6006/internal", host="10.0.0.5:6006"),
                               {}, "/internal", "").status == 403


def test_without_a_twilio_token_tokens_refuse_twilio_saying_why():
    refusal = Access(frozenset({BEARER}), 10).check_twilio({"host": "h"}, {}, "/twilio", "")
    assert refusal.status == 401 and "twilio_auth_token_file" in refusal.reason
    assert Access(None, 10).check_twilio({"host": "h"}, {}, "/twilio", "") is None  # open server


def test_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="needs server.twilio_auth_token_file"):
        ServerConfig(twilio_stream_url="wss://a.example/twilio")
    with pytest.raises(ConfigError, match="must be a wss:// URL"):
        ServerConfig(twilio_auth_token_file="f", twilio_stream_url="https://a.example/twilio")
    for text, count in (("", 0), ("# comment\n\n", 0), ("a\nb\n", 2)):
        (tmp_path / "t").write_text(text)
        with pytest.raises(ConfigError, match=f"holds {count} secrets, not one"):
            read_secret(tmp_path / "t", "server.twilio_auth_token_file")
    (tmp_path / "t").write_text("# Twilio\n  secret  \n")
    assert read_secret(tmp_path / "t", "x") == "secret"
    with pytest.raises(ConfigError, match="server.twilio_auth_token_file .*missing"):
        read_secret(tmp_path / "missing", "server.twilio_auth_token_file")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("twilio-auth")
    (d / "twilio").write_text(AUTH_TOKEN + "\n")
    (d / "tokens").write_text(BEARER + "\n")
    s = ServerProcess("--twilio-auth-token-file", str(d / "twilio"), "--token-file", str(d / "tokens"))
    yield s, d
    assert s.stop() == 0


def replay(server, folder, **extra):
    args = argparse.Namespace(file=str(HELLO), url=server.url("/twilio"), token=BEARER,
                              cafile=None, realtime=False, json=True, partials=False,
                              call_id=None, frame_ms=20, dtmf=[], no_subscribe=False, param=[],
                              **extra)
    return asyncio.run(twilio_replay.main(args))


def test_a_call_signed_as_twilio_signs_it_is_transcribed(server):
    s, folder = server
    (folder / "wrong").write_text("not-the-auth-token\n")
    messages = replay(s, folder, twilio_auth_token_file=str(folder / "twilio"))
    finals = [m["text"] for m in messages if m.get("type") == "result" and m["is_final"] and m["text"]]
    assert finals and "FIVE THIRTY" in finals[-1]
    with pytest.raises(websockets.InvalidStatus) as refused:
        replay(s, folder, twilio_auth_token_file=str(folder / "wrong"))
    assert refused.value.response.status_code == 403


def test_unsigned_handshakes_are_refused_and_other_routes_keep_their_tokens(server):
    s, folder = server

    async def status(path, extra_headers):
        try:
            async with websockets.connect(s.url(path), additional_headers=extra_headers):
                return 101
        except websockets.InvalidStatus as e:
            return e.response.status_code

    signed = {"X-Twilio-Signature": twilio_signature(AUTH_TOKEN, s.url("/twilio"))}
    assert asyncio.run(status("/twilio", {})) == 403
    assert asyncio.run(status("/twilio", {"Authorization": "Bearer wrong"})) == 403
    assert asyncio.run(status("/twilio", signed)) == 101
    # the Twilio signature opens /twilio alone
    assert asyncio.run(status("/", {"X-Twilio-Signature": twilio_signature(AUTH_TOKEN, s.url("/"))})) == 401
    assert asyncio.run(status("/audiofork", signed)) == 401
