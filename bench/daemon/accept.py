"""How to share a listening port between server processes: SO_REUSEPORT (each worker
binds the port, the kernel spreads connections) or a supervisor that accepts and hands
each socket to a worker (SCM_RIGHTS over a Unix socket pair, round robin).

Each worker answers a request line with its index; a client opens ``--connections``
connections, ``--concurrency`` at a time, and times connect + request + answer. Reports
per mode: connections per second, latency p50/p95/p99, connections per worker, and the
CPU seconds of the supervisor (the handover mode's extra hop).

    python bench/daemon/accept.py --workers 2 --connections 3000 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import resource
import socket
import statistics
import time


def _answer_loop(index: int, serve) -> None:
    async def handle(reader, writer):
        await reader.readline()
        writer.write(f"{index}\n".encode())
        await writer.drain()
        writer.close()

    asyncio.run(serve(handle))


def reuseport_worker(index: int, port: int) -> None:
    async def serve(handle):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        server = await asyncio.start_server(handle, sock=sock, backlog=1024)
        await server.serve_forever()

    _answer_loop(index, serve)


def handover_worker(index: int, channel: socket.socket) -> None:
    async def serve(handle):
        loop = asyncio.get_running_loop()
        tasks = set()  # (the loop keeps only weak references to tasks)
        while True:  # (a thread waits for the next socket; the loop serves meanwhile)
            fd = await loop.run_in_executor(None, _receive_fd, channel)
            conn = socket.socket(fileno=fd)
            reader, writer = await asyncio.open_connection(sock=conn)
            task = loop.create_task(handle(reader, writer))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    _answer_loop(index, serve)


def _receive_fd(channel: socket.socket) -> int:
    _, fds, _, _ = socket.recv_fds(channel, 1, 1)
    return fds[0]


def handover_supervisor(port_out, workers: int, stop) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(workers)]
    procs = [mp.Process(target=handover_worker, args=(i, b)) for i, (_, b) in enumerate(pairs)]
    for p in procs:
        p.start()
    port_out.put(listener.getsockname()[1])
    listener.settimeout(0.2)
    n = 0
    start = resource.getrusage(resource.RUSAGE_SELF)
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        socket.send_fds(pairs[n % workers][0], [b"x"], [conn.fileno()])
        conn.close()
        n += 1
    end = resource.getrusage(resource.RUSAGE_SELF)
    port_out.put((end.ru_utime + end.ru_stime) - (start.ru_utime + start.ru_stime))
    for p in procs:
        p.kill()


async def client(port: int, connections: int, concurrency: int) -> tuple[list[float], dict]:
    latencies, per_worker = [], {}
    gate = asyncio.Semaphore(concurrency)

    async def one():
        async with gate:
            t = time.perf_counter()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"hi\n")
            await writer.drain()
            worker = (await reader.readline()).decode().strip()
            latencies.append(time.perf_counter() - t)
            per_worker[worker] = per_worker.get(worker, 0) + 1
            writer.close()

    await asyncio.gather(*[one() for _ in range(connections)])
    return latencies, per_worker


def report(mode: str, latencies: list[float], per_worker: dict, seconds: float,
           supervisor_cpu: float | None) -> dict:
    q = statistics.quantiles(latencies, n=100)
    return {"mode": mode, "connections_per_s": round(len(latencies) / seconds),
            "p50_ms": round(q[49] * 1000, 2), "p95_ms": round(q[94] * 1000, 2),
            "p99_ms": round(q[98] * 1000, 2), "per_worker": dict(sorted(per_worker.items())),
            "supervisor_cpu_s": supervisor_cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--connections", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    out = []

    # SO_REUSEPORT: a reserved port, every worker binds it
    hold = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    hold.bind(("127.0.0.1", 0))
    port = hold.getsockname()[1]
    procs = [mp.Process(target=reuseport_worker, args=(i, port)) for i in range(args.workers)]
    for p in procs:
        p.start()
    time.sleep(1.0)
    t = time.perf_counter()
    lat, per = asyncio.run(client(port, args.connections, args.concurrency))
    out.append(report("SO_REUSEPORT", lat, per, time.perf_counter() - t, None))
    for p in procs:
        p.kill()
    hold.close()

    # handover: the supervisor accepts and passes each socket on
    queue, stop = mp.Queue(), mp.Event()
    sup = mp.Process(target=handover_supervisor, args=(queue, args.workers, stop))
    sup.start()
    port = queue.get()
    time.sleep(1.0)
    t = time.perf_counter()
    lat, per = asyncio.run(client(port, args.connections, args.concurrency))
    seconds = time.perf_counter() - t
    stop.set()
    out.append(report("handover", lat, per, seconds, round(queue.get(), 3)))
    sup.join()
    print(json.dumps({"workers": args.workers, "connections": args.connections,
                      "concurrency": args.concurrency, "cpus": os.cpu_count(),
                      "results": out}, indent=1))


if __name__ == "__main__":
    main()
