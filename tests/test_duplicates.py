"""Near-duplicate pages are grouped in search results, not repeated down the top ten."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from sourcepage import api
from sourcepage.ingest import ingest
from sourcepage.retrieval.duplicates import group, jaccard, shingles


def test_shingle_similarity_hand_computed() -> None:
    a = shingles("one two three four five six")  # 2 shingles
    b = shingles("one two three four five seven")  # shares the first
    assert len(a) == 2 and jaccard(a, b) == 1 / 3
    assert jaccard(a, a) == 1.0 and jaccard(a, frozenset()) == 0.0


def test_a_republished_document_is_grouped_under_its_best_page(fresh_corpus: Path, tmp_path: Path) -> None:
    manifest = fresh_corpus / "manifest.csv"
    rows = list(csv.DictReader(manifest.open(encoding="utf-8")))
    src = rows[0]
    copy = dict(src, doc_id=src["doc_id"] + "_copy", file="copy_" + src["file"], jurisdiction="UK")
    shutil.copy(fresh_corpus / "pdf" / src["file"], fresh_corpus / "pdf" / copy["file"])
    with manifest.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows([*rows, copy])
    store = tmp_path / "dup-store"
    ingest(fresh_corpus, store, workers=1)
    out = api.search("Who may remove a lockout device?", store, method="bm25", k=5)
    pages = [r["page"] for r in out["results"]]
    docs = [r["doc_id"] for r in out["results"]]
    grouped = [d for r in out["results"] for d in r["duplicates"]]
    assert grouped, "the copy's pages should be grouped under the original's"
    assert all(d["similarity"] >= 0.8 for d in grouped)
    # a page and its copy never both occupy a result slot
    for r in out["results"]:
        for d in r["duplicates"]:
            assert d["page"] not in pages
    assert len(pages) == len(set(pages)) and len(docs) <= 5


def test_group_keeps_rank_order(safety_store: Path) -> None:
    from sourcepage.records import Hit

    texts = {"a#p1": "x y z w v u t", "b#p1": "x y z w v u t", "c#p1": "entirely different words here now"}
    hits = [Hit(1, "a#p1", 3.0, "a#p1#c0"), Hit(2, "c#p1", 2.0, "c#p1#c0"), Hit(3, "b#p1", 1.0, "b#p1#c0")]
    g = group(hits, texts.__getitem__)
    assert [h.page_id for h, _ in g] == ["a#p1", "c#p1"] and [d.page_id for d, _ in g[0][1]] == ["b#p1"]


def test_two_corpus_folders_make_one_collection(fresh_corpus: Path, tmp_path: Path) -> None:
    import pytest

    from sourcepage.store.db import Store

    second = Path(shutil.copytree(fresh_corpus, tmp_path / "second"))
    rows = list(csv.DictReader((second / "manifest.csv").open(encoding="utf-8")))
    with (second / "manifest.csv").open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows([dict(r, doc_id=r["doc_id"] + "_b") for r in rows])
    store = tmp_path / "both"
    rep = ingest([fresh_corpus, second], store, workers=1)
    assert len(rep.extracted) == 2 * len(rows) and not rep.removed
    st = Store(store)
    assert len(st.documents()) == 2 * len(rows)
    st.close()
    with pytest.raises(ValueError, match="is also in"):
        ingest([fresh_corpus, fresh_corpus], store, workers=1)
    rep = ingest(fresh_corpus, store, workers=1)  # one folder again: the other's documents go
    assert sorted(rep.removed) == sorted(r["doc_id"] + "_b" for r in rows)
