"""Codec chatter kept off the terminal: libsndfile's MP3 decoder (libmpg123) prints its
own diagnostics straight to the C library's stderr, on files that decode correctly too
(``[src/libmpg123/layer3.c:...] error: part2_3_length ... too large``, ``Warning: Xing
stream size off ...``), and no soundfile call turns that off.

``codec_stderr_caught()`` points file descriptor 2 at a temporary file while a decoder
call runs, then writes back whatever was not the codec's (a log line another thread
wrote meanwhile is delayed, never lost) and drops the codec's lines. Whether a file is
damaged is judged by what it decodes to (``AudioFile.shortfall``: fewer samples than its
header promises), not by these lines. One redirection at a time (a lock), so two threads
decoding at once cannot restore each other's descriptor.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["codec_stderr_caught", "is_codec_chatter"]

# what libmpg123 prints: "[src/libmpg123/<file>.c:<function>():<line>] error: ..." and its
# "Note:"/"Warning:" lines about Xing/Info headers and seeking
_CHATTER = re.compile(rb"^(\[src/libmpg123/[^\]]*\] |(Note|Warning|Error): .*(Xing|seek|mpg123|"
                      rb"frame|stream|bit reservoir|MPEG))")
_LOCK = threading.Lock()


def is_codec_chatter(line: bytes) -> bool:
    """Whether a line written to stderr is the MP3 decoder's own."""
    return bool(_CHATTER.match(line))


@contextmanager
def codec_stderr_caught() -> Iterator[None]:
    """Run the block with fd 2 captured; afterwards the lines that are not the codec's
    (``is_codec_chatter``) go to the real stderr, in order."""
    with _LOCK:
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError):
            pass
        saved = os.dup(2)
        with tempfile.TemporaryFile() as caught:
            os.dup2(caught.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                caught.seek(0)
                kept = [line for line in caught.read().splitlines(keepends=True)
                        if not is_codec_chatter(line)]
                if kept:
                    os.write(2, b"".join(kept))
