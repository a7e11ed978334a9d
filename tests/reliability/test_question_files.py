"""One validation of question files, shared by every command that reads one (issue 51):
a 20 MB question kept ``calibrate`` busy for 15 minutes at 1.7 GB, a lone surrogate
crashed it with a traceback, an id with spaces passed and ``eval`` failed late with
partial outputs, and bytes that are not UTF-8 were reported by byte offset. Each is
now refused by :func:`read_questions` with file and line, before any work, by ``eval``,
``calibrate``, ``judge`` and ``sweep`` alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage.cli import app
from sourcepage.evaluation.questions import QuestionError, read_questions
from sourcepage.service.search import SearchBody
from sourcepage.vocabulary import MAX_QUESTION_CHARS

GOOD = {
    "id": "Q1",
    "question": "How does a group lockbox work in group lockout?",
    "topic": "loto",
    "type": "direct",
    "answerability": "answerable",
    "evidence": [{"page": "loto_energy_control#p2", "grade": 2}],
}
NEGATIVE = {
    "id": "U1",
    "question": "What is the speed limit for forklifts on public roads in Peru?",
    "topic": "other",
    "type": "direct",
    "answerability": "unsupported",
}


def _file(tmp_path: Path, bad_line: bytes) -> Path:
    """A question file whose third line is ``bad_line`` (the first two are good)."""
    path = tmp_path / "questions.jsonl"
    good = [json.dumps(GOOD).encode(), json.dumps(NEGATIVE).encode()]
    path.write_bytes(b"\n".join([*good, bad_line]) + b"\n")
    return path


def _q(**over: object) -> bytes:
    return json.dumps({**GOOD, "id": "Q3", **over}).encode()


CASES = {
    "20 MB question": (_q(question="lockout " * 2_500_000), "a line of 20000"),
    "long question": (_q(question="lockout " * 75), "600 characters (at most 500"),
    "id with spaces": (_q(id="Q 3"), "bad id 'Q 3'"),
    "id with a slash": (_q(id="../Q3"), "bad id"),
    "lone surrogate": (_q().replace(b'"Q3"', b'"Q3", "note": "\\ud800"'), "lone surrogate"),
    "surrogate question": (_q(question="lock \\udfff out").replace(b"\\\\", b"\\"), "lone surrogate"),
    "not UTF-8": (_q(question="lockout").replace(b"lockout", b"lock\xffout"), "not UTF-8"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_read_questions_names_file_and_line(tmp_path: Path, case: str) -> None:
    line, words = CASES[case]
    path = _file(tmp_path, line)
    with pytest.raises(QuestionError) as e:
        read_questions(path)
    assert len(e.value.problems) == 1, e.value.problems
    assert e.value.problems[0].startswith(f"{path}:3: ") and words in e.value.problems[0], e.value.problems


def test_invalid_utf8_is_reported_by_line_not_byte_offset(tmp_path: Path) -> None:
    path = _file(tmp_path, _q(question="lockout").replace(b"lockout", b"lock\xffout"))
    with pytest.raises(QuestionError) as e:
        read_questions(path)
    assert f"{path}:3: not UTF-8" in str(e.value) and "of the line" in str(e.value)


def test_the_limit_is_the_web_apis() -> None:
    field = SearchBody.model_fields["question"]
    (limit,) = [m.max_length for m in field.metadata if hasattr(m, "max_length")]
    assert limit == MAX_QUESTION_CHARS


@pytest.mark.parametrize("case", ["20 MB question", "lone surrogate", "id with spaces", "not UTF-8"])
def test_every_command_refuses_it_before_any_work(
    plain_store: Path, safety_corpus: Path, tmp_path: Path, case: str
) -> None:
    """eval, calibrate, judge and sweep: exit 2, the file and line named, no traceback,
    no output folder."""
    line, words = CASES[case]
    path = _file(tmp_path, line)
    q, store = ["--questions", str(path)], ["--store", str(plain_store)]
    corpus = ["--corpus", str(safety_corpus)]
    runs = {
        "eval": ["eval", *q, *corpus, *store, "--out", str(tmp_path / "eval")],
        "calibrate": ["calibrate", *q, *store],
        "judge": ["judge", *q, *store, "--reviewer", "ada"],
        "sweep": ["sweep", *q, *corpus, "--out", str(tmp_path / "sw")],
    }
    for name, args in runs.items():
        res = CliRunner().invoke(app, args)
        crash = res.exception is not None and not isinstance(res.exception, SystemExit)
        out = res.output + (repr(res.exception) if crash else "")
        assert res.exit_code == 2, (name, res.exit_code, out[-800:])
        flat = "".join(out.split())  # the console wraps long lines
        assert f"{path}:3" in flat and "".join(words.split()) in flat, (name, out[-800:])
        assert "Traceback" not in out and not crash, (name, out[-800:])
    assert not (tmp_path / "eval").exists() and not (tmp_path / "sw").exists()
