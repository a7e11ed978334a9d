"""BEIR folders: streamed ingest with safe ids, and evaluation that pytrec_eval agrees with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sourcepage.corpus import beir as B
from sourcepage.evaluation.beir import metrics_from_ranked, run_beir
from sourcepage.evaluation.runs import read_trec_run
from sourcepage.ingest import ingest_beir
from sourcepage.records import parse_page_id
from sourcepage.retrieval.search import Searcher
from sourcepage.store.db import Store

TOPICS = {
    "lockout": "lockout tagout energy isolation padlock authorized employee removes lock",
    "guard": "machine guarding point of operation barrier guard fixed interlocked guard",
    "confined": "confined space permit entry attendant atmospheric testing oxygen",
    "ppe": "personal protective equipment gloves goggles respirator hazard assessment",
    "ladder": "ladder scaffold fall protection guardrail harness anchorage",
    "noise": "noise exposure hearing conservation decibel audiometric testing earplugs",
}
# odd BEIR ids: slashes, spaces, '#', case, unicode, CJK, long, numeric, and one that is
# literally the safe id another id maps to (a collision the ingest must resolve)
ODD_IDS = [
    "Doc/1",
    "doc 1",
    "DOC#1",
    "doc1",
    "Ünïcödé-ß",
    "日本語",
    "MED-10",
    "med-10",
    "x" * 120,
    "123",
    B.beir_doc_id("Doc/1"),
    "Q8",
]


def _docs() -> list[tuple[str, str, str]]:
    ids = ODD_IDS + [f"d{i:02d}" for i in range(30 - len(ODD_IDS))]
    topics = list(TOPICS)
    docs = []
    for i, bid in enumerate(ids):
        t = topics[i % len(topics)]
        words = TOPICS[t].split()
        # each document stresses a different subset of its topic's words
        text = " ".join(words[j % len(words)] for j in range(i % 5, i % 5 + 8 + i % 7))
        docs.append((bid, f"{t.title()} document {i}", f"Text {i}: {text}. Other filler words."))
    return docs


QUERIES = {
    "Q1": "who removes the lockout padlock",
    "Q2": "interlocked machine guard barrier",
    "Q3": "confined space atmospheric testing oxygen",
    "Q4": "respirator goggles gloves",
    "Q5": "fall protection harness anchorage",
    "Q6": "hearing conservation audiometric",
    "Q7": "lockout energy isolation",  # judged, but nothing relevant: skipped
    "Q8": "noise exposure decibel earplugs",  # its id is also a document id
    "Q 9": "ladder guardrail scaffold",  # a query id with a space
}


def write_beir(folder: Path, qrels: dict[str, dict[str, int]] | None = None) -> Path:
    folder.mkdir(parents=True)
    docs = _docs()
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for bid, title, text in docs:
            obj = {"_id": bid, "title": title, "text": text, "metadata": {"url": f"https://x.org/{len(bid)}"}}
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for qid, text in QUERIES.items():
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
        f.write(json.dumps({"_id": "Q99", "text": "not in the qrels"}) + "\n")
    if qrels is None:
        by_topic: dict[str, list[str]] = {}
        for i, (bid, _, _) in enumerate(docs):
            by_topic.setdefault(list(TOPICS)[i % len(TOPICS)], []).append(bid)
        topic_of = {"Q1": "lockout", "Q2": "guard", "Q3": "confined", "Q4": "ppe", "Q5": "ladder"}
        topic_of.update({"Q6": "noise", "Q8": "noise", "Q 9": "ladder"})
        qrels = {}
        for qid, t in topic_of.items():
            ids = by_topic[t]
            # graded: 2 for one document, 1 for another, 0 for a third (judged non-relevant)
            qrels[qid] = {ids[0]: 2, ids[1]: 1, ids[-1]: 0}
        qrels["Q6"]["not-in-corpus"] = 1  # a judged id the corpus lacks (counts in IDCG/recall)
        qrels["Q7"] = {by_topic["lockout"][0]: 0, by_topic["lockout"][1]: 0}
    (folder / "qrels").mkdir()
    with open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, judged in qrels.items():
            for cid, s in judged.items():
                f.write(f"{qid}\t{cid}\t{s}\n")
    return folder


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "tinybeir")


# --------------------------------------------------------------------------- ids


def test_doc_ids_are_safe_unique_and_stable():
    for bid in ODD_IDS:
        did = B.beir_doc_id(bid)
        assert parse_page_id(f"{did}#p1") == (did, 1), bid
        assert B.beir_doc_id(bid) == did  # deterministic
    assert B.beir_doc_id("123") == "123" and B.beir_doc_id("d01") == "d01"  # valid ids kept
    assert B.beir_doc_id("Doc/1") != B.beir_doc_id("doc 1") != B.beir_doc_id("DOC#1")
    assert B.beir_doc_id("Ünïcödé-ß").startswith("unicode-")
    assert B.beir_doc_id("日本語").startswith("beir-")
    assert len(B.beir_doc_id("x" * 500)) <= 70
    assert B.trec_id("doc 1") == "doc%201" and B.trec_id("Doc/1") == "Doc/1"


def test_ingest_maps_every_id_round_trip(beir_dir, tmp_path):
    store = tmp_path / "store"
    rep = ingest_beir(beir_dir, store, batch_size=7)
    assert rep.documents == 30 and rep.written == 30 and rep.duplicates == 0
    mapping = B.id_map(store)  # doc_id -> BEIR id
    assert sorted(mapping.values()) == sorted(d[0] for d in _docs())
    assert len(set(mapping)) == 30
    back = {b: d for d, b in mapping.items()}
    # the collision: "Doc/1" came first and keeps its safe id; the literal id gets "-2"
    assert back["Doc/1"] == B.beir_doc_id("Doc/1")
    assert back[B.beir_doc_id("Doc/1")] == B.beir_doc_id("Doc/1") + "-2"
    st = Store(store)
    docs = {d.doc_id: d for d in st.documents()}
    assert set(docs) == set(mapping)
    for doc_id, bid in mapping.items():
        d = docs[doc_id]
        assert d.extra["beir_id"] == bid
        assert d.authority == "BEIR:tinybeir" and d.doc_type == "beir_document" and d.pages == "1"
        assert len(st.page_texts(doc_id)) == 1
    title, text = next((t, x) for b, t, x in _docs() if b == "doc 1")
    d = docs[back["doc 1"]]
    import hashlib

    assert d.title == title and d.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert st.page_texts(d.doc_id, "raw") == [text]
    enriched = st.conn.execute(
        "SELECT text FROM chunks WHERE version='enriched' AND doc_id=?", (d.doc_id,)
    ).fetchall()
    assert [r[0] for r in enriched] == [f"Document: {title}\n{text}"]  # one chunk, title header
    st.close()
    # re-ingest: the file is unchanged, nothing is read
    again = ingest_beir(beir_dir, store)
    assert again.skipped_unchanged_file and again.unchanged == 30
    # a forced re-ingest reads everything, writes nothing and keeps the ids
    forced = ingest_beir(beir_dir, store, force=True)
    assert forced.written == 30 and forced.unchanged == 0
    assert B.id_map(store) == mapping


def test_ingest_incremental_changes_and_duplicates(beir_dir, tmp_path):
    store = tmp_path / "store"
    ingest_beir(beir_dir, store)
    mapping = B.id_map(store)
    lines = (beir_dir / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    changed = json.loads(lines[3])
    changed["text"] = "completely new text about forklifts"
    lines[3] = json.dumps(changed, ensure_ascii=False)
    del lines[5]  # a removed document
    lines.append(lines[0])  # a duplicate id
    (beir_dir / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rep = ingest_beir(beir_dir, store)
    assert (rep.documents, rep.written, rep.unchanged, rep.removed, rep.duplicates) == (29, 1, 28, 1, 1)
    assert any("appears again" in w for w in rep.warnings)
    assert B.id_map(store) == mapping  # ids never move
    res = Searcher(Store(store), "raw").rank("forklifts", "bm25", k=1)
    assert res.hits[0].page_id == f"{B.beir_doc_id(changed['_id'])}#p1"


def test_ingest_streams_the_corpus_line_by_line(beir_dir, tmp_path, monkeypatch):
    """corpus.jsonl is iterated line by line (never read whole), and the first batch is
    written after 4 lines were read, not after all 30."""
    read: list[str] = []

    class LineReader:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def __iter__(self):
            for line in self.f:
                read.append(line)
                yield line

        def read(self, *a):
            pytest.fail("corpus.jsonl read whole")

    real_open = open
    import sourcepage.jsonl as jsonl  # the one JSONL reader, which beir's iter_jsonl reads through

    monkeypatch.setattr(jsonl, "open", lambda *a, **k: LineReader(real_open(*a, **k)), raising=False)
    at_first_write: list[int] = []
    real_write = Store.write_document

    def spy(self, *a, **k):
        if not at_first_write:
            at_first_write.append(len(read))
        return real_write(self, *a, **k)

    monkeypatch.setattr(Store, "write_document", spy)
    rep = ingest_beir(beir_dir, tmp_path / "store", batch_size=4)
    assert rep.documents == 30 and len(read) == 30
    assert at_first_write == [4]


def test_readers(beir_dir):
    q = B.read_qrels(beir_dir, "test")
    assert q["Q7"] and all(s == 0 for s in q["Q7"].values())
    assert set(B.read_queries(beir_dir, {"Q1", "Q 9"})) == {"Q1", "Q 9"}
    assert B.beir_splits(beir_dir) == ["test"]
    with pytest.raises(B.BeirError, match="splits present: test"):
        B.read_qrels(beir_dir, "dev")
    bad = beir_dir / "queries.jsonl"
    bad.write_text('{"_id": "a", "text": "x"}\n{not json\n', encoding="utf-8")
    with pytest.raises(B.BeirError, match=r"queries.jsonl:2: invalid JSON"):
        B.read_queries(beir_dir)


# --------------------------------------------------------------------------- evaluation


@pytest.fixture
def evaluated(beir_dir, tmp_path):
    out = tmp_path / "out"
    m = run_beir(beir_dir, out, ["bm25", "lsa"], ["raw"], "test", None, None, bootstrap=200)
    return beir_dir, out, m


def _pytrec(qrels_path: Path, run_path: Path, measures: set[str], cut: int | None = None) -> dict:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels: dict[str, dict[str, int]] = {}
    with open(qrels_path, encoding="utf-8") as f:  # the ORIGINAL BEIR qrels file
        next(f)
        for line in f:
            qid, cid, s = line.rstrip("\n").split("\t")
            qrels.setdefault(B.trec_id(qid), {})[B.trec_id(cid)] = int(s)
    run = {q: dict(r[:cut] if cut else r) for q, r in read_trec_run(run_path).items()}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def test_metrics_equal_pytrec_eval(evaluated):
    beir_dir, out, m = evaluated
    per_q = [json.loads(x) for x in (out / "per_question.jsonl").read_text().splitlines()]
    qrels_file = beir_dir / "qrels" / "test.tsv"
    for r in m["runs"]:
        run_path = out / "trec" / f"raw__{r['method']}.run"
        full = _pytrec(qrels_file, run_path, {"ndcg_cut_10", "recall_100"})
        top10 = _pytrec(qrels_file, run_path, {"recip_rank"}, cut=10)  # RR@10
        ours = {B.trec_id(p["question_id"]): p for p in per_q if p["method"] == r["method"]}
        assert set(ours) == set(full)  # evaluated queries only: Q7 (nothing relevant) skipped
        for q, p in ours.items():
            assert p["ndcg_cut_10"] == pytest.approx(full[q]["ndcg_cut_10"], abs=1e-6), q
            assert p["recall@100"] == pytest.approx(full[q]["recall_100"], abs=1e-6), q
            assert p["mrr@10"] == pytest.approx(top10[q]["recip_rank"], abs=1e-6), q
        for ours_name, theirs, table in (
            ("ndcg_cut_10", "ndcg_cut_10", full),
            ("recall@100", "recall_100", full),
            ("mrr@10", "recip_rank", top10),
        ):
            mean = sum(v[theirs] for v in table.values()) / len(table)
            assert r[ours_name] == pytest.approx(mean, abs=1e-6)
    # graded nDCG is not trivially 1 or 0 here, and bm25 finds something
    bm25 = next(r for r in m["runs"] if r["method"] == "bm25")
    assert 0 < bm25["ndcg_cut_10"] < 1 and bm25["recall@100"] > 0


def test_ir_measures_agrees_on_written_files(evaluated):
    ir_measures = pytest.importorskip("ir_measures")
    _, out, m = evaluated
    qrels = list(ir_measures.read_trec_qrels(str(out / "trec" / "qrels.txt")))
    for r in m["runs"]:
        run = list(ir_measures.read_trec_run(str(out / "trec" / f"raw__{r['method']}.run")))
        agg = ir_measures.calc_aggregate([ir_measures.nDCG @ 10, ir_measures.R @ 100], qrels, run)
        assert r["ndcg_cut_10"] == pytest.approx(agg[ir_measures.nDCG @ 10], abs=1e-6)
        assert r["recall@100"] == pytest.approx(agg[ir_measures.R @ 100], abs=1e-6)


def test_outputs_skips_and_schema(evaluated):
    beir_dir, out, m = evaluated
    assert m["skipped_queries"] == 1 and m["queries"]["skipped_no_relevant"] == 1
    assert m["queries"]["evaluated"] == 8 and m["depth"] == 100
    assert json.loads((out / "metrics.json").read_text())["skipped_queries"] == 1
    rows = [json.loads(x) for x in (out / "ranked.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["question_id"] for r in rows} == set(QUERIES) - {"Q7"}
    mapping = B.id_map(out / "store")
    qrels = B.read_qrels(beir_dir)
    for r in rows:
        assert set(r) >= {"question_id", "text_version", "method", "rank", "page", "score", "chunk_id"}
        doc_id, n = parse_page_id(r["page"])
        assert n == 1 and mapping[doc_id] == r["beir_id"]
        assert r["grade"] == qrels[r["question_id"]].get(r["beir_id"], 0)
    # the query "Q8" never retrieves the document "Q8" (BEIR's ignore_identical_ids)
    assert not any(r["question_id"] == "Q8" and r["beir_id"] == "Q8" for r in rows)
    # every headline number is recomputed from ranked.jsonl and the qrels
    again = metrics_from_ranked(rows, qrels)
    for a, b in zip(again, m["runs"], strict=True):
        for k, v in a.items():
            assert b[k] == (pytest.approx(v, abs=1e-9) if isinstance(v, float) else v)
    stats = json.loads((out / "stats.json").read_text())
    assert set(stats["ci"]) == {"raw bm25", "raw lsa"}
    mean, lo, hi = stats["ci"]["raw bm25"]["ndcg_cut_10"]
    assert lo <= mean <= hi
    assert stats["pairwise"][0]["comparisons"][0]["a"] == "bm25"
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "nDCG@10" in report and "bm25" in report
    run_lines = (out / "trec" / "raw__bm25.run").read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("Q%209 Q0 ") for line in run_lines)
    assert all(len(line.split()) == 6 for line in run_lines)


def test_cli_ingest_and_eval(beir_dir, tmp_path):
    from typer.testing import CliRunner

    from sourcepage.cli import app

    runner = CliRunner()
    store = tmp_path / "clistore"
    res = runner.invoke(app, ["ingest", "--beir", str(beir_dir), "--store", str(store)])
    assert res.exit_code == 0, res.output
    assert "30 documents" in res.output
    st = Store(store)  # BEIR defaults: one chunk a document, enriched with the title only
    assert st.get_meta("text_settings")["chunk"]["mode"] == "page"
    assert st.get_meta("text_settings")["enrich_fields"] == ["title"]
    st.close()
    out = tmp_path / "cliout"
    res = runner.invoke(
        app,
        [
            "eval",
            "--beir",
            str(beir_dir),
            "--methods",
            "bm25",
            "--out",
            str(out),
            "--store",
            str(store),
            "--bootstrap",
            "100",
        ],
    )
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["runs"][0]["method"] == "bm25" and m["skipped_queries"] == 1
    assert json.loads((out / "run.json").read_text())["ingest"]["skipped_unchanged_file"]  # not re-read
    res = runner.invoke(app, ["eval", "--beir", str(beir_dir), "--split", "dev", "--out", str(out)])
    assert res.exit_code != 0 and "splits present" in res.output
