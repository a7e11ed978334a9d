"""Read, validate and write question sets (``questions.jsonl``, benchmark-format.md §3).

A question set is the ground truth every metric rests on, so :func:`read_questions`
never drops or repairs a question: it collects every problem in the file, each as
``file:line: reason``, and raises one :class:`QuestionError` naming them all. It is the
one validation of question files: ``eval``, ``calibrate``, ``judge``, ``sweep``, ``serve
--questions`` and ``verify`` all read through it. Beyond the spec's fields it bounds what
a file may hold: a question of at most ``MAX_QUESTION_CHARS`` (the web API's limit), ids
of ``[A-Za-z0-9_.-]`` (they name files and TREC columns), no lone surrogate (it cannot be
written as UTF-8), lines of at most ``MAX_LINE_CHARS``, and bytes that are not UTF-8
named by line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sourcepage.evaluation.relevance import Qrels
from sourcepage.jsonl import LineDecodeError, jsonl_lines
from sourcepage.records import Question, parse_page_id
from sourcepage.vocabulary import ANSWERABILITIES, MAX_QUESTION_CHARS

__all__ = [
    "ANSWERABILITIES",
    "EVIDENCE_EXTRA",
    "QUESTION_TYPES",
    "QuestionError",
    "qrels",
    "question_from_dict",
    "question_to_dict",
    "questions_to_jsonl",
    "read_questions",
]

QUESTION_TYPES: tuple[str, ...] = ("direct", "procedural", "scenario", "comparison")
GRADES: tuple[int, ...] = (1, 2)
REQUIRED: tuple[str, ...] = ("id", "question", "topic", "type", "answerability")
_KNOWN = (*REQUIRED, "reference_answer", "answer_points", "evidence")
_EVIDENCE_KNOWN = ("page", "grade", "excerpt")

#: a question id: it names run files, TREC columns and URLs
QUESTION_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")
#: the longest line read (evidence excerpts and answers included); longer is refused unparsed
MAX_LINE_CHARS = 1_000_000
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Key in ``Question.extra`` holding unknown keys of evidence items, page -> {key: value},
#: so that they survive a round trip. A question-level field of this name is refused.
EVIDENCE_EXTRA = "_evidence_extra"


class QuestionError(ValueError):
    """A question set failed validation; ``problems`` lists every ``file:line: reason``."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        n = len(self.problems)
        if n == 1:
            super().__init__(f"1 problem in question set: {self.problems[0]}")
        else:
            super().__init__(f"{n} problems in question set:\n  " + "\n  ".join(self.problems))


# --------------------------------------------------------------------------- page index


def _page_index(known_pages: Iterable[str]) -> dict[str, list[int]]:
    """doc_id -> sorted page numbers, to say which pages exist when one does not."""
    index: dict[str, list[int]] = {}
    for pid in known_pages:
        try:
            doc, n = parse_page_id(pid)
        except ValueError:
            continue
        index.setdefault(doc, []).append(n)
    return {doc: sorted(ns) for doc, ns in index.items()}


def _ranges(numbers: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``: a compact list of page ranges."""
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def _unknown_page(pid: str, index: Mapping[str, list[int]]) -> str:
    """Reason for a well-formed page id that the corpus does not hold."""
    doc, _ = parse_page_id(pid)
    if doc in index:
        return f"page {pid!r} is not in the corpus: document {doc!r} has pages {_ranges(index[doc])}"
    return f"page {pid!r} is not in the corpus: no document {doc!r}"


# --------------------------------------------------------------------------- one object


def _check_fields(obj: Mapping[str, Any]) -> list[str]:
    """Problems with the required fields and the optional answer fields."""
    problems: list[str] = []
    for name in REQUIRED:
        if name not in obj:
            problems.append(f"missing required field {name!r}")
        elif not isinstance(obj[name], str) or not obj[name].strip():
            problems.append(f"field {name!r} must be a non-empty string, got {obj[name]!r}")
    qid, text = obj.get("id"), obj.get("question")
    if isinstance(qid, str) and qid.strip() and not QUESTION_ID.fullmatch(qid):
        problems.append(f"bad id {qid[:120]!r}: letters, digits, '_', '.' and '-' only (1-100 of them)")
    if isinstance(text, str) and len(text) > MAX_QUESTION_CHARS:
        problems.append(
            f"the question has {len(text)} characters (at most {MAX_QUESTION_CHARS}, as the web API)"
        )
    problems += [
        f"field {where} holds a lone surrogate (not text: cannot be UTF-8)" for where in _surrogates(obj)
    ]
    qtype, answerability = obj.get("type"), obj.get("answerability")
    # the spec fixes the types of answerable questions; negatives "may use direct", so a
    # held-out set that types them otherwise (e.g. "unsupported") is accepted, not rejected
    if (
        isinstance(qtype, str)
        and qtype.strip()
        and qtype not in QUESTION_TYPES
        and answerability == "answerable"
    ):
        problems.append(f"bad type {qtype!r} (expected one of {', '.join(QUESTION_TYPES)})")
    if isinstance(answerability, str) and answerability.strip() and answerability not in ANSWERABILITIES:
        problems.append(f"bad answerability {answerability!r} (expected one of {', '.join(ANSWERABILITIES)})")
    ref = obj.get("reference_answer")
    if ref is not None and not isinstance(ref, str):
        problems.append(f"reference_answer must be a string, got {ref!r}")
    points = obj.get("answer_points")
    if points is not None and not (isinstance(points, list) and all(isinstance(p, str) for p in points)):
        problems.append(f"answer_points must be a list of strings, got {points!r}")
    if EVIDENCE_EXTRA in obj:
        problems.append(f"field name {EVIDENCE_EXTRA!r} is reserved")
    return problems


def _surrogates(value: Any, where: str = "") -> list[str]:
    """Where in a JSON value a string (or a key) holds a lone surrogate (``"\\ud800"``)."""
    if isinstance(value, str):
        return [where or "value"] if _SURROGATE.search(value) else []
    if isinstance(value, dict):
        out = [f"{where}.{k!a}" for k in value if _SURROGATE.search(k)]
        for k, v in value.items():
            out += _surrogates(v, f"{where}.{k}" if where else f"{k!r}")
        return out
    if isinstance(value, list):
        return [w for i, v in enumerate(value) for w in _surrogates(v, f"{where}[{i}]")]
    return []


def _check_evidence_item(
    i: int, item: Any, seen: dict[str, int], index: Mapping[str, list[int]] | None
) -> list[str]:
    """Problems with evidence item ``i`` (1-based); records its page in ``seen``."""
    where = f"evidence item {i}"
    if not isinstance(item, dict):
        return [f"{where} must be an object with 'page' and 'grade', got {item!r}"]
    problems: list[str] = []
    page, grade = item.get("page"), item.get("grade")
    if "page" not in item:
        problems.append(f"{where}: missing 'page'")
    elif not isinstance(page, str):
        problems.append(f"{where}: malformed page id {page!r} (expected '<doc_id>#p<n>')")
    else:
        try:
            parse_page_id(page)
        except ValueError:
            problems.append(f"{where}: malformed page id {page!r} (expected '<doc_id>#p<n>')")
        else:
            if page in seen:
                problems.append(f"{where}: page {page!r} listed twice (first as evidence item {seen[page]})")
            else:
                seen[page] = i
            if index is not None and _unknown_in(page, index):
                problems.append(f"{where}: {_unknown_page(page, index)}")
    if "grade" not in item:
        problems.append(f"{where}: missing 'grade'")
    elif isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:
        problems.append(f"{where}: bad grade {grade!r} (must be 1 or 2)")
    excerpt = item.get("excerpt")
    if excerpt is not None and not isinstance(excerpt, str):
        problems.append(f"{where}: excerpt must be a string, got {excerpt!r}")
    return problems


def _unknown_in(page: str, index: Mapping[str, list[int]]) -> bool:
    doc, n = parse_page_id(page)
    return n not in index.get(doc, ())


def _check_evidence(obj: Mapping[str, Any], index: Mapping[str, list[int]] | None) -> list[str]:
    """Problems with the evidence list, given the question's answerability."""
    evidence = obj.get("evidence")
    answerability = obj.get("answerability")
    if answerability != "answerable":
        if evidence not in (None, []) and answerability in ANSWERABILITIES:
            return [f"{answerability} question must not have evidence"]
        return []
    if evidence is None or evidence == []:
        return ["answerable question has no evidence"]
    if not isinstance(evidence, list):
        return [f"evidence must be a list, got {evidence!r}"]
    seen: dict[str, int] = {}
    problems: list[str] = []
    for i, item in enumerate(evidence, 1):
        problems += _check_evidence_item(i, item, seen, index)
    return problems


def question_from_dict(obj: Mapping[str, Any]) -> Question:
    """Build a :class:`Question` from an already validated object; unknown fields go to ``extra``."""
    evidence: dict[str, int] = {}
    excerpts: dict[str, str] = {}
    item_extra: dict[str, dict[str, Any]] = {}
    for item in obj.get("evidence") or []:
        page = item["page"]
        evidence[page] = item["grade"]
        if "excerpt" in item and item["excerpt"] is not None:
            excerpts[page] = item["excerpt"]
        unknown = {k: v for k, v in item.items() if k not in _EVIDENCE_KNOWN}
        if unknown:
            item_extra[page] = unknown
    extra = {k: v for k, v in obj.items() if k not in _KNOWN}
    if item_extra:
        extra[EVIDENCE_EXTRA] = item_extra
    return Question(
        id=obj["id"],
        question=obj["question"],
        topic=obj["topic"],
        type=obj["type"],
        answerability=obj["answerability"],
        evidence=evidence,
        excerpts=excerpts,
        reference_answer=obj.get("reference_answer") or "",
        answer_points=tuple(obj.get("answer_points") or ()),
        extra=extra,
    )


# --------------------------------------------------------------------------- file


def read_questions(path: str | Path, known_pages: set[str] | None = None) -> list[Question]:
    """Every question of a ``questions.jsonl`` file, in file order.

    Blank lines and lines starting with ``//`` are skipped. With ``known_pages``
    (page ids of the corpus) every evidence page must exist. Raises one
    :class:`QuestionError` listing all problems (a missing or unreadable file among
    them); never drops a question.
    """
    index = _page_index(known_pages) if known_pages is not None else None
    problems: list[str] = []
    questions: list[Question] = []
    first_line: dict[str, int] = {}
    try:
        lines = [(n, line) for n, _, line in jsonl_lines(path)]
    except FileNotFoundError:
        raise QuestionError([f"{path}: no such file"]) from None
    except LineDecodeError as e:
        raise QuestionError(
            [f"{path}:{e.lineno}: not UTF-8 ({e.reason} at byte {e.start + 1} of the line)"]
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise QuestionError([f"{path}: cannot read the question set: {e}"]) from None
    for lineno, line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        here = f"{path}:{lineno}"
        if len(stripped) > MAX_LINE_CHARS:
            problems.append(f"{here}: a line of {len(stripped)} characters (at most {MAX_LINE_CHARS})")
            continue
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as exc:
            problems.append(f"{here}: invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        except RecursionError:
            problems.append(f"{here}: invalid JSON: nested too deeply")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{here}: expected a JSON object, got {type(obj).__name__}")
            continue
        found = _check_fields(obj) + _check_evidence(obj, index)
        qid = obj.get("id")
        if isinstance(qid, str) and qid.strip():
            if qid in first_line:
                found.insert(0, f"duplicate id {qid!r} (first on line {first_line[qid]})")
            else:
                first_line[qid] = lineno
        problems += [f"{here}: {reason}" for reason in found]
        if not found:
            questions.append(question_from_dict(obj))
    if problems:
        raise QuestionError(problems)
    return questions


def require_answerable(questions: Sequence[Question], path: str | Path) -> None:
    """QuestionError unless the set holds an answerable question (nothing to score
    otherwise): an evaluation checks this before it writes anything."""
    if not questions:
        raise QuestionError([f"{path}: no questions (empty, or only blank and // lines)"])
    if not any(q.answerability == "answerable" for q in questions):
        raise QuestionError([f"{path}: no answerable question: nothing to score"])


def question_to_dict(q: Question) -> dict[str, Any]:
    """The spec object for one question: standard fields first, then unknown fields."""
    out: dict[str, Any] = {
        "id": q.id,
        "question": q.question,
        "topic": q.topic,
        "type": q.type,
        "answerability": q.answerability,
    }
    if q.reference_answer:
        out["reference_answer"] = q.reference_answer
    if q.answer_points:
        out["answer_points"] = list(q.answer_points)
    item_extra: Mapping[str, Mapping[str, Any]] = q.extra.get(EVIDENCE_EXTRA, {})
    if q.evidence:
        items = []
        for page, grade in q.evidence.items():
            item: dict[str, Any] = {"page": page, "grade": grade}
            if page in q.excerpts:
                item["excerpt"] = q.excerpts[page]
            item.update(item_extra.get(page, {}))
            items.append(item)
        out["evidence"] = items
    out.update({k: v for k, v in q.extra.items() if k != EVIDENCE_EXTRA})
    return out


def questions_to_jsonl(questions: Iterable[Question]) -> str:
    """The questions as ``questions.jsonl`` text (UTF-8, one object a line, final newline)."""
    return "".join(json.dumps(question_to_dict(q), ensure_ascii=False) + "\n" for q in questions)


def qrels(questions: Iterable[Question]) -> Qrels:
    """question id -> {page id: grade} for the answerable questions, in question order."""
    return Qrels.from_questions(questions)
