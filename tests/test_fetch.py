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


def test_default_corpus_looks_beside_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sourcepage
    from sourcepage.corpus import fetch

    checkout = Path(sourcepage.__file__).resolve().parents[2]  # src/sourcepage/__init__.py → checkout
    beside = checkout.parent / "shared" / "corpus"
    monkeypatch.chdir(tmp_path)
    if (beside / "manifest.csv").is_file():
        assert fetch.default_corpus() == beside.resolve()
    else:
        assert fetch.default_corpus() is None
    (tmp_path / "shared" / "corpus").mkdir(parents=True)
    (tmp_path / "shared" / "corpus" / "manifest.csv").write_text("doc_id\n")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")  # ../shared/corpus from the working directory comes first
    assert fetch.default_corpus() == (tmp_path / "shared" / "corpus").resolve()


def test_locate_corpus_order_and_errors(
    safety_corpus: Path, server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sourcepage.corpus import fetch

    assert fetch.locate_corpus(tmp_path / "q.jsonl", safety_corpus) == safety_corpus
    monkeypatch.setattr(fetch, "default_corpus", lambda: None)
    with pytest.raises(fetch.CorpusUnavailable, match="no --corpus given") as e:
        fetch.locate_corpus(tmp_path / "q.jsonl")
    assert e.value.report is None
    # a manifest beside the questions: download, report what failed
    manifest = _manifest(safety_corpus, tmp_path / "osha6", server)
    seen: list[Path] = []
    with pytest.raises(fetch.CorpusUnavailable, match="3 of the corpus documents") as e:
        fetch.locate_corpus(manifest.parent / "q.jsonl", cache=tmp_path / "cache", on_download=seen.append)
    assert seen == [manifest] and len(e.value.report.problems) == 3 and len(e.value.report.fetched) == 1
    # every document downloadable: the cached corpus folder
    ok = tmp_path / "ok"
    ok.mkdir()
    rows = list(csv.DictReader((safety_corpus / "manifest.csv").open(encoding="utf-8")))
    for r in rows:
        r["source_url"] = f"{server}/{r['file']}"
    with (ok / "manifest.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    got = fetch.locate_corpus(ok / "q.jsonl", cache=tmp_path / "cache")
    assert got == tmp_path / "cache" / "ok" and len(list((got / "pdf").iterdir())) == len(rows)
