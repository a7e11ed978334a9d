"""A bounded load test of the web service on this machine (``sourcepage bench --load``).

``run_load`` starts ``sourcepage serve`` for a store as a child process on a free port of
127.0.0.1, lets ``clients`` threads (each with its own keep-alive connection) send
requests for ``seconds``, stops the server and reports requests/s, latency percentiles
and errors. Traffic goes to the loopback address only, to the server this function
started; every loop is bounded by the deadline and by ``MAX_REQUESTS_PER_CLIENT``.

The mix is what a reviewer's browser and an API client send, in rounds of 20 requests:
``POST /search`` (bm25 on the raw text, the safety questions below in turn; 9 of 20),
``GET /pages/{id}`` (8), ``GET /documents`` (1) and, when the store knows its corpus,
``GET /pages/{id}/image`` (2; else two more ``/documents``). Page images render in
limited worker processes, two at a time. A missing BM25 index is
built before the server starts (the server itself never builds one). An error is any
answer other than 200, or a failed connection.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from sourcepage.retrieval.index import load_index
from sourcepage.retrieval.methods import parse_method
from sourcepage.store.db import Store

MAX_REQUESTS_PER_CLIENT = 100_000
QUESTIONS = (
    "Who may remove a lockout device?",
    "What must be done before an employee enters a permit-required confined space?",
    "When is hearing protection required?",
    "How should a bench grinder tongue guard be adjusted?",
    "What is an energy isolating device?",
    "Which gases are tested first before confined space entry?",
    "Who provides personal protective equipment and who pays for it?",
    "How do workers use a group lockbox at shift change?",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentile(sorted_ms: list[float], q: float) -> float:
    if not sorted_ms:
        return 0.0
    i = min(len(sorted_ms) - 1, max(0, round(q * (len(sorted_ms) - 1))))
    return round(sorted_ms[i], 2)


def _ensure_bm25(store: Path) -> None:
    st = Store(store)
    try:
        if load_index(st, "raw", parse_method("bm25")) is None:
            from sourcepage.retrieval.index import build_index

            build_index(st, "raw", parse_method("bm25"))
        pages = st.page_ids()
    finally:
        st.close()
    if not pages:
        raise ValueError(f"store {store} has no pages: ingest a corpus first")


def _start_server(store: Path, port: int, log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sourcepage.cli", "serve", "--store", str(store), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError(f"the server did not start: see {log}") from None
            time.sleep(0.1)


def _requests(pages: list[str], images: bool) -> list[tuple[str, str, str, bytes | None]]:
    """One round of the mix: (kind, method, path, body), 20 requests."""
    out: list[tuple[str, str, str, bytes | None]] = []
    for i in range(20):
        page = pages[(i * 7) % len(pages)].replace("#", "%23")
        if i in (0, 10) and images:
            out.append(("image", "GET", f"/pages/{page}/image", None))
        elif i == 5 or (i in (0, 10) and not images):
            out.append(("documents", "GET", "/documents", None))
        elif i % 5 == 1 or i % 5 == 3:
            out.append(("page", "GET", f"/pages/{page}", None))
        else:
            body = json.dumps({"question": QUESTIONS[i % len(QUESTIONS)], "method": "bm25", "k": 10})
            out.append(("search", "POST", "/search", body.encode()))
    return out


def _client(port: int, mix: list, deadline: float, offset: int, out: list[tuple[str, float, bool]]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    n = 0
    while time.perf_counter() < deadline and n < MAX_REQUESTS_PER_CLIENT:
        kind, method, path, body = mix[(offset + n) % len(mix)]
        n += 1
        t0 = time.perf_counter()
        ok = False
        try:
            headers = {"Content-Type": "application/json"} if body else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            ok = resp.status == 200
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        out.append((kind, (time.perf_counter() - t0) * 1000, ok))
    conn.close()


def run_load(store: str | Path, clients: int = 50, seconds: float = 30.0) -> dict[str, Any]:
    """Serve ``store`` on 127.0.0.1 and load it with ``clients`` for ``seconds``."""
    if not 1 <= clients <= 500:
        raise ValueError(f"clients must be between 1 and 500, got {clients}")
    if not 0 < seconds <= 600:
        raise ValueError(f"seconds must be in (0, 600], got {seconds}")
    store = Path(store).resolve()
    _ensure_bm25(store)
    st = Store(store)
    try:
        pages = sorted(st.page_ids())[:200]
    finally:
        st.close()
    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="sourcepage-load-", suffix=".log")[1])
    server = _start_server(store, port, log)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            images = bool(json.loads(r.read())["page_images"])
        mix = _requests(pages, images)
        results: list[list[tuple[str, float, bool]]] = [[] for _ in range(clients)]
        t0 = time.perf_counter()
        deadline = t0 + seconds
        threads = [
            threading.Thread(target=_client, args=(port, mix, deadline, i, results[i]), daemon=True)
            for i in range(clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + 120)
        wall = time.perf_counter() - t0
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)
    log.unlink(missing_ok=True)
    rows = [r for rs in results for r in rs]
    ms = sorted(r[1] for r in rows)
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in sorted({r[0] for r in rows}):
        k_ms = sorted(r[1] for r in rows if r[0] == kind)
        by_kind[kind] = {
            "requests": len(k_ms),
            "errors": sum(1 for r in rows if r[0] == kind and not r[2]),
            "p50_ms": _percentile(k_ms, 0.5),
            "p95_ms": _percentile(k_ms, 0.95),
        }
    return {
        "clients": clients,
        "seconds": seconds,
        "wall_seconds": round(wall, 2),
        "requests": len(rows),
        "errors": sum(1 for r in rows if not r[2]),
        "requests_per_s": round(len(rows) / wall, 1) if wall else 0.0,
        "p50_ms": _percentile(ms, 0.5),
        "p95_ms": _percentile(ms, 0.95),
        "max_ms": round(ms[-1], 2) if ms else 0.0,
        "by_kind": by_kind,
        "page_images": images,
    }
