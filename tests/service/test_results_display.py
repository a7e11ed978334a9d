"""The small things a reader of the results trips on (issue 49), each through real requests
or the real command: card passages end at a sentence or word with "…"; a first quote not
from the top page says why; ranks that skip where near-duplicates were folded say so; the
reviewed question's answer is printed as the answer; ``make demo`` names its report once;
the ``index`` table does not pass the cached vectors' load off as the dense build."""

from __future__ import annotations

import csv
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sourcepage import api
from sourcepage.cli import app as cli
from sourcepage.ingest import ingest
from sourcepage.retrieval.index import build_indexes
from sourcepage.service.app import create_app
from sourcepage.service.deps import CARD_CHARS, excerpt

ROOT = Path(__file__).resolve().parents[2]
LOCAL = "http://127.0.0.1"
#: on the test store, bm25's top page for it is not the page its first quote is from
OFF_TOP = "What is an affected employee?"


def _passages(page: str) -> list[str]:
    found = re.findall(r'<blockquote class="passage">(.*?)</blockquote>', page, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", p)) for p in found]


def test_excerpt_ends_at_a_sentence_or_a_word() -> None:
    text = "Heading\nThe first sentence ends here. " + "word " * 150 + "Last. More text follows."
    shown, _ = excerpt(text, [(0, 7)])
    assert shown.endswith(" …") and len(shown) <= CARD_CHARS + 2
    assert text.startswith(shown[:-2]) and text[len(shown) - 2] == " "  # cut between words
    sentences = "One sentence here. " * 40 + "the lock is removed by its owner. " + "And more. " * 80
    at = sentences.find("lock")
    shown, marks = excerpt(sentences, [(at, at + 4)])
    assert shown.startswith("… the lock is removed") and shown.endswith(". …")  # from its sentence
    assert [shown[a:b] for a, b in marks] == ["lock"]
    assert excerpt("Short.", [(0, 5)]) == ("Short.", [(0, 5)])


def test_cards_end_whole_and_the_first_quote_says_why_it_is_not_the_top_page(fresh_store: Path) -> None:
    with TestClient(create_app(fresh_store), base_url=LOCAL) as c:
        res = c.post("/search", json={"question": OFF_TOP, "method": "bm25", "k": 10}).json()
        page = c.get("/", params={"q": OFF_TOP, "method": "bm25", "k": 10}).text
        css = c.get("/static/style.css").text
    full = {r["page"]: r["passage"] for r in res["results"]}
    shown = _passages(page)
    assert len(shown) == len(full) == 10
    for text, r in zip(shown, res["results"], strict=True):
        passage = r["passage"].replace("\ufffe", "-")
        if len(passage) <= CARD_CHARS:
            assert text == passage
        else:
            assert len(text) <= CARD_CHARS + 4
            body = text.rstrip(" …").lstrip("… ")
            assert body in passage
            if not text.endswith("…"):  # no ellipsis: it ends where the passage ends
                assert passage.rstrip().endswith(body), text[-40:]
            else:  # cut after a whole word or sentence
                after = passage[passage.find(body) + len(body)]
                assert re.search(r"[\w.!?;:)\"”’]$", body) and after.isspace()
    assert "max-height" not in re.search(r"\.passage \{[^}]*\}", css).group(0)  # no box cut mid-line
    first, top = res["answer"]["quotes"][0]["page"], res["results"][0]["page"]
    assert first != top, "the question no longer shows the case: pick another"
    rank = next(r["rank"] for r in res["results"] if r["page"] == first)
    note = re.search(r'<p class="quote-note first-note" data-first-rank="(\d+)">(.*?)</p>', page, re.S)
    assert note and note.group(1) == str(rank)
    said = " ".join(html.unescape(note.group(2)).split())
    assert said.startswith(f"The first quote is from {first}, ranked {rank}, not from the top page ({top})")
    out = CliRunner().invoke(
        cli, ["search", OFF_TOP, "--store", str(fresh_store), "--method", "bm25"], terminal_width=200
    )
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert f"the first quote is from {first}, ranked {rank}, not from the top page {top}" in flat


def test_folded_near_duplicates_are_named_where_ranks_skip(fresh_corpus: Path, tmp_path: Path) -> None:
    manifest = fresh_corpus / "manifest.csv"
    rows = list(csv.DictReader(manifest.open(encoding="utf-8")))
    src = next(r for r in rows if r["doc_id"] == "loto_energy_control")
    copy = dict(src, doc_id="loto_copy", file="copy_" + src["file"], jurisdiction="UK")
    shutil.copy(fresh_corpus / "pdf" / src["file"], fresh_corpus / "pdf" / copy["file"])
    with manifest.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows([*rows, copy])
    store = tmp_path / "dup-store"
    ingest(fresh_corpus, store, workers=1)
    build_indexes(store, "raw", ["bm25"])
    question = "Who may remove a lockout device?"
    res = api.search(question, store, method="bm25", k=5, build=False, refer=False)
    folded = [(d, r) for r in res["results"] for d in r["duplicates"]]
    assert folded
    ranks = [r["rank"] for r in res["results"]]
    assert ranks != list(range(1, len(ranks) + 1))  # the ranks skip: the folded pages are counted
    with TestClient(create_app(store), base_url=LOCAL) as c:
        page = c.get("/", params={"q": question, "method": "bm25", "k": 5}).text
    n = len(folded)
    assert f'data-folded="{n}"' in page and f"{n} near-duplicate page" in page
    for d, _ in folded:
        assert f"{d['page']}</a> (rank {d['rank']}" in page
    out = CliRunner().invoke(
        cli, ["search", question, "--store", str(store), "--method", "bm25", "-k", "5"], terminal_width=200
    )
    flat = " ".join(out.output.split())
    assert out.exit_code == 0 and f"{n} near-duplicate page" in flat
    d, r = folded[0]
    assert f"{d['page']} (rank {d['rank']}) under {r['page']}" in flat


def test_make_demo_names_its_report_once() -> None:
    """``sourcepage eval`` prints ``report: …`` itself; the Makefile's targets add no second."""
    dry = subprocess.run(
        ["make", "-n", "demo", "demo-intl", "CORPUS=tests", "INTL=tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "sourcepage eval" in dry.stdout, dry.stdout + dry.stderr
    assert "report:" not in dry.stdout
    evaluation = (ROOT / "src/sourcepage/cli/evaluation.py").read_text(encoding="utf-8")
    assert 'f"report: {out_dir' in evaluation


@pytest.mark.slow  # two worker processes load the embedding model
def test_index_table_times_the_embedding_apart_from_the_dense_build(fresh_store: Path) -> None:
    shutil.rmtree(fresh_store / "indexes", ignore_errors=True)
    res = subprocess.run(
        [sys.executable, "-m", "sourcepage.cli", "index", "--store", str(fresh_store), "--version", "raw"]
        + ["--method", "dense", "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if " raw " in f" {line} "]
    embed = next(line for line in rows if "embed chunks" in line)
    build = next(line for line in rows if "build from the vectors" in line)
    chunks = int(re.findall(r"\b(\d+)\b", build)[0])
    assert re.search(rf"\b{chunks}\b", embed)  # every chunk embedded now, timed on its own row
