"""Known audio through a real input device, for the microphone tests and the microphone
latency benchmark.

A private PulseAudio daemon (its own HOME and XDG_RUNTIME_DIR, so it never meets the
user's sound server) with one null sink: what ``paplay`` plays into the sink comes out of
the sink's monitor, which ``streamdec mic`` captures through the ALSA ``pulse`` device
(``PULSE_SOURCE`` names the monitor). Needs the Debian packages pulseaudio,
pulseaudio-utils, libasound2-plugins and libportaudio2. A file at the sink's rate and
format (mono 16-bit) comes through sample for sample, except that the monitor misses the
first 45-90 ms of each playback (measured): start files with some silence.

    with NullSink(tmp_dir) as sink:
        run = caption_playback(sink, ["a.wav"], ["--format", "jsonl"])
    run.lines      # the command's standard output, each line with when it arrived

``caption_playback`` starts ``streamdec mic``, waits for its first captured block (the
null sink takes a while to start), plays the files one after the other, then stops the
command with SIGINT (Ctrl-C) and collects what it wrote.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

__all__ = ["NullSink", "MicRun", "caption_playback", "LISTENING"]

LISTENING = "streamdec: listening to input device"  # stderr, once the first block arrived


class NullSink:
    """A PulseAudio daemon of its own with one mono 16-bit null sink at ``rate`` Hz.
    ``env``: the environment under which clients (paplay, streamdec mic) reach it."""

    name = "streamdec_test"

    def __init__(self, folder: Path, rate: int = 44100) -> None:
        self.folder = Path(folder)
        self.rate = rate
        home, runtime = self.folder / "home", self.folder / "runtime"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_")}
        self.env.update(HOME=str(home), XDG_RUNTIME_DIR=str(runtime),
                        PULSE_SOURCE=f"{self.name}.monitor", PULSE_SINK=self.name)
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "NullSink":
        home, runtime = Path(self.env["HOME"]), Path(self.env["XDG_RUNTIME_DIR"])
        (home / ".config" / "pulse").mkdir(parents=True, exist_ok=True)
        # clients must never start a daemon of their own when this one is gone
        (home / ".config" / "pulse" / "client.conf").write_text("autospawn = no\n")
        runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        script = self.folder / "default.pa"
        script.write_text(
            "load-module module-native-protocol-unix\n"
            f"load-module module-null-sink sink_name={self.name} format=s16le "
            f"rate={self.rate} channels=1\n"
            f"set-default-sink {self.name}\n"
            f"set-default-source {self.name}.monitor\n")
        self.log = self.folder / "pulseaudio.log"
        with open(self.log, "w") as log:
            self._proc = subprocess.Popen(
                ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "-F", str(script)],
                env=self.env, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"pulseaudio exited ({self._proc.returncode}): "
                                   f"{self.log.read_text()}")
            ok = subprocess.run(["pactl", "list", "short", "sinks"], env=self.env,
                                capture_output=True, text=True)
            if ok.returncode == 0 and self.name in ok.stdout:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"pulseaudio did not start in {timeout} s: "
                                   f"{self.log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the daemon (and wait for it); safe to call twice."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def play(self, path: str | Path) -> None:
        """Play an audio file into the sink; returns once it has been played."""
        subprocess.run(["paplay", f"--device={self.name}", str(path)], env=self.env,
                       check=True, timeout=120)


@dataclass
class MicRun:
    """What one ``streamdec mic`` run wrote, with ``time.monotonic()`` arrival times."""

    lines: list[tuple[float, str]] = field(default_factory=list)  # standard output
    stderr: list[tuple[float, str]] = field(default_factory=list)
    played: list[tuple[float, float]] = field(default_factory=list)  # each file's paplay
    listening_at: float = 0.0  # when the first block had arrived (the LISTENING line)
    stopped_at: float = 0.0  # when SIGINT was sent
    returncode: int | None = None

    @property
    def stderr_text(self) -> str:
        return "".join(line for _, line in self.stderr)


def _collect(pipe, into: list, seen: threading.Event | None = None) -> None:
    for line in pipe:
        into.append((time.monotonic(), line))
        if seen is not None and line.startswith(LISTENING):
            seen.set()


def caption_playback(sink: NullSink, files: Sequence[str | Path], mic_args: Sequence[str],
                     pause: float = 0.0, tail: float = 0.6, start_timeout: float = 60.0
                     ) -> MicRun:
    """Run ``streamdec mic --device pulse MIC_ARGS`` on the sink's monitor, play ``files``
    into the sink (``pause`` seconds apart) once it captures, wait ``tail`` seconds, send
    SIGINT and collect its output."""
    run = MicRun()
    proc = subprocess.Popen([sys.executable, "-m", "streamdec", "mic", "--device", "pulse",
                             *mic_args], env=sink.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1)
    listening = threading.Event()
    readers = [threading.Thread(target=_collect, args=(proc.stdout, run.lines)),
               threading.Thread(target=_collect, args=(proc.stderr, run.stderr, listening))]
    for t in readers:
        t.start()
    try:
        deadline = time.monotonic() + start_timeout
        while not listening.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                for t in readers:
                    t.join()
                raise RuntimeError(f"streamdec mic did not start capturing: {run.stderr_text}")
        run.listening_at = next(t for t, line in run.stderr if line.startswith(LISTENING))
        for n, path in enumerate(files):
            if n:
                time.sleep(pause)
            started = time.monotonic()
            sink.play(path)
            run.played.append((started, time.monotonic()))
        time.sleep(tail)
        run.stopped_at = time.monotonic()
        proc.send_signal(signal.SIGINT)
        run.returncode = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for t in readers:
            t.join()
    return run
