"""The ``sourcepage`` command as a whole: user and data text is printed verbatim (never
read as rich markup), help texts name the method grammar, audit and the eval fallback."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage.cli import app, main
from sourcepage.retrieval.methods import METHOD_GRAMMAR


def _flat(text: str) -> str:
    """Output with rich's line wrapping and help-panel borders undone."""
    return " ".join(text.replace("│", " ").split())


def test_entry_points() -> None:
    assert callable(main)
    res = subprocess.run(
        [sys.executable, "-m", "sourcepage.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and "search" in res.stdout and "bench" in res.stdout


@pytest.mark.parametrize("command", ["search", "index", "judge", "eval", "reviews"])
def test_method_help_names_the_grammar(command: str) -> None:
    res = CliRunner().invoke(app, [command, "--help"])
    assert res.exit_code == 0
    assert "rerank:" in res.output
    assert METHOD_GRAMMAR in _flat(res.output)


def test_error_message_printed_verbatim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sourcepage.ingest

    def broken(*args, **kwargs):
        raise ValueError("manifest.csv:1 [missing column: title] in [bold]x[/bold]")

    monkeypatch.setattr(sourcepage.ingest, "ingest", broken)
    res = CliRunner().invoke(app, ["ingest", "--corpus", str(tmp_path), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2
    assert "error: manifest.csv:1 [missing column: title] in [bold]x[/bold]" in res.output


def test_manifest_error_keeps_its_column(fresh_corpus: Path, tmp_path: Path) -> None:
    path = fresh_corpus / "manifest.csv"
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=[c for c in rows[0] if c != "title"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    res = CliRunner().invoke(app, ["ingest", "--corpus", str(fresh_corpus), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2
    assert "csv:1 [title]: required column missing from header" in _flat(res.output)


def _fake_result(question: str) -> dict:
    page = {
        "rank": 1,
        "page": "doc#p3",
        "doc_id": "doc",
        "page_number": 3,
        "score": 1.5,
        "chunk_id": "doc#p3#c1",
        "passage": "As [doc p.3] says, each [red]lock[/red] is removed by its owner.",
        "highlights": [[24, 28]],
        "title": "[draft] Lockout guide",
        "authority": "[OSHA]",
        "jurisdiction": "US",
        "year": "2023",
        "doc_type": "guidance",
        "role": "primary",
    }
    return {
        "question": question,
        "method": "bm25",
        "text_version": "raw",
        "decision": "review",
        "reasons": ["compare [doc p.3] first."],
        "jurisdictions": ["US", "[UK]"],
        "query_ms": 12.5,
        "timings_ms": {"load": 10.0, "rank": 1.5, "decide": 1.0},
        "results": [page],
        "answer": {
            "status": "draft for review",
            "asked": "who (a person or role)",
            "fact_found": False,
            "quotes": [{"text": "Each lock is removed [sic].", "citation": "[osha3120-lockout-tagout p.22]"}],
        },
    }


def test_search_prints_passages_and_citations_verbatim(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from sourcepage import api

    def fake(question: str, store: Path, **kw: object) -> dict:
        res = _fake_result(question)
        res["results"][0]["section"] = "[Part 2] Duties › 45 Duties of workers"
        return res

    monkeypatch.setattr(api, "search", fake)
    question = "What does [doc p.3] say about [bold]locks[/bold]?"
    res = CliRunner().invoke(app, ["search", question, "--store", str(tmp_path)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert f"bm25 · raw · {question}" in out
    assert "[draft] Lockout guide" in out and "[OSHA]" in out
    assert "decision: review — compare [doc p.3] first." in out
    assert "jurisdictions (US, [UK])" in out
    assert "\u201cEach lock is removed [sic].\u201d [osha3120-lockout-tagout p.22]" in out
    assert "12 ms: load 10 (indexes and models) · rank 1.5 · decide 1.0" in out
    assert "none states what was asked: who (a person or role)" in out
    assert "As [doc p.3] says, each [red]lock[/red] is removed by its owner." in out
    assert "(doc#p3#c1)\n[Part 2] Duties › 45 Duties of workers\nAs [doc p.3]" in out  # its section, verbatim


@pytest.mark.parametrize("width", [80, 120, 160, 200])
def test_search_table_keeps_a_hit_to_two_lines_and_says_routing_and_referral(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, width: int
) -> None:
    from sourcepage import api

    def fake(question: str, store: Path, **kw: object) -> dict:
        res = _fake_result(question)
        eu = {
            **res["results"][0],
            "page": "eu-reg-2023-1230-machinery#p45",
            "title": "Regulation (EU) 2023/1230 of 14 June 2023 on machinery (OJ L 165, 29.6.2023, p. 1-102)",
            "authority": "European Parliament and Council (Publications Office of the EU)",
            "doc_type": "regulation",
        }
        res["results"] = [{**eu, "rank": r} for r in range(1, 6)]
        res["routing"] = {"jurisdictions": ["EU"], "matched": ["EU"], "uncovered": [], "applied": True}
        res["referral"] = {"id": 7, "url": "/questions/7"}
        return res

    monkeypatch.setattr(api, "search", fake)
    res = CliRunner().invoke(
        app, ["search", "What does the EU require?", "--store", str(tmp_path)], terminal_width=width
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    body = lines[next(i for i, x in enumerate(lines) if "eu-reg-2023" in x) :]
    rows = [x for x in body[: next(i for i, x in enumerate(body) if "decision:" in x)] if x.strip("│└┘─┴ ")]
    assert len(rows) <= 2 * 5, res.output  # one or two lines a hit
    assert sum("Regulation" in x for x in rows) == 5  # and the title is still there
    assert "routing: searched only EU documents (the question names EU)" in _flat(res.output)
    assert "referred to the reviewer's desk as question #7" in _flat(res.output)


def test_judge_card_and_hint_print_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    from sourcepage.cli.labels import _hint, _show
    from sourcepage.labels.session import Card
    from sourcepage.records import Question

    q = Question(
        id="Q[1]",
        question="What does [doc p.3] require?",
        topic="t",
        type="direct",
        answerability="answerable",
        answer_points=("[a] point",),
    )
    text = "see [doc p.3] here"
    _show(Card("1/2", "Q[1]", q, "doc#p3", "[draft] guide", text, ((4, 13),), (("[ann]", 1), ("bob", 2))))
    _hint("answer [0], 1, 2, s or q")
    cap = capsys.readouterr()
    for part in ("Q[1]: What does [doc p.3] require?", "• [a] point", "page doc#p3 — [draft] guide", text):
        assert part in cap.out
    assert "[ann]: 1   bob: 2" in cap.out
    assert "answer [0], 1, 2, s or q" in cap.err


def test_audit_command(safety_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "audit.csv"
    res = CliRunner().invoke(app, ["audit", "--store", str(safety_store), "--pages", "--csv", str(out)])
    assert res.exit_code == 0, res.output
    assert "Page audit" in res.output and "4 documents. Flags are automated risk indicators" in res.output
    assert "confined_space_entry#p2: low_text_100, low_text_300 (0 chars)" in res.output
    assert f"wrote {out}" in res.output and len(out.read_text().splitlines()) == 12
    res = CliRunner().invoke(app, ["audit", "--store", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "error:" in res.output


def test_eval_reports_what_could_not_be_fetched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from sourcepage.corpus import fetch

    def unavailable(questions, corpus=None, *, on_download=None, **kw):
        on_download(tmp_path / "[set]" / "manifest.csv")
        rep = fetch.FetchReport(
            tmp_path / "cache", problems={"doc-b": "cannot download [x]", "doc-a": "no url"}
        )
        raise fetch.CorpusUnavailable("2 of the corpus documents could not be fetched into [cache]", rep)

    monkeypatch.setattr(fetch, "locate_corpus", unavailable)
    q = tmp_path / "questions.jsonl"
    res = CliRunner().invoke(app, ["eval", "--questions", str(q), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    flat = _flat(res.output)
    # rich hard-wraps a long path inside a word: compare without whitespace
    said = f"no local corpus: downloading the documents of {tmp_path / '[set]' / 'manifest.csv'}"
    assert "".join(said.split()) in "".join(flat.split())
    assert "not fetched doc-a: no url not fetched doc-b: cannot download [x]" in flat  # sorted by id
    assert "error: 2 of the corpus documents could not be fetched into [cache]" in flat


def test_index_reports_each_build_off_a_terminal(fresh_store: Path) -> None:
    """In a pipe or a log, where no bar is drawn, ``index`` says when each build starts and
    ends, so a build of minutes is never silent."""
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "sourcepage.cli",
            "index",
            "--store",
            str(fresh_store),
            "--version",
            "raw,cleaned",
            "--method",
            "bm25",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    for v in ("raw", "cleaned"):
        assert f"bm25 index ({v} text) …" in lines
        assert any(line.startswith(f"bm25 index ({v} text): done in ") for line in lines)
    assert "Indexes" in res.stdout


@pytest.mark.slow  # two processes, each loading the sentence models
def test_first_search_announces_and_follows_each_index_build(fresh_store: Path) -> None:
    """A search on a store never indexed builds what it needs on first use: a notice
    names each build and, off a terminal, a line says when it ended; the second search
    builds nothing and its load time is small."""

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "sourcepage.cli",
                "search",
                "Who may remove a lock?",
                "--store",
                str(fresh_store),
                "--method",
                "bm25",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )

    first = run()
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    for name in ("bm25", "dense"):  # its own index, and the one the shipped policy reads
        assert any(
            line.startswith(f"building the {name} index of the raw text on first use") for line in lines
        )
        assert any(line.startswith(f"{name} index (raw, first use): done in ") for line in lines), lines
    again = run()
    assert again.returncode == 0, again.stderr
    assert "first use" not in again.stderr
    assert json.loads(again.stdout)["timings_ms"]["load"] < json.loads(first.stdout)["timings_ms"]["load"]


@pytest.mark.parametrize("width", [80, 160])
def test_search_table_keeps_rank_page_score_and_year_on_a_narrow_terminal(width: int) -> None:
    """On an 80-column terminal the ranked pages keep their rank, whole page id, score,
    jurisdiction and year on one line (rich used to squeeze those columns to nothing)."""
    import io

    from rich.console import Console

    from sourcepage.cli.retrieval import _results_table

    res = _fake_result("Who may remove a lock?")
    res["results"][0] |= {"page": "osha3170-safeguarding-amputations#p39", "title": "Safeguarding " * 5}
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(_results_table(res, "raw", res["question"], width))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    row = next(line for line in text.splitlines() if "osha3170-safeguarding-amputations#p39" in line)
    assert row.split()[0] in ("1", "│") and "1.5" in row and "US" in row and "2023" in row
    assert ("guidance" in row) == (width >= 120)  # the document type only where there is room


def test_search_table_keeps_the_title_beside_a_long_authority() -> None:
    """corpus-construction's authorities run to 90 characters: on a 130-column terminal the
    table drops to the narrow layout instead of squeezing the title to nothing, and a hit's
    phase and work package sit under its title."""
    import io

    from rich.console import Console

    from sourcepage.cli.retrieval import _results_table

    res = _fake_result("How must lifting inserts be designed?")
    res["results"][0] |= {
        "page": "au-ascc-precast-tiltup-cop#p29",
        "title": "National Code of Practice for Precast, Tilt-up and Concrete Elements",
        "authority": "Australian Safety and Compensation Council (Commonwealth of Australia, DEEWR)",
        "fields": {"phase": ["structure"], "work_package": ["precast_tiltup", "lifting"]},
    }
    for width in (130, 160):
        console = Console(width=width, record=True, file=io.StringIO())
        console.print(_results_table(res, "raw", res["question"], width))
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= width
        assert "National Code" in text and "phase=structure" in text
        assert ("Australian Safety" in text) == (width == 160)


def test_piped_quotes_are_whole_with_the_stating_sentence_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49: a quote is printed whole (the NSW stand-by person sentence was a neighbour
    elided with "…"), the sentence judged to state the answer between ** in a pipe, bold and
    underlined on a terminal."""
    import io

    from rich.console import Console

    from sourcepage.cli._common import out
    from sourcepage.cli.quotes import print_quotes, quote_line

    text = "Context before. The chosen one says it. More context states it. A second chosen one."
    a, b = text.index("The chosen"), text.index(" More")
    s, e = text.index("More"), text.index(" A second")
    quote = {"text": text, "citation": "[doc p. 3]", "spans": [[a, b]], "stating": [[s, e]]}
    monkeypatch.setattr(out, "no_color", True)  # as in a pipe, also when pytest runs on a terminal
    with out.capture() as cap:
        print_quotes({"answer": {"status": "answer", "quotes": [quote]}})
    printed = cap.get()
    whole = "Context before. The chosen one says it. **More context states it.** A second chosen one."
    assert f"\u201c{whole}\u201d" in printed
    assert "\u2026" not in printed
    line = quote_line(quote, plain=False)
    console = Console(record=True, force_terminal=True, width=200, file=io.StringIO())
    console.print(line)
    styled = console.export_text(styles=True)
    assert "\x1b[1;4mMore context states it." in styled and "\x1b[1mThe chosen one says it." in styled


def test_quotes_from_several_jurisdictions_name_theirs(monkeypatch: pytest.MonkeyPatch) -> None:
    from sourcepage.cli._common import out
    from sourcepage.cli.quotes import print_quotes

    quote = {"text": "Only a lock isolates.", "spans": [[0, 21]]}
    res = {
        "answer": {
            "status": "draft for review",
            "quotes": [
                {**quote, "citation": "[osha p. 3]", "jurisdiction": "US"},
                {**quote, "citation": "[nsw p.44]", "jurisdiction": "AU-NSW"},
            ],
        }
    }
    monkeypatch.setattr(out, "no_color", True)
    with out.capture() as cap:
        print_quotes(res)
    printed = cap.get()
    assert "[osha p. 3] (US)" in printed and "[nsw p.44] (AU-NSW)" in printed
    res["answer"]["quotes"][1]["jurisdiction"] = "US"  # one jurisdiction: the citation alone
    with out.capture() as cap:
        print_quotes(res)
    assert "(US)" not in cap.get()
    res["answer"]["quotes"][1]["section"] = "Part 4 › 4.5. Isolating energy sources"
    with out.capture() as cap:
        print_quotes(res)
    printed = cap.get()
    assert "[nsw p.44] · 4.5. Isolating energy sources" in printed and "Part 4" not in printed
    assert "[osha p. 3]\n" in printed  # no section: the citation alone


def test_the_section_column_keeps_the_heading_number() -> None:
    """The table's section is the path's last heading cut at its end, so its number stays."""
    from sourcepage.cli.retrieval import _tail

    art = "CHAPTER II OBLIGATIONS › Article 10 Obligations of manufacturers of machinery and related products"
    assert _tail({"section": art}) == "Article 10 Obligations of manufacturers…"
    assert _tail({"section": "Part 2 › Subpart 3 › 45 Duties of workers"}) == "45 Duties of workers"
    assert _tail({"section": ""}) == _tail({}) == ""
