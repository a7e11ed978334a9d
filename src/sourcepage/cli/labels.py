"""Labels from people: ``sourcepage judge`` (relevance judgments), ``calibrate`` (the
answer / review / refuse policy) and ``reviews`` (the reviewer log)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from sourcepage.cli._common import METHOD_GRAMMAR, StoreOpt, Text, err, escape, fail, out, progress, ticker

if TYPE_CHECKING:
    from sourcepage.labels.session import Card
    from sourcepage.records import Question
    from sourcepage.store.db import Store


def _ask(prompt: str) -> str:
    """One line from the terminal; Ctrl-D / Ctrl-C end the input."""
    try:
        return typer.prompt(prompt, default="", show_default=False)
    except typer.Abort as e:
        raise EOFError from e


def _hint(message: str) -> None:
    err.print(message, highlight=False, markup=False)


def _show(card: Card) -> None:
    """A question, the page to grade and the window of its text, query terms bold."""
    out.rule(escape(card.header))
    if card.question is not None:
        out.print(Text(f"{card.question_id}: {card.question.question}", style="bold"))
        for p in card.question.answer_points:
            out.print(Text(f"  • {p}"))
    out.print(Text(f"page {card.page} — {card.title}", style="bold cyan"))
    text = Text(card.text)
    for a, b in card.marks:
        text.stylize("bold yellow", a, b)
    out.print(text)
    if card.grades:
        out.print(Text("   ".join(f"{name}: {grade}" for name, grade in card.grades)))


#: the judging session's terminal I/O (labels.session's ask / show / say)
_TERMINAL = {"ask": _ask, "show": _show, "say": _hint}


def judge(
    store: StoreOpt = Path(".store"),
    questions: Annotated[Path, typer.Option("--questions", help="questions.jsonl (spec §3).")] = Path(
        "questions.jsonl"
    ),
    reviewer: Annotated[str, typer.Option("--reviewer", help="Your reviewer name.")] = "",
    methods: Annotated[
        str, typer.Option(help=f"Comma-separated methods whose pages are pooled ({METHOD_GRAMMAR}).")
    ] = "bm25,lsa",
    depth: Annotated[int, typer.Option(help="Pages pooled per method and question.")] = 10,
    version: Annotated[str, typer.Option(help="Text version searched for the pool.")] = "raw",
    db: Annotated[Path | None, typer.Option("--db", help="Label log (default STORE/labels.sqlite).")] = None,
    kappa: Annotated[
        str | None, typer.Option("--kappa", help="Other reviewer: print Cohen's kappa and disagreements.")
    ] = None,
    export_to: Annotated[
        Path | None, typer.Option("--export", help="Write the judged questions.jsonl here.")
    ] = None,
    adjudicate_: Annotated[
        bool, typer.Option("--adjudicate", help="Walk the disagreements with --kappa OTHER and settle them.")
    ] = False,
) -> None:
    """Judge pooled pages for each question (resumable); kappa, adjudication and export."""
    from sourcepage.evaluation.questions import QuestionError, read_questions
    from sourcepage.labels import judgments as J
    from sourcepage.labels import session as S
    from sourcepage.store.db import Store, StoreError

    _check_judge_options(reviewer, kappa, adjudicate_, depth)
    try:
        st = Store(store)
        qs = read_questions(questions, st.page_ids())
    except (StoreError, QuestionError, OSError) as e:
        fail(str(e))
    conn = J.connect(db or J.default_path(store))
    cards = S.Cards(st, qs)
    if kappa:
        dis = _print_agreement(conn, reviewer, kappa)
        if adjudicate_:
            S.adjudicate_pairs(conn, cards, dis, reviewer, kappa, **_TERMINAL)
    if export_to is not None:
        _export_judgments(conn, qs, export_to, reviewer)
    if kappa or export_to is not None:
        return
    _judge_pooled(conn, cards, st, qs, reviewer, methods, depth, version)


def _check_judge_options(reviewer: str, kappa: str | None, adjudicate: bool, depth: int) -> None:
    """Exit with a message for a missing, malformed or reserved reviewer name, --adjudicate
    without --kappa, or a depth below 1."""
    from sourcepage.labels import judgments as J
    from sourcepage.store.reviewers import check_name

    if not reviewer.strip():
        fail("--reviewer NAME is required")
    try:
        check_name(reviewer)
    except ValueError as e:
        fail(str(e))
    if reviewer.startswith(J.ADJUDICATOR):
        fail(f"reviewer names starting with {J.ADJUDICATOR!r} are reserved")
    if adjudicate and not kappa:
        fail("--adjudicate needs --kappa OTHER (the reviewer to reconcile with)")
    if depth < 1:
        fail(f"--depth must be at least 1, got {depth}")


def _print_agreement(conn: Any, reviewer: str, other: str) -> list[dict[str, Any]]:
    """Print Cohen's kappa of two reviewers and their disagreements; return these."""
    from sourcepage.labels import judgments as J

    k = J.cohens_kappa(conn, reviewer, other)

    def num(x: float | None, none: str) -> str:
        return none if x is None else f"{x:.3f}"

    out.print(
        f"Cohen's kappa {reviewer} vs {other}: {num(k['kappa'], 'undefined')} over {k['n']} pairs "
        f"(agreement {num(k['agreement'], '–')}); binary relevance (grade >= 1): "
        f"{num(k['kappa_binary'], 'undefined')} (agreement {num(k['agreement_binary'], '–')})",
        markup=False,
    )
    dis = J.disagreements(conn, reviewer, other)
    if dis:
        t = Table(title=f"{len(dis)} disagreements", title_justify="left")
        for col in ("question", "page", reviewer, other):
            t.add_column(escape(col), no_wrap=True)
        for d in dis:
            t.add_row(escape(d["question_id"]), escape(d["page"]), str(d[reviewer]), str(d[other]))
        out.print(t)
    else:
        out.print("no disagreements")
    return dis


def _export_judgments(conn: Any, qs: Any, export_to: Path, reviewer: str) -> None:
    """Write the judged questions.jsonl and say what changed."""
    from sourcepage.labels import judgments as J

    rep = J.export(conn, qs, export_to, reviewer=reviewer)
    for w in rep.warnings:
        err.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    out.print(
        f"wrote {rep.questions} questions to {export_to} "
        f"({len(rep.changed)} with changed evidence, {len(rep.warnings)} warnings)",
        highlight=False,
        markup=False,
    )


def _judge_pooled(
    conn: Any, cards: Any, st: Any, qs: Any, reviewer: str, methods: str, depth: int, version: str
) -> None:
    """The judging loop over the pages pooled from ``methods`` (resumable)."""
    from sourcepage.labels import judgments as J
    from sourcepage.labels import session as S
    from sourcepage.retrieval.search import Searcher

    try:
        pooled = J.pool(
            Searcher(st, version), qs, [m.strip() for m in methods.split(",") if m.strip()], depth
        )
    except (ValueError, RuntimeError) as e:
        fail(str(e))
    todo = J.pending(conn, pooled, reviewer)
    total = sum(len(v) for v in pooled.values())
    out.print(f"{reviewer}: {total - len(todo)}/{total} pooled pages judged, {len(todo)} to go", markup=False)
    done = S.judge_pairs(conn, cards, todo, reviewer, **_TERMINAL)
    left = len(J.pending(conn, pooled, reviewer))
    out.print(f"recorded {done} judgments; {left} pending (run again to resume)")


def calibrate(
    questions: Annotated[Path, typer.Option("--questions", help="Development questions (spec §3).")],
    store: StoreOpt = Path(".store"),
    version: Annotated[str, typer.Option(help="Text version.")] = "raw",
    sparse: Annotated[str, typer.Option(help="Sparse method.")] = "bm25",
    semantic: Annotated[str, typer.Option(help="Semantic method (dense[:model] or lsa).")] = "dense",
    max_answerable_refused: Annotated[
        float, typer.Option(help="Share of answerable questions the refusal threshold may refuse.")
    ] = 0.05,
    max_negative_answered: Annotated[
        float,
        typer.Option(help="Share of unsupported / out-of-domain questions the answer threshold may answer."),
    ] = 0.0,
    seed: int = 42,
    from_reviews: Annotated[
        bool,
        typer.Option(
            "--from-reviews",
            help="Add the store's reviewed questions (reviewer log, desk decisions) to the dev set.",
        ),
    ] = False,
) -> None:
    """Refine the shipped answer / review / refuse policy on this store's development questions;
    store it with the index and say how much it changed."""
    from sourcepage import api
    from sourcepage.evaluation.answerability import held_out
    from sourcepage.evaluation.questions import QuestionError, read_questions
    from sourcepage.store.db import Store, StoreError
    from sourcepage.support.calibrate import check_classes, describe_calibration, run_calibration
    from sourcepage.vocabulary import ANSWERABILITIES

    try:
        st = Store(store)
        qs = read_questions(questions, known_pages=st.page_ids())
        if from_reviews:
            qs = _with_reviewed(st, qs)
        check_classes(qs, questions)
        with progress() as prog:
            tick = ticker(prog)
            rep = run_calibration(
                st,
                qs,
                version=version,
                sparse=sparse,
                semantic=semantic,
                max_answerable_refused=max_answerable_refused,
                max_negative_answered=max_negative_answered,
                seed=seed,
                progress=lambda done, total: tick(
                    f"answerability features ({sparse} + {semantic})", done, total
                ),
                features=api.service(store, version).policy_features,  # the search's own rows
            )
    except (StoreError, QuestionError, ValueError, RuntimeError) as e:
        fail(str(e))
    t = Table(
        title=escape(f"Held-out ({rep.cv['folds']}-fold) answerability, {sparse} + {semantic} on {version}")
    )
    for col in ("policy", "AUROC near", "answerable refused", "unsupported refused", "out-of-domain refused"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for h in held_out(rep.cv, qs, rep.single_scores):
        t.add_row(escape(h.policy), f"{h.auroc_near:.3f}", *(f"{h.refused[c]:.0%}" for c in ANSWERABILITIES))
    out.print(t)
    out.print(describe_calibration(rep), markup=False)


def _with_reviewed(st: Store, qs: list[Question]) -> list[Question]:
    """``qs`` and the store's reviewed questions (the latest review of each; a question
    already in ``qs`` keeps its benchmark label)."""
    from sourcepage.evaluation.questions import question_from_dict
    from sourcepage.labels import reviews as R
    from sourcepage.store.labels import normalise_question

    topics = {d.doc_id: d.topic for d in st.documents()}
    known = {normalise_question(q.question) for q in qs}
    added = [
        question_from_dict(d)
        for d in R.export_questions(R.list_reviews(st.path), topics)
        if normalise_question(d["question"]) not in known
    ]
    classes = {c: sum(q.answerability == c for q in added) for c in ("answerable", "unsupported")}
    out.print(
        f"from the reviewer log: {len(added)} reviewed questions added "
        f"({classes['answerable']} answered, {classes['unsupported']} refused by a reviewer)",
        markup=False,
    )
    return [*qs, *added]


def reviews(
    store: StoreOpt = Path(".store"),
    question: Annotated[str | None, typer.Option(help="Record a review of this question.")] = None,
    decision: Annotated[str | None, typer.Option(help="The reviewer's decision: answer or refuse.")] = None,
    page: Annotated[
        list[str] | None, typer.Option("--page", help="Accepted evidence page; repeatable.")
    ] = None,
    reviewer: Annotated[str | None, typer.Option(help="Who reviewed.")] = None,
    note: str = "",
    method: Annotated[
        str, typer.Option(help=f"Method whose decision is recorded ({METHOD_GRAMMAR}).")
    ] = "bm25",
    version: str = "raw",
    export: Annotated[Path | None, typer.Option(help="Write the log as questions.jsonl.")] = None,
) -> None:
    """The reviewer log of referred questions: record a decision, list the log, export it."""
    from sourcepage.labels import reviews as R
    from sourcepage.store.db import Store, StoreError
    from sourcepage.store.files import write_text

    try:
        st = Store(store)
        if question:
            from sourcepage.api import search
            from sourcepage.store.reviewers import check_name

            check_name((reviewer or "").strip())  # before the search, which may refer the question

            res = search(question, store, method=method, k=5, version=version, answer=False)
            referral = (res.get("referral") or {}).get("id")  # a review decision: this decides its referral
            R.record(
                store,
                question,
                method,
                version,
                res["decision"],
                decision or "",
                page or [],
                reviewer or "",
                note,
                referral=referral,
            )
        log = R.list_reviews(store)
    except (StoreError, ValueError) as e:
        fail(str(e))
    t = Table(title=f"Reviewer log — {escape(str(store))}")
    for col in ("id", "when", "reviewer", "system", "decision", "pages", "question"):
        t.add_column(col, overflow="fold")
    for r in log:
        cells = (r.created_at, r.reviewer, r.system_decision, r.decision, " ".join(r.pages), r.question)
        t.add_row(str(r.id), *(escape(c) for c in cells))
    out.print(t)
    if export:
        topics = {d.doc_id: d.topic for d in st.documents()}
        write_text(export, R.export_jsonl(log, topics))
        out.print(f"wrote {export}", markup=False)


def desk(
    store: StoreOpt = Path(".store"),
    status: Annotated[str, typer.Option(help="pending, decided or all.")] = "pending",
    jurisdiction: Annotated[
        str | None, typer.Option(help="Only referrals with pages of this jurisdiction.")
    ] = None,
    topic: Annotated[str | None, typer.Option(help="Only referrals with pages of this topic.")] = None,
) -> None:
    """The reviewer's desk: the referred questions, oldest first (decide them at /desk)."""
    from sourcepage.labels import referrals as F

    if status not in (*F.STATUSES, "all"):
        fail(f"--status must be pending, decided or all, got {status!r}")
    if not (store / "store.sqlite").exists():
        fail(f"no store at {store} (run `sourcepage ingest` first)")
    picked, counts = F.queue(F.referrals(store), None if status == "all" else status, jurisdiction, topic)
    t = Table(title=f"Reviewer's desk — {counts['pending']} pending, {counts['decided']} decided")
    for col in ("id", "referred", "asked", "status", "jurisdictions", "question"):
        t.add_column(col, overflow="fold")
    for r in picked:
        d = r.as_dict()
        status_cell = r.status if r.decision is None else f"{r.decision.decision} ({r.decision.reviewer})"
        cells = (
            d["created_at"][:16].replace("T", " "),
            str(d["asked"]),
            status_cell,
            " ".join(d["jurisdictions"]),
        )
        t.add_row(str(r.id), *(escape(c) for c in cells), escape(r.question))
    out.print(t)
    if picked:
        out.print(Text("decide at /desk/ID of `sourcepage serve` (a reviewer's sign-in)", style="dim"))
