"""The documentation site as CI builds it: ``mkdocs build --strict`` succeeds on the pages as
committed, and fails on a broken link, a broken anchor, a page missing from the nav or an API
reference that resolves to nothing; the command line reference is what the argparse parsers
say (scripts/cli_reference.py); the plots are drawn from the committed reports by
bench/plots.py, each shown on a page whose caption names those reports; README stays short
and links every page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import cli_reference  # noqa: E402
from bench import plots  # noqa: E402

ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def build(site: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly_with_every_page_the_api_and_the_plots(tmp_path):
    run = build(tmp_path / "site")
    assert run.returncode == 0, run.stderr
    site = tmp_path / "site"
    for page in DOCS.rglob("*.md"):
        html = site / page.relative_to(DOCS).with_suffix("") / "index.html"
        if page.name == "index.md":
            html = site / page.relative_to(DOCS).parent / "index.html"
        assert html.exists(), html
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("streamdec.core.recognizer.Recognizer.create_stream",
                 "streamdec.core.stream.Stream.accept_waveform", "streamdec.errors.AudioInputError",
                 "streamdec.engine.Engine", "streamdec.server.app.create_app"):
        assert f'id="{name}"' in api, name
    model = (site / "builtin-model" / "index.html").read_text(encoding="utf-8")
    assert "the built-in streaming English model" in model  # MODEL.md, included
    for plot in plots.PLOTS:
        assert (site / "plots" / f"{plot.name}.png").exists(), plot.name
    assert (site / "captioning-page.png").exists()


def broken_copy(tmp_path: Path, change) -> Path:
    """A copy of docs/ with one change, and a config that is mkdocs.yml with that copy."""
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    change(docs)
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\n", encoding="utf-8")
    return config


def append(name: str, text: str):
    def change(docs: Path):
        with open(docs / name, "a", encoding="utf-8") as f:
            f.write(text)
    return change


BROKEN = {
    "a link to a missing page": (append("server.md", "\nSee [nothing](no-such-page.md).\n"),
                                 "no-such-page.md"),
    "a link to a missing anchor": (append("server.md", "\nSee [x](call-centers.md#no-such-part).\n"),
                                   "no-such-part"),
    "a page left out of the nav": (append("extra.md", "# Extra\n"), "extra.md"),
    "a page of the nav missing": (lambda docs: (docs / "vad.md").unlink(), "vad.md"),
    "an API reference to nothing": (append("reference/api.md", "\n::: streamdec.no_such_thing\n"),
                                    "no_such_thing"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_strict_build_fails_on(tmp_path, case):
    change, named = BROKEN[case]
    run = build(tmp_path / "site", broken_copy(tmp_path, change))
    assert run.returncode != 0, case
    assert named in run.stderr, run.stderr


def test_the_cli_reference_is_what_the_parsers_say():
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert page == cli_reference.render(), "run: python scripts/cli_reference.py"
    for option in ("--max-decode-delay-ms", "--text-format", "--list-devices", "--catalog", "--order"):
        assert f"`{option}`" in page, option


def test_the_plots_are_drawn_from_the_committed_reports_and_captioned_with_them(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "plots.py"), "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    names = sorted(plot.name for plot in plots.PLOTS)
    assert sorted(p.stem for p in tmp_path.glob("*.png")) == names
    assert sorted(p.stem for p in (DOCS / "plots").glob("*.png")) == names  # none stale
    pages = {p: p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")}
    for plot in plots.PLOTS:
        drawn = (tmp_path / f"{plot.name}.png").read_bytes()
        assert drawn[:8] == b"\x89PNG\r\n\x1a\n" and len(drawn) > 20_000, plot.name
        shown = [text for text in pages.values() if f"(plots/{plot.name}.png)" in text]
        assert len(shown) == 1, f"{plot.name} is shown on {len(shown)} pages"
        caption = shown[0].split(f"(plots/{plot.name}.png)", 1)[1].split("\n\n", 2)[1]
        for source in plot.sources:
            assert (plots.RESULTS / source).exists(), source
            assert f"`bench/results/{source}`" in caption, (plot.name, source)


def test_readme_is_short_and_links_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 100
    linked = set(re.findall(r"\]\(docs/([\w/-]+\.md)\)", readme))
    assert linked == {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert "python -m pip install -e '.[docs]'" in readme and "`mkdocs serve`" in readme


def test_readme_figures_are_the_projects_own():
    """The README's commands and figures are read from where they live: the test command
    is .ci/run's, the server's port its default, the published model's size the catalog's,
    the docs server's address mkdocs.yml's."""
    from streamdec.server.config import ServerConfig
    from streamdec.validation import read_toml

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert ci == "bash scripts/install-test-deps.sh && python3 -m pytest -q"
    assert f"```sh\n{ci}\n```" in readme
    # "runs that second one (two processes)": pytest's options in pyproject.toml, with
    # pytest-xdist in the test extra the first command installs
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "-n 2" in project["tool"]["pytest"]["ini_options"]["addopts"]
    assert any(d.startswith("pytest-xdist") for d in
               project["project"]["optional-dependencies"]["test"])
    assert "CI (`.ci/run`) runs that second one (two processes)." in " ".join(readme.split())
    port = ServerConfig().port
    assert f"# port {port}; a captioning page at http://localhost:{port}/" in readme
    name = "sherpa-onnx-streaming-zipformer-en-2023-06-26"
    catalog = read_toml(ROOT / "streamdec" / "hub" / "catalog.toml", "catalog")
    mb = [e["unpacked_mb"] for e in catalog["model"] if e["name"] == name]
    assert len(mb) == 1, mb
    assert f"downloads a model of {mb[0]} MB (unpacked)" in readme and f"models get {name}" in readme
    addr = re.search(r"^dev_addr: (\S+)", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert addr is not None and f"`mkdocs serve` shows it at http://{addr[1]}." in readme
