"""``streamdec models list | get NAME | path NAME | repair DIR OUT``: published models, one
command away.

``repair DIR OUT`` copies a model directory to OUT with each ONNX file whose downsampling
lost its padding step repaired (``streamdec.models.repair``: what streamdec does itself at
load), for runtimes that load the files as they are (sherpa-onnx). A ``SHA256SUMS`` in DIR
is copied with the lines of the repaired files rewritten to the sums of the files written
(the other lines are kept: those files are copied byte for byte), so that
``sha256sum -c SHA256SUMS`` in OUT checks the copy.

Exit status: 0 done; 1 the download or its checks failed (the message says why, and
whether the bytes received are kept for a resume), or a model file cannot be repaired;
2 a usage error (unknown name, bad catalog file, OUT not empty).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import sys
from pathlib import Path

from ..errors import ModelDownloadError, ModelLoadError
from ..hub import find_entry, install, load_catalog, models_dir
from ..hub.cache import installed_dir
from ..hub.catalog import CATALOG_ENV
from .options import HelpFormatter

#: the checksum file a model directory may carry (``sha256sum`` output: "HEX  NAME" lines)
SUMS = "SHA256SUMS"
_SUM_LINE = re.compile(r"([0-9a-fA-F]{64}) ([ *])(.+)")


def add_parser(sub) -> None:
    p = sub.add_parser("models", help="list and download published models",
                       description="Published streaming transducer models: list them, "
                       "download one into the cache, print where it is. --model NAME (in "
                       "transcribe, mic, serve, config files) then finds it by its name.",
                       formatter_class=HelpFormatter)
    p.set_defaults(run=lambda a: (p.print_help(), 2)[1])
    msub = p.add_subparsers(dest="models_command")
    catalog = argparse.ArgumentParser(add_help=False)
    catalog.add_argument("--catalog", metavar="FILE", help="a catalog file of your own (a "
                         "mirror, in-house models) whose entries add to / replace the "
                         f"built-in ones (default: ${CATALOG_ENV} when set)")

    ls = msub.add_parser("list", parents=[catalog], formatter_class=HelpFormatter,
                         help="the models streamdec can download")
    ls.add_argument("--long", action="store_true", help="every fact of each entry")
    ls.set_defaults(run=run_list)

    get = msub.add_parser("get", parents=[catalog], formatter_class=HelpFormatter,
                          help="download a model into the cache (resumes, verifies)")
    get.add_argument("name", help="a name from 'streamdec models list', or whisper-NAME "
                     "(tiny.en, base, ...: a Whisper model for the second pass, downloaded "
                     "by faster-whisper)")
    src = get.add_mutually_exclusive_group()
    src.add_argument("--url", help="download the archive from here instead (a mirror) "
                     "(default: the catalog's URL)")
    src.add_argument("--from", dest="archive", metavar="FILE",
                     help="install from an archive already on disk (offline) (default: none)")
    get.add_argument("--force", action="store_true",
                     help="download and replace it even when it is there already")
    get.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    get.set_defaults(run=run_get)

    path = msub.add_parser("path", parents=[catalog], formatter_class=HelpFormatter,
                           help="print the directory of a downloaded model")
    path.add_argument("name")
    path.set_defaults(run=run_path)

    fix = msub.add_parser("repair", formatter_class=HelpFormatter,
                          help="write a copy of a model directory that other runtimes load",
                          description="Copy DIR to OUT, repairing each ONNX file whose "
                          "downsampling lost its padding step (k2-fsa's -mobile zipformer2 "
                          "exports): streamdec repairs them itself when it loads them; "
                          "sherpa-onnx and plain ONNX Runtime need the repaired copy. A "
                          f"{SUMS} in DIR is copied with the sums of the repaired files "
                          "rewritten.")
    fix.add_argument("dir", type=Path, help="the model directory")
    fix.add_argument("out", type=Path, help="where the copy goes (a new or empty directory)")
    fix.set_defaults(run=run_repair)


def rewrite_sums(text: str, digests: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` (a SHA256SUMS file) with the sum of each file named in ``digests`` (name ->
    hex sha256) replaced; every other line as it was. Returns the new text and the names
    whose lines were rewritten, in file order."""
    lines, rewritten = [], []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        m = _SUM_LINE.fullmatch(body)
        if m and m.group(3) in digests:
            line = f"{digests[m.group(3)]} {m.group(2)}{m.group(3)}{line[len(body):]}"
            rewritten.append(m.group(3))
        lines.append(line)
    return "".join(lines), rewritten


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _mb(value) -> str:
    return "-" if value is None else f"{value:g}"


def run_list(args: argparse.Namespace) -> int:
    entries = load_catalog(args.catalog)
    if args.long:
        for e in entries.values():
            where = installed_dir(e.name)
            check = ", ".join(x for x in (e.size_bytes and f"{e.size_bytes} bytes",
                                          e.sha256 and f"sha256 {e.sha256}") if x)
            print(f"{e.name}{'  (recommended)' if e.recommended else ''}\n"
                  f"  language {e.language or '-'}; {e.family or '-'}; trained on "
                  f"{e.trained_on or '-'}; chunk {e.chunk or 'not stated'}\n"
                  f"  encoder {_mb(e.encoder_mb)} MB (int8 {_mb(e.encoder_int8_mb)} MB), "
                  f"{_mb(e.unpacked_mb)} MB unpacked; CPU cost {e.cpu or '-'}\n"
                  f"  {e.note}\n  archive {e.url}\n"
                  f"  checked by {check or 'the announced length and the expected files'}\n"
                  f"  docs {e.docs or '-'}\n"
                  f"  {f'downloaded: {where}' if where else 'not downloaded'}")
        return 0
    rows = [("", "NAME", "LANG", "FAMILY", "MB", "ENC MB", "CPU", "CHUNK", "")]
    for e in entries.values():
        rows.append(("*" if e.recommended else "", e.name, e.language or "-", e.family or "-",
                     _mb(e.unpacked_mb), f"{_mb(e.encoder_mb)}/{_mb(e.encoder_int8_mb)}",
                     e.cpu or "-", e.chunk or "-",
                     "downloaded" if installed_dir(e.name) else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"\n* recommended. MB: the model files unpacked; ENC MB: the encoder, fp32/int8; "
          f"CPU: encoder cost (low <= 100 MB, medium <= 260, high). Sizes are the "
          f"publisher's (sherpa-onnx's docs). 'streamdec models list --long' for more.\n"
          f"Cache: {models_dir()}", file=sys.stderr)
    return 0


#: ``models get whisper-NAME``: a Whisper model for the second pass (faster-whisper's own
#: download into the Hugging Face cache; ``--config two-pass`` with ``model = "NAME"``)
WHISPER_PREFIX = "whisper-"


def _get_whisper(args: argparse.Namespace) -> int:
    name = args.name[len(WHISPER_PREFIX):]
    if args.url or args.archive:
        print("streamdec: error: --url and --from are for the catalog's models; "
              f"{args.name} comes from faster-whisper's own download", file=sys.stderr)
        return 2
    try:
        import faster_whisper
    except ImportError:
        print("streamdec: error: Whisper models need faster-whisper: python3 -m pip install "
              "-e '.[two-pass]' in the streamdec folder", file=sys.stderr)
        return 1
    known = faster_whisper.available_models()
    if name not in known:
        print(f"streamdec: error: unknown Whisper model {name!r}: one of "
              f"{', '.join(WHISPER_PREFIX + k for k in known)}", file=sys.stderr)
        return 2
    try:
        path = faster_whisper.download_model(name)
    except Exception as e:  # the hub's errors: network, disk
        print(f"streamdec: error: downloading {args.name} failed: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"streamdec: {args.name} is in faster-whisper's cache (Whisper's weights: MIT "
              f"licence); use it with [second_pass] model = \"{name}\"", file=sys.stderr)
    print(path)
    return 0


def run_get(args: argparse.Namespace) -> int:
    if args.name.startswith(WHISPER_PREFIX):
        return _get_whisper(args)
    entry = find_entry(args.name, args.catalog)
    try:
        done = install(entry, url=args.url, archive=args.archive, force=args.force,
                       quiet=args.quiet)
    except ModelDownloadError as e:
        print(f"streamdec: error: {e}", file=sys.stderr)
        return 1
    if not done.fresh:
        print(f"streamdec: {entry.name} is downloaded already (--force replaces it)",
              file=sys.stderr)
    elif not args.quiet:
        print(f"streamdec: installed {entry.name} (archive sha256 {done.sha256}); use it "
              f"with --model {entry.name}", file=sys.stderr)
    print(done.path)
    return 0


def run_path(args: argparse.Namespace) -> int:
    found = installed_dir(args.name)
    if found is None:
        find_entry(args.name, args.catalog)  # unknown: a usage error (2)
        print(f"streamdec: error: model {args.name!r} is not downloaded yet; run: "
              f"streamdec models get {args.name}", file=sys.stderr)
        return 1
    print(found)
    return 0


def run_repair(args: argparse.Namespace) -> int:
    import onnx

    from ..models.repair import repair_lost_padding

    src, out = args.dir, args.out
    if not src.is_dir():
        print(f"streamdec: error: {src} is not a directory", file=sys.stderr)
        return 2
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(f"streamdec: error: {out} exists and is not an empty directory", file=sys.stderr)
        return 2
    files = sorted(p for p in src.iterdir() if p.is_file())
    repaired: dict[Path, object] = {}
    try:
        for path in files:
            if path.suffix == ".onnx":
                model = onnx.load(str(path))
                if repair_lost_padding(model, path):
                    repaired[path] = model
    except ModelLoadError as e:
        print(f"streamdec: error: {e}", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    for path in files:
        if path in repaired:
            onnx.save(repaired[path], str(out / path.name))
        elif path.name != SUMS:
            shutil.copyfile(path, out / path.name)
    for folder in sorted(p for p in src.iterdir() if p.is_dir()):  # lang/ and the like
        shutil.copytree(folder, out / folder.name)
    for path in repaired:
        print(f"streamdec: repaired {path.name}", file=sys.stderr)
    if (src / SUMS).is_file():
        given = (src / SUMS).read_bytes().decode("utf-8", "surrogateescape")
        text, rewritten = rewrite_sums(given, {path.name: _sha256(out / path.name)
                                               for path in repaired})
        (out / SUMS).write_bytes(text.encode("utf-8", "surrogateescape"))
        if rewritten:
            print(f"streamdec: {SUMS}: rewrote the sums of {', '.join(rewritten)}",
                  file=sys.stderr)
    if not repaired:
        print(f"streamdec: nothing to repair in {src}; copied as it is", file=sys.stderr)
    print(out)
    return 0
