"""``streamdec mic`` on a real input device.

A private PulseAudio daemon with a null sink (``bench/captions/null_sink.py``): the tests play known
speech into the sink with ``paplay`` and run ``streamdec mic`` (a real process) on the
sink's monitor through the ALSA ``pulse`` device, then compare what it showed with what
``streamdec transcribe`` gives.

Why the comparison is exact and over the captured audio: the played file is at the sink's
own rate and format (44.1 kHz, 16-bit, mono), so PulseAudio passes its samples through
unchanged, and the test checks that the saved capture is exactly those samples after the
silence that preceded playback. The built-in model's text depends on where speech falls on
the 10 ms frame grid (with greedy search, ``examples/hello.wav`` after 0 to 4000 samples of
lead-in silence gives 31 different transcripts over 42 offsets, up to 21% CER apart), so
the reference is ``transcribe`` of the same samples, lead-in included; on those, the live
decode must give the very same events, tokens and times (chunking invariance through the
engine). PulseAudio drops the first 45-90 ms of each playback from the monitor (measured),
hence the half second of silence before the speech in the played file.

The messages for a missing PortAudio or sounddevice, an absent or unknown device and a
busy device are checked too, each without a traceback.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from streamdec.cli.live_line import LiveLine
from streamdec.cli.main import main
from streamdec.core.results import Result, Word

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.captions.null_sink import LISTENING, NullSink, caption_playback  # noqa: E402

LEAD_IN = 0.5  # seconds of digital silence before the speech in the played file


@pytest.fixture(scope="module")
def sink(tmp_path_factory):
    with NullSink(tmp_path_factory.mktemp("pulse")) as s:
        yield s


@pytest.fixture(scope="module")
def played(tmp_path_factory, sink) -> Path:
    """examples/hello.wav at the sink's rate, 16-bit, after LEAD_IN s of silence."""
    speech, rate = sf.read(str(REPO / "examples" / "hello.wav"), dtype="float32")
    speech = soxr.resample(speech, rate, sink.rate)
    path = tmp_path_factory.mktemp("played") / "hello-44k.wav"
    sf.write(str(path), np.concatenate([np.zeros(int(LEAD_IN * sink.rate), np.float32), speech]),
             sink.rate, subtype="PCM_16")
    return path


def mic(env: dict, *args: str, prelude: str = "") -> subprocess.CompletedProcess:
    """``streamdec mic ARGS`` in a process of its own; ``prelude``: Python run first (to put
    a stub at the PortAudio boundary)."""
    code = f"import sys\n{prelude}\nfrom streamdec.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "mic", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def first_nonzero(x: np.ndarray) -> int:
    return int(np.flatnonzero(x)[0])


def without_file(event: dict) -> dict:
    """An event as both commands must agree on it: all but the source name and the
    log-probs (floats)."""
    return {k: v for k, v in event.items() if k not in ("file", "log_probs")}


@pytest.mark.slow
def test_captions_played_speech_as_transcribe_does(sink, played, tmp_path, capsys):
    options = ["--no-endpoint", "--search", "modified_beam"]  # the only final comes at Ctrl-C
    run = caption_playback(sink, [played], ["--format", "jsonl", "--save",
                                            str(tmp_path / "cap"), *options], tail=1.0)
    assert run.returncode == 0, run.stderr_text
    events = [(t, json.loads(line)) for t, line in run.lines]

    # live: text shows while the audio plays; Ctrl-C finishes the utterance and its final
    # (the end of the stream) is printed after it
    assert any(e["type"] == "partial" and e["text"] and t < run.played[0][1] for t, e in events)
    finals = [(t, e) for t, e in events if e["type"] == "final"]
    assert len(finals) == 1 and finals[0][1]["is_eof"] and finals[0][1]["text"]
    assert finals[0][0] > run.stopped_at
    assert {e["file"] for _, e in events} == {"pulse"}

    # the saved capture is exactly the played samples after the silence before playback
    # (PulseAudio may cut the start of the played file's own silence, never its speech)
    captured, rate = sf.read(str(tmp_path / "cap.wav"), dtype="int16")
    audio, _ = sf.read(str(played), dtype="int16")
    assert rate == sink.rate
    lead = first_nonzero(captured) - first_nonzero(audio)
    cut = max(0, -lead)
    assert cut < first_nonzero(audio)
    body = captured[max(0, lead):max(0, lead) + len(audio) - cut]
    np.testing.assert_array_equal(body, audio[cut:])
    assert not captured[max(0, lead) + len(body):].any()

    # on those samples, transcribe gives the same events (mic formats finals for people by
    # default: --text-format full) and the same subtitles
    assert main(["transcribe", "--format", "jsonl", "--text-format", "full",
                 str(tmp_path / "cap.wav"), *options]) == 0
    reference = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [without_file(e) for _, e in events] == [without_file(e) for e in reference]
    assert main(["transcribe", "--format", "srt", str(tmp_path / "cap.wav"), *options]) == 0
    assert (tmp_path / "cap.srt").read_text() == capsys.readouterr().out

    # what was lost is reported (here: nothing)
    assert ("device overruns (audio lost): 0; blocks dropped because decoding fell behind: 0"
            in run.stderr_text)


@pytest.mark.slow
def test_captions_with_a_published_model_directory(sink, played, tmp_path, capsys):
    """``streamdec mic --model DIR`` with a directory as icefall's exporter writes it (the
    lstm of tests/fixtures/published-layouts): the same events as transcribe of the
    capture with that model."""
    model = ["--model", str(REPO / "tests" / "fixtures" / "published-layouts" / "D-lstm"),
             "--no-endpoint"]
    run = caption_playback(sink, [played], ["--format", "jsonl", "--save",
                                            str(tmp_path / "cap"), *model], tail=1.0)
    assert run.returncode == 0, run.stderr_text
    assert "streamdec: model " in run.stderr_text
    events = [json.loads(line) for _, line in run.lines]
    finals = [e for e in events if e["type"] == "final"]
    assert len(finals) == 1 and len(finals[0]["tokens"]) > 10
    # mic's finals are formatted by default (--text-format full): transcribe's too, then
    assert main(["transcribe", "--format", "jsonl", "--text-format", "full",
                 str(tmp_path / "cap.wav"), *model]) == 0
    reference = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [without_file(e) for e in events] == [without_file(e) for e in reference]


@pytest.mark.slow
def test_a_device_that_stops_ends_the_stream_with_an_error(tmp_path):
    """The sound server goes away mid-capture: the last result still comes, then a clear
    error and exit status 1."""
    with NullSink(tmp_path) as own_sink:
        proc = subprocess.Popen([sys.executable, "-m", "streamdec", "mic", "--device", "pulse",
                                 "--format", "jsonl"], env=own_sink.env, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr.readline().startswith(LISTENING)
            own_sink.stop()
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 1, err
    assert "streamdec: error: input device 0 'pulse' stopped delivering audio" in err
    last = json.loads(out.splitlines()[-1])
    assert last["type"] == "final" and last["is_eof"]
    assert "Traceback" not in err


def test_blocks_dropped_when_decoding_falls_behind_are_counted_and_filled(sink):
    """The loop does not read for a while: blocks beyond the queue's bound are dropped and
    counted, and the signal handed out stays continuous (silence in their place)."""
    code = """
import asyncio, json, time
from streamdec.microphone import Capture, find_input_device

async def main():
    capture = Capture(find_input_device("pulse"), 44100, 100, max_queued_seconds=0.3)
    sizes, silent = [], []
    async with capture:
        async for block in capture.blocks():
            if not sizes:
                time.sleep(1.5)  # the loop is busy: the queue (3 blocks) fills up
            sizes.append(len(block))
            silent.append(not block.any())
            if len(sizes) == 8:
                capture.stop()
    print(json.dumps({"sizes": sizes, "silent": silent, "dropped": capture.dropped_blocks,
                      "dropped_frames": capture.dropped_frames, "summary": capture.summary()}))

asyncio.run(main())
"""
    run = subprocess.run([sys.executable, "-c", code], env=sink.env, cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["dropped"] >= 5  # 1.5 s of 100 ms blocks arrived, 3 could wait
    assert report["dropped_frames"] == 4410 * report["dropped"]
    # the dropped blocks come back as one stretch of silence of their length, in place
    odd = [n for n, size in enumerate(report["sizes"]) if size != 4410]
    assert [report["sizes"][n] for n in odd] == [report["dropped_frames"]]
    assert report["silent"][odd[0]]
    assert (f"blocks dropped because decoding fell behind: {report['dropped']} "
            f"({report['dropped_frames'] / 44100:.1f} s, replaced by silence)"
            in report["summary"])


def test_list_devices(sink):
    run = mic(sink.env, "--list-devices")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert any(" pulse (ALSA, " in line for line in lines), run.stdout
    assert sum(line.startswith("*") for line in lines) == 1  # the default


@pytest.mark.parametrize("device, message", [
    ("nosuch", "streamdec: error: no input device matches 'nosuch'; input devices: "),
    ("99", "streamdec: error: there is no input device 99; input devices: "),
])
def test_unknown_device(sink, device, message):
    run = mic(sink.env, "--device", device)
    assert run.returncode == 2
    assert run.stderr.startswith(message), run.stderr
    assert "'pulse'" in run.stderr and "Traceback" not in run.stderr


def test_busy_device(sink):
    """What PortAudio raises when another program holds the device (ALSA's EBUSY becomes
    paDeviceUnavailable); no device here can be made busy, so the stub sits at the open."""
    stub = ("import sounddevice\n"
            "def busy(*a, **k):\n"
            "    raise sounddevice.PortAudioError("
            "'Error opening InputStream: Device unavailable', -9985)\n"
            "sounddevice.InputStream = busy")
    run = mic(sink.env, "--device", "pulse", prelude=stub)
    assert run.returncode == 2
    assert run.stderr == ("streamdec: error: input device 0 'pulse' is busy or unavailable: "
                          "another program may be using it (Error opening InputStream: Device "
                          "unavailable [PaErrorCode -9985])\n")


def test_unwritable_save_prefix(sink, tmp_path):
    run = mic(sink.env, "--device", "pulse", "--save", str(tmp_path / "missing" / "cap"))
    assert run.returncode == 2
    assert run.stderr.startswith(f"streamdec: error: --save: cannot write {tmp_path}/missing/"
                                 "cap.srt"), run.stderr


def test_no_input_device(tmp_path):
    """No sound server and no sound card: nothing to capture from."""
    if Path("/proc/asound/cards").exists() and "no soundcards" not in \
            Path("/proc/asound/cards").read_text():
        pytest.skip("this machine has a sound card: it cannot be made device-less")
    home = tmp_path / "home"
    (home / ".config" / "pulse").mkdir(parents=True)
    (home / ".config" / "pulse" / "client.conf").write_text("autospawn = no\n")
    (tmp_path / "run").mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_")}
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    for args in ([], ["--list-devices"]):
        run = mic(env, *args)
        assert run.returncode == 2
        assert run.stderr == ("streamdec: error: no input device found: connect a microphone, "
                              "or check that the sound server (PulseAudio, PipeWire) is "
                              "running\n")


@pytest.mark.parametrize("stub, message", [
    # what sounddevice raises on import when it finds no PortAudio library
    ("raise OSError('PortAudio library not found')",
     "streamdec: error: PortAudio library not found: capturing audio needs the PortAudio "
     "library (Debian/Ubuntu: apt install libportaudio2; macOS: brew install portaudio)\n"),
    # sounddevice itself not installed
    ("raise ModuleNotFoundError(\"No module named 'sounddevice'\")",
     "streamdec: error: capturing audio needs the sounddevice package: python3 -m pip "
     "install -e '.[mic]' in the streamdec folder\n"),
])
def test_portaudio_missing(tmp_path, stub, message):
    (tmp_path / "sounddevice.py").write_text(stub + "\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    run = mic(env, "--list-devices")
    assert (run.returncode, run.stderr) == (2, message)


def result(text: str, final: bool, words=(), stable: int = 0) -> Result:
    return Result(text=text, tokens=(), token_ids=(), timestamps=(), log_probs=(), segment=0,
                  start_time=60.0, end_time=75.0, is_final=final, words=words,
                  stable_chars=len(text) if final else stable)


class Terminal:
    """Standard output as a terminal shows it."""

    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> None:
        self.text += s

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("tty, shown", [
    (True, "\r\033[K\033[2mHEL\033[22m\r\033[KHELLO\033[2m WOR\033[22m"
           "\r\033[K[01:01.20 - 01:02.64] HELLO WORLD\n\r\033[K"),
    (False, "[01:01.20 - 01:02.64] HELLO WORLD\n"),
])
def test_live_line_rewrites_the_partial_and_commits_finals_with_times(tty, shown):
    """On a terminal a partial's unstable part is dim (SGR 2 ... 22)."""
    out = Terminal(tty)
    line = LiveLine(out, times=True)
    words = (Word("HELLO", 61.2, 61.8, 0.9), Word("WORLD", 61.9, 62.64, 0.8))
    for r in (result("HEL", False), result("HELLO WOR", False, stable=5),
              result("HELLO WORLD", True, words), result("", True)):
        line("pulse", r)
    assert out.text == shown


def test_live_line_dims_only_the_unstable_part_of_a_cut_line(monkeypatch):
    """A line wider than the terminal shows its end; the source prefix is never dim."""
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda: os.terminal_size((11, 24)))
    out = Terminal(True)
    line = LiveLine(out, prefix=True)
    line("a", result("HELLO WORLD", False, stable=5))  # "a: HELLO WORLD" cut to 10
    line("a", result("HI", False, stable=2))
    line("a", result("HI", False, stable=0))
    assert out.text == ("\r\033[KELLO\033[2m WORLD\033[22m" "\r\033[Ka: HI"
                        "\r\033[Ka: \033[2mHI\033[22m")


@pytest.mark.slow
def test_latency_benchmark_smoke(tmp_path):
    out = tmp_path / "report.json"
    run = subprocess.run([sys.executable, str(REPO / "bench" / "captions" / "mic_latency.py"), "--smoke",
                          "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert report["words"] >= 1 and len(report["utterances"]) == 1
    assert {"median", "p90", "max"} == set(report["word_delay"])
    assert report["block_seconds"] == 0.1 and report["model_chunk_seconds"] == 0.32
