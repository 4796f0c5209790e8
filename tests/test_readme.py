"""The README as a reader uses it: its Python examples run as written (from the project
root) and it points to nothing outside the repository."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_python_examples_run_as_written():
    assert PYTHON_BLOCKS, "the README has no Python example"
    for block in PYTHON_BLOCKS:
        run = subprocess.run([sys.executable, "-c", block], cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, f"{block}\n---\n{run.stderr}"
        assert run.stdout.strip(), "the example prints its results"


def test_links_and_paths_stay_inside_the_repository():
    assert "../" not in README
    for target in re.findall(r"\]\(([^)#]+)\)", README):  # markdown links
        if not re.match(r"[a-z]+://", target):
            assert (ROOT / target).exists(), target
    for path in re.findall(r"`((?:streamdec|recipes|bench|tests|clients|configs|examples)/[\w./-]*)`",
                           README):
        assert (ROOT / path.rstrip("/")).exists() or "*" in path, path
