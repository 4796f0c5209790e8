"""File transcription: the adapter between audio files and the core.

``transcribe_files`` decodes many files at once (their streams share batched decode
calls), reading each in blocks so memory stays bounded, and yields each file's results
in input order. ``transcribe_realtime`` paces one file as if it were live audio.
A file that cannot be read becomes an error for that file only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .audio_file import AudioFile
from .errors import StreamdecError
from .recognizer import Recognizer
from .results import Result

__all__ = ["FileTranscription", "transcribe_files", "transcribe_realtime"]

EventCallback = Callable[[str, Result], None]


@dataclass
class FileTranscription:
    path: str
    events: list[Result] = field(default_factory=list)
    duration: float = 0.0
    error: StreamdecError | None = None

    @property
    def finals(self) -> list[Result]:
        return [e for e in self.events if e.is_final]


class _FileJob:
    def __init__(self, recognizer: Recognizer, path: str, block_seconds: float,
                 channel: int | None) -> None:
        self.result = FileTranscription(path)
        self.audio = AudioFile(path)
        self.result.duration = self.audio.duration
        self.blocks = self.audio.blocks(block_seconds, channel)
        self.stream = recognizer.create_stream()

    def feed(self, recognizer: Recognizer) -> None:
        """Hand the stream audio until it holds a chunk to decode or its input is over."""
        while not recognizer.is_ready(self.stream) and not self.stream.input_done:
            block = next(self.blocks, None)
            if block is None:
                self.stream.input_finished()
            else:
                self.stream.accept_waveform(self.audio.rate, block)


def transcribe_files(recognizer: Recognizer, paths: Iterable[str | Path], batch_size: int = 8,
                     block_seconds: float = 10.0, on_event: EventCallback | None = None,
                     channel: int | None = None) -> Iterator[FileTranscription]:
    """Transcribe files, up to ``batch_size`` at a time; yields results in input order.
    ``channel``: the channel of multi-channel files to transcribe (None: their average)."""
    pending = iter(enumerate(str(p) for p in paths))
    active: list[tuple[int, _FileJob]] = []
    finished: dict[int, FileTranscription] = {}
    next_out = 0
    exhausted = False
    while True:
        while not exhausted and len(active) < batch_size:
            item = next(pending, None)
            if item is None:
                exhausted = True
                break
            index, path = item
            try:
                active.append((index, _FileJob(recognizer, path, block_seconds, channel)))
            except StreamdecError as e:
                finished[index] = FileTranscription(path, error=e)
        if active:
            for _, job in active:
                job.feed(recognizer)
            recognizer.decode([job.stream for _, job in active])
            still = []
            for index, job in active:
                for event in job.stream.pop_events():
                    job.result.events.append(event)
                    if on_event:
                        on_event(job.result.path, event)
                if job.stream.done:
                    finished[index] = job.result
                else:
                    still.append((index, job))
            active = still
        while next_out in finished:
            yield finished.pop(next_out)
            next_out += 1
        if exhausted and not active and not finished:
            return


def transcribe_realtime(recognizer: Recognizer, path: str | Path, chunk_ms: int = 100,
                        on_event: EventCallback | None = None, channel: int | None = None,
                        sleep: Callable[[float], None] = time.sleep) -> FileTranscription:
    """Feed one file in ``chunk_ms`` pieces at the pace of live audio."""
    audio = AudioFile(path)
    result = FileTranscription(str(path), duration=audio.duration)
    stream = recognizer.create_stream()
    start = time.monotonic()
    fed = 0.0

    def drain() -> None:
        while recognizer.is_ready(stream):
            recognizer.decode([stream])
        for event in stream.pop_events():
            result.events.append(event)
            if on_event:
                on_event(result.path, event)

    for block in audio.blocks(chunk_ms / 1000, channel):
        wait = start + fed - time.monotonic()
        if wait > 0:
            sleep(wait)
        stream.accept_waveform(audio.rate, block)
        fed += len(block) / audio.rate
        drain()
    stream.input_finished()
    drain()
    return result
