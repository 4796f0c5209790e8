"""HTTP download into a ``.part`` file that a later call resumes (``Range``).

Beside ``NAME.part`` a small ``NAME.part.json`` remembers the URL and the server's
validator (ETag, else Last-Modified): a resumed request sends ``If-Range`` with it, so a
file that changed on the server is fetched whole again instead of being spliced.
"""

from __future__ import annotations

import http.client
import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

from .. import __version__
from ..errors import ModelDownloadError

__all__ = ["fetch", "discard_partial"]

BLOCK = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def _sidecar(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def discard_partial(part: Path) -> None:
    """Remove a partial download and its sidecar (both may be missing)."""
    part.unlink(missing_ok=True)
    _sidecar(part).unlink(missing_ok=True)


def _open(url: str, have: int, validator: str | None, timeout: float):
    headers = {"User-Agent": f"streamdec/{__version__}", "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
        if validator:
            headers["If-Range"] = validator
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                      timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing after ``have``: complete already, or stale
            e.close()
            total = re.fullmatch(r"bytes \*/(\d+)", e.headers.get("Content-Range") or "")
            return int(total.group(1)) if total else None
        e.close()
        raise ModelDownloadError(f"{url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise ModelDownloadError(f"{url}: cannot download ({reason})") from None


def fetch(url: str, part: Path, *, quiet: bool = False, label: str = "",
          timeout: float = 30.0) -> int:
    """Download ``url`` into ``part``, continuing what an earlier call left there; returns
    the size of the complete file. ModelDownloadError when the server refuses or the
    transfer stops short; the bytes received stay in ``part`` for the next call."""
    meta = {}
    if part.exists() and _sidecar(part).exists():
        try:
            meta = json.loads(_sidecar(part).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
    if meta.get("url") != url:  # a part from elsewhere (or without a sidecar) is not ours
        discard_partial(part)
        meta = {}
    have = part.stat().st_size if part.exists() else 0
    resp = _open(url, have, meta.get("validator"), timeout)
    if resp is None or isinstance(resp, int):  # 416
        if resp == have:
            return have
        discard_partial(part)
        have, resp = 0, _open(url, 0, None, timeout)
    with resp:
        status = getattr(resp, "status", None)
        total = None
        if status == 206:
            answered = resp.headers.get("Content-Range") or ""
            m = _CONTENT_RANGE.fullmatch(answered)
            if not m or int(m.group(1)) != have:
                discard_partial(part)  # the next call starts afresh
                raise ModelDownloadError(f"{url}: the server answered a resumed download "
                                         f"with the wrong range ({answered!r})")
            total = None if m.group(3) == "*" else int(m.group(3))
        else:  # 200 (or a file: URL): the whole file, from the start
            have = 0
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
        validator = resp.headers.get("ETag") or resp.headers.get("Last-Modified")
        part.parent.mkdir(parents=True, exist_ok=True)
        _sidecar(part).write_text(json.dumps({"url": url, "validator": validator}),
                                  encoding="utf-8")
        got = have
        from tqdm import tqdm

        with open(part, "ab" if have else "wb") as out, \
                tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024,
                     desc=label or None, file=sys.stderr, disable=True if quiet else None,
                     leave=True) as bar:
            error = None
            try:
                while True:
                    block = resp.read(BLOCK)
                    if not block:
                        break
                    out.write(block)
                    got += len(block)
                    bar.update(len(block))
            except (OSError, http.client.HTTPException) as e:
                error = e
    if error is not None or (total is not None and got != total):
        of = f" of {total}" if total is not None else ""
        why = f" ({type(error).__name__}: {error})" if error is not None else ""
        raise ModelDownloadError(f"{url}: the download stopped after {got}{of} bytes{why}; "
                                 "they are kept: run the same command again to resume")
    return got
