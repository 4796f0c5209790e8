"""examples/deploy/nginx.conf in a real nginx (Debian's ``nginx`` package, /usr/sbin/nginx):
TLS in front of ``streamdec serve``, WebSocket upgrade, HTTP passed through.

The shipped file is used as written but for its ports, its upstream's port and its
certificate paths (``TEMPLATE`` lists each replacement, and each must match exactly once).
nginx runs as this test's own process (no master process, a temporary prefix) with a
self-signed certificate; the server runs on another free loopback port."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import soundfile as sf

from server_utils import UNIT, ServerProcess, get, sherpa_client, wait_for_logged
from test_server_limits import self_signed

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "examples" / "deploy" / "nginx.conf"
NGINX = "/usr/sbin/nginx"
# nginx's main context around the shipped file: everything under the temporary prefix
MAIN = """daemon off;
master_process off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include {prefix}/streamdec.conf;
}}
"""


def template(text: str, http: int, https: int, upstream: int, cert: Path, key: Path) -> str:
    """The shipped config with only its ports and certificate paths replaced."""
    replacements = [
        ("listen 80;", f"listen 127.0.0.1:{http};"),
        ("listen 443 ssl;", f"listen 127.0.0.1:{https} ssl;"),
        ("server 127.0.0.1:6006;", f"server 127.0.0.1:{upstream};"),
        ("/etc/letsencrypt/live/transcribe.example.com/fullchain.pem", str(cert)),
        ("/etc/letsencrypt/live/transcribe.example.com/privkey.pem", str(key)),
    ]
    for old, new in replacements:
        assert text.count(old) == 1, f"{SHIPPED.name}: {old!r} is not there once"
        text = text.replace(old, new)
    return text


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture(scope="module")
def server():
    s = ServerProcess()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def nginx(server, tmp_path_factory):
    """(https port, http port, an SSL context trusting the certificate)."""
    assert shutil.which(NGINX) or Path(NGINX).exists(), \
        f"{NGINX} is missing: install Debian's nginx (scripts/install-test-deps.sh)"
    prefix = tmp_path_factory.mktemp("nginx")
    cert, key = self_signed(prefix)
    http, https = free_ports(2)
    (prefix / "streamdec.conf").write_text(
        template(SHIPPED.read_text(encoding="utf-8"), http, https, server.port, cert, key))
    (prefix / "nginx.conf").write_text(MAIN.format(prefix=prefix))
    check = subprocess.run([NGINX, "-t", "-p", str(prefix), "-e", str(prefix / "error.log"),
                            "-c", str(prefix / "nginx.conf")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen([NGINX, "-p", str(prefix), "-e", str(prefix / "error.log"),
                             "-c", str(prefix / "nginx.conf")], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10 * UNIT
    while True:
        try:
            socket.create_connection(("127.0.0.1", https), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, (prefix / "error.log").read_text()
            assert time.monotonic() < deadline, "nginx did not listen"
            time.sleep(0.05)
    yield https, http, ssl.create_default_context(cafile=str(cert))
    proc.terminate()
    proc.wait(timeout=10 * UNIT)


def final_text(result: dict) -> str:
    assert result["done"] and result["close"] == 1000, result
    return " ".join(r["text"] for r in result["results"] if r["is_final"] and r["text"])


@pytest.mark.slow
def test_a_stream_through_nginx_over_wss_gives_the_direct_streams_text(server, nginx):
    https, _, context = nginx
    audio, rate = sf.read(ROOT / "examples" / "hello.wav", dtype="float32")
    assert rate == 16000
    before = len(server.connections_logged())
    direct = asyncio.run(sherpa_client(server.url("/"), audio, 1600))
    proxied = asyncio.run(sherpa_client(f"wss://127.0.0.1:{https}/", audio, 1600, ssl=context))
    assert final_text(direct) and final_text(proxied) == final_text(direct)
    # both reached the server, and ended as a client's "Done" ends them
    connections = wait_for_logged(server, before, lambda lines: len(lines) >= 2)
    assert [c["protocol"] for c in connections] == ["sherpa", "sherpa"]
    assert [c["close_code"] for c in connections] == [1000, 1000]


@pytest.mark.slow
def test_health_and_a_file_upload_answer_through_nginx(server, nginx):
    https, http, context = nginx
    status, body = get(f"https://127.0.0.1:{https}/health", context)
    assert status == 200 and json.loads(body)["status"] == "ok", body
    wav = (ROOT / "examples" / "hello.wav").read_bytes()
    texts = []
    for url, ctx in [(server.http("/v1/audio/transcriptions"), None),
                     (f"https://127.0.0.1:{https}/v1/audio/transcriptions", context)]:
        boundary = "streamdec-test-boundary"
        form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"hello.wav\"\r\nContent-Type: audio/wav\r\n\r\n").encode() + wav + \
            f"\r\n--{boundary}--\r\n".encode()
        request = urllib.request.Request(url, data=form, method="POST", headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}"})
        with urllib.request.urlopen(request, timeout=60 * UNIT, context=ctx) as r:
            assert r.status == 200
            texts.append(json.loads(r.read())["text"])
    assert texts[0] and texts[1] == texts[0]


@pytest.mark.slow
def test_plain_http_is_sent_to_https(nginx):
    _, http, _ = nginx

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as answer:
        opener.open(f"http://127.0.0.1:{http}/health", timeout=10 * UNIT)
    assert answer.value.code == 301
    assert answer.value.headers["Location"] == "https://127.0.0.1/health"
