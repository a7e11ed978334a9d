"""A bounded load test: 50 clients against `sourcepage serve` on 127.0.0.1.

The suite runs it for 6 seconds (``SOURCEPAGE_LOAD_SECONDS`` changes that; the figures in
the notes come from ``sourcepage bench --load --clients 50 --seconds 30``). It asserts
what must hold under load: no errors, every kind of request answered, the answer log
untouched (no request asked to log).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage.cli import app as cli

pytestmark = pytest.mark.slow

SECONDS = os.environ.get("SOURCEPAGE_LOAD_SECONDS", "6")


def test_fifty_clients_on_loopback(safety_store: Path, tmp_path: Path) -> None:
    store = Path(shutil.copytree(safety_store, tmp_path / "store"))
    out = tmp_path / "load.json"
    args = ["--store", str(store), "--clients", "50", "--seconds", SECONDS, "--json", str(out)]
    res = CliRunner().invoke(cli, ["bench", "--load", *args])
    assert res.exit_code == 0, res.output
    r = json.loads(out.read_text())
    print(json.dumps({k: v for k, v in r.items() if k != "by_kind"}), json.dumps(r["by_kind"]))
    assert r["errors"] == 0, r.get("server_log")
    # every client answered at least once: at a load average of 15 on 2 cores a request takes
    # 5-6 s and a 6-second run makes 51-56 requests, so more than one each is not promised
    assert r["requests"] >= 50
    assert set(r["by_kind"]) == {"search", "page", "documents", "image"}
    assert all(k["requests"] > 0 for k in r["by_kind"].values())
    assert r["requests_per_s"] > 1
    assert not (store / "answers.jsonl").exists()
