"""``streamdec models list | get | path`` and ``--model NAME``, against a local HTTP server
(127.0.0.1, ephemeral port) serving archives packed as sherpa-onnx publishes them: one
top-level directory named like the archive, holding the model files. No other network.

Cases: a good download that then transcribes (also by config file and ``lang --model``); the
2023 archives' file names; a resumed download after the server closed mid-way; a server
that ignores Range; a complete partial (416); a short archive (size mismatch); a wrong
checksum; an archive lacking an expected file; an unreadable archive; members that escape
the directory (``..``, absolute path, symlink and hard link out); an HTTP 404; an unknown
name; a catalog name not downloaded yet; --from FILE and --url; the progress bar; a second
``get`` of the same model while one runs.
"""

import hashlib
import io
import json
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from streamdec.cli.main import main
from streamdec.appconfig import load_config
from streamdec.models.config import BUILTIN_MODEL_DIR

ROOT = Path(__file__).resolve().parents[1]
HELLO = str(ROOT / "examples" / "hello.wav")
NAME = "sherpa-onnx-streaming-zipformer-en-test"
# the names sherpa-onnx's newer archives use (e.g. the 2025 kroko and zh archives)
PLAIN = {"encoder.onnx": "encoder.onnx", "decoder.onnx": "decoder.onnx",
         "joiner.onnx": "joiner.onnx", "tokens.txt": "tokens.txt"}
# the 2023 English archives' names (sherpa-onnx-streaming-zipformer-en-2023-06-26)
STEM = "epoch-99-avg-1-chunk-16-left-128"
DATED = {f"{p}-{STEM}{q}.onnx": f"{p}{q}.onnx" for p in ("encoder", "decoder", "joiner")
         for q in ("", ".int8")} | {"tokens.txt": "tokens.txt"}


def content(published: str, builtin: str, real: bool) -> bytes:
    """The bytes packed for a file: the built-in model's when the test decodes with it,
    else a few distinct bytes (the download and unpack checks never read a model)."""
    return (BUILTIN_MODEL_DIR / builtin).read_bytes() if real and builtin else \
        f"{published}\n".encode()


def pack(files: dict, top: str = NAME, extra=(), real: bool = False) -> bytes:
    """A .tar.bz2 as ``tar cjf`` packs a published model: the directory ``top``, then
    ``top/NAME`` for each published name -> built-in model file, a README.md and
    test_wavs/ as the publisher ships them; then the raw ``extra`` members (TarInfo, bytes)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2") as tar:
        for d in (top, f"{top}/test_wavs"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for published, builtin in {**files, "README.md": "", "test_wavs/0.wav": ""}.items():
            data = content(published, builtin, real)
            info = tarfile.TarInfo(f"{top}/{published}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info, data in extra:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


class Server:
    """Serves ``routes[path] = (bytes, mode)``; mode "range" honours Range/If-Range,
    "close-once" sends half the body of the first answer (announcing all of it) and then
    closes, "no-range" always sends the whole file with 200. Requests are logged."""

    def __init__(self):
        self.routes, self.log = {}, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.log.append((self.path, self.headers.get("Range")))
                if self.path not in server.routes:
                    self.send_error(404)
                    return
                data, mode = server.routes[self.path]
                etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
                start = 0
                rng = self.headers.get("Range")
                if rng and mode != "no-range" and self.headers.get("If-Range", etag) == etag:
                    start = int(rng.removeprefix("bytes=").rstrip("-"))
                if start >= len(data):  # nothing left to send
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = data[start:]
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", etag)
                self.end_headers()
                if mode == "close-once":
                    server.routes[self.path] = (data, "range")
                    body = body[: len(body) // 2]
                self.wfile.write(body)
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMDEC_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def catalog(tmp_path, monkeypatch, url, files, **extra) -> Path:
    """A catalog file of one entry, named by STREAMDEC_CATALOG (as a mirror's would be)."""
    lines = [f'[[model]]\nname = "{NAME}"\nurl = "{url}"\nfiles = {json.dumps(list(files))}']
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    path = tmp_path / "catalog.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setenv("STREAMDEC_CATALOG", str(path))
    return path


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(home: Path) -> list[str]:
    """What the cache holds besides installed models' directories (temp dirs, partials)."""
    models = home / "models"
    found = [p.name for p in models.iterdir() if p.name != ".partial"] if models.exists() else []
    partial = models / ".partial"
    if partial.exists():
        found += [f".partial/{p.name}" for p in partial.iterdir() if not p.name.endswith(".lock")]
    return sorted(found)


def test_get_verifies_installs_and_model_name_transcribes(tmp_path, monkeypatch, capsys,
                                                        server, home):
    data = pack(PLAIN, real=True)
    server.routes["/a.tar.bz2"] = (data, "range")
    catalog(tmp_path, monkeypatch, server.url + "/a.tar.bz2", PLAIN,
            size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    code, out, err = run(capsys, "models", "get", NAME, "--quiet")
    assert code == 0, err
    target = home / "models" / NAME
    assert out == f"{target}\n"
    assert leftovers(home) == [NAME]
    for published, builtin in PLAIN.items():
        assert (target / published).read_bytes() == (BUILTIN_MODEL_DIR / builtin).read_bytes()
    source = json.loads((target / ".streamdec-source.json").read_text())
    assert source["sha256"] == hashlib.sha256(data).hexdigest()

    code, out, err = run(capsys, "models", "path", NAME)
    assert (code, out) == (0, f"{target}\n")
    # one search for both: the copy has the network files only, and a folder without lang/
    # defaults to greedy where the built-in folder defaults to its words
    code, by_name, err = run(capsys, "transcribe", HELLO, "--model", NAME, "--search", "greedy")
    assert code == 0, err
    code, by_path, err = run(capsys, "transcribe", HELLO, "--model", str(BUILTIN_MODEL_DIR),
                             "--search", "greedy")
    assert code == 0 and by_name == by_path and by_name.strip()
    words = tmp_path / "words.txt"
    words.write_text("hello\nworld\n", encoding="utf-8")
    for model, out_dir in ((NAME, "by-name"), (str(BUILTIN_MODEL_DIR), "by-path")):
        assert main(["lang", str(tmp_path / out_dir), "--words", str(words), "--model", model,
                     "--no-fst"]) == 0
    assert (tmp_path / "by-name" / "lexicon.txt").read_text() == \
        (tmp_path / "by-path" / "lexicon.txt").read_text()
    capsys.readouterr()
    cfg = tmp_path / "my.toml"
    cfg.write_text(f'[model]\nmodel_dir = "{NAME}"\n', encoding="utf-8")
    assert load_config(cfg).recognizer.model.model_dir == str(target)

    requests = len(server.log)  # a second get finds it there and downloads nothing
    code, out, err = run(capsys, "models", "get", NAME)
    assert (code, out, len(server.log)) == (0, f"{target}\n", requests)
    assert "downloaded already" in err
    code, out, err = run(capsys, "models", "list")
    assert code == 0 and NAME in out and "downloaded" in out
    assert str(home / "models") in err


def test_the_2023_english_names_install_as_published(tmp_path, monkeypatch, capsys, server,
                                                     home):
    server.routes["/b.tar.bz2"] = (pack(DATED), "range")
    catalog(tmp_path, monkeypatch, server.url + "/b.tar.bz2", DATED)
    code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert code == 0, err
    target = home / "models" / NAME
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [*DATED, ".streamdec-source.json", "README.md", "test_wavs"])
    assert (target / "test_wavs" / "0.wav").read_bytes() == b"test_wavs/0.wav\n"
    for published, builtin in DATED.items():
        assert (target / published).read_bytes() == content(published, builtin, False)


def test_server_closing_midway_keeps_bytes_and_the_next_get_resumes(tmp_path, monkeypatch,
                                                                   capsys, server, home):
    data = pack(PLAIN)
    server.routes["/c.tar.bz2"] = (data, "close-once")
    catalog(tmp_path, monkeypatch, server.url + "/c.tar.bz2", PLAIN,
            sha256=hashlib.sha256(data).hexdigest())
    half = len(data) // 2
    code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert (code, out) == (1, "")
    assert (f"the download stopped after {half} of {len(data)} bytes" in err
            and "run the same command again to resume" in err), err
    assert not (home / "models" / NAME).exists()
    assert leftovers(home) == [f".partial/{NAME}.tar.bz2", f".partial/{NAME}.tar.bz2.json"]
    assert (home / "models" / ".partial" / f"{NAME}.tar.bz2").stat().st_size == half

    code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert code == 0, err
    assert server.log[-1] == ("/c.tar.bz2", f"bytes={half}-")
    assert leftovers(home) == [NAME]
    for published, builtin in PLAIN.items():
        assert (home / "models" / NAME / published).read_bytes() == \
            content(published, builtin, False)


def test_a_server_ignoring_range_restarts_from_zero(tmp_path, monkeypatch, capsys, server,
                                                    home):
    data = pack(PLAIN)
    server.routes["/d.tar.bz2"] = (data, "no-range")
    catalog(tmp_path, monkeypatch, server.url + "/d.tar.bz2", PLAIN, size_bytes=len(data))
    partial = home / "models" / ".partial"
    partial.mkdir(parents=True)
    (partial / f"{NAME}.tar.bz2").write_bytes(b"x" * 1000)  # 1000 wrong bytes, as if ours
    (partial / f"{NAME}.tar.bz2.json").write_text(
        json.dumps({"url": server.url + "/d.tar.bz2", "validator": None}))
    code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert code == 0, err
    assert server.log == [("/d.tar.bz2", "bytes=1000-")]
    assert leftovers(home) == [NAME]


def test_a_complete_partial_left_by_a_killed_get_is_installed(tmp_path, monkeypatch, capsys,
                                                              server, home):
    data = pack(PLAIN)
    server.routes["/h.tar.bz2"] = (data, "range")
    catalog(tmp_path, monkeypatch, server.url + "/h.tar.bz2", PLAIN, size_bytes=len(data))
    partial = home / "models" / ".partial"
    partial.mkdir(parents=True)
    (partial / f"{NAME}.tar.bz2").write_bytes(data)
    etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
    (partial / f"{NAME}.tar.bz2.json").write_text(
        json.dumps({"url": server.url + "/h.tar.bz2", "validator": etag}))
    code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert code == 0, err
    assert server.log == [("/h.tar.bz2", f"bytes={len(data)}-")]  # answered 416: nothing left
    assert leftovers(home) == [NAME]


@pytest.mark.parametrize("case", ["short", "checksum", "missing-file", "not-an-archive"])
def test_an_archive_that_arrived_whole_but_is_wrong_is_deleted(case, tmp_path, monkeypatch,
                                                               capsys, server, home):
    good = pack(PLAIN)
    files, data, check = PLAIN, good, {"sha256": hashlib.sha256(good).hexdigest()}
    if case == "short":  # the server has (and announces) a truncated file
        data, check = good[: len(good) - 100], {"size_bytes": len(good)}
    elif case == "checksum":
        check = {"sha256": "0" * 64}
    elif case == "missing-file":
        files = PLAIN | {"bpe.model": "bpe.model"}
        check = {}
    elif case == "not-an-archive":
        data, check = b"<html>not found</html>", {}
    server.routes["/e.tar.bz2"] = (data, "range")
    catalog(tmp_path, monkeypatch, server.url + "/e.tar.bz2", files, **check)
    code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert (code, out) == (1, "")
    expected = {
        "short": f"{NAME}.tar.bz2: {len(good) - 100} bytes, but the catalog says {len(good)}",
        "checksum": f"{NAME}.tar.bz2: sha256 {hashlib.sha256(good).hexdigest()} does not "
                    f"match the catalog's {'0' * 64}",
        "missing-file": f"{NAME}.tar.bz2: the archive lacks bpe.model",
        "not-an-archive": f"{NAME}.tar.bz2: not a readable .tar.bz2 archive",
    }[case]
    assert err.startswith(f"streamdec: error: {expected}"), err
    assert leftovers(home) == []  # no model, no partial, no temporary directory


def _member(name, kind=tarfile.REGTYPE, data=b"x", link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data if kind == tarfile.REGTYPE else None


@pytest.mark.parametrize("case", ["dotdot", "absolute", "symlink-out", "hardlink-out"])
def test_members_escaping_the_directory_are_refused(case, tmp_path, monkeypatch, capsys,
                                                    server, home):
    escape = tmp_path / "escaped.txt"
    member, why = {
        "dotdot": (_member(f"{NAME}/../../../escaped.txt"), "its path leaves the model directory"),
        "absolute": (_member(str(escape)), "its path leaves the model directory"),
        "symlink-out": (_member(f"{NAME}/tokens2.txt", tarfile.SYMTYPE, link="/etc/passwd"),
                        "it links to '/etc/passwd', outside the model directory"),
        "hardlink-out": (_member(f"{NAME}/t3", tarfile.LNKTYPE, link="../../outside"),
                         "it links to '../../outside', outside the model directory"),
    }[case]
    server.routes["/f.tar.bz2"] = (pack(PLAIN, extra=[member]), "range")
    catalog(tmp_path, monkeypatch, server.url + "/f.tar.bz2", PLAIN)
    code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert (code, out) == (1, "")
    assert err == (f"streamdec: error: {NAME}.tar.bz2: refused to unpack "
                   f"{member[0].name!r}: {why}\n")
    assert not escape.exists() and not (home / "escaped.txt").exists()
    assert leftovers(home) == []


def test_http_error_unknown_name_and_not_downloaded(tmp_path, monkeypatch, capsys, server,
                                                    home):
    catalog(tmp_path, monkeypatch, server.url + "/missing.tar.bz2", PLAIN)
    code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert (code, out) == (1, "")
    assert err == (f"streamdec: error: {server.url}/missing.tar.bz2: HTTP 404 Not Found\n")
    assert leftovers(home) == []

    code, out, err = run(capsys, "models", "get", "no-such-model")
    assert (code, out) == (2, "")
    assert err.startswith("streamdec: error: unknown model 'no-such-model'; "
                          "'streamdec models list' shows the 16 names it knows")

    for argv in (["transcribe", HELLO, "--model", NAME], ["models", "path", NAME]):
        code, out, err = run(capsys, *argv)
        assert (code, out) == ((2, "") if argv[0] == "transcribe" else (1, ""))
        assert err == (f"streamdec: error: model '{NAME}' is not downloaded yet; run: "
                       f"streamdec models get {NAME}\n")
    code, out, err = run(capsys, "transcribe", HELLO, "--model", "no-such-model")
    assert code == 2 and "no-such-model" in err and "streamdec models get" not in err


def test_from_file_offline_and_url_mirror(tmp_path, monkeypatch, capsys, server, home):
    data = pack(PLAIN)
    archive = tmp_path / "offline.tar.bz2"
    archive.write_bytes(data)
    catalog(tmp_path, monkeypatch, "https://example.invalid/a.tar.bz2", PLAIN,
            sha256=hashlib.sha256(data).hexdigest())
    code, out, err = run(capsys, "models", "get", NAME, "--from", str(archive), "-q")
    assert code == 0, err
    assert archive.read_bytes() == data  # the user's file is left alone
    assert leftovers(home) == [NAME]

    server.routes["/mirror.tar.bz2"] = (data, "range")
    code, out, err = run(capsys, "models", "get", NAME, "--force", "-q",
                         "--url", server.url + "/mirror.tar.bz2")
    assert code == 0, err
    assert server.log == [("/mirror.tar.bz2", None)]
    assert leftovers(home) == [NAME]


def test_the_builtin_catalog_lists_the_english_models(capsys, home, monkeypatch):
    monkeypatch.delenv("STREAMDEC_CATALOG", raising=False)
    code, out, err = run(capsys, "models", "list")
    assert code == 0
    names = [line.split()[1] if line.startswith("*") else line.split()[0]
             for line in out.splitlines()[1:]]
    assert names[:5] == ["sherpa-onnx-streaming-zipformer-en-2023-06-26",
                         "sherpa-onnx-streaming-zipformer-en-20M-2023-02-17",
                         "sherpa-onnx-streaming-zipformer-en-2023-06-21",
                         "sherpa-onnx-streaming-zipformer-en-2023-02-21",
                         "sherpa-onnx-lstm-en-2023-02-17"]
    assert len(names) == 15
    recommended = [line.split()[1] for line in out.splitlines() if line.startswith("*")]
    assert recommended == names[:2]
    for url in [line.split()[1] for line in run(capsys, "models", "list", "--long")[1]
                .splitlines() if line.strip().startswith("archive ")]:
        assert url.startswith(("https://github.com/k2-fsa/sherpa-onnx/releases/download/"
                               "asr-models/", "https://github.com/k2-fsa/sherpa-onnx/releases/"
                               "download/kws-models/")) and url.endswith(".tar.bz2")
    # the small real-speech English model, with its licence and its training data's terms
    kws = [n for n in names if "kws-zipformer-gigaspeech-3.3M" in n]
    assert kws == ["sherpa-onnx-kws-zipformer-gigaspeech-3.3M-2024-01-01",
                   "sherpa-onnx-kws-zipformer-gigaspeech-3.3M-2024-01-01-mobile"]
    long = run(capsys, "models", "list", "--long")[1]
    for name in kws:
        entry = long.split(name + "\n", 1)[1].split("\n  docs", 1)[0]
        assert "Apache-2.0" in entry and "non-commercial research and education" in entry, entry


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("quiet", [False, True])
def test_progress_bar_on_a_terminal_unless_quiet(quiet, tmp_path, monkeypatch, server, home):
    data = pack(PLAIN)
    server.routes["/g.tar.bz2"] = (data, "range")
    catalog(tmp_path, monkeypatch, server.url + "/g.tar.bz2", PLAIN)
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    assert main(["models", "get", NAME] + (["--quiet"] if quiet else [])) == 0
    bar = f"{NAME}: 100%"
    assert (bar in err.getvalue()) is not quiet, err.getvalue()


def test_a_second_get_of_the_same_model_while_one_runs_is_refused(tmp_path, monkeypatch,
                                                                 capsys, server, home):
    import fcntl  # POSIX, as the lock is

    catalog(tmp_path, monkeypatch, server.url + "/i.tar.bz2", PLAIN)
    partial = home / "models" / ".partial"
    partial.mkdir(parents=True)
    with open(partial / f"{NAME}.lock", "w") as held:  # as the running get holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        code, out, err = run(capsys, "models", "get", NAME, "-q")
    assert (code, out, server.log) == (1, "", [])
    assert err == (f"streamdec: error: {NAME}: another 'streamdec models get' of this model "
                   "is running\n")
