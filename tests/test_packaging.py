"""The package as a user installs it: the built wheel (not an editable checkout) in a new
virtualenv on the oldest Python the project claims (3.10, where TOML needs ``tomli``)
transcribes with a built-in config named on the command line, and ships the captioning
page."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def oldest_python() -> str:
    """pyenv's Python 3.10 (on these machines' image); an error, not a skip, without it."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.10"
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10*/bin/python3.10")))
    assert found, "no Python 3.10 found under ~/.pyenv/versions: the oldest claimed version"
    return found[-1]


@pytest.mark.slow
def test_wheel_on_python_310_runs_a_builtin_config(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                    str(ROOT)], check=True, timeout=300)
    (wheel,) = wheels.glob("streamdec-*.whl")
    shipped = zipfile.ZipFile(wheel).namelist()
    for page_file in ("index.html", "static/app.js", "static/capture-worklet.js",
                      "static/subtitles.js", "static/style.css"):  # the captioning page
        assert f"streamdec/web/{page_file}" in shipped, page_file
    assert "streamdec/hub/catalog.toml" in shipped  # streamdec models list / get
    compiled_words = [n for n in shipped if n.startswith("streamdec/assets/synthetic-en/lang/.streamdec-cache/")]
    assert len(compiled_words) == 1 and compiled_words[0].endswith(".npz")  # words by default, no compiling
    venv = tmp_path / "venv"
    subprocess.run([oldest_python(), "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                    str(wheel)], check=True, timeout=600)
    work = tmp_path / "elsewhere"  # no configs/ folder around
    work.mkdir()
    (work / "call.wav").write_bytes((ROOT / "examples" / "hello.wav").read_bytes())
    run = subprocess.run([str(venv / "bin" / "streamdec"), "transcribe", "call.wav",
                          "--config", "telephony"], cwd=work, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "PLEASE CALL" in run.stdout
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import streamdec, sys; print(streamdec.__file__, sys.version_info[:2])"],
                           cwd=work, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(venv)) and "(3, 10)" in where
    bad = subprocess.run([str(venv / "bin" / "streamdec"), "transcribe", "call.wav",
                          "--config", "telefony"], cwd=work, capture_output=True, text=True)
    assert bad.returncode == 2
    assert "built-in: accurate, default, low-latency, telephony, two-pass" in bad.stderr
    # the default (words) reads the shipped compiled file: nothing compiled, nothing written
    home = tmp_path / "home"
    site_cache = Path(where.split()[0]).parent / "assets" / "synthetic-en" / "lang" / ".streamdec-cache"
    before = sorted(p.name for p in site_cache.iterdir())
    words = subprocess.run([str(venv / "bin" / "streamdec"), "transcribe", "call.wav"], cwd=work,
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "STREAMDEC_HOME": str(home)})
    assert words.returncode == 0, words.stderr
    assert "PLEASE CALL ME BACK AT FIVE THIRTY" in words.stdout
    assert sorted(p.name for p in site_cache.iterdir()) == before
    assert not (home / "lang-cache").exists()
