"""The browser captioning page in a real browser, with known audio as its microphone, for
the page's tests and its latency benchmark.

Debian's Chromium (``/usr/bin/chromium``, package chromium) driven by Playwright, never a
browser Playwright downloads. Chromium's fake capture device plays a WAV file as the
microphone (``--use-file-for-fake-audio-capture``), in real time from when the page opens
the microphone, looping at the file's end (after zeros up to the end of the device's last
10 ms buffer). At 44.1 kHz, the rate of the fake device and of headless Chromium's audio
context, a mono 16-bit file comes through unresampled: each sample as a float, ``s / 32767``
for positive and ``s / 32768`` for negative samples (``to_int16`` undoes this exactly).

``TAP`` (added to every page of a context) records, with ``performance.now()``, what the
page does, without changing it: every binary WebSocket message it sends (the audio) and
every change of its captions (the partial line and each new final), at the first animation
frame that shows the change.

    with sync_playwright() as p:
        browser = launch(p, "speech-44k.wav")
        page = open_page(browser, server.http("/"))
        page.click("#toggle")   ...   page.click("#toggle")
        audio = sent_audio(page); events = caption_events(page)
"""

from __future__ import annotations

import base64

import numpy as np

__all__ = ["CHROMIUM", "OTHER_NAME", "CAPTURE_RATE", "launch", "open_page", "TAP", "sent_audio",
           "send_times", "caption_events", "to_int16", "wait_until_sent"]

CHROMIUM = "/usr/bin/chromium"
# a name of this machine that is not "localhost": the page as a browser on another machine
# sees it (a plain-http page there is not a secure context)
OTHER_NAME = "captions.test"
CAPTURE_RATE = 44100  # the fake capture device's rate, and headless Chromium's audio context's
# a closed network: no background connections (they would be refused, many at a time)
QUIET = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def launch(playwright, audio: str | None = None, fake_ui: bool = True):
    """Headless Chromium with a fake microphone (playing ``audio``, a WAV file, or a beep
    when None); ``fake_ui``: microphone requests are granted without a prompt (without it,
    headless Chromium refuses them). ``OTHER_NAME`` is 127.0.0.1."""
    args = [*QUIET, "--use-fake-device-for-media-stream",
            f"--host-resolver-rules=MAP {OTHER_NAME} 127.0.0.1"]
    if fake_ui:
        args.append("--use-fake-ui-for-media-stream")
    if audio is not None:
        args.append(f"--use-file-for-fake-audio-capture={audio}")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)


TAP = """
(() => {
  const tap = { sent: [], sendTimes: [], events: [] };
  window.__tap = tap;
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    if (data instanceof ArrayBuffer) {
      tap.sent.push(new Float32Array(data.slice(0)));
      tap.sendTimes.push(performance.now());
    }
    return send.call(this, data);
  };
  const record = (event) => requestAnimationFrame(() => {
    event.t = performance.now();
    tap.events.push(event);
  });
  addEventListener("DOMContentLoaded", () => {
    const partial = document.getElementById("partial");
    let last = "";
    new MutationObserver(() => {
      if (partial.textContent !== last && partial.textContent) {
        record({ type: "partial", segment: Number(partial.dataset.segment),
                 text: partial.textContent });
      }
      last = partial.textContent;
    }).observe(partial, { childList: true, characterData: true, subtree: true });
    new MutationObserver((mutations) => {
      for (const m of mutations) for (const li of m.addedNodes) {
        record({ type: "final", segment: Number(li.dataset.segment),
                 text: li.querySelector(".text").textContent });
      }
    }).observe(document.getElementById("finals"), { childList: true });
  });
})();
"""


def open_page(browser, url: str, **context_options):
    """A new context (its own permissions and storage) and page at ``url`` with ``TAP``,
    once the page's script has run (its Start button is enabled)."""
    context = browser.new_context(**context_options)
    context.add_init_script(TAP)
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#toggle:enabled")
    return page


def sent_audio(page) -> np.ndarray:
    """Every audio sample the page has sent (float32, as sent)."""
    b64 = page.evaluate("""() => {
      const parts = window.__tap.sent;
      const all = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) { all.set(p, at); at += p.length; }
      const bytes = new Uint8Array(all.buffer);
      let text = "";
      for (let i = 0; i < bytes.length; i += 0x8000) {
        text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
      }
      return btoa(text);
    }""")
    return np.frombuffer(base64.b64decode(b64), dtype="<f4")


def send_times(page) -> list[tuple[float, int]]:
    """(when, samples sent so far including this message) per audio message; ``when``
    in seconds of the page's clock (``performance.now()``)."""
    times, sizes = page.evaluate("() => [window.__tap.sendTimes, "
                                 "window.__tap.sent.map((p) => p.length)]")
    return [(t / 1000, int(n)) for t, n in zip(times, np.cumsum(sizes))]


def caption_events(page) -> list[tuple[float, dict]]:
    """(when shown, {"type": "partial" | "final", "segment", "text"}) per caption change,
    in order; ``when`` as in ``send_times``."""
    events = page.evaluate("() => window.__tap.events")
    return [(e.pop("t") / 1000, e) for e in sorted(events, key=lambda e: e["t"])]


def wait_until_sent(page, samples: int, timeout: float) -> None:
    """Wait until the page has sent at least ``samples`` samples of audio."""
    page.wait_for_function(
        "(n) => window.__tap.sent.reduce((m, p) => m + p.length, 0) >= n", arg=samples,
        timeout=timeout * 1000, polling=100)


def to_int16(audio: np.ndarray) -> np.ndarray:
    """16-bit samples from the fake device's floats (see the module docstring); exact for
    audio that came from a 16-bit file."""
    x = audio.astype(np.float64)
    return np.round(np.where(x > 0, x * 32767, x * 32768)).astype(np.int16)
