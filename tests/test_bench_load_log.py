"""``bench --load`` says what the server said when a request failed (issue 51, point 9):
a 5xx's traceback, not the tail of a log that 50 clients fill with access lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sourcepage.bench import load
from sourcepage.cli import app as cli

TRACEBACK = [
    "INFO:     Application startup complete.",
    "ERROR:    internal error on POST /search",
    "Traceback (most recent call last):",
    '  File "pipeline.py", line 1, in search',
    "KeyError: 'doc'",
    'INFO:     127.0.0.1:40000 - "POST /search HTTP/1.1" 500 Internal Server Error',
]


def _log(before: int, after: int) -> str:
    ok = 'INFO:     127.0.0.1:{} - "GET /pages/a%23p1 HTTP/1.1" 200 OK'
    lines = [ok.format(40001 + i) for i in range(before)] + TRACEBACK
    return "\n".join(lines + [ok.format(50001 + i) for i in range(after)])


def test_server_errors_keep_the_traceback_and_drop_answered_requests() -> None:
    text = _log(200, 2000)  # the traceback early in a long run: 200 kB after it
    assert TRACEBACK[2] not in text[-6000:]  # what a tail of the log kept
    assert load.server_errors(text) == "\n".join(TRACEBACK)
    assert load.server_errors(text, limit=20) == "\n".join(TRACEBACK)[-20:]


def test_bench_load_prints_the_servers_account_of_a_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kinds = {"search": {"requests": 9, "errors": 1, "refused": 0, "p50_ms": 1.0, "p95_ms": 2.0}}
    result: dict[str, Any] = {
        "clients": 50,
        "wall_seconds": 6.0,
        "requests": 9,
        "requests_per_s": 1.5,
        "p50_ms": 1.0,
        "p95_ms": 2.0,
        "max_ms": 3.0,
        "errors": 1,
        "by_kind": kinds,
        "server_log": load.server_errors(_log(5, 5)),
    }
    monkeypatch.setattr(load, "run_load", lambda *a, **k: result)
    res = CliRunner().invoke(cli, ["bench", "--load", "--store", str(tmp_path)])
    assert res.exit_code == 1
    assert "KeyError: 'doc'" in res.output and "internal error on POST /search" in res.output
