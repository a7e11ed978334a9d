"""Load tests of the web service on this machine (``sourcepage bench --load``).

Both start ``sourcepage serve`` for a store as a child process on a free port of
127.0.0.1 (``workers`` processes), wait for ``/health``, load it, and stop the server they
started; traffic goes to the loopback address only, and every loop is bounded.

- ``serve_and_load`` (``--questions FILE``): throughput of ``POST /search`` alone. One warm-up
  search per worker and question, then ``clients`` concurrent clients (asyncio, one keep-alive
  HTTP/1.1 connection each) post ``requests`` searches in total (the questions in turn).
  Reported: requests per second, latency p50 / p95 / p99 / max, errors (a status other than
  200, or a failed connection), and the server's CPU milliseconds per request (its processes'
  user + system time, from /proc). The load runs on the same machine as the server: on 2
  cores it takes CPU from it.
- ``run_load`` (no questions file): a reviewer's mix for ``seconds``, in rounds of 20 requests
  (optionally with a re-ingest at half time, and a signed-in reviewer's writes):
  ``POST /search`` (bm25 on the raw text, the safety questions below in turn; 9 of 20),
  ``GET /pages/{id}`` (8), ``GET /documents`` (1) and, when the store knows its corpus,
  ``GET /pages/{id}/image`` (2; else two more ``/documents``), from ``clients`` threads with
  a keep-alive connection each; reported by request kind. A missing BM25 index is built
  before the server starts (the server itself never builds one).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.retrieval.index import load_index
from sourcepage.retrieval.methods import parse_method
from sourcepage.store.db import Store


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


def search_load(
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
    """Until ``/health`` answers: the service answers only after its start-up loaded the
    models of a default search (``service.app.warm``)."""
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
        first = search_load(host, port, bodies[:1], clients=1, requests=1)  # the first after ready
        warm = search_load(
            host, port, bodies, clients=max(1, workers), requests=len(bodies) * max(1, workers)
        )
        cpu0 = server_cpu_seconds(proc.pid)
        result = search_load(host, port, bodies, clients=clients, requests=requests)
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
        "first_search_ms": first["max_ms"],
        "warm_up": {"requests": warm["requests"], "errors": warm["errors"]},
        **result,
    }


MAX_REQUESTS_PER_CLIENT = 100_000
#: the reviewer account ``run_load(writes=True)`` creates in the store
LOAD_REVIEWER = "bench-load"
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


def _start_server(store: Path, port: int, log: Path, workers: int = 1) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sourcepage.cli", "serve", "--store", str(store), "--port", str(port)]
    cmd += ["--workers", str(workers)] if workers > 1 else []
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_healthy("127.0.0.1", port, proc)
    except RuntimeError as e:
        proc.kill()
        raise RuntimeError(f"{e}: see {log}") from None
    return proc


#: one request of the mix: (kind, method, path, body, headers, status that counts as success)
Request = tuple[str, str, str, bytes | None, dict[str, str], int]


def _requests(pages: list[str], images: bool, session: dict[str, str] | None = None) -> list[Request]:
    """One round of the mix, 20 requests; with a signed-in ``session`` (its cookie and
    CSRF headers, and ``reviewer``) the document lists become review writes."""
    out: list[Request] = []
    json_type = {"Content-Type": "application/json"}
    for i in range(20):
        page = pages[(i * 7) % len(pages)].replace("#", "%23")
        if i in (0, 10) and images:
            out.append(("image", "GET", f"/pages/{page}/image", None, {}, 200))
        elif session is not None and (i == 5 or (i in (0, 10) and not images)):
            review = {
                "question": QUESTIONS[i % len(QUESTIONS)],
                "decision": "answer",
                "pages": [pages[(i * 7) % len(pages)]],
                "reviewer": session["reviewer"],
                "note": "bench --load --writes",
            }
            # each write on a new connection, as a browser's posts over time: any worker may take it
            headers = {**json_type, "Cookie": session["cookie"], "X-CSRF-Token": session["csrf"]}
            headers["Connection"] = "close"
            out.append(("write", "POST", "/reviews", json.dumps(review).encode(), headers, 201))
        elif i == 5 or (i in (0, 10) and not images):
            out.append(("documents", "GET", "/documents", None, {}, 200))
        elif i % 5 == 1 or i % 5 == 3:
            out.append(("page", "GET", f"/pages/{page}", None, {}, 200))
        else:
            body = json.dumps({"question": QUESTIONS[i % len(QUESTIONS)], "method": "bm25", "k": 10})
            out.append(("search", "POST", "/search", body.encode(), json_type, 200))
    return out


def _mix_client(
    port: int, mix: list[Request], deadline: float, offset: int, out: list[tuple[str, float, bool, int]]
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    n = 0
    while time.perf_counter() < deadline and n < MAX_REQUESTS_PER_CLIENT:
        kind, method, path, body, headers, want = mix[(offset + n) % len(mix)]
        n += 1
        t0 = time.perf_counter()
        status = 0
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        out.append((kind, (time.perf_counter() - t0) * 1000, status == want, status))


def _warm_up(port: int, workers: int) -> float:
    """Seconds until searches answer: two concurrent searches per worker, each waited for
    up to 10 minutes (a cold worker loads its indexes and the answer policy's sentence
    model on its first search: over a minute on a busy machine, longer than the load's
    60-second client timeout)."""
    body = json.dumps({"question": QUESTIONS[0], "method": "bm25", "k": 10}).encode()

    def one() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            conn.request("POST", "/search", body=body, headers={"Content-Type": "application/json"})
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, daemon=True) for _ in range(2 * max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(660)
    return round(time.perf_counter() - t0, 2)


def _sign_in(port: int, store: Path) -> dict[str, str]:
    """Create the reviewer ``bench-load`` (a new token), sign in through ``/login`` and
    read the session's CSRF token from the search page: what a reviewer's browser does."""
    from sourcepage.store.reviewers import add_reviewer

    token = add_reviewer(store, LOAD_REVIEWER)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        form = urllib.parse.urlencode({"token": token, "next": "/"})
        form_type = {"Content-Type": "application/x-www-form-urlencoded"}
        conn.request("POST", "/login", body=form, headers=form_type)
        resp = conn.getresponse()
        resp.read()
        cookie = (resp.getheader("set-cookie") or "").split(";", 1)[0]
        if resp.status != 303 or not cookie:
            raise RuntimeError(f"sign-in at /login answered {resp.status}")
        conn.request("GET", "/", headers={"Cookie": cookie})
        page = conn.getresponse().read().decode()
    finally:
        conn.close()
    if 'name="csrf" value="' not in page:
        raise RuntimeError("the search page after sign-in carries no CSRF token")
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    return {"reviewer": LOAD_REVIEWER, "cookie": cookie, "csrf": csrf}


def _reingest(store: Path, corpus: Path, log: Path) -> dict[str, Any]:
    """``sourcepage ingest --force`` of ``corpus`` into ``store`` while the load runs (the
    same documents: the indexes stay current, every document is written again)."""
    cmd = [sys.executable, "-m", "sourcepage.cli", "ingest", "--corpus", str(corpus), "--store", str(store)]
    t0 = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.call([*cmd, "--force"], stdout=out, stderr=subprocess.STDOUT, timeout=600)
    return {"corpus": str(corpus), "exit_code": code, "seconds": round(time.perf_counter() - t0, 2)}


def run_load(
    store: str | Path,
    clients: int = 50,
    seconds: float = 30.0,
    workers: int = 1,
    *,
    reingest: str | Path | None = None,
    writes: bool = False,
) -> dict[str, Any]:
    """Serve ``store`` on 127.0.0.1 and load it with ``clients`` for ``seconds``.

    ``reingest`` (a corpus folder): at half time, ``sourcepage ingest --force`` of it into
    the store while the load goes on (the service must swap to the new content without an
    error). ``writes``: a reviewer (``bench-load``, created in the store) signs in once and
    the mix's document lists become review writes under that session, on every worker
    (they go to the store's review log: load a copy)."""
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
    server = _start_server(store, port, log, workers)
    extra: dict[str, Any] = {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            images = bool(json.loads(r.read())["page_images"])
        extra["warm_up_seconds"] = _warm_up(port, workers)
        mix = _requests(pages, images, _sign_in(port, store) if writes else None)
        results: list[list[tuple[str, float, bool, int]]] = [[] for _ in range(clients)]
        t0 = time.perf_counter()
        deadline = t0 + seconds
        threads = [
            threading.Thread(target=_mix_client, args=(port, mix, deadline, i, results[i]), daemon=True)
            for i in range(clients)
        ]
        for t in threads:
            t.start()
        if reingest is not None:
            time.sleep(seconds / 2)
            extra["reingest"] = _reingest(store, Path(reingest), log.with_suffix(".ingest.log"))
        for t in threads:
            t.join(seconds + 120)
        wall = time.perf_counter() - t0
        extra["server_alive"] = server.poll() is None
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)
    summary = _summary([r for rs in results for r in rs], clients, seconds, wall, images) | extra
    if summary["errors"]:  # the server's own account of a failed request (a 5xx's traceback)
        summary["server_log"] = server_errors(log.read_text(errors="replace"))
    log.unlink(missing_ok=True)
    log.with_suffix(".ingest.log").unlink(missing_ok=True)
    return summary


#: uvicorn's access line of a request answered below 500 ('INFO:     127.0.0.1:42376 - "GET /x
#: HTTP/1.1" 200 OK')
_ACCESS = re.compile(r'^INFO:\s+\S+:\d+ - ".*" [1-4]\d\d\b')


def server_errors(text: str, limit: int = 12_000) -> str:
    """The server's log without the access lines of requests answered below 500: what
    it said about a failure (a 5xx's traceback and its access line), its last ``limit``
    characters. The whole log's tail is no use: 50 clients write an access line a
    request, and a traceback from early in the run was pushed out of any tail."""
    kept = [line for line in text.splitlines() if not _ACCESS.match(line)]
    return "\n".join(kept)[-limit:]


def _summary(
    rows: list[tuple[str, float, bool, int]], clients: int, seconds: float, wall: float, images: bool
) -> dict[str, Any]:
    ms = sorted(r[1] for r in rows)
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in sorted({r[0] for r in rows}):
        k_ms = sorted(r[1] for r in rows if r[0] == kind)
        failed = [r[3] for r in rows if r[0] == kind and not r[2]]
        by_kind[kind] = {
            "requests": len(k_ms),
            "errors": len(failed),
            "refused": sum(1 for s in failed if s in (401, 403)),
            "statuses": {str(s): failed.count(s) for s in sorted(set(failed))},
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
