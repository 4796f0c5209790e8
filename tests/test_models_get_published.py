"""A model directory exactly as published (fixture A: the 2023-06-26 English archive's
names, tokens.txt with #0/#1), packed as sherpa-onnx packs it, served locally, fetched by
``streamdec models get`` and decoded by name: the same transcript as the directory itself."""

import tarfile
from pathlib import Path

from streamdec.cli.main import main
from test_models_get import HELLO, NAME, catalog, leftovers, run, server, home  # noqa: F401

FIXTURE = (Path(__file__).resolve().parent / "fixtures" / "published-layouts"
           / "A-streaming-zipformer2-chunk-16-left-128")


def test_a_published_directory_downloads_and_transcribes_by_name(tmp_path, monkeypatch,
                                                                 capsys, server, home):
    archive = tmp_path / f"{NAME}.tar.bz2"
    with tarfile.open(archive, "w:bz2") as tar:
        tar.add(FIXTURE, arcname=NAME)
    server.routes["/p.tar.bz2"] = (archive.read_bytes(), "range")
    files = sorted(p.name for p in FIXTURE.iterdir() if p.suffix in (".onnx", ".txt"))
    catalog(tmp_path, monkeypatch, server.url + "/p.tar.bz2", files)
    code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert code == 0, err
    assert leftovers(home) == [NAME]
    code, by_name, err = run(capsys, "transcribe", HELLO, "--model", NAME)
    assert code == 0, err
    code, by_path, err = run(capsys, "transcribe", HELLO, "--model", str(FIXTURE))
    assert code == 0 and by_name == by_path and by_name.strip(), (by_name, by_path)
