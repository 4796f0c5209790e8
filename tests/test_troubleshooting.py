"""docs/troubleshooting.md quotes the messages streamdec really prints: each quote of the
page (``QUOTES``, listed by hand: the left side as the page shows it, with a user's names
and numbers) has its fixed parts in the package's source, so a reworded message fails
here until the page follows it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamdec.errors import CLOSE_CODES

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "troubleshooting.md"
# the package's source with implicitly joined string literals joined ("a "\n  f"b" -> "a b")
SOURCE = re.sub(r'"\s*\n\s*f?"', "", "\n".join(
    p.read_text(encoding="utf-8") for p in sorted((ROOT / "streamdec").rglob("*.py"))))

# (as the page quotes it, the literal parts of the source that make it)
QUOTES = [
    ("serve needs the server extra", ["serve needs the server extra"]),
    ("inverse text normalisation (text_format full) needs the wetextprocessing package",
     ["inverse text normalisation (text_format full) needs the wetextprocessing package"]),
    ("cannot listen on 127.0.0.1:6006: Address already in use", ["cannot listen on {host}:{port}"]),
    ("model directory not found", [": model directory not found\""]),
    ("audio file not found", [": audio file not found\""]),
    ("not a readable audio file (Format not recognised)", [": not a readable audio file "]),
    ("file is not a readable audio file", ["file is not a readable audio file ("]),
    ("its header promises 7.86 s of audio but it holds 4.69 s; transcribed what is there",
     ["its header promises {declared / self.rate:.2f} s of audio but it holds "
      "{self.seconds_read:.2f} s; transcribed what is there\""]),
    ("no input device found: connect a microphone, or check that the sound server\n"
     "(PulseAudio, PipeWire) is running",
     ["no input device found: connect a microphone, or check that the sound server "
      "(PulseAudio, PipeWire) is running"]),
    ("capturing audio needs the PortAudio library",
     ["capturing audio needs the PortAudio library"]),
    ("capturing audio needs the sounddevice package",
     ["capturing audio needs the sounddevice package"]),
    ("is busy or unavailable: another program may be using it",
     ["is busy or unavailable: another program may be using it\""]),
    ("missing or invalid bearer token", ["missing or invalid bearer token"]),
    ("server is at its limit of 200 connections",
     ["server is at its limit of {self.max_connections} connections"]),
    ("server is behind its audio", ["server is behind its audio"]),
    ("server is shutting down", ["\"server is shutting down\""]),
    ("sample_rate must be in [8000, 96000], got 100",
     ["{name} must be in [{low}, {high}], got {value}", "MIN_RATE, MAX_RATE = 8000, 96000"]),
    ("samples contain NaN or infinity", ["\"samples contain NaN or infinity\""]),
    ("1001 bytes is not a whole number of f32le samples (4 bytes each)",
     ["bytes is not a whole number of {encoding} samples\"", "f\" ({size} bytes each)\""]),
    ("no message for 60 s", ["no message for {self.limits.idle_timeout_seconds:g} s\""]),
    ("stream is over the limit of 14400 s of audio",
     ["stream is over the limit of {limits.max_stream_seconds:g} s of audio\""]),
    ("message of 2000000 bytes is over the limit of 1048576 bytes",
     ["message of {len(data)} bytes is over the limit of {limits.max_message_bytes} bytes\""]),
]
# the defaults the quoted numbers come from (idle 60 s, 4 h of audio, 1 MiB, 200 connections)
DEFAULTS = ["idle_timeout_seconds: float = 60.0", "max_stream_seconds: float = 4 * 3600.0",
            "max_message_bytes: int = 1 << 20", "max_connections: int = 200"]
# the close codes the page's table gives, by kind
CODES = {"bad_audio": 1007, "bad_message": 1003, "idle_timeout": 1008, "too_long": 1008,
         "too_big": 1009, "decode_failed": 1011}


def page_text() -> str:
    return PAGE.read_text(encoding="utf-8")


@pytest.mark.parametrize("quote,parts", QUOTES, ids=[q for q, _ in QUOTES])
def test_each_quoted_message_is_on_the_page_and_made_by_the_code(quote, parts):
    assert quote in page_text(), f"the page no longer quotes {quote!r}"
    for part in parts:
        assert part in SOURCE, f"{quote!r}: the code no longer says {part!r}"


def test_the_quoted_numbers_are_the_defaults():
    config = (ROOT / "streamdec" / "server" / "config.py").read_text(encoding="utf-8")
    assert all(d in config for d in DEFAULTS), [d for d in DEFAULTS if d not in config]
    assert 4 * 3600 == 14400 and 1 << 20 == 1048576


def test_the_close_codes_on_the_page_are_the_servers():
    text = page_text()
    for kind, code in CODES.items():
        assert CLOSE_CODES[kind] == code, kind
        assert f"| {code} | `{kind}` |" in text, kind
