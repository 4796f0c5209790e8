"""The servers ``bench/daemon/load.py`` puts under load, started on the same model files with the
same search and ONNX Runtime thread count, each as its own process on a free loopback port:

- ``streamdec``: ``streamdec serve`` (this package, run by the same Python);
- ``sherpa-onnx``: ``sherpa-onnx-online-websocket-server``, the C++ server of the
  ``sherpa-onnx-bin`` package (the same sherpa-onnx release as the ``sherpa-onnx`` package).

Both speak the sherpa-onnx protocol at ``/``. ``Settings`` holds what the two share; each
start function turns it into its server's command line.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from bench.common.peer import SHERPA_METHODS, batch_fixed_at_one, sherpa_loadable
from streamdec.models.files import ModelFiles

__all__ = ["Settings", "Target", "ServerLog", "PEERS", "REPORT_KEYS", "free_port", "proc_sample", "process_tree",
           "serve_streamdec", "start_streamdec", "start_sherpa_onnx", "sherpa_server_args",
           "sherpa_server_binary"]

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120.0  # seconds for a server to load its model and listen
# the C++ server's --max-batch-size unless one is given to both (its own default is 5; every
# report since the first gave it 32, streamdec's batch size then)
SHERPA_MAX_BATCH = 32


@dataclass(frozen=True)
class Settings:
    """What both servers are given alike."""
    files: ModelFiles  # the model files (peer.model_files: --model-dir, --int8, --model-variant)
    model_args: tuple[str, ...]  # the same choice as streamdec serve flags (peer.serve_model_args)
    model_type: str  # the encoder's model_type metadata (sherpa-onnx needs it named)
    search: str = "greedy"  # greedy or modified_beam
    beam: int = 4  # modified_beam: max active paths
    threads: int = 1  # ONNX Runtime intra-op threads per session
    # streams decoded in one batch; None: streamdec's engine chooses by the model
    # (``streamdec.engine.sizes_for``) and the C++ server gets SHERPA_MAX_BATCH (1 for an
    # encoder exported with a fixed batch of 1)
    max_batch: int | None = None
    streamdec_args: tuple[str, ...] = ()  # more arguments for streamdec serve
    sherpa_args: tuple[str, ...] = ()  # more arguments for the sherpa-onnx server
    source: Path = REPO  # the checkout whose streamdec is served (A/B of a code change)


def process_tree(root: int) -> set[int]:
    """A process and every process below it, as of now (``streamdec serve --ray``: its Ray
    instance, proxy and replicas, which Ray starts and restarts)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
            children.setdefault(parent, []).append(int(name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += children.get(pid, [])
    return found


def _cpu_seconds(stat: str) -> float:
    """User + system CPU seconds in a ``/proc/.../stat`` file (a process's or a thread's)."""
    with open(stat) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_sample(pid: int) -> tuple[float, int]:
    """(CPU seconds used so far, RSS bytes) of a process."""
    cpu = _cpu_seconds(f"/proc/{pid}/stat")
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    return cpu, rss


@dataclass
class Target:
    """A server under measurement: where it listens, its process, how to stop it. ``proc``
    is None for a server this script did not start (it is left running)."""
    name: str
    url: str
    pid: int
    command: list[str] = field(default_factory=list)
    metrics_url: str | None = None  # Prometheus metrics, where the server has them
    proc: subprocess.Popen | None = None
    cleanup: Callable[[], None] | None = None
    log: "ServerLog | None" = None  # its stderr lines after it started listening

    def processes(self) -> set[int]:
        """The server's process and the processes it started."""
        return process_tree(self.pid)

    def sample(self) -> tuple[float, int]:
        """(CPU seconds used so far, RSS bytes), summed over the server's processes (CPU
        of processes that ended meanwhile is not counted)."""
        return self.sample_threads()[:2]

    def sample_threads(self) -> tuple[float, int, float]:
        """``sample`` and, from the same processes, the CPU seconds their main threads used
        so far (streamdec's event loop; the rest of the CPU is its other threads:
        decoding)."""
        cpu = main = 0.0
        rss = 0
        for pid in self.processes():
            try:
                c, r = proc_sample(pid)
                m = _cpu_seconds(f"/proc/{pid}/task/{pid}/stat")
            except (OSError, StopIteration, ValueError, IndexError):  # gone, or a zombie
                continue
            cpu, rss, main = cpu + c, rss + r, main + m
        return cpu, rss, main

    def stop(self) -> int | str | None:
        """SIGTERM, then its exit status (``"killed"`` if it took over a minute)."""
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            status: int | str = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            status = "killed"
        if self.cleanup is not None:
            self.cleanup()
        return status


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerLog:
    """A started server's stderr lines after it was ready, each with the monotonic time it
    was read (the server's own stall diagnostics: ``loop_lag``, ``reads_paused``), kept up
    to ``MAX_LINES`` (later ones are read and dropped); a thread reads them, so the pipe
    never fills."""

    MAX_LINES = 200_000

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def add(self, line: str) -> None:
        if len(self.lines) < self.MAX_LINES:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def since(self, t: float) -> list[tuple[float, str]]:
        """The lines read at or after monotonic time ``t``."""
        return [x for x in list(self.lines) if x[0] >= t]


def _start(cmd: list[str], ready: str, env: dict | None = None, cwd: Path = REPO
           ) -> tuple[subprocess.Popen, ServerLog]:
    """Start ``cmd`` and wait until a line of its stderr holds ``ready``; its later lines
    are then read into a ``ServerLog`` in the background (the pipe never fills)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=cwd, env=env)
    lines: queue.Queue = queue.Queue()

    def drain() -> None:
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=START_TIMEOUT)
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            proc.wait()
            raise SystemExit(f"server did not start: {' '.join(cmd)}\n{''.join(seen[-20:])}")
        seen.append(line)
        if ready in line:
            log = ServerLog()
            threading.Thread(target=lambda: [log.add(x) for x in iter(lines.get, None)],
                             daemon=True).start()
            return proc, log


def serve_streamdec(port: int, args: list[str], source: Path = REPO
                    ) -> tuple[subprocess.Popen, ServerLog]:
    """``streamdec serve --port PORT ARGS...`` (this Python; the package of the checkout
    ``source``: ``python -m`` imports it from the working directory), listening, and its
    log."""
    return _start([sys.executable, "-m", "streamdec", "serve", "--port", str(port),
                   "--max-connections", "2000", *args], '"event": "listening"',
                  cwd=source)


def start_streamdec(settings: Settings) -> Target:
    port = free_port()
    proc, log = serve_streamdec(port, [
        *settings.model_args, "--search", settings.search,
        "--beam", str(settings.beam), "--num-threads", str(settings.threads),
        *(() if settings.max_batch is None else ("--max-batch", str(settings.max_batch))),
        *settings.streamdec_args], settings.source)
    cmd = proc.args
    return Target("streamdec", f"ws://127.0.0.1:{port}/", proc.pid, cmd,
                  f"http://127.0.0.1:{port}/metrics", proc, log=log)


def sherpa_server_binary() -> Path:
    """The C++ server installed by the ``sherpa-onnx-bin`` package (the file itself, not a
    wrapper, so that its process is the one measured)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("sherpa-onnx-bin")
    except PackageNotFoundError:
        raise SystemExit("sherpa-onnx-bin is not installed (pip install -e '.[test]')")
    for f in dist.files or []:
        if Path(str(f)).name == "sherpa-onnx-online-websocket-server":
            return Path(dist.locate_file(f)).resolve()
    raise SystemExit("sherpa-onnx-bin has no sherpa-onnx-online-websocket-server")


def sherpa_server_args(settings: Settings) -> list[str]:
    """The C++ server's options for ``settings`` (the model files streamdec chose)."""
    m = settings.files
    return [f"--tokens={m.tokens}", f"--encoder={m.encoder}", f"--decoder={m.decoder}",
            f"--joiner={m.joiner}", f"--model-type={settings.model_type}",
            f"--decoding-method={SHERPA_METHODS[settings.search]}",
            f"--max-active-paths={settings.beam}", f"--num-threads={settings.threads}",
            f"--max-batch-size={settings.max_batch or _sherpa_batch(m.encoder)}"]


def _sherpa_batch(encoder: Path) -> int:
    """The C++ server's batch size by default: SHERPA_MAX_BATCH, or 1 for an encoder whose
    export fixes the batch at 1 (k2-fsa's ``-mobile`` zipformer2: the C++ server, batching
    such a model, drops every connection; streamdec runs it one stream at a time)."""
    return 1 if batch_fixed_at_one(encoder) else SHERPA_MAX_BATCH


def start_sherpa_onnx(settings: Settings) -> Target:
    import sherpa_onnx

    port = free_port()
    logs = tempfile.TemporaryDirectory(prefix="sherpa-server-")
    # a network streamdec repairs at load goes to the C++ server as its repaired copy
    settings = replace(settings, files=sherpa_loadable(settings.files, Path(logs.name)))
    cmd = [str(sherpa_server_binary()), f"--port={port}", *sherpa_server_args(settings),
           f"--log-file={Path(logs.name) / 'log.txt'}", *settings.sherpa_args]
    # its ONNX Runtime library lies in the sherpa_onnx package, found through an RPATH
    # relative to its install prefix, which a virtual environment moves
    env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(
        filter(None, [str(Path(sherpa_onnx.__file__).parent / "lib"),
                      os.environ.get("LD_LIBRARY_PATH")]))}
    try:
        proc, log = _start(cmd, "Listening on:", env)
    except BaseException:
        logs.cleanup()
        raise
    return Target("sherpa_onnx", f"ws://127.0.0.1:{port}/", proc.pid, cmd, None, proc,
                  logs.cleanup, log)


#: command-line name -> start function
PEERS: dict[str, Callable[[Settings], Target]] = {"streamdec": start_streamdec,
                                                  "sherpa-onnx": start_sherpa_onnx}
#: command-line name -> key of its figures in a report
REPORT_KEYS = {"streamdec": "streamdec", "sherpa-onnx": "sherpa_onnx"}
