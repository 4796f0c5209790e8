"""The captioning page's picture in the docs is the one the page's test makes
(``bench/captions/screenshot.py``): tagged by that test, at its viewport, showing finals
formatted for people (cased and punctuated, as the page shows them), and README and the
captions page show that file."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.captions.screenshot import (MADE_BY, SCREENSHOT, UPDATE, VIEWPORT,  # noqa: E402
                                       png_info, save, tagged, target)


def test_the_docs_picture_is_the_one_the_page_test_makes():
    width, height, tags = png_info(SCREENSHOT.read_bytes())
    assert (width, height) == (VIEWPORT["width"], VIEWPORT["height"])
    assert tags.get("made-by") == MADE_BY, "docs/captioning-page.png was not made by the " \
        "page's test: run tests/test_web.py::test_page_captions_the_microphone_as_" \
        f"transcribe_does with {UPDATE}=1"
    finals = json.loads(tags["finals"])
    assert finals and all(re.search(r"[a-z]", f) and re.search(r"[.?!]$", f) for f in finals)


@pytest.mark.parametrize("page", ["README.md", "docs/captions.md"])
def test_the_docs_show_it(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    assert re.search(r"!\[[^\]]+\]\((docs/)?captioning-page\.png\)", text)


def test_save_writes_only_when_the_finals_differ(tmp_path):
    png = tagged(SCREENSHOT.read_bytes(), {})  # (its own tags come first: replaced below)
    path = tmp_path / "page.png"
    assert save(png, ["[00:01.00 - 00:02.00] Hello."], path)
    first = path.read_bytes()
    assert not save(png + b"", ["[00:01.00 - 00:02.00] Hello."], path)
    assert path.read_bytes() == first
    assert save(png, ["[00:01.00 - 00:02.00] Hello.", "[00:03.00 - 00:04.00] Bye."], path)
    assert json.loads(png_info(path.read_bytes())[2]["finals"])[-1].endswith("Bye.")


def test_the_page_test_writes_the_docs_picture_only_when_asked(tmp_path):
    elsewhere = tmp_path / "page.png"
    assert target(elsewhere, {}) == elsewhere
    assert target(elsewhere, {UPDATE: "0"}) == elsewhere
    assert target(elsewhere, {UPDATE: "1"}) == SCREENSHOT
