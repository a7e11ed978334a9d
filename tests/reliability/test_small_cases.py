"""Smaller cases of issue 51 (point 8): a negative or absurd number of worker processes
was accepted by ``ingest`` and ``index``; it is refused before any work (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage.cli import app


@pytest.mark.parametrize("workers", ["-3", "-5", "100000"])
def test_ingest_and_index_refuse_a_bad_worker_count(
    safety_corpus: Path, tmp_path: Path, workers: str
) -> None:
    store = tmp_path / "store"
    for args in (
        ["ingest", "--corpus", str(safety_corpus), "--store", str(store), "--workers", workers],
        ["index", "--store", str(store), "--workers", workers],
    ):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2, (args[0], res.exit_code, res.output[-500:])
        assert "--workers" in res.output, res.output[-500:]
    assert not store.exists()
