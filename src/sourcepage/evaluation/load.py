"""``sourcepage bench --load``: the web API's throughput under a bounded loopback load.

``serve_and_load`` starts ``sourcepage serve`` on a free loopback port (``workers``
processes), waits for ``/health``, sends one warm-up search per worker and question, then
``clients`` concurrent clients (asyncio, one keep-alive HTTP/1.1 connection each) post
``requests`` searches in total to ``POST /search`` (the questions in turn), and stops the
server it started. Reported: requests per second over the whole run, latency p50 / p95 /
p99 / max per request, errors (a status other than 200, or a failed connection), and the
server's CPU milliseconds per request (its processes' user + system time, from /proc).
The load runs on the same machine as the server: on 2 cores it takes CPU from it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(host: str, port: int, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST /search HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


async def _client(
    host: str,
    port: int,
    reqs: list[bytes],
    next_i: list[int],
    total: int,
    lat: list[float],
    errors: list[str],
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while next_i[0] < total:
            i = next_i[0]
            next_i[0] += 1
            t0 = time.perf_counter()
            writer.write(reqs[i % len(reqs)])
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            lat.append((time.perf_counter() - t0) * 1000)
            if status != 200:
                errors.append(f"HTTP {status}")
    except (OSError, asyncio.IncompleteReadError, ValueError) as e:
        errors.append(f"{type(e).__name__}: {e}")
    finally:
        writer.close()


def run_load(
    host: str, port: int, bodies: list[dict[str, Any]], clients: int = 32, requests: int = 2000
) -> dict[str, Any]:
    """``requests`` searches over ``clients`` connections; throughput and latency."""
    reqs = [_request(host, port, b) for b in bodies]
    lat: list[float] = []
    errors: list[str] = []
    next_i = [0]

    async def main() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(
            *(_client(host, port, reqs, next_i, requests, lat, errors) for _ in range(clients))
        )
        return time.perf_counter() - t0

    seconds = asyncio.run(main())
    a = np.asarray(lat or [float("nan")])
    return {
        "clients": clients,
        "requests": len(lat),
        "errors": len(errors) + (requests - len(lat) if len(lat) < requests else 0),
        "error_examples": sorted(set(errors))[:5],
        "seconds": seconds,
        "requests_per_s": len(lat) / seconds if seconds else 0.0,
        **{f"p{q}_ms": float(np.percentile(a, q)) for q in (50, 95, 99)},
        "max_ms": float(a.max()),
    }


def server_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` and its descendants
    (Linux /proc; 0.0 elsewhere): the server's cost per request, whatever else the
    machine runs."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, stack = 0.0, [pid]
    while stack:
        p = stack.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{p}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, IndexError, ValueError):
            continue
    return total


def _wait_healthy(host: str, port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before answering")
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the server did not answer /health within {timeout:.0f} s")


def serve_and_load(
    store: str | Path,
    questions: list[str],
    method: str = "bm25",
    workers: int = 2,
    clients: int = 32,
    requests: int = 2000,
    k: int = 10,
) -> dict[str, Any]:
    """Start the service on loopback, load it, stop it (see the module docstring)."""
    if not questions:
        raise ValueError("no questions to send")
    host, port = "127.0.0.1", _free_port()
    cmd = [sys.executable, "-m", "sourcepage.cli", "serve", "--store", str(store), "--host", host]
    cmd += ["--port", str(port)] + (["--workers", str(workers)] if workers > 1 else [])
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=os.environ.copy())
    try:
        try:
            _wait_healthy(host, port, proc)
        except RuntimeError as e:
            log.seek(0)
            raise RuntimeError(f"{e}: {log.read().decode(errors='replace')[-2000:]}") from None
        bodies = [{"question": q, "method": method, "k": k} for q in questions]
        warm = run_load(host, port, bodies, clients=max(1, workers), requests=len(bodies) * max(1, workers))
        cpu0 = server_cpu_seconds(proc.pid)
        result = run_load(host, port, bodies, clients=clients, requests=requests)
        cpu = server_cpu_seconds(proc.pid) - cpu0
        result["server_cpu_ms_per_request"] = cpu * 1000 / max(1, result["requests"])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    return {
        "store": str(store),
        "method": method,
        "workers": workers,
        "questions": len(questions),
        "k": k,
        "warm_up": {"requests": warm["requests"], "errors": warm["errors"]},
        **result,
    }
