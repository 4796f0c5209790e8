"""The captioning page's picture in the docs (``docs/captioning-page.png``, shown by README
and docs/captions.md), made by the test that drives the page in Chromium
(tests/test_web.py), so that it shows what the page shows today.

The PNG carries ``tEXt`` chunks that say which test made it and the finals the page
showed. The test writes the docs' file only when asked (``STREAMDEC_UPDATE_DOCS_PICTURE=1``
in its environment: the captions' times move a little from run to run through the
browser's audio path, so an ordinary run must not change the checkout); otherwise it
writes the picture beside its other outputs. ``save`` writes a new picture only when those
finals (or the picture's size) differ from the file's. tests/test_screenshot.py checks the
committed file against these tags.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

__all__ = ["SCREENSHOT", "MADE_BY", "VIEWPORT", "UPDATE", "tagged", "png_info", "save",
           "target"]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "captioning-page.png"
MADE_BY = "tests/test_web.py::test_page_captions_the_microphone_as_transcribe_does"
VIEWPORT = {"width": 1000, "height": 640}  # CSS pixels, one device pixel each
UPDATE = "STREAMDEC_UPDATE_DOCS_PICTURE"  # set to 1: the page's test rewrites SCREENSHOT

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(
        ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """(kind, whole chunk) of each chunk of a PNG file's bytes, in order."""
    if not png.startswith(_SIGNATURE) or png[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    out, at = [], len(_SIGNATURE)
    while at < len(png):
        size, kind = struct.unpack(">I4s", png[at:at + 8])
        out.append((kind, png[at:at + 12 + size]))
        at += 12 + size
    return out


def tagged(png: bytes, tags: dict[str, str]) -> bytes:
    """``png`` with a ``tEXt`` chunk per tag (Latin-1 keys and values) after its header, in
    place of the ``tEXt`` chunks it had."""
    chunks = [c for kind, c in _chunks(png) if kind != b"tEXt"]
    text = [_chunk(b"tEXt", k.encode("latin-1") + b"\0" + v.encode("latin-1"))
            for k, v in tags.items()]
    return _SIGNATURE + b"".join(chunks[:1] + text + chunks[1:])


def png_info(png: bytes) -> tuple[int, int, dict[str, str]]:
    """(width, height, tEXt tags) of a PNG file's bytes."""
    chunks = _chunks(png)
    width, height = struct.unpack(">II", png[16:24])
    tags = {}
    for kind, chunk in chunks:
        if kind == b"tEXt":
            key, _, value = chunk[8:-4].partition(b"\0")
            tags[key.decode("latin-1")] = value.decode("latin-1")
    return width, height, tags


def save(png: bytes, finals: list[str], path: Path = SCREENSHOT) -> bool:
    """Write ``png`` (a screenshot of the page showing ``finals``) to ``path`` tagged with
    ``MADE_BY`` and the finals, unless the file there already shows the same finals at the
    same size. Whether it wrote."""
    shown = json.dumps(finals, ensure_ascii=True)
    width, height, _ = png_info(png)
    if path.exists():
        old_width, old_height, old = png_info(path.read_bytes())
        if (old_width, old_height, old.get("made-by"), old.get("finals")) == (
                width, height, MADE_BY, shown):
            return False
    path.write_bytes(tagged(png, {"made-by": MADE_BY, "finals": shown}))
    return True


def target(elsewhere: Path, environ=os.environ) -> Path:
    """Where the page's test saves its picture: ``SCREENSHOT`` when ``UPDATE`` is 1 in
    ``environ``, else ``elsewhere`` (the checkout is left alone)."""
    return SCREENSHOT if environ.get(UPDATE) == "1" else elsewhere
