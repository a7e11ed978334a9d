"""The judging workflow: pooling, append-only judgments, resumability, kappa,
adjudication, export and the interactive ``sourcepage judge`` command."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage.cli import app
from sourcepage.evaluation.questions import read_questions
from sourcepage.labels import judgments as J
from sourcepage.records import Hit, Question, Ranking
from sourcepage.retrieval.search import Searcher

QUESTIONS = [
    {
        "id": "Q1",
        "question": "Who removes each lock when releasing equipment from lockout?",
        "topic": "loto",
        "type": "direct",
        "answerability": "answerable",
        "answer_points": ["each lock is removed by the employee who applied it"],
        "evidence": [{"page": "loto_energy_control#p3", "grade": 2, "excerpt": "each lock removed"}],
    },
    {
        "id": "Q2",
        "question": "How close must the tongue guard be to the abrasive wheel of a bench grinder?",
        "topic": "machine_guarding",
        "type": "direct",
        "answerability": "answerable",
        "evidence": [
            {"page": "machine_guarding#p2", "grade": 2, "excerpt": "one quarter inch", "source": "draft"}
        ],
        "reviewer_hint": "kept",
    },
    {
        "id": "Q3",
        "question": "What is the maximum noise exposure for an eight hour shift?",
        "topic": "none",
        "type": "direct",
        "answerability": "unsupported",
    },
]


def _questions(tmp_path: Path) -> tuple[Path, list[Question]]:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return path, read_questions(path)


@pytest.fixture
def db(tmp_path: Path):
    conn = J.connect(tmp_path / "j" / "judgments.sqlite")
    yield conn
    conn.close()


class FakeSearcher:
    """Fixed rankings per method, to pin the pool order."""

    version = "raw"

    def __init__(self, rankings: dict[str, list[str]]):
        self.rankings = rankings

    def rank(self, query: str, method: str = "bm25", k: int | None = 20, filters=None) -> Ranking:
        pages = self.rankings[method][:k]
        hits = tuple(Hit(i, p, 1.0 / i, p + "#c1") for i, p in enumerate(pages, 1))
        return Ranking(method, self.version, hits)


# --------------------------------------------------------------------------- pooling


def test_pool_order_best_rank_then_natural_page_order(tmp_path: Path) -> None:
    _, qs = _questions(tmp_path)
    fake = FakeSearcher(
        {
            "bm25": ["d#p10", "d#p2", "e#p1", "d#p3"],
            "lsa": ["d#p9", "d#p10", "d#p3", "f#p1"],
        }
    )
    pooled = J.pool(fake, qs, ["bm25", "lsa"], depth=3)
    # unsupported Q3 is not pooled; ranks: p10 1, p9 1, p2 2, e#p1 3, p3 3 (d#p3 of bm25 is past depth)
    assert list(pooled) == ["Q1", "Q2"]
    assert pooled["Q1"] == ["d#p9", "d#p10", "d#p2", "d#p3", "e#p1"]
    assert J.pool(fake, qs, ["lsa", "bm25"], depth=3) == pooled


def test_pool_real_searcher_is_deterministic(safety_store: Path, tmp_path: Path) -> None:
    _, qs = _questions(tmp_path)
    s = Searcher(safety_store, "raw")
    a = J.pool(s, qs, ["bm25", "lsa"], depth=3)
    b = J.pool({"raw": Searcher(safety_store, "raw")}, qs, ["lsa", "bm25"], depth=3)
    assert a == b
    assert "loto_energy_control#p3" in a["Q1"]
    assert all(len(set(v)) == len(v) and 1 <= len(v) <= 6 for v in a.values())
    with pytest.raises(ValueError, match="no searcher for version"):
        J.pool({"raw": s}, qs, ["bm25@cleaned"])


# --------------------------------------------------------------------------- recording


def test_append_only_history_and_current(db) -> None:
    J.record(db, "Q1", "loto_energy_control#p3", 1, "ann", "first look")
    J.record(db, "Q1", "loto_energy_control#p3", 2, "ann", "on reflection")
    J.record(db, "Q1", "loto_energy_control#p3", 0, "bob")
    rows = J.history(db, "Q1", "loto_energy_control#p3", "ann")
    assert [(r["grade"], r["note"]) for r in rows] == [(1, "first look"), (2, "on reflection")]
    assert all(r["created_at"] for r in rows)
    assert J.current(db) == {
        ("Q1", "loto_energy_control#p3", "ann"): 2,
        ("Q1", "loto_energy_control#p3", "bob"): 0,
    }
    assert J.current(db, "bob") == {("Q1", "loto_energy_control#p3", "bob"): 0}
    with pytest.raises(ValueError, match="bad grade"):
        J.record(db, "Q1", "loto_energy_control#p3", 3, "ann")
    with pytest.raises(ValueError, match="not a page id"):
        J.record(db, "Q1", "loto p3", 1, "ann")
    with pytest.raises(ValueError, match="reserved"):
        J.record(db, "Q1", "loto_energy_control#p3", 1, "adjudicator:ann")
    with pytest.raises(Exception, match="CHECK"):  # the table itself refuses a bad grade
        db.conn.execute(
            "INSERT INTO labels (kind, subject, actor, body, created_at)"
            """ VALUES ('judgment', 'Q1', 'x', '{"page": "a#p1", "grade": 5}', 'now')"""
        )
    assert len(J.history(db)) == 3


def test_pending_shrinks_and_resumes(db, tmp_path: Path) -> None:
    pooled = {"Q1": ["a#p1", "a#p2"], "Q2": ["b#p1"]}
    assert J.pending(db, pooled, "ann") == [("Q1", "a#p1"), ("Q1", "a#p2"), ("Q2", "b#p1")]
    J.record(db, "Q1", "a#p2", 1, "ann")
    J.record(db, "Q1", "a#p1", 0, "bob")  # another reviewer's work is not ann's
    assert J.pending(db, pooled, "ann") == [("Q1", "a#p1"), ("Q2", "b#p1")]
    db.close()
    again = J.connect(tmp_path / "j" / "judgments.sqlite")  # a new session resumes
    J.record(again, "Q2", "b#p1", 2, "ann")
    assert J.pending(again, pooled, "ann") == [("Q1", "a#p1")]
    assert J.pending(again, pooled, "bob") == [("Q1", "a#p2"), ("Q2", "b#p1")]
    again.close()


# --------------------------------------------------------------------------- agreement


def test_cohens_kappa_hand_computed(db) -> None:
    ann = [2, 2, 1, 0, 0, 1]
    bob = [2, 1, 1, 0, 1, 1]
    for i, (a, b) in enumerate(zip(ann, bob, strict=True), 1):
        J.record(db, "Q1", f"d#p{i}", a, "ann")
        J.record(db, "Q1", f"d#p{i}", b, "bob")
    J.record(db, "Q1", "d#p99", 2, "ann")  # only ann judged it: not a pair
    # p_o = 4/6; ann marginals 2/2/2, bob 1/4/1 -> p_e = (2*1 + 2*4 + 2*1) / 36 = 1/3
    # kappa = (2/3 - 1/3) / (1 - 1/3) = 0.5
    k = J.cohens_kappa(db, "ann", "bob")
    assert k["n"] == 6
    assert k["agreement"] == pytest.approx(4 / 6)
    assert k["kappa"] == pytest.approx(0.5)
    dis = J.disagreements(db, "ann", "bob")
    assert [(d["page"], d["ann"], d["bob"]) for d in dis] == [("d#p2", 2, 1), ("d#p5", 0, 1)]
    # binary relevance (grade >= 1): ann 1,1,1,0,0,1 vs bob 1,1,1,0,1,1 -> p_o = 5/6;
    # marginals ann 4/2, bob 5/1 -> p_e = (4*5 + 2*1) / 36 = 11/18; kappa = (5/6 - 11/18) / (7/18) = 4/7
    assert k["agreement_binary"] == pytest.approx(5 / 6)
    assert k["kappa_binary"] == pytest.approx(4 / 7)
    assert J.cohens_kappa(db, "ann", "nobody") == {
        "kappa": None,
        "n": 0,
        "agreement": None,
        "kappa_binary": None,
        "agreement_binary": None,
    }


def test_binary_kappa_ignores_grade_1_vs_2(db) -> None:
    """Grades 1 and 2 are both relevant: they disagree graded but agree binary."""
    for i, (a, b) in enumerate([(2, 1), (1, 2), (0, 0), (1, 1)], 1):
        J.record(db, "Q1", f"d#p{i}", a, "ann")
        J.record(db, "Q1", f"d#p{i}", b, "bob")
    k = J.cohens_kappa(db, "ann", "bob")
    assert k["agreement"] == pytest.approx(0.5)
    assert k["kappa"] < 0.5
    assert k["agreement_binary"] == 1.0 and k["kappa_binary"] == pytest.approx(1.0)
    J.record(db, "Q1", "d#p3", 1, "ann")  # now every ann grade is relevant, bob has one 0
    k = J.cohens_kappa(db, "ann", "bob")
    assert k["agreement_binary"] == pytest.approx(0.75)
    assert k["kappa_binary"] == pytest.approx(0.0)


def test_kappa_uses_latest_judgment(db) -> None:
    J.record(db, "Q1", "d#p1", 0, "ann")
    J.record(db, "Q1", "d#p1", 2, "bob")
    J.record(db, "Q1", "d#p2", 1, "ann")
    J.record(db, "Q1", "d#p2", 1, "bob")
    assert len(J.disagreements(db, "ann", "bob")) == 1
    J.record(db, "Q1", "d#p1", 2, "ann")  # ann changes her mind
    assert J.disagreements(db, "ann", "bob") == []
    assert J.cohens_kappa(db, "ann", "bob")["kappa"] == pytest.approx(1.0)


# --------------------------------------------------------------------------- export


def test_export_adjudication_precedence_and_round_trip(db, tmp_path: Path) -> None:
    _, qs = _questions(tmp_path)
    # Q1: both agree p3 = 2; disagree on p1 (ann 1, bob 0) -> adjudicated 0; p2 agreed 1
    J.record(db, "Q1", "loto_energy_control#p3", 2, "ann")
    J.record(db, "Q1", "loto_energy_control#p3", 2, "bob")
    J.record(db, "Q1", "loto_energy_control#p1", 1, "ann")
    J.record(db, "Q1", "loto_energy_control#p1", 0, "bob")
    J.record(db, "Q1", "loto_energy_control#p2", 1, "ann")
    J.record(db, "Q1", "loto_energy_control#p2", 1, "bob")
    J.adjudicate(db, "Q1", "loto_energy_control#p1", 0, "carol", "isolation, not release")
    # Q2: every pooled page judged 0 -> original evidence kept with a warning
    J.record(db, "Q2", "machine_guarding#p1", 0, "ann")
    J.record(db, "Q2", "machine_guarding#p2", 0, "ann")
    out = tmp_path / "out" / "judged.jsonl"
    rep = J.export(db, qs, out, reviewer="ann")
    back = {q.id: q for q in read_questions(out)}
    assert list(back) == ["Q1", "Q2", "Q3"]  # nothing dropped, order kept
    # the adjudicated 0 beats ann's 1; ann's and the agreed grades stand
    assert back["Q1"].evidence == {"loto_energy_control#p3": 2, "loto_energy_control#p2": 1}
    assert back["Q1"].excerpts == {"loto_energy_control#p3": "each lock removed"}
    assert back["Q2"].evidence == {"machine_guarding#p2": 2}
    assert back["Q2"].excerpts == {"machine_guarding#p2": "one quarter inch"}
    assert back["Q2"].extra["reviewer_hint"] == "kept"
    assert back["Q2"].extra["_evidence_extra"] == {"machine_guarding#p2": {"source": "draft"}}
    assert back["Q3"] == qs[2]
    assert rep.changed == ["Q1"]
    assert any("Q2" in w and "graded 0" in w for w in rep.warnings)
    # an adjudication in favour flips the export, whoever the reviewer is
    J.adjudicate(db, "Q1", "loto_energy_control#p1", 1, "carol")
    J.export(db, qs, out, reviewer="bob")
    assert read_questions(out)[0].evidence["loto_energy_control#p1"] == 1


def test_export_without_reviewer_needs_agreement(db, tmp_path: Path) -> None:
    _, qs = _questions(tmp_path)
    J.record(db, "Q1", "loto_energy_control#p2", 2, "ann")
    J.record(db, "Q1", "loto_energy_control#p2", 0, "bob")
    J.record(db, "Q1", "loto_energy_control#p1", 1, "ann")
    J.record(db, "Q1", "loto_energy_control#p1", 1, "bob")
    J.record(db, "Q3", "loto_energy_control#p1", 1, "ann")
    J.record(db, "Q9", "loto_energy_control#p1", 1, "ann")
    out = tmp_path / "judged.jsonl"
    rep = J.export(db, qs, out)
    q1 = read_questions(out)[0]
    # p3 unjudged keeps its original label, p1 agreed, p2 unresolved and left out
    assert q1.evidence == {"loto_energy_control#p3": 2, "loto_energy_control#p1": 1}
    text = "\n".join(rep.warnings)
    assert "disagree on loto_energy_control#p2" in text
    assert "Q3: unsupported question has pages judged relevant" in text
    assert "Q9: judged, but not in the question set" in text
    J.export(db, qs, out, reviewer="ann")  # ann's own grade settles it for her export
    assert read_questions(out)[0].evidence["loto_energy_control#p2"] == 2


# --------------------------------------------------------------------------- CLI


def test_cli_interactive_resumable(fresh_store: Path, tmp_path: Path) -> None:
    qpath, qs = _questions(tmp_path)
    runner = CliRunner()
    args = ["judge", "--store", str(fresh_store), "--questions", str(qpath), "--reviewer", "ann"]
    args += ["--methods", "bm25", "--depth", "2"]
    res = runner.invoke(app, args, input="2\n\n0\nnot relevant\nq\n")
    assert res.exit_code == 0, res.output
    assert "Q1: Who removes each lock" in res.output
    assert "each lock is removed by the employee who applied it" in res.output
    assert "grade [0/1/2], s=skip, q=quit" in res.output
    assert "recorded 2 judgments; 2 pending" in res.output
    db = J.connect(J.default_path(fresh_store))
    pooled = J.pool(Searcher(fresh_store, "raw"), qs, ["bm25"], depth=2)
    first, second = pooled["Q1"][:2]
    assert J.current(db, "ann") == {("Q1", first, "ann"): 2, ("Q1", second, "ann"): 0}
    assert J.history(db, "Q1", second)[0]["note"] == "not relevant"
    # judgments live in the label log: the store's database has no label table
    store_db = sqlite3.connect(fresh_store / "store.sqlite")
    assert not store_db.execute("SELECT 1 FROM sqlite_master WHERE name LIKE '%label%'").fetchone()
    store_db.close()
    # resume: a skip, then Ctrl-D (end of input) stops; the earlier work stays
    res = runner.invoke(app, args, input="s\n")
    assert res.exit_code == 0, res.output
    assert "2/4 pooled pages judged, 2 to go" in res.output
    assert len(J.pending(db, pooled, "ann")) == 2
    res = runner.invoke(app, args, input="x\n1\n\n2\nfull answer\n")
    assert "answer 0, 1, 2, s or q" in res.output
    assert "0 pending" in res.output
    # a second reviewer, kappa, adjudication and export
    bob = [a if a != "ann" else "bob" for a in args]
    res = runner.invoke(app, bob, input="2\n\n1\n\n1\n\n2\n\n")
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, [*args, "--kappa", "bob"])
    assert res.exit_code == 0, res.output
    assert "Cohen's kappa ann vs bob" in res.output and "over 4 pairs" in res.output
    assert "binary relevance (grade >= 1)" in res.output
    assert "1 disagreements" in res.output
    res = runner.invoke(app, [*args, "--kappa", "bob", "--adjudicate"], input="1\nsettled\n")
    assert res.exit_code == 0, res.output
    assert J.current(db, "adjudicator:ann") == {("Q1", second, "adjudicator:ann"): 1}
    out = tmp_path / "judged.jsonl"
    res = runner.invoke(app, [*args, "--export", str(out)])
    assert res.exit_code == 0, res.output
    judged = {q.id: q for q in read_questions(out)}
    assert judged["Q1"].evidence[first] == 2 and judged["Q1"].evidence[second] == 1
    db.close()


def test_cli_errors(safety_store: Path, tmp_path: Path) -> None:
    qpath, _ = _questions(tmp_path)
    store = Path(shutil.copytree(safety_store, tmp_path / "store"))
    runner = CliRunner()
    base = ["judge", "--store", str(store), "--questions", str(qpath)]
    res = runner.invoke(app, base)
    assert res.exit_code == 2 and "--reviewer" in res.output
    res = runner.invoke(app, [*base, "--reviewer", "ann", "--adjudicate"])
    assert res.exit_code == 2 and "--kappa" in res.output
    res = runner.invoke(app, [*base, "--reviewer", "ann", "--methods", "nope"])
    assert res.exit_code == 2 and "unknown method" in res.output


# --------------------------------------------------------------------------- session


def _feed(*answers: str):
    """An ``ask`` that replays ``answers`` and then ends the input like Ctrl-D."""
    it = iter(answers)
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None

    return ask, prompts


def test_page_window_centres_on_the_terms() -> None:
    from sourcepage.labels.session import page_window

    assert page_window("short text", [(0, 5)], limit=100) == ("short text", [(0, 5)])
    text = "x" * 500 + " lock " + "y" * 500
    window, marks = page_window(text, [(501, 505)], limit=200)
    assert window.startswith("…") and window.endswith("…") and len(window) == 202
    ((a, b),) = marks
    assert window[a:b] == "lock"
    window, marks = page_window(text, [], limit=200)  # no terms: the start of the page
    assert window == "x" * 200 + "…" and marks == []


def test_session_loop_records_skips_and_stops(fresh_store: Path, tmp_path: Path) -> None:
    from sourcepage.labels.session import Cards, judge_pairs
    from sourcepage.retrieval.tokenize import content_terms as query_terms
    from sourcepage.store.db import Store

    _, qs = _questions(tmp_path)
    db = J.connect(tmp_path / "judgments.sqlite")
    pooled = J.pool(Searcher(fresh_store, "raw"), qs, ["bm25"], depth=2)
    todo = J.pending(db, pooled, "ann")
    cards = Cards(Store(fresh_store), qs)
    shown, hints = [], []
    ask, prompts = _feed("7", " 2 ", "", "s", "0", "off topic [p.3]", "q")
    done = judge_pairs(db, cards, todo, "ann", ask=ask, show=shown.append, say=hints.append)
    assert done == 2 and hints == ["answer 0, 1, 2, s or q"]
    assert [c.header for c in shown] == ["1/4", "2/4", "3/4", "4/4"]
    first = shown[0]
    assert first.question_id == "Q1" and first.question is not None and first.page == todo[0][1]
    terms = query_terms(first.question.question)
    assert first.title and first.marks and all(first.text[a:b].lower() in terms for a, b in first.marks)
    assert prompts[:3] == ["grade [0/1/2], s=skip, q=quit"] * 2 + ["note (optional)"]
    assert J.current(db, "ann") == {("Q1", todo[0][1], "ann"): 2, (todo[2][0], todo[2][1], "ann"): 0}
    assert J.history(db, todo[2][0], todo[2][1])[0]["note"] == "off topic [p.3]"
    # end of input at the note prompt records the grade without a note, then stops
    ask, _ = _feed("1")
    left = J.pending(db, pooled, "ann")
    assert judge_pairs(db, cards, left, "ann", ask=ask, show=shown.append, say=hints.append) == 1
    assert len(J.pending(db, pooled, "ann")) == 1


def test_session_adjudication(fresh_store: Path, tmp_path: Path) -> None:
    from sourcepage.labels.session import Cards, adjudicate_pairs
    from sourcepage.store.db import Store

    _, qs = _questions(tmp_path)
    db = J.connect(tmp_path / "judgments.sqlite")
    for page, a, b in (("loto_energy_control#p3", 2, 1), ("loto_energy_control#p1", 0, 2)):
        J.record(db, "Q1", page, a, "ann")
        J.record(db, "Q1", page, b, "bob")
    J.record(db, "Q9", "machine_guarding#p2", 0, "ann")  # a question not in the set
    J.record(db, "Q9", "machine_guarding#p2", 1, "bob")
    cards = Cards(Store(fresh_store), qs)
    dis = J.disagreements(db, "ann", "bob")
    shown: list = []
    ask, _ = _feed("1", "both right")
    assert adjudicate_pairs(db, cards, dis, "ann", "bob", ask=ask, show=shown.append, say=print) == 1
    assert shown[0].header == "adjudicate 1/3" and shown[0].grades == (("ann", 0), ("bob", 2))
    assert J.current(db, "adjudicator:ann") == {("Q1", "loto_energy_control#p1", "adjudicator:ann"): 1}
    shown.clear()
    ask, _ = _feed("s", "2", "")
    assert adjudicate_pairs(db, cards, dis, "ann", "bob", ask=ask, show=shown.append, say=print) == 1
    assert [c.header for c in shown] == ["adjudicate 1/2", "adjudicate 2/2"]  # settled ones drop out
    q9 = shown[1]
    assert q9.question_id == "Q9" and q9.question is None and q9.text
