"""Report tables by a question's construction fields: project phase, work package, project type.

A construction question set (benchmarks/construction) gives each question the ``phase``,
``work_package`` and ``project_type`` it is asked in, as a string, a ``;``-list or a JSON
list (the manifest's convention, ``corpus.fields``). ``per_question.jsonl`` keeps them as
lists, and report.md gains a table per field: a row per group with its answerable,
unsupported and out-of-domain questions and each run's Hit@3 / MRR over its answerable ones.
A question listing two work packages counts in both groups, so a table's counts add up to
more than the questions.
Question sets without these fields get no tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sourcepage.corpus.fields import split_values
from sourcepage.records import Question

#: the question fields that get a table, and their titles
FIELDS: dict[str, str] = {
    "phase": "project phase",
    "work_package": "work package",
    "project_type": "project type",
}
NONE = "(none)"


def question_fields(q: Question) -> dict[str, list[str]]:
    """The construction fields ``q`` carries, each as a list ({} for a set without them)."""
    out: dict[str, list[str]] = {}
    for name in FIELDS:
        value = q.extra.get(name)
        if value is None:
            continue
        values = split_values(value) if isinstance(value, str) else [str(v).strip() for v in value]
        out[name] = [v for v in values if v] or [NONE]
    return out


def _cell(values: Sequence[tuple[float, float]]) -> str:
    if not values:
        return "–"
    h3 = sum(v[0] for v in values) / len(values)
    rr = sum(v[1] for v in values) / len(values)
    return f"{h3:.2f} / {rr:.2f}"


def field_tables(
    per_q: Sequence[Mapping[str, Any]], runs: Sequence[tuple[str, str]]
) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of one table per field that some question carries: a row per
    group with its answerable, unsupported and out-of-domain questions, and a column per
    run (Hit@3 / MRR over the group's answerable questions). [] when no question carries one."""
    tables = []
    for name, title in FIELDS.items():
        rows = [r for r in per_q if name in r]
        if not rows:
            continue
        groups = sorted({g for r in rows for g in r[name]})
        scored: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = {}
        members: dict[str, dict[str, set[str]]] = {g: {} for g in groups}
        for r in rows:
            for g in r[name]:
                members[g].setdefault(r["answerability"], set()).add(r["question_id"])
                if "mrr" in r:
                    run = scored.setdefault((r["text_version"], r["method"]), {})
                    run.setdefault(g, []).append((r["hit@3"], r["mrr"]))
        shown = [run for run in runs if run in scored]
        lines = [
            [
                g,
                str(len(members[g].get("answerable", ()))),
                f"{len(members[g].get('unsupported', ()))} / {len(members[g].get('out_of_domain', ()))}",
                *(_cell(scored[run].get(g, [])) for run in shown),
            ]
            for g in groups
        ]
        tables.append(
            (title, [title, "answerable", "unsupported / ood", *(f"{v} {m}" for v, m in shown)], lines)
        )
    return tables
