"""The examples of README.md and of every page of the documentation site (docs/) as a reader
uses them, from the project root: every Python example runs as written and prints its
results; every shell example runs, or the line before it says why it is not run:

    <!-- not run: needs a microphone -->
    ```sh
    streamdec mic
    ```

(a marker before a page's ``--8<-- "FILE"`` include covers the shell examples of FILE).
Paths the pages name in code (``streamdec/...``, ``bench/...``) exist."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LANGUAGES = {"python", "sh", "text", "toml", "json"}  # every fence names one of these
MARKER = re.compile(r"<!-- not run: (.+?) -->$", re.S)
INCLUDE = re.compile(r'--8<-- "([^"]+)"$')
FENCE = re.compile(r"```(\S*)$")


@dataclass(frozen=True)
class Example:
    where: str  # FILE:LINE of the opening fence
    language: str
    code: str
    not_run: str | None  # the marker's reason


def examples_of(path: Path, inherited: str | None = None) -> list[Example]:
    found, lines, before = [], path.read_text(encoding="utf-8").split("\n"), ""
    i = 0
    while i < len(lines):
        line = lines[i]
        assert not re.match(r"\s+```", line), f"{path}:{i + 1}: an indented fence is not checked"
        marker = MARKER.search(before)
        include = INCLUDE.match(line)
        if include:
            found += examples_of(ROOT / include.group(1), marker.group(1) if marker else None)
        fence = FENCE.match(line)
        if fence:
            end = lines.index("```", i + 1)
            found.append(Example(f"{path.relative_to(ROOT)}:{i + 1}", fence.group(1),
                                 "\n".join(lines[i + 1:end]) + "\n",
                                 marker.group(1) if marker else inherited))
            i = end
        if line.strip():
            before = line
        i += 1
    return found


EXAMPLES = [e for page in PAGES for e in examples_of(page)]
PYTHON = [e for e in EXAMPLES if e.language == "python"]
SHELL = [e for e in EXAMPLES if e.language == "sh"]


def test_the_pages_have_examples_and_every_fence_names_its_language():
    assert len(PYTHON) >= 2 and len(SHELL) >= 20, (len(PYTHON), len(SHELL))
    assert {e.language for e in EXAMPLES} <= LANGUAGES, {e.where: e.language for e in EXAMPLES
                                                         if e.language not in LANGUAGES}


@pytest.mark.parametrize("example", PYTHON, ids=[e.where for e in PYTHON])
def test_the_python_examples_run_as_written(example):
    assert example.not_run is None, f"{example.where}: every Python example runs"
    run = subprocess.run([sys.executable, "-c", example.code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, f"{example.code}\n---\n{run.stderr}"
    assert run.stdout.strip(), "the example prints its results"


@pytest.mark.parametrize("example", SHELL, ids=[e.where for e in SHELL])
def test_the_shell_examples_run_or_say_why_not(example):
    if example.not_run is not None:
        assert len(example.not_run.split()) >= 2, f"{example.where}: say why it is not run"
        return
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", example.code], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{example.code}\n---\n{run.stderr}"
    assert run.stdout.strip(), "the example prints its results"


def test_at_least_one_shell_example_of_readme_and_of_the_site_runs():
    ran = {e.where.split(":")[0] for e in SHELL if e.not_run is None}
    assert "README.md" in ran and any(page.startswith("docs/") for page in ran), ran


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_paths_named_in_code_exist(page):
    text = page.read_text(encoding="utf-8")
    for path in re.findall(
            r"`((?:streamdec|recipes|bench|tests|clients|configs|examples|scripts|docs)/[\w./-]*)`",
            text):
        assert (ROOT / path.rstrip("/")).exists() or "*" in path, f"{page.name}: {path}"


def test_readme_links_stay_inside_the_repository():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "../" not in readme
    for target in re.findall(r"\]\(([^)#]+)\)", readme):  # markdown links
        if not re.match(r"[a-z]+://", target):
            assert (ROOT / target).exists(), target
