"""MP3 input without the decoder's chatter: libsndfile's MP3 decoder (libmpg123) prints
errors and warnings on stderr while it decodes a correct file; ``streamdec transcribe``
and the server's upload reader print nothing of it, and a truncated MP3 gets one clear
warning (the header's length against what it held), its audio transcribed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamdec.files.codec_stderr import codec_stderr_caught, is_codec_chatter
from streamdec.server.transcription import read_upload

ROOT = Path(__file__).resolve().parents[1]
CHATTER = b"[src/libmpg123/layer3.c:INT123_do_layer3():1774] error: part2_3_length (1056) " \
          b"too large for available bit count (1048)\n"


@pytest.fixture(scope="module")
def mp3s(tmp_path_factory) -> tuple[Path, Path]:
    """examples/hello.wav as an MP3 (libsndfile's own MPEG writer), and its first half."""
    d = tmp_path_factory.mktemp("mp3")
    speech, rate = sf.read(str(ROOT / "examples" / "hello.wav"), dtype="float32")
    assert "MP3" in sf.available_formats(), "libsndfile >= 1.1 with MPEG support is needed"
    whole, cut = d / "hello.mp3", d / "cut.mp3"
    sf.write(str(whole), speech, rate, format="MP3")
    data = whole.read_bytes()
    cut.write_bytes(data[:len(data) // 2])
    return whole, cut


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_the_decoder_does_chatter_on_a_correct_file(mp3s):
    """(what the tests below hold back is really there)"""
    code = (f"import soundfile as sf\nf = sf.SoundFile({str(mp3s[0])!r})\n"
            "print(sum(len(b) for b in f.blocks(16000, dtype='float32')))")  # one s a read
    out = run("-c", code)
    assert out.returncode == 0 and int(out.stdout) == 125766
    assert "libmpg123" in out.stderr


def test_a_correct_mp3_is_transcribed_without_a_word_on_stderr(mp3s):
    out = run("-m", "streamdec", "transcribe", "--search", "greedy", str(mp3s[0]))
    assert out.returncode == 0
    assert out.stderr == ""
    assert out.stdout.strip().endswith("PLEASE CALL ME BACK AT FIVE THIRTY")


def test_a_truncated_mp3_gets_one_clear_warning(mp3s):
    out = run("-m", "streamdec", "transcribe", "--search", "greedy", str(mp3s[1]))
    assert out.returncode == 0 and out.stdout.strip()
    assert out.stderr == (f"streamdec: warning: {mp3s[1]}: its header promises 7.86 s of "
                          "audio but it holds 3.78 s; transcribed what is there\n")


def test_the_servers_upload_reader_is_quiet(mp3s, capfd):
    rate, samples = read_upload(mp3s[0].read_bytes())
    assert (rate, len(samples), samples.dtype) == (16000, 125766, np.float32)
    assert capfd.readouterr().err == ""


def test_other_writes_to_stderr_pass_through_in_order(capfd):
    with codec_stderr_caught():
        os.write(2, b"first\n" + CHATTER + b"Warning: Xing stream size off by more than 1%, "
                 b"fuzzy seeking may be even more fuzzy than by design!\nsecond\n")
    assert capfd.readouterr().err == "first\nsecond\n"


@pytest.mark.parametrize("line, chatter", [
    (CHATTER, True),
    (b"Note: Illegal Audio-MPEG-Header 0x00000000 at offset 417.\n", True),
    (b'{"event": "connection", "protocol": "sherpa"}\n', False),
    (b"streamdec: warning: x.mp3: its header promises 7.86 s\n", False),
    (b"Traceback (most recent call last):\n", False),
])
def test_what_counts_as_the_codecs(line, chatter):
    assert is_codec_chatter(line) is chatter
