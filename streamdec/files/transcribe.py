"""File transcription: the adapter between audio inputs and the core.

``transcribe_files`` decodes many inputs at once (their streams share batched decode
calls), reading each in blocks so memory stays bounded, and yields each input's result
in input order. ``transcribe_realtime`` paces one input as if it were live audio.

One bad input fails alone, as an error in its own result:

- an input that cannot be opened (missing, a directory, not audio), or whose first block
  is already damaged, *fails*: ``error`` set, no events;
- an input damaged partway (a read error such as a truncated FLAC's, or samples the stream
  rejects: NaN/inf, floats beyond [-1, 1]) keeps the events of the audio before the
  damage, with ``error`` set (``duration`` says how much was transcribed);
- a file that holds less audio than its header promises is transcribed to its end, with
  a warning;
- an input whose decoding fails (the model raised) keeps the events decoded before, with
  ``error`` set to the DecodeError naming the input.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from ..core.drive import decode_continuously, decode_ready, pop_events
from ..core.recognizer import Recognizer
from ..core.results import Event, KeywordEvent, Result
from ..errors import AudioInputError, DecodeError, StreamdecError
from .audio_file import AudioFile, AudioFileError, RawFormat

__all__ = ["FileTranscription", "transcribe_files", "transcribe_realtime"]

EventCallback = Callable[[str, Event], None]


@dataclass
class FileTranscription:
    path: str
    events: list[Result] = field(default_factory=list)
    keywords: list[KeywordEvent] = field(default_factory=list)  # heard, with keywords asked
    duration: float = 0.0  # seconds of audio transcribed
    error: StreamdecError | None = None  # the input failed, or was damaged partway
    warnings: list[str] = field(default_factory=list)

    @property
    def finals(self) -> list[Result]:
        return [e for e in self.events if e.is_final]

    @property
    def failed(self) -> bool:
        """Nothing was transcribed: the input could not be opened or was damaged from its
        first block on."""
        return self.error is not None and not self.events


class _FileJob:
    """One input being transcribed: its audio blocks, its stream and what came out (a
    ``drive.Job``). An input that cannot be opened is a finished job with its error."""

    def __init__(self, recognizer: Recognizer, path: str, block_seconds: float,
                 channel: int | None, raw: RawFormat | None, index: int = 0,
                 keywords: Sequence[str] | None = None) -> None:
        self.index = index
        self.result = FileTranscription(path)
        self._recognizer = recognizer
        self.stream = None
        self._abandoned = False  # damaged before any usable sample: nothing to decode
        try:
            self.audio = AudioFile(path, raw)
            self.blocks = self.audio.blocks(block_seconds, channel)
            self.stream = recognizer.create_stream(keywords=keywords)
        except StreamdecError as e:
            self.result.error = e
            self._abandoned = True

    @property
    def finished(self) -> bool:
        return self._abandoned or self.stream.done

    def feed_block(self) -> None:
        """Hand the stream the next block of audio. At the end of the audio, or where it is
        damaged, end the stream's input (or, with no usable sample yet, the job)."""
        if self.finished or self.stream.input_done:
            return
        try:
            block = next(self.blocks, None)
            if block is not None:
                self.stream.accept_waveform(self.audio.rate, block)
                return
            warning = self.audio.shortfall()
            if warning:
                self.result.warnings.append(warning)
        except AudioFileError as e:
            self.result.error = e
        except AudioInputError as e:  # the stream rejected the block and is unchanged
            self.blocks.close()
            self.result.error = AudioFileError(
                f"{self.audio.label}: unusable samples after {self._seconds_accepted:.2f} s ({e})")
        self.result.duration = self._seconds_accepted
        if self.stream.features.num_samples_accepted:
            self.stream.input_finished()
        else:
            self._abandoned = True

    def feed(self) -> None:
        """Hand the stream audio until it holds a chunk to decode or its input is over."""
        while not (self.finished or self._recognizer.is_ready(self.stream)
                   or self.stream.input_done):
            self.feed_block()

    def collect(self, on_event: EventCallback | None = None) -> None:
        if self.stream is None:
            return
        for event in pop_events(self._recognizer, self.stream):
            if isinstance(event, KeywordEvent):
                self.result.keywords.append(event)
            else:
                self.result.events.append(event)
            if on_event:
                on_event(self.result.path, event)
        if self.stream.error is not None and self.result.error is None:
            # decoding failed: the input's error, never an empty success
            self.result.error = DecodeError(f"{self.audio.label}: {self.stream.error}")

    @property
    def _seconds_accepted(self) -> float:
        return self.stream.features.num_samples_accepted / self.audio.rate


def transcribe_files(recognizer: Recognizer, paths: Iterable[str | Path], batch_size: int = 8,
                     block_seconds: float = 1.0, on_event: EventCallback | None = None,
                     channel: int | None = None, raw: RawFormat | None = None,
                     keywords: Sequence[str] | None = None) -> Iterator[FileTranscription]:
    """Transcribe inputs (paths, or ``-`` for standard input), up to ``batch_size`` at a
    time; yields their results in input order. ``channel``: the channel of multi-channel
    files to transcribe (None: their average); ``raw``: the inputs are headerless PCM;
    ``keywords``: keyword lines spotted beside the transcript (``on_event`` then also gets
    each ``KeywordEvent``)."""
    class Job(_FileJob):
        def collect(self) -> None:
            super().collect(on_event)

    jobs = (Job(recognizer, str(path), block_seconds, channel, raw, index, keywords)
            for index, path in enumerate(paths))
    finished: dict[int, FileTranscription] = {}
    next_out = 0
    for job in decode_continuously(jobs, batch_size, recognizer.decode):
        finished[job.index] = job.result
        while next_out in finished:
            yield finished.pop(next_out)
            next_out += 1


def transcribe_realtime(recognizer: Recognizer, path: str | Path, chunk_ms: int = 100,
                        on_event: EventCallback | None = None, channel: int | None = None,
                        raw: RawFormat | None = None,
                        sleep: Callable[[float], None] = time.sleep,
                        keywords: Sequence[str] | None = None) -> FileTranscription:
    """Feed one input in ``chunk_ms`` pieces at the pace of live audio."""
    job = _FileJob(recognizer, str(path), chunk_ms / 1000, channel, raw, keywords=keywords)
    start = time.monotonic()
    while not job.finished:
        wait = start + job.audio.seconds_read - time.monotonic()
        if wait > 0:
            sleep(wait)
        job.feed_block()
        decode_ready(recognizer, [job.stream])
        job.collect(on_event)
    return job.result
