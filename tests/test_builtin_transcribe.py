"""The shipped model end to end: the first example (README and docs/index.md), the tail of an utterance, and greedy
parity with sherpa-onnx on the built-in model files."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamdec import EndpointConfig, Recognizer, RecognizerConfig, SearchConfig
from streamdec.models import BUILTIN_MODEL_DIR
from decode_utils import decode_in_pieces, finals, sherpa_decode

ROOT = Path(__file__).resolve().parents[1]

SENTENCES = ["please call me back tomorrow morning",
             "the meeting starts at nine thirty",
             "my account number is four five six",
             "thank you for calling have a nice day"]


def _edits(r, h) -> int:
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(h) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
    return d[len(h)]


def cer(ref: str, hyp: str) -> float:
    return _edits(ref.upper(), hyp.upper()) / max(1, len(ref))


def wer(ref: str, hyp: str) -> float:
    return _edits(ref.upper().split(), hyp.upper().split()) / max(1, len(ref.split()))


def speak(text: str, path, voice: str = "en-us+m3") -> np.ndarray:
    """espeak-ng speech with leading/trailing silence trimmed: it ends at its last sample.
    The same samples on every run: sox's resampling dithers with fresh random noise unless
    told not to (``-D``), which made close calls (a grammar's [unk]) flip once in ~25 runs."""
    raw = path.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(raw), text], check=True)
    subprocess.run(["sox", "-D", str(raw), "-r", "16000", str(path),
                    "silence", "1", "0.02", "1%", "reverse", "silence", "1", "0.02", "1%",
                    "reverse"], check=True)
    audio, rate = sf.read(str(path), dtype="float32")
    assert rate == 16000
    return audio


@pytest.fixture(scope="module")
def rec():
    """Greedy, named (the default with the built-in model is its words), as sherpa-onnx's
    greedy_search is compared with it."""
    return Recognizer(RecognizerConfig(search=SearchConfig(),
                                       endpoint=EndpointConfig(enabled=False)))


def test_readme_example_is_transcribed():
    """What the first command prints is what README and the site's first page (docs/index.md,
    "On a fresh machine") say to expect (words by default), and the figures they give."""
    p = subprocess.run([sys.executable, "-m", "streamdec", "transcribe", "examples/hello.wav"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    page = " ".join((ROOT / "docs" / "index.md").read_text(encoding="utf-8").split())
    promised = re.search(r"Expect `([A-Z' ]+)`", page).group(1)
    assert p.stdout.strip() == promised
    assert f"Expect `{promised}` (3 of 18 words wrong)" in readme
    ref = ("hello world the quick brown fox jumps over the lazy dog please call me back at "
           "five thirty")
    assert cer(ref, p.stdout.strip()) < 0.2, p.stdout
    greedy = subprocess.run([sys.executable, "-m", "streamdec", "transcribe", "examples/hello.wav",
                             "--search", "greedy"], capture_output=True, text=True, timeout=120)
    assert greedy.returncode == 0 and f"`--search greedy` gives " \
        f"`{greedy.stdout.strip()}`" in page, greedy.stdout
    # the error rates the page gives for both
    assert wer(ref, p.stdout.strip()) == 3 / 18 and "(3 of 18 words wrong)" in page
    assert (round(100 * cer(ref, greedy.stdout.strip())), round(100 * wer(ref, greedy.stdout.strip()))) \
        == (14, 33) and "(14% of the letters wrong, 33% of the words)" in page


@pytest.mark.parametrize("n", range(len(SENTENCES)))
def test_last_word_at_the_very_end_is_not_lost(rec, tmp_path, n):
    audio = speak(SENTENCES[n], tmp_path / "s.wav")
    result = finals(decode_in_pieces(rec, audio, 1600))[-1]
    padded = finals(decode_in_pieces(rec, np.concatenate([audio, np.zeros(16000, np.float32)]),
                                     1600))[-1]
    duration = len(audio) / 16000
    assert result.token_ids, "nothing recognised"
    assert result.absolute_timestamps[-1] > duration - 0.6, "no token near the end of the audio"
    # a second of silence after the end adds nothing the unpadded decode missed
    assert result.text == padded.text


@pytest.mark.parametrize("n", range(len(SENTENCES)))
def test_greedy_matches_sherpa_onnx_on_the_builtin_model(rec, tmp_path, n):
    audio = speak(SENTENCES[n], tmp_path / "s.wav", voice="en-gb")
    ours = finals(decode_in_pieces(rec, audio, 3200))
    assert len(ours) == 1 and ours[0].tokens
    theirs = sherpa_decode(BUILTIN_MODEL_DIR, rec.meta.model_type, audio, rec.meta.chunk_frames)
    # sherpa-onnx lists the word-boundary unit "\u2581" as a space
    assert [t.replace("\u2581", " ") for t in ours[0].tokens] == list(theirs.tokens)
    np.testing.assert_allclose(ours[0].timestamps, theirs.timestamps, atol=0.006)
    assert ours[0].text == theirs.text.strip()


def test_pytorch_backend_gives_the_onnx_tokens_on_the_builtin_model(rec, tmp_path):
    from streamdec import ModelConfig

    torch_rec = Recognizer(RecognizerConfig(model=ModelConfig(backend="torch"),
                                            search=rec.config.search,
                                            endpoint=EndpointConfig(enabled=False)))
    for n, sentence in enumerate(SENTENCES):
        audio = speak(sentence, tmp_path / f"{n}.wav", voice="en-us+f2")
        a = finals(decode_in_pieces(rec, audio, 4000))[-1]
        b = finals(decode_in_pieces(torch_rec, audio, 4000))[-1]
        assert a.token_ids == b.token_ids and a.timestamps == b.timestamps
