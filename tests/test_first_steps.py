"""docs/first-steps.md as a reader follows it: every shell command of the page, in order,
and the outputs the page shows.

What differs from a reader's run, and only this:

- the commands run in the test's own environment, where the package and its extras are
  already installed: a fresh virtual environment per run would cost minutes of CI, so the
  page's environment lines (``ENVIRONMENT`` below: the venv, its activation, the two
  ``pip install``) are checked to be on the page, in order, and not run;
- ``REPO`` is this repository, cloned into a temporary folder (the later commands run in
  that clone, with this tree's ``streamdec``);
- the port: the page's 6006 becomes a free loopback port, so a server already on 6006
  cannot answer in our place;
- ``streamdec serve`` runs in the background until the end (the page says to leave it
  running), and the commands after it run once its log says it is listening;
- before ``/health`` is asked, the test waits (a reader's pace) until the server has let
  the client before it go, which it does just after that client's last message.

A ``text`` block right after a shell block is the output of that block's last command,
compared exactly (trailing blanks aside)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from server_utils import UNIT, get

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "first-steps.md"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)
ENVIRONMENT = ["python3 -m venv .venv", ". .venv/bin/activate", "python3 -m pip install -e .",
               "python3 -m pip install -e '.[server]'"]
SERVE = "streamdec serve --port 6006"


def steps() -> list[tuple[list[str], str | None]]:
    """The page's shell blocks in order, as (command lines, the output shown after it)."""
    found: list[tuple[list[str], str | None]] = []
    for match in FENCE.finditer(PAGE.read_text(encoding="utf-8")):
        language, body = match.groups()
        if language == "sh":
            found.append(([line for line in body.splitlines() if line.strip()], None))
        elif language == "text":
            assert found and found[-1][1] is None, "a text block follows a shell block"
            found[-1] = (found[-1][0], body)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_page_lists_its_environment_lines_and_its_commands():
    lines = [line for commands, _ in steps() for line in commands]
    assert [line for line in lines if line in ENVIRONMENT] == ENVIRONMENT
    assert lines.count(SERVE) == 1
    assert len(steps()) == 10 and sum(out is not None for _, out in steps()) == 5


def test_the_install_size_is_the_installation_pages():
    table = (ROOT / "docs" / "installation.md").read_text(encoding="utf-8")
    size = re.search(r"^\| \(none\) \|.*\| ([\d.]+ [MG]B) \|$", table, re.M).group(1)
    assert f"({size} in a fresh virtual environment" in PAGE.read_text(encoding="utf-8")


def test_readme_starts_with_the_pages_first_lines():
    """README's clone and virtual environment are the page's, and its install line too."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [body for language, body in FENCE.findall(readme) if language == "sh"]
    first = [line for commands, _ in steps()[:2] for line in commands]
    assert blocks[0].splitlines() == first
    assert blocks[1].startswith(ENVIRONMENT[2] + " && streamdec transcribe examples/hello.wav")


@pytest.mark.slow
def test_every_command_of_first_steps_runs_and_prints_what_the_page_shows(tmp_path):
    assert (ROOT / ".git").exists(), "the page clones the repository: run this test in a clone"
    port = str(free_port())
    env = {**os.environ, "REPO": str(ROOT), "PYTHONPATH": os.pathsep.join(
        p for p in [str(ROOT), os.environ.get("PYTHONPATH", "")] if p)}
    cwd, server, ran, outputs = tmp_path, None, 0, {}
    try:
        for commands, shown in steps():
            for line in commands:
                if line in ENVIRONMENT:
                    continue
                line = line.replace("6006", port)
                ran += 1
                if line.startswith("streamdec serve"):
                    server = start_server(line, cwd, env)
                    continue
                if line.startswith("cd "):
                    cwd = cwd / line[3:].strip()
                    assert cwd.is_dir(), line
                    continue
                if "/health" in line:
                    wait_for_no_connection(port)
                run = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=cwd, env=env,
                                     capture_output=True, text=True, timeout=180 * UNIT)
                assert run.returncode == 0, f"{line}\n---\n{run.stderr}"
                output = outputs[line] = run.stdout
            if shown is not None:
                assert [s.rstrip() for s in output.strip("\n").split("\n")] == \
                    [s.rstrip() for s in shown.strip("\n").split("\n")], line
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30 * UNIT)
    assert ran == sum(len(c) for c, _ in steps()) - len(ENVIRONMENT)
    # the page says why the server's words differ from transcribe's, while they do
    transcribed = outputs["streamdec transcribe examples/hello.wav"].strip()
    streamed = outputs[f"python3 clients/sherpa_file.py examples/hello.wav --url "
                       f"ws://127.0.0.1:{port}/"].split(maxsplit=1)[1].strip()
    assert (transcribed != streamed) == ("a few words differ from `transcribe`'s" in
                                         PAGE.read_text(encoding="utf-8"))
    assert server is not None and server.returncode == 0


def wait_for_no_connection(port: str) -> None:
    deadline = time.monotonic() + 10 * UNIT
    while json.loads(get(f"http://127.0.0.1:{port}/health")[1])["connections"] != 0:
        assert time.monotonic() < deadline, "the server still counts a connection"
        time.sleep(0.05)


def start_server(line: str, cwd: Path, env: dict) -> subprocess.Popen:
    """``line`` in the background; returns once its log says it listens on the port."""
    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=cwd, env=env,
                            stderr=subprocess.PIPE, text=True)
    deadline, log = time.monotonic() + 120 * UNIT, []
    for entry in proc.stderr:
        log.append(entry)
        if '"event": "listening"' in entry:
            assert json.loads(entry[entry.index("{"):])["port"] == int(line.split()[-1])
            break
        if time.monotonic() > deadline:
            break
    else:
        raise AssertionError("the server ended:\n" + "".join(log))
    assert '"event": "listening"' in log[-1], "".join(log)
    # keep reading its log, so that it never blocks on a full pipe
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc
