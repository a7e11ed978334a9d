from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sourcepage.evaluation.questions import (
    EVIDENCE_EXTRA,
    QuestionError,
    qrels,
    question_to_dict,
    questions_to_jsonl,
    read_questions,
)
from sourcepage.records import Question

KNOWN = {f"osha3120#p{n}" for n in (1, 2, 3, 5)} | {"ppe#p1"}


def _answerable(qid: str = "Q001", **over: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": qid,
        "question": "What must be done before an authorized employee removes a lock?",
        "topic": "loto",
        "type": "procedural",
        "answerability": "answerable",
        "reference_answer": "Check the work area and notify employees.",
        "answer_points": ["check the work area", "notify affected employees"],
        "evidence": [
            {"page": "osha3120#p2", "grade": 2, "excerpt": "Before lockout devices are removed ..."},
            {"page": "osha3120#p3", "grade": 1, "excerpt": "Notify affected employees."},
        ],
    }
    obj.update(over)
    return obj


def _unsupported(qid: str = "U001", **over: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": qid,
        "question": "What is the fine for a missing lock in Ohio in 2031?",
        "topic": "loto",
        "type": "direct",
        "answerability": "unsupported",
    }
    obj.update(over)
    return obj


def _write(tmp_path: Path, *lines: dict[str, Any] | str) -> Path:
    """questions.jsonl with one line per item: dicts as JSON, strings verbatim."""
    path = tmp_path / "questions.jsonl"
    text = "".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines)
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path, known: set[str] | None = None) -> list[str]:
    with pytest.raises(QuestionError) as info:
        read_questions(path, known)
    assert isinstance(info.value, ValueError)
    return info.value.problems


def _only(path: Path, line: int, *needles: str, known: set[str] | None = None) -> str:
    """The single problem, checked to start with file:line and to contain the needles."""
    problems = _problems(path, known)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}:{line}: "), problems[0]
    for needle in needles:
        assert needle in problems[0], problems[0]
    return problems[0]


# --------------------------------------------------------------------------- good files


def test_reads_good_file_skipping_blank_and_comment_lines(tmp_path):
    path = _write(tmp_path, "// a comment", "", _answerable(), "   ", "  // indented comment", _unsupported())
    qs = read_questions(path, KNOWN)
    assert [q.id for q in qs] == ["Q001", "U001"]
    q = qs[0]
    assert q.evidence == {"osha3120#p2": 2, "osha3120#p3": 1}
    assert list(q.evidence) == ["osha3120#p2", "osha3120#p3"]  # file order kept
    assert q.excerpts["osha3120#p3"] == "Notify affected employees."
    assert q.reference_answer.startswith("Check")
    assert q.answer_points == ("check the work area", "notify affected employees")
    assert q.extra == {}
    assert qs[1].evidence == {} and qs[1].reference_answer == "" and qs[1].answer_points == ()


def test_non_answerable_may_have_empty_or_null_evidence(tmp_path):
    path = _write(tmp_path, _unsupported("U1", evidence=[]), _unsupported("U2", evidence=None))
    assert [q.evidence for q in read_questions(path)] == [{}, {}]


def test_empty_file_gives_no_questions(tmp_path):
    assert read_questions(_write(tmp_path, "// nothing yet")) == []


def test_unknown_fields_are_kept(tmp_path):
    item = {"page": "osha3120#p2", "grade": 2, "excerpt": "x", "note": "spans the break"}
    path = _write(tmp_path, _answerable(notes="hard one", absence_check={"ok": True}, evidence=[item]))
    (q,) = read_questions(path)
    assert q.extra["notes"] == "hard one"
    assert q.extra["absence_check"] == {"ok": True}
    assert q.extra[EVIDENCE_EXTRA] == {"osha3120#p2": {"note": "spans the break"}}
    assert question_to_dict(q)["evidence"] == [item]
    assert question_to_dict(q)["notes"] == "hard one"


def test_round_trip(tmp_path):
    originals = [
        _answerable("Q1", notes="kept"),
        _answerable("Q2", evidence=[{"page": "ppe#p1", "grade": 1}]),  # no excerpt
        _unsupported("U1", reference_answer="Not in the corpus.", extra_flag=[1, "ü"]),
        _unsupported("O1", answerability="out_of_domain", topic="none"),
    ]
    path = _write(tmp_path, *originals)
    qs = read_questions(path, KNOWN)
    text = questions_to_jsonl(qs)
    assert [json.loads(line) for line in text.splitlines()] == originals
    again = tmp_path / "again.jsonl"
    again.write_text(text, encoding="utf-8")
    assert read_questions(again, KNOWN) == qs
    assert questions_to_jsonl(read_questions(again)) == text
    assert "ü" in text  # UTF-8, not \u escapes


def test_qrels_only_answerable():
    qs = [
        Question("Q1", "q", "loto", "direct", "answerable", evidence={"a#p1": 2, "b#p3": 1}),
        Question("U1", "q", "loto", "direct", "unsupported"),
        Question("Q2", "q", "ppe", "scenario", "answerable", evidence={"c#p9": 1}),
    ]
    assert qrels(qs) == {"Q1": {"a#p1": 2, "b#p3": 1}, "Q2": {"c#p9": 1}}


# --------------------------------------------------------------------------- rejections


def test_invalid_json(tmp_path):
    path = _write(tmp_path, _answerable(), '{"id": "Q2", "question": ')
    _only(path, 2, "invalid JSON")


def test_not_an_object(tmp_path):
    _only(_write(tmp_path, "// c", '["Q1"]'), 2, "expected a JSON object")


@pytest.mark.parametrize("field", ["id", "question", "topic", "type", "answerability"])
def test_missing_required_field(tmp_path, field):
    obj = _unsupported()
    del obj[field]
    _only(_write(tmp_path, obj), 1, f"missing required field {field!r}")


def test_required_field_must_be_non_empty_string(tmp_path):
    _only(_write(tmp_path, _unsupported(question="  ")), 1, "'question' must be a non-empty string")
    _only(_write(tmp_path, _unsupported(id=7)), 1, "'id' must be a non-empty string")


def test_bad_type(tmp_path):
    _only(_write(tmp_path, _answerable(type="howto")), 1, "bad type 'howto'", "procedural")


def test_bad_answerability(tmp_path):
    _only(_write(tmp_path, _unsupported(answerability="maybe")), 1, "bad answerability 'maybe'")


def test_duplicate_id_names_first_line(tmp_path):
    path = _write(tmp_path, "// header", _answerable("Q1"), _unsupported("U1"), _unsupported("Q1"))
    _only(path, 4, "duplicate id 'Q1'", "first on line 2")


@pytest.mark.parametrize("evidence", ["absent", [], None])
def test_answerable_without_evidence(tmp_path, evidence):
    obj = _answerable()
    if evidence == "absent":
        del obj["evidence"]
    else:
        obj["evidence"] = evidence
    _only(_write(tmp_path, obj), 1, "answerable question has no evidence")


@pytest.mark.parametrize("answerability", ["unsupported", "out_of_domain"])
def test_evidence_on_non_answerable(tmp_path, answerability):
    obj = _unsupported(answerability=answerability, evidence=[{"page": "ppe#p1", "grade": 1}])
    _only(_write(tmp_path, obj), 1, f"{answerability} question must not have evidence")


def test_evidence_not_a_list(tmp_path):
    _only(_write(tmp_path, _answerable(evidence={"ppe#p1": 2})), 1, "evidence must be a list")


def test_evidence_item_not_an_object(tmp_path):
    _only(_write(tmp_path, _answerable(evidence=["ppe#p1"])), 1, "evidence item 1 must be an object")


@pytest.mark.parametrize("page", ["osha3120-p2", "osha3120#p0", "OSHA#p2", "osha3120#2", "", 12])
def test_malformed_page_id(tmp_path, page):
    obj = _answerable(evidence=[{"page": "ppe#p1", "grade": 2}, {"page": page, "grade": 1}])
    _only(_write(tmp_path, obj), 1, "evidence item 2: malformed page id", "<doc_id>#p<n>")


def test_missing_page_and_grade(tmp_path):
    problems = _problems(_write(tmp_path, _answerable(evidence=[{"excerpt": "x"}])))
    assert problems == [
        f"{tmp_path / 'questions.jsonl'}:1: evidence item 1: missing 'page'",
        f"{tmp_path / 'questions.jsonl'}:1: evidence item 1: missing 'grade'",
    ]


def test_page_not_known_names_existing_pages(tmp_path):
    obj = _answerable(evidence=[{"page": "osha3120#p4", "grade": 2}])
    _only(_write(tmp_path, obj), 1, "'osha3120#p4' is not in the corpus", "has pages 1-3, 5", known=KNOWN)


def test_page_of_unknown_document(tmp_path):
    obj = _answerable(evidence=[{"page": "nosuch#p1", "grade": 2}])
    _only(_write(tmp_path, obj), 1, "'nosuch#p1' is not in the corpus", "no document 'nosuch'", known=KNOWN)


def test_unknown_pages_accepted_without_known_pages(tmp_path):
    obj = _answerable(evidence=[{"page": "nosuch#p1", "grade": 2}])
    assert read_questions(_write(tmp_path, obj))[0].evidence == {"nosuch#p1": 2}


@pytest.mark.parametrize("grade", [0, 3, -1, "2", 1.5, 2.0, True, None])
def test_bad_grade(tmp_path, grade):
    obj = _answerable(evidence=[{"page": "ppe#p1", "grade": grade}])
    _only(_write(tmp_path, obj), 1, "evidence item 1: bad grade", "must be 1 or 2")


def test_same_page_twice(tmp_path):
    obj = _answerable(evidence=[{"page": "ppe#p1", "grade": 2}, {"page": "ppe#p1", "grade": 1}])
    _only(_write(tmp_path, obj), 1, "evidence item 2: page 'ppe#p1' listed twice", "first as evidence item 1")


def test_bad_optional_fields(tmp_path):
    _only(_write(tmp_path, _unsupported(reference_answer=["x"])), 1, "reference_answer must be a string")
    _only(_write(tmp_path, _unsupported(answer_points="one")), 1, "answer_points must be a list of strings")
    _only(
        _write(tmp_path, _answerable(evidence=[{"page": "ppe#p1", "grade": 2, "excerpt": 3}])),
        1,
        "excerpt must be a string",
    )


def test_negative_questions_may_use_other_types(tmp_path):
    """Spec §3: unsupported / out-of-domain questions "may use direct" — other types pass."""
    qs = read_questions(_write(tmp_path, _unsupported("U1", type="unsupported")))
    assert qs[0].type == "unsupported"


def test_reserved_field_name(tmp_path):
    _only(_write(tmp_path, _unsupported(**{EVIDENCE_EXTRA: {}})), 1, "reserved")


def test_all_problems_collected_in_one_error(tmp_path):
    bad_grade_twice = _answerable(
        "Q3", evidence=[{"page": "ppe#p1", "grade": 5}, {"page": "ppe#p1", "grade": 1}]
    )
    path = _write(
        tmp_path,
        _answerable("Q1"),  # line 1: fine
        "not json",  # line 2
        "// comment",  # line 3
        _unsupported("Q1", answerability="maybe"),  # line 4: duplicate id and bad answerability
        bad_grade_twice,  # line 5: bad grade and duplicate page
        _answerable("Q4", evidence=[{"page": "ppe#p7", "grade": 1}]),  # line 6: unknown page
        _unsupported("U9"),  # line 7: fine
    )
    problems = _problems(path, KNOWN)
    lines = [p.removeprefix(f"{path}:").split(":", 1)[0] for p in problems]
    assert lines == ["2", "4", "4", "5", "5", "6"], problems
    assert "duplicate id 'Q1' (first on line 1)" in problems[1]
    with pytest.raises(QuestionError, match="6 problems in question set"):
        read_questions(path, KNOWN)
