"""Corpus download fallback, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import csv
import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from sourcepage.corpus.fetch import fetch_corpus


@pytest.fixture
def server(safety_corpus: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(safety_corpus / "pdf"))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _manifest(safety_corpus: Path, folder: Path, base: str) -> Path:
    rows = list(csv.DictReader((safety_corpus / "manifest.csv").open(encoding="utf-8")))
    rows[0]["source_url"] = f"{base}/{rows[0]['file']}"
    rows[1]["source_url"] = f"{base}/{rows[2]['file']}"  # serves another file: checksum mismatch
    rows[2]["source_url"] = ""
    rows[3]["source_url"] = "http://127.0.0.1:9/nothing.pdf"  # closed port
    folder.mkdir(parents=True)
    with (folder / "manifest.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return folder / "manifest.csv"


def test_fetch_verifies_and_reports(safety_corpus: Path, server: str, tmp_path: Path) -> None:
    manifest = _manifest(safety_corpus, tmp_path / "osha6", server)
    rep = fetch_corpus(manifest, cache=tmp_path / "cache")
    names = [r["doc_id"] for r in csv.DictReader(manifest.open(encoding="utf-8"))]
    assert rep.fetched == [names[0]]
    assert set(rep.problems) == set(names[1:])
    assert "SHA-256" in rep.problems[names[1]]
    assert "no source_url" in rep.problems[names[2]]
    assert "cannot download" in rep.problems[names[3]]
    assert not list((tmp_path / "cache").rglob("*.part"))
    again = fetch_corpus(manifest, cache=tmp_path / "cache")
    assert again.cached == [names[0]] and again.fetched == []
    assert (rep.corpus / "manifest.csv").is_file()
    shutil.rmtree(tmp_path / "cache")
