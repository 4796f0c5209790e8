"""The browser captioning page (``streamdec serve`` at ``/``) in a real browser.

Debian's Chromium, driven by Playwright (``bench/captions/caption_page.py``), against a real
``streamdec serve`` process on loopback; Chromium's fake capture device plays a known file
as the microphone.

Why the comparison with ``transcribe`` is exact and over the audio the page sent: the
built-in model's text depends on where speech falls on the 10 ms frame grid, and the page
starts sending at whatever point of the file the device has reached (it plays from when
the page opens the microphone, and loops). So the test records every sample the page sends
(``caption_page.TAP``) and checks two things: those samples are the file's, exactly (a
44.1 kHz mono 16-bit file reaches the page unresampled, and the floats map back to the
file's integers one for one; but for the few samples a busy machine's capture device may
drop or repeat), with nothing else but silence; and the page shows the very
finals, words and times that ``transcribe`` gives for those samples, and its SRT and TXT
downloads are what ``transcribe --format srt`` would write for them.

Also: the SRT rules of the page's script against ``streamdec.files.formats`` on the same results
(so the two cannot drift apart); the messages when the microphone is refused, the server is
full (503), unreachable or lost mid-session, or needs a token, and when a browser on
another machine opens the page over plain http; captioning over https from such a browser;
the page's size on a phone and a projector.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr
from websockets.sync.client import connect

from server_utils import REPO, UNIT, ServerProcess, get, wait_for_idle
from streamdec import Recognizer
from streamdec.cli.live_line import LiveLine
from streamdec.files.formats import subtitles
from streamdec.core.results import make_result
from streamdec.search.base import Hypothesis
from streamdec.server.sherpa import sherpa_message
from streamdec.textfmt import default_formatter
from streamdec.files.transcribe import transcribe_files
from test_builtin_transcribe import speak
from test_server_limits import self_signed

sys.path.insert(0, str(REPO))

from bench.captions import screenshot  # noqa: E402
from bench.captions.caption_page import (CAPTURE_RATE, OTHER_NAME, launch, open_page,  # noqa: E402
                          sent_audio, to_int16, wait_until_sent)
from playwright.sync_api import sync_playwright  # noqa: E402

LEAD_IN, PAUSE, TAIL = 1.0, 2.0, 3.0  # seconds of silence in the played file
MAX_CONNECTIONS = 1


@pytest.fixture(scope="module")
def server():
    s = ServerProcess("--max-connections", str(MAX_CONNECTIONS))
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> Path:
    """examples/hello.wav, a pause, an espeak-ng sentence: mono 16-bit at the capture rate,
    between LEAD_IN and TAIL seconds of silence."""
    folder = tmp_path_factory.mktemp("played")
    hello, rate = sf.read(str(REPO / "examples" / "hello.wav"), dtype="float32")
    sentence = speak("please call me back tomorrow morning", folder / "sentence.wav")

    def silence(seconds: float) -> np.ndarray:
        return np.zeros(int(seconds * CAPTURE_RATE), np.float32)

    audio = np.concatenate([silence(LEAD_IN), soxr.resample(hello, rate, CAPTURE_RATE),
                            silence(PAUSE), soxr.resample(sentence, 16000, CAPTURE_RATE),
                            silence(TAIL)])
    path = folder / "played-44k.wav"
    sf.write(str(path), audio, CAPTURE_RATE, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def playwright():
    with sync_playwright() as p:  # one per process: a second one cannot start inside it
        yield p


@pytest.fixture(scope="module")
def browser(playwright, played):
    b = launch(playwright, str(played))
    yield b
    b.close()


@pytest.fixture(scope="module")
def rec():
    return Recognizer()


#: Chromium's fake capture device can drop or repeat a few samples on a busy machine (seen
#: on a 2-core VM, with the code before and after a change that did not touch the page:
#: whole 10 ms buffers in the pause between the played file's utterances and within them,
#: and once a piece that was not a whole buffer). So the sent audio is checked block by
#: block: every BLOCK of it that is not silence must be a piece of the file, sample for
#: sample, found in the file's order, but for at most MAX_GLITCHES blocks that straddle such
#: a glitch; the pieces must cover the file's speech from its first sample to its last,
#: with no more than a few buffers of it missing anywhere.
BLOCK, MAX_GLITCHES = CAPTURE_RATE // 100, 6
KEY = 8  # samples: a block is looked up in the file by the KEY samples from its first non-zero one


def between_first_and_last_sound(x: np.ndarray) -> np.ndarray:
    nonzero = np.flatnonzero(x)
    return x[nonzero[0]:nonzero[-1] + 1]


def glitched_blocks(got: np.ndarray, want: np.ndarray) -> int:
    """How many non-silent ``BLOCK``s of ``got`` are not a piece of ``want``; each other
    block is one, sample for sample, no earlier in ``want`` than the block before it but
    for a repeated buffer, with at most ``3 * BLOCK`` of ``want``'s non-zero samples
    between two of them, the first at ``want``'s start, the last at its end
    (AssertionError otherwise)."""
    starts: dict[bytes, list[int]] = {}
    for k in np.flatnonzero(want[:len(want) - KEY + 1]):
        starts.setdefault(want[k:k + KEY].tobytes(), []).append(int(k))
    found, glitched, expected = [], 0, 0
    for s in range(0, len(got) - BLOCK + 1, BLOCK):
        block = got[s:s + BLOCK]
        nonzero = np.flatnonzero(block)
        if not len(nonzero) or nonzero[0] + KEY > BLOCK:
            continue
        first = int(nonzero[0])
        candidates = [expected] + [k - first for k in starts.get(block[first:first + KEY].tobytes(), [])]
        at = next((p for p in candidates
                   if 0 <= p <= len(want) - BLOCK and np.array_equal(want[p:p + BLOCK], block)), None)
        if at is None:
            glitched += 1
            continue
        if found:
            assert at >= found[-1] - 2 * BLOCK, (
                f"sent audio goes back in the file from sample {found[-1]} to {at}: not one "
                "stream of the file (did the played file restart?)")
            skipped = np.count_nonzero(want[found[-1] + BLOCK:at])
            assert skipped <= 3 * BLOCK, (
                f"{skipped} samples of the file's speech between its samples {found[-1]} and "
                f"{at} were not sent")
        found.append(at)
        expected = at + BLOCK
    assert found, "no piece of the sent audio is the file's"
    assert found[0] < MAX_GLITCHES * BLOCK, f"the file's first {found[0]} samples were not sent"
    assert len(want) - found[-1] - BLOCK < (MAX_GLITCHES + 1) * BLOCK, (
        f"the file's last {len(want) - found[-1] - BLOCK} samples were not sent")
    return glitched


def page_finals(page) -> list[str]:
    return page.locator("#finals li").all_inner_texts()


def shown_by_live_line(finals) -> list[str]:
    """How ``streamdec mic`` writes these finals off a terminal: ``[mm:ss.ss - mm:ss.ss]
    TEXT`` lines."""
    out = io.StringIO()
    line = LiveLine(out, times=True)
    for r in finals:
        line("", r)
    return out.getvalue().splitlines()


def download(page, button: str) -> str:
    with page.expect_download() as info:
        page.click(button)
    return Path(info.value.path()).read_text(encoding="utf-8")


@pytest.mark.slow
def test_page_captions_the_microphone_as_transcribe_does(server, browser, played, rec,
                                                          tmp_path):
    page = open_page(browser, server.http("/"), viewport=screenshot.VIEWPORT)
    errors = []
    page.on("pageerror", lambda e: errors.append(e))
    page.click("#toggle")
    page.wait_for_selector('#status[data-state="listening"]', timeout=20_000 * UNIT)
    file_audio, _ = sf.read(str(played), dtype="int16")
    # the docs' picture: while the second utterance is spoken (its partial under the first
    # final), saved below once everything the page showed is checked
    wait_until_sent(page, len(file_audio) - int((TAIL + 0.6) * CAPTURE_RATE),
                    timeout=60 * UNIT)
    page.wait_for_selector("#finals li", timeout=30_000 * UNIT)
    picture, pictured = page.screenshot(), page_finals(page)
    # the file's speech has been sent, and its trailing silence but its last second
    wait_until_sent(page, len(file_audio) - CAPTURE_RATE, timeout=60 * UNIT)
    page.click("#toggle")
    page.wait_for_selector('#status[data-state="stopped"]', timeout=30_000 * UNIT)
    assert page.inner_text("#message") == "" and errors == []
    page.screenshot(path=str(tmp_path / "captions.png"))

    # what the page sent is the file's audio, sample for sample, and silence
    sent = sent_audio(page)
    samples = to_int16(sent)
    assert np.abs(samples / np.where(sent > 0, 32767, 32768) - sent).max() < 1e-7
    speech, heard = between_first_and_last_sound(file_audio), between_first_and_last_sound(samples)
    # piece by piece in the file's order, silence after it (the loop did not restart)
    assert glitched_blocks(heard, speech) <= MAX_GLITCHES

    # the server was told the capture rate
    logged = server.connections_logged()[-1]
    assert logged["options"]["sample_rate"] == CAPTURE_RATE
    assert logged["close_code"] == 1000

    # on those samples, transcribe gives the page's finals, times, TXT and SRT
    path = tmp_path / "sent.wav"
    sf.write(str(path), sent, CAPTURE_RATE, subtype="FLOAT")
    item = next(transcribe_files(rec, [str(path)]))
    # the page asks for finals formatted for people (text_format full)
    formatted = [default_formatter().apply(r, "full") for r in item.finals]
    finals = [r for r in formatted if r.text]
    assert len(finals) == 2  # the two utterances
    assert page_finals(page) == shown_by_live_line(finals)
    assert page.inner_text("#partial") == ""
    assert download(page, "#download-txt") == "".join(r.display + "\n" for r in finals)
    assert download(page, "#download-srt") == subtitles(formatted, "srt")
    assert pictured == page_finals(page)[:len(pictured)] and pictured  # the first final
    # docs/captioning-page.png when asked (and the finals differ), else beside the test's
    # other outputs
    screenshot.save(picture, pictured, screenshot.target(tmp_path / "captioning-page.png"))


# -- the page's SRT rules against streamdec.files.formats ------------------------------------------
def spelled(rec, segment: int, segment_start: int, words, is_final=True):
    """A result of the built-in model's units spelling ``words``: (text, first frame, last
    frame) each, the word boundary and first letter at the first frame, the last letter at
    the last; frames are absolute encoder frames."""
    ids, frames = [], []
    table = rec.symbols.symbol_to_id
    for text, first, last in words:
        letters = [table[c] for c in text]
        ids += [table["\u2581"]] + letters
        spread = np.linspace(first, last, len(letters)).round().astype(int).tolist()
        frames += [first] + spread
    hyp = Hypothesis(context=(0, 0), tokens=tuple(ids), frames=tuple(frames),
                     log_probs=tuple(-0.1 for _ in ids))
    end = (words[-1][2] + 5) if words else segment_start + 10
    return make_result(hyp, rec.symbols, rec.meta, segment=segment, segment_start=segment_start,
                       encoder_frame_offset=end, is_final=is_final)


W8 = [f"WORD{c * 4}" for c in "ABCDEFGHIJ"]  # ten 8-letter words: four fit on a 42-char line

SRT_CASES = {
    "one short segment": [[("HELLO", 12, 20), ("WORLD", 25, 33)]],
    "two lines of at most 42 characters, then a new cue": [
        [(w, 10 * n, 10 * n + 6) for n, w in enumerate(W8)]],
    "at most 7 s on screen": [[(c * 3, 25 * n, 25 * n + 5) for n, c in enumerate("ABCDEFGHIJ")]],
    "segments are never merged; a short cue is cut by the next": [
        [("ONE", 0, 4)], [("TWO", 12, 16), ("THREE", 18, 24)], [("FOUR", 60, 62)]],
    "a word longer than a line": [[("X" * 45, 5, 40), ("AND", 42, 44), ("MORE", 46, 50)]],
    "apostrophes and even breaks": [[("DON'T", 3, 9), ("STOP", 11, 15), ("A" * 20, 17, 40),
                                     ("BB", 41, 43), ("C" * 18, 44, 60)]],
    "empty finals and partials give no cue": [[], [("KEPT", 100, 110)]],
    "late in a long session": [[("LATER", 90_000, 90_020), ("ON", 90_022, 90_030)]],
}


@pytest.mark.parametrize("case", list(SRT_CASES))
def test_page_srt_follows_the_same_rules_as_formats(browser, server, rec, case):
    results, start = [], 0
    for n, words in enumerate(SRT_CASES[case]):
        start = words[0][1] if words else start
        results.append(spelled(rec, n, start, words))
    if case.startswith("empty"):
        results.insert(1, spelled(rec, 1, 100, [("DRAFT", 100, 104)], is_final=False))
    messages = [sherpa_message(r, rec.meta.encoder_frame_seconds) for r in results]
    page = open_page(browser, server.http("/"))
    srt, txt, words = page.evaluate("""async ([messages, frame]) => {
        const m = await import("/static/subtitles.js");
        const finals = messages.map((x) => m.finalOf(JSON.parse(x), frame)).filter(Boolean);
        return [m.srt(finals), m.txt(finals), finals.map((f) => f.words)];
    }""", [messages, rec.meta.encoder_frame_seconds])
    page.context.close()
    finals = [r for r in results if r.is_final and r.text]
    assert words == [[{"text": w.text, "start": w.start, "end": w.end} for w in r.words]
                     for r in finals]
    assert srt == subtitles(results, "srt")
    assert txt == "".join(r.text + "\n" for r in finals)


def test_page_shows_the_stable_part_of_a_partial_steady_and_the_rest_lighter(browser, server,
                                                                            rec):
    """The page's split of a partial (its ``stable`` characters, code points) and the
    stylesheet: the stable part in the text colour at full opacity, the rest lighter."""
    import dataclasses

    partial = dataclasses.replace(
        spelled(rec, 0, 0, [("HELLO", 0, 4), ("WORLD", 6, 10)], is_final=False),
        stable_chars=5)
    messages = [json.loads(sherpa_message(partial, rec.meta.encoder_frame_seconds)),
                {"text": "\u00c9COLE \U0001F600 X", "stable": 7},  # code points, not UTF-16
                {"text": "HI"}]  # a server without the field: nothing stable
    page = open_page(browser, server.http("/"))
    parts, styles = page.evaluate("""async (messages) => {
        const m = await import("/static/subtitles.js");
        const p = document.getElementById("partial");
        p.innerHTML = '<span class="stable">A</span><span class="unstable">B</span>';
        const style = (sel) => {
            const s = getComputedStyle(p.querySelector(sel));
            return [s.opacity, s.color];
        };
        const body = getComputedStyle(document.body).color;
        return [messages.map(m.partialParts), [style(".stable"), style(".unstable"), body]];
    }""", messages)
    page.context.close()
    assert parts == [["HELLO", " WORLD"], ["\u00c9COLE \U0001F600", " X"], ["", "HI"]]
    (stable_opacity, stable_color), (unstable_opacity, _), text_color = styles
    assert float(stable_opacity) == 1.0 and stable_color == text_color
    assert float(unstable_opacity) == pytest.approx(0.6)


# -- what the page says when it cannot caption -------------------------------------------------
REFUSED = ("The microphone was refused. Allow this page to use it (the icon in the address "
           "bar, or the browser's site settings), then press Start again.")


def start_and_wait_for_error(page) -> str:
    page.click("#toggle")
    page.wait_for_selector('#status[data-state="error"]', timeout=20_000 * UNIT)
    return page.inner_text("#message")


def test_refused_microphone(server, playwright):
    """A browser that asks its user (no fake prompt), whose user has said no."""
    connections = len(server.connections_logged())
    b = launch(playwright, fake_ui=False)
    try:
        page = open_page(b, server.http("/"))
        cdp = page.context.new_cdp_session(page)
        cdp.send("Browser.setPermission", {"permission": {"name": "microphone"},
                                           "setting": "denied",
                                           "origin": server.http("/").rstrip("/")})
        assert start_and_wait_for_error(page) == REFUSED
        assert page.inner_text("#toggle") == "Start"
    finally:
        b.close()
    assert len(server.connections_logged()) == connections  # it never connected


def test_full_server(server, browser):
    """Every connection is taken (``max_connections``): the page says so, with the reason,
    and connects once there is room."""
    wait_for_idle(server)
    page = open_page(browser, server.http("/"))
    with connect(server.url("/sherpa")):  # takes the only place
        assert start_and_wait_for_error(page) == (
            f"The server cannot take this connection now (server is at its limit of "
            f"{MAX_CONNECTIONS} connections; retry later). Try again in a moment.")
    wait_for_idle(server)
    page.click("#toggle")
    page.wait_for_selector('#status[data-state="listening"]', timeout=20_000 * UNIT)
    page.click("#toggle")
    page.wait_for_selector('#status[data-state="stopped"]', timeout=30_000 * UNIT)
    page.context.close()


def test_admission_endpoint(server):
    """What the page asks before connecting: the handshake's answer, over plain HTTP."""
    wait_for_idle(server)
    status, body = get(server.http("/admission?sample_rate=44100"))
    assert (status, json.loads(body)) == (200, {"admitted": True, "frame_seconds": 0.04})
    status, body = get(server.http("/admission?sample_rate=1"))
    assert status == 400 and json.loads(body) == {
        "admitted": False, "status": 400,
        "reason": "unsupported sample_rate 1: supported 8000..96000 Hz"}
    # this server has no second pass: asked for, the handshake would be refused, and so
    status, body = get(server.http("/admission?second_pass=true"))
    assert status == 400 and json.loads(body)["reason"].startswith(
        "a second pass was asked for, but none is configured")
    with connect(server.url("/sherpa")):
        status, body = get(server.http("/admission"))
    assert status == 503 and json.loads(body)["reason"] == (
        f"server is at its limit of {MAX_CONNECTIONS} connections; retry later")


def test_server_lost_then_unreachable(browser):
    """The server dies mid-session: the page says the connection was lost; Start then says
    the server cannot be reached."""
    own = ServerProcess()
    try:
        host = own.http("/").split("//")[1].rstrip("/")
        page = open_page(browser, own.http("/"))
        page.click("#toggle")
        page.wait_for_selector('#status[data-state="listening"]', timeout=20_000 * UNIT)
        own.stop(signal.SIGKILL)
        page.wait_for_selector('#status[data-state="error"]', timeout=20_000 * UNIT)
        assert page.inner_text("#message") == (
            f"The connection to the server at {host} was lost.")
        assert start_and_wait_for_error(page) == (
            f"Cannot reach the server at {host}. Check that streamdec serve is running and "
            "reachable from this device, then press Start again.")
        page.context.close()
    finally:
        own.stop(signal.SIGKILL)


INSECURE = ("The browser allows the microphone only on a secure page: open this page over "
            "https (start the server with --tls-cert and --tls-key), or at http://localhost "
            "on the machine that runs the server.")


def test_plain_http_from_another_machine_says_https_is_needed(server, browser):
    page = open_page(browser, f"http://{OTHER_NAME}:{server.port}/")
    assert start_and_wait_for_error(page) == INSECURE
    page.context.close()


def test_https_from_another_machine_with_a_token(browser, tmp_path):
    """Over https (the server's TLS options) the page may use the microphone from another
    machine's browser, and connects over wss; with a token file, it needs ``?token=``."""
    cert, key = self_signed(tmp_path)
    (tmp_path / "tokens").write_text("page-token\n")
    own = ServerProcess("--tls-cert", str(cert), "--tls-key", str(key),
                        "--token-file", str(tmp_path / "tokens"))
    try:
        origin = f"https://{OTHER_NAME}:{own.port}"
        page = open_page(browser, origin + "/", ignore_https_errors=True)
        assert start_and_wait_for_error(page) == (
            f"This server needs an access token: open this page as {origin}/?token=YOUR_TOKEN "
            "(missing or invalid bearer token (Authorization: Bearer TOKEN, or ?token=TOKEN)).")
        page.context.close()
        page = open_page(browser, origin + "/?token=page-token", ignore_https_errors=True)
        page.click("#toggle")
        page.wait_for_selector('#status[data-state="listening"]', timeout=20_000 * UNIT)
        wait_until_sent(page, CAPTURE_RATE, timeout=20 * UNIT)
        page.click("#toggle")
        page.wait_for_selector('#status[data-state="stopped"]', timeout=30_000 * UNIT)
        assert page.inner_text("#message") == ""
        page.context.close()
        logged = own.connections_logged()
        assert [c["close_code"] for c in logged] == [1000]
    finally:
        assert own.stop() == 0


# -- legible on a phone and on a projector -----------------------------------------------------
def test_phone_and_projector_layouts(server, browser):
    phone = open_page(browser, server.http("/"), viewport={"width": 360, "height": 740},
                      device_scale_factor=2, is_mobile=True, has_touch=True)
    overflow = phone.evaluate("() => document.documentElement.scrollWidth")
    body_font = phone.evaluate("() => parseFloat(getComputedStyle(document.body).fontSize)")
    button = phone.locator("#toggle").bounding_box()
    phone.context.close()
    assert overflow <= 360  # nothing wider than the screen
    assert body_font >= 16
    assert button["height"] >= 44  # a finger's target

    projector = open_page(browser, server.http("/?large"), viewport={"width": 1280, "height": 720})
    assert projector.locator("#large").is_checked()
    caption_font = projector.evaluate(
        "() => parseFloat(getComputedStyle(document.getElementById('captions')).fontSize)")
    projector.context.close()
    assert caption_font >= 64  # 5.5% of the width, at least 2rem


@pytest.mark.slow
def test_latency_benchmark_smoke(tmp_path):
    out = tmp_path / "report.json"
    run = subprocess.run([sys.executable, str(REPO / "bench" / "captions" / "web_latency.py"), "--smoke",
                          "--out", str(out)], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert report["words"] >= 1 and len(report["utterances"]) == 1
    assert {"median", "p90", "max"} == set(report["word_delay"])
    assert report["block_seconds"] == 0.05 and report["capture_rate"] == CAPTURE_RATE
