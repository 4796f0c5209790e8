"""The package's version has one home (``streamdec.__version__``; pyproject.toml reads it):
``streamdec --version`` and the server's ``/health`` report it, and it is the newest
released version in CHANGELOG.md (its first ``## [x.y.z]`` heading; ``[Unreleased]``
comes above it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import streamdec
from server_utils import UNIT, ServerProcess, get

ROOT = Path(__file__).resolve().parents[1]
RELEASED = re.compile(r"^## \[(\d+\.\d+\.\d+)\]", re.MULTILINE)


def test_version_is_semantic_and_pyproject_reads_it_from_the_package():
    assert re.fullmatch(r"\d+\.\d+\.\d+", streamdec.__version__)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "streamdec.__version__"}


def test_cli_reports_the_version():
    out = subprocess.run([sys.executable, "-m", "streamdec", "--version"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60 * UNIT)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"streamdec {streamdec.__version__}\n"


def test_health_reports_the_version():
    server = ServerProcess("--search", "greedy")  # (no words to load: only /health is asked)
    try:
        status, body = get(server.http("/health"))
    finally:
        assert server.stop() == 0
    assert status == 200
    health = json.loads(body)
    assert (health["status"], health["version"]) == ("ok", streamdec.__version__)


def test_changelog_newest_release_is_the_package_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    released = RELEASED.findall(text)
    assert released, "CHANGELOG.md has no released version heading ('## [x.y.z] - date')"
    assert released[0] == streamdec.__version__


def test_ray_serve_health_reports_the_version():
    from streamdec.rayserve.collector import Collector

    health = Collector().health()  # (no replica has reported yet: starting)
    assert (health["status"], health["version"]) == ("starting", streamdec.__version__)
