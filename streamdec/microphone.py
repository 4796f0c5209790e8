"""Microphone capture (sounddevice over PortAudio): the adapter between an input device and
the engine.

PortAudio calls the capture callback in a thread of its own with each block of samples.
The callback never blocks and touches nothing of the event loop's: it copies the block
into a bounded queue and asks the loop to wake up. A block that finds the queue full
(decoding fell behind) is dropped and counted; a device overrun (PortAudio's
``input_overflow`` flag: the device had to throw audio away before the callback ran) is
counted too. ``Capture.blocks()`` hands the blocks to the loop as one continuous signal:
where blocks were dropped it puts silence of the same length, so the times of results
stay the times of the device's clock.

    device = find_input_device("USB")               # a name, an index, or None: the default
    async with Capture(device, device.default_rate, block_ms=100) as capture:
        async for samples in capture.blocks():       # mono int16 blocks, until stop()
            ...
    print(capture.summary())                        # overruns, never silently dropped

Every failure a user can meet (PortAudio or sounddevice not installed, no input device,
an unknown device, a busy device, a device that stops delivering audio) is a
``MicrophoneError`` with a message that says what to do.
"""

from __future__ import annotations

import asyncio
import math
import queue
from dataclasses import dataclass
from typing import AsyncIterator

import numpy as np

from .errors import MicrophoneError

__all__ = ["MicrophoneError", "InputDevice", "input_devices", "require_input_devices",
           "find_input_device", "Capture"]

# PortAudio error codes (PaErrorCode in portaudio.h; part of its stable interface)
_PA_INVALID_CHANNEL_COUNT = -9998
_PA_INVALID_SAMPLE_RATE = -9997
_PA_DEVICE_UNAVAILABLE = -9985  # what PortAudio reports for a busy device


def _sounddevice():
    """The sounddevice module (it loads PortAudio when imported)."""
    try:
        import sounddevice
    except ImportError:
        raise MicrophoneError("capturing audio needs the sounddevice package: "
                              "python3 -m pip install -e '.[mic]' in the streamdec folder") \
            from None
    except OSError as e:  # sounddevice could not load the PortAudio library
        raise MicrophoneError(f"{e}: capturing audio needs the PortAudio library (Debian/"
                              "Ubuntu: apt install libportaudio2; macOS: brew install "
                              "portaudio)") from None
    return sounddevice


@dataclass(frozen=True)
class InputDevice:
    """An audio device that can capture, as PortAudio lists it."""

    index: int
    name: str
    host_api: str  # e.g. ALSA, Core Audio, Windows WASAPI
    channels: int  # input channels
    default_rate: int  # the device's own sample rate (Hz)
    is_default: bool  # the system's default input device

    def __str__(self) -> str:
        return f"{self.index} '{self.name}'"

    def describe(self) -> str:
        """One line for ``--list-devices``."""
        return (f"{'*' if self.is_default else ' '} {self.index:>3} {self.name} ({self.host_api}, "
                f"{self.channels} in, {self.default_rate} Hz)")


def input_devices() -> list[InputDevice]:
    """The devices that can capture, in PortAudio's order."""
    sd = _sounddevice()
    try:
        default = sd.query_devices(kind="input")["index"]
    except sd.PortAudioError:  # no default input device
        default = None
    apis = sd.query_hostapis()
    return [InputDevice(d["index"], d["name"], apis[d["hostapi"]]["name"],
                        d["max_input_channels"], int(d["default_samplerate"]),
                        d["index"] == default)
            for d in sd.query_devices() if d["max_input_channels"] > 0]


def require_input_devices() -> list[InputDevice]:
    """``input_devices()``, or MicrophoneError when there is none."""
    devices = input_devices()
    if not devices:
        raise MicrophoneError("no input device found: connect a microphone, or check that "
                              "the sound server (PulseAudio, PipeWire) is running")
    return devices


def find_input_device(spec: str | None) -> InputDevice:
    """The input device named by ``spec``: an index, a name or part of one (any case; an
    exact name wins over partial matches), or None for the system's default input device."""
    devices = require_input_devices()
    listing = "; input devices: " + ", ".join(str(d) for d in devices)
    if spec is None:
        for d in devices:
            if d.is_default:
                return d
        raise MicrophoneError("there is no default input device: choose one with --device"
                              + listing)
    if spec.strip().isdigit():
        for d in devices:
            if d.index == int(spec):
                return d
        raise MicrophoneError(f"there is no input device {spec}" + listing)
    wanted = spec.strip().casefold()
    exact = [d for d in devices if d.name.casefold() == wanted]
    matches = exact or [d for d in devices if wanted in d.name.casefold()]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise MicrophoneError(f"no input device matches '{spec}'" + listing)
    raise MicrophoneError(f"'{spec}' matches several input devices ("
                          + ", ".join(str(d) for d in matches) + "): give its index")


def _open_error(device: InputDevice, rate: int, error: Exception) -> MicrophoneError:
    """A PortAudio failure to open or start ``device`` as a message that says what to do."""
    code = error.args[1] if len(error.args) > 1 else None
    host_text = str(error.args[2][2]) if len(error.args) > 2 else ""
    if code == _PA_DEVICE_UNAVAILABLE or "busy" in host_text.casefold():
        why = "is busy or unavailable: another program may be using it"
    elif code == _PA_INVALID_SAMPLE_RATE:
        why = (f"does not capture at {rate} Hz (its own rate is {device.default_rate} Hz; "
               "choose another with --rate)")
    elif code == _PA_INVALID_CHANNEL_COUNT:
        why = "cannot capture one channel (mono)"
    else:
        why = "cannot be opened"
    return MicrophoneError(f"input device {device} {why} ({error})")


class Capture:
    """An input stream of one device: mono int16 blocks of ``block_ms`` at ``rate`` Hz.

    ``max_queued_seconds`` of blocks may wait for the loop; blocks beyond that are dropped
    (and counted). Use from one event loop: ``async with`` starts and stops it.
    """

    def __init__(self, device: InputDevice, rate: int, block_ms: int,
                 max_queued_seconds: float = 2.0) -> None:
        sd = _sounddevice()
        self.device = device
        self.rate = rate
        self.block_frames = max(1, rate * block_ms // 1000)
        self._queue: queue.Queue[tuple[int, np.ndarray]] = queue.Queue(
            maxsize=max(2, math.ceil(max_queued_seconds * rate / self.block_frames)))
        self.overruns = 0  # device overruns (audio lost before it reached us)
        self.dropped_blocks = 0  # blocks dropped because the queue was full
        self.dropped_frames = 0
        self.lost: MicrophoneError | None = None  # set when the device stopped by itself
        self._captured = 0  # frames the device delivered (PortAudio's thread)
        self._handed = 0  # frames handed out by blocks(), silence for dropped blocks included
        self._loop: asyncio.AbstractEventLoop | None = None
        self._arrived: asyncio.Event | None = None
        self._stopping = False
        self._ended = False
        try:
            self._stream = sd.InputStream(
                device=device.index, samplerate=rate, channels=1, dtype="int16",
                blocksize=self.block_frames, callback=self._callback,
                finished_callback=self._finished)
        except sd.PortAudioError as e:
            raise _open_error(device, rate, e) from None

    async def __aenter__(self) -> "Capture":
        self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        self.stop()

    # -- loop thread ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start capturing (call on the event loop that reads ``blocks()``)."""
        sd = _sounddevice()
        self._loop = asyncio.get_running_loop()
        self._arrived = asyncio.Event()
        try:
            self._stream.start()
        except sd.PortAudioError as e:
            self._stream.close()
            raise _open_error(self.device, self.rate, e) from None

    def stop(self) -> None:
        """Stop capturing. ``blocks()`` still hands out what was captured, then ends."""
        if not self._stopping:
            self._stopping = True
            self._stream.stop()
            self._stream.close()
            self._end()

    async def blocks(self) -> AsyncIterator[np.ndarray]:
        """Mono int16 blocks, in order, as one continuous signal (silence where blocks were
        dropped), until the capture is stopped or the device stops."""
        while True:
            try:
                start, samples = self._queue.get_nowait()
            except queue.Empty:
                if self._ended:
                    return
                self._arrived.clear()
                await self._arrived.wait()
                continue
            if start > self._handed:
                yield np.zeros(start - self._handed, np.int16)
            self._handed = start + len(samples)
            yield samples

    @property
    def seconds(self) -> float:
        """Seconds of audio handed out so far."""
        return self._handed / self.rate

    def summary(self) -> str:
        """How much was captured and what was lost: printed on exit, overruns or not."""
        dropped = self.dropped_frames / self.rate
        return (f"captured {self.seconds:.1f} s from input device {self.device} at {self.rate} "
                f"Hz; device overruns (audio lost): {self.overruns}; blocks dropped because "
                f"decoding fell behind: {self.dropped_blocks} ({dropped:.1f} s, replaced by "
                "silence)")

    def _end(self) -> None:
        self._ended = True
        self._arrived.set()

    def _device_stopped(self) -> None:
        if not self._stopping:
            self.lost = MicrophoneError(f"input device {self.device} stopped delivering audio")
            self._stopping = True
            self._stream.close()
            self._end()

    # -- PortAudio's thread --------------------------------------------------------------------
    def _callback(self, indata: np.ndarray, frames: int, time, status) -> None:
        if status.input_overflow:
            self.overruns += 1
        start = self._captured
        self._captured += frames
        try:
            self._queue.put_nowait((start, indata[:, 0].copy()))
        except queue.Full:
            self.dropped_blocks += 1
            self.dropped_frames += frames
            return
        self._wake(self._arrived.set)

    def _finished(self) -> None:
        """PortAudio's stream became inactive: after stop(), or because the device failed."""
        self._wake(self._device_stopped)

    def _wake(self, callback) -> None:
        try:
            self._loop.call_soon_threadsafe(callback)
        except RuntimeError:  # the loop is closed: nobody reads any more
            pass
