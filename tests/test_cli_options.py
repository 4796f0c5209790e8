"""Options checked once, up front, before any audio is decoded: non-finite numbers and an
unusable hotwords file give one error and exit 2, with nothing on standard output."""

import pytest
import soundfile as sf

from model_factory import test_audio
from streamdec.cli.main import main


@pytest.fixture(scope="module")
def wavs(tmp_path_factory):
    d = tmp_path_factory.mktemp("w")
    paths = []
    for n in range(3):
        p = d / f"a{n}.wav"
        sf.write(str(p), test_audio(1.0, seed=n), 16000)
        paths.append(str(p))
    return paths


@pytest.mark.parametrize("option, value, message", [
    ("--blank-penalty", "nan", "search.blank_penalty must be a finite number, got nan"),
    ("--blank-penalty", "inf", "search.blank_penalty must be a finite number, got inf"),
    ("--hotwords-score", "-inf", "search.hotwords_score must be a finite number, got -inf"),
])
def test_non_finite_numbers_are_refused(capsys, wavs, model_dirs, option, value, message):
    code = main(["transcribe", *wavs, "--model", str(model_dirs["lstm"]), "--search",
                 "modified_beam", f"{option}={value}"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip() == f"streamdec: error: {message}"


def test_an_unusable_hotword_is_one_error_before_decoding(capsys, wavs, model_dirs, tmp_path):
    hot = tmp_path / "hot.txt"
    hot.write_text("ABC\nQUIZ\n")  # Q, U, Z: no units of the test model
    code = main(["transcribe", *wavs, "--model", str(model_dirs["lstm"]), "--search",
                 "modified_beam", "--hotwords-file", str(hot)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("error") == 1 and "'QUIZ': the model has no unit for Q, U, Z" in err


def test_a_closed_pipe_ends_quietly(tmp_path):
    """``streamdec transcribe ... | head -1``: no traceback when the reader goes away."""
    import subprocess
    import sys

    import numpy as np

    paths = []
    for n in range(30):
        p = tmp_path / f"s{n}.wav"
        sf.write(str(p), np.zeros(1600, np.float32), 16000)
        paths.append(str(p))
    script = (f"{sys.executable} -m streamdec transcribe --format jsonl {' '.join(paths)}"
              " | head -c 10")
    run = subprocess.run(["bash", "-o", "pipefail", "-c", script], capture_output=True,
                         text=True, timeout=120)
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr, run.stderr
    assert len(run.stdout) == 10
