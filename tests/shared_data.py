"""Where the tests find the shared folder of real speech and the real model, which is never
copied into the project: ``shared/`` beside the repository's checkout.

Looked for, in order:

1. ``$STREAMDEC_SHARED``, when set (a checkout kept elsewhere names its folder this way);
2. ``../shared`` beside this checkout (CI lays it there);
3. ``../shared`` beside the checkout this one was cloned from, when ``origin`` is a folder on
   this machine (a fresh clone made to test a commit).

None found: :data:`SHARED` is the second, so every test that reads it fails naming that path.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _origin_checkout() -> Path | None:
    try:
        url = subprocess.run(["git", "-C", str(REPO), "config", "--get", "remote.origin.url"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not url or "://" in url or url.startswith("git@"):
        return None
    path = Path(url.removeprefix("file:"))
    return path if path.is_absolute() and path.is_dir() else None


def find_shared() -> Path:
    beside = REPO.parent / "shared"
    candidates = []
    if os.environ.get("STREAMDEC_SHARED"):
        candidates.append(Path(os.environ["STREAMDEC_SHARED"]))
    candidates.append(beside)
    origin = _origin_checkout()
    if origin is not None:
        candidates.append(origin.parent / "shared")
    return next((c for c in candidates if c.is_dir()), beside)


SHARED = find_shared()
REAL_EN = SHARED / "data" / "real-en"
REAL_MODEL = SHARED / "models" / "kws-zipformer-gigaspeech-3.3M-mobile"
