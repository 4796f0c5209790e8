"""examples/deploy/streamdec.service is a unit systemd accepts: ``systemd-analyze verify``
(systemd's own checker, from Debian's ``systemd`` package) on the shipped file with only
its ``ExecStart`` program pointed at this environment's ``streamdec`` (the unit names
/opt/streamdec/.venv/bin/streamdec, which a test machine does not have)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "examples" / "deploy" / "streamdec.service"
PROGRAM = "/opt/streamdec/.venv/bin/streamdec"


def test_systemd_analyze_verifies_the_shipped_unit(tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: install Debian's systemd " \
                    "(scripts/install-test-deps.sh)"
    streamdec = shutil.which("streamdec")
    assert streamdec, "the streamdec command is not on PATH: install the package"
    text = UNIT.read_text(encoding="utf-8")
    assert text.count(f"ExecStart={PROGRAM} ") == 1
    unit = tmp_path / "streamdec.service"
    unit.write_text(text.replace(PROGRAM, streamdec))
    run = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and not run.stderr.strip(), run.stderr
