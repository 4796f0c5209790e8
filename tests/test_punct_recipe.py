"""recipes/punct-case: the labels made from written text, and a seconds-long smoke run
(train, resume from the checkpoint, export) whose model streamdec loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamdec.textfmt.punct import PunctCaseTagger

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "punct-case"
sys.path.insert(0, str(RECIPE))

from data import labelled  # noqa: E402


@pytest.mark.parametrize("text,words,punct,case", [
    ("Hello, my name is John.", "HELLO MY NAME IS JOHN", [1, 0, 0, 0, 2], [1, 0, 0, 0, 1]),
    ("Is it 30 dollars?", "IS IT THIRTY DOLLARS", [0, 0, 0, 3], [1, 0, 0, 0]),
    ("I was born in 1985!", "I WAS BORN IN NINETEEN EIGHTY FIVE", [0, 0, 0, 0, 0, 0, 2],
     [1, 0, 0, 0, 0, 0, 0]),
    ("The NASA budget -- huge; really", "THE NASA BUDGET HUGE REALLY", [0, 0, 1, 1, 0],
     [1, 2, 0, 0, 0]),
    ("Don't stop: McDonald's", "DON'T STOP MCDONALD'S", [0, 1, 0], [1, 0, 1]),
])
def test_labels(text, words, punct, case):
    assert labelled(text) == (words.split(), punct, case)


def test_smoke_training_resumes_and_exports_a_loadable_tagger(tmp_path):
    exp, out = tmp_path / "exp", tmp_path / "model"

    def run(*args):
        proc = subprocess.run([sys.executable, *args], cwd=RECIPE, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return proc.stdout

    run("train.py", str(exp), "--smoke", "--minutes", "0.01", "--save-every", "5")
    assert (exp / "checkpoint.pt").is_file() and (exp / "vocab.txt").is_file()
    assert "resumed at step" in run("train.py", str(exp), "--smoke", "--minutes", "0.02",
                                    "--save-every", "5")
    run("export.py", str(exp), str(out), "--smoke")
    tags = PunctCaseTagger(out).tag("HELLO HOW ARE YOU".split())
    assert len(tags) == 4
    assert all(mark in ("", ",", ".", "?") and casing in ("lower", "cap", "upper")
               for mark, casing in tags)
