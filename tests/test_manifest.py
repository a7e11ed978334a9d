"""Manifest validation (benchmark-format.md §1): every problem names file, line, column."""

from __future__ import annotations

import csv
from pathlib import Path

import pdf_factory as pf
import pytest

from sourcepage.corpus.manifest import ManifestError, Problem, read_manifest
from sourcepage.ingest import ingest
from sourcepage.records import MANIFEST_COLUMNS
from sourcepage.store.db import Store


def _corpus(root: Path, rows: list[dict[str, object]] | None = None) -> Path:
    """Two one-page documents ``one`` and ``two``; ``rows`` overrides the manifest rows."""
    pf.text_pdf(root / "pdf" / "one.pdf", ["Lockout devices are applied by authorized employees."])
    pf.text_pdf(root / "pdf" / "two.pdf", ["Guards keep hands out of the point of operation."])
    pf.write_manifest(root, rows if rows is not None else [{"doc_id": "one"}, {"doc_id": "two"}])
    return root


def _rewrite(corpus: Path, edit) -> Path:
    """Rewrite manifest.csv rows (lists of fields) through ``edit(rows) -> rows``."""
    path = corpus / "manifest.csv"
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\r\n").writerows(edit(rows))
    return path


def _problems(corpus: Path, **kw) -> tuple[ManifestError, list[Problem]]:
    with pytest.raises(ManifestError) as ei:
        read_manifest(corpus, **kw)
    return ei.value, ei.value.problems


def _located(err: ManifestError, corpus: Path, line: int, column: str) -> None:
    """The error text names the manifest file, the line and the column."""
    assert f"{corpus / 'manifest.csv'}:{line} [{column}]" in str(err)


def test_valid_manifest_reads_documents_in_order(tmp_path: Path) -> None:
    m = read_manifest(_corpus(tmp_path))
    assert [d.doc_id for d in m.documents] == ["one", "two"]
    assert m.warnings == ()
    assert m.pdf_path(m.documents[0]) == tmp_path / "pdf" / "one.pdf"
    assert m.documents[0].sha256 == pf.sha256_file(tmp_path / "pdf" / "one.pdf")


@pytest.mark.parametrize("column", ["doc_id", "sha256", "license"])
def test_missing_column(tmp_path: Path, column: str) -> None:
    corpus = _corpus(tmp_path)
    i = MANIFEST_COLUMNS.index(column)
    _rewrite(corpus, lambda rows: [r[:i] + r[i + 1 :] for r in rows])
    err, problems = _problems(corpus)
    assert [(p.line, p.column) for p in problems] == [(1, column)]
    assert "required column missing" in problems[0].message
    _located(err, corpus, 1, column)


def test_all_missing_columns_reported_together(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    _rewrite(corpus, lambda rows: [r[:11] for r in rows])  # drop pages, license, found_in
    err, problems = _problems(corpus)
    assert {p.column for p in problems} == {"pages", "license", "found_in"}
    for c in ("pages", "license", "found_in"):
        _located(err, corpus, 1, c)


def test_duplicate_doc_id(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, [{"doc_id": "one"}, {"doc_id": "one", "file": "two.pdf"}])
    err, problems = _problems(corpus)
    assert [(p.line, p.column) for p in problems] == [(3, "doc_id")]
    assert "duplicate 'one'" in problems[0].message and "first on line 2" in problems[0].message
    _located(err, corpus, 3, "doc_id")


@pytest.mark.parametrize("bad", ["Bad_ID", "-leading-dash", "has space", "dot.ted", ""])
def test_bad_doc_id(tmp_path: Path, bad: str) -> None:
    corpus = _corpus(tmp_path, [{"doc_id": "one"}, {"doc_id": bad, "file": "two.pdf"}])
    err, problems = _problems(corpus)
    assert [(p.line, p.column) for p in problems] == [(3, "doc_id")]
    assert repr(bad) in problems[0].message
    _located(err, corpus, 3, "doc_id")


def test_missing_file(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, [{"doc_id": "one"}, {"doc_id": "two", "file": "absent.pdf"}])
    err, problems = _problems(corpus)
    assert [(p.line, p.column) for p in problems] == [(3, "file")]
    assert "absent.pdf does not exist" in problems[0].message
    _located(err, corpus, 3, "file")


def test_file_outside_pdf_folder_is_refused(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, [{"doc_id": "one", "file": "../manifest.csv", "sha256": "0" * 64}])
    err, problems = _problems(corpus)
    assert [(p.line, p.column) for p in problems] == [(2, "file")]
    _located(err, corpus, 2, "file")


def test_every_problem_is_collected_in_one_pass(tmp_path: Path) -> None:
    corpus = _corpus(
        tmp_path,
        [
            {"doc_id": "Bad", "file": "one.pdf"},
            {"doc_id": "two", "file": "gone.pdf"},
            {"doc_id": "three", "file": "two.pdf", "year": "20x4", "sha256": "0" * 64},
        ],
    )
    err, problems = _problems(corpus)
    got = {(p.line, p.column) for p in problems}
    assert got == {(2, "doc_id"), (3, "file"), (4, "year"), (4, "sha256")}
    for line, col in got:
        _located(err, corpus, line, col)


def test_checksum_mismatch_is_fatal(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, [{"doc_id": "one"}, {"doc_id": "two", "sha256": "0" * 64}])
    err, problems = _problems(corpus)
    assert [(p.line, p.column, p.fatal) for p in problems] == [(3, "sha256", True)]
    real = pf.sha256_file(corpus / "pdf" / "two.pdf")
    assert "0" * 64 in problems[0].message and real in problems[0].message
    _located(err, corpus, 3, "sha256")


def test_malformed_checksum_is_fatal(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, [{"doc_id": "one", "sha256": "not-a-digest"}, {"doc_id": "two"}])
    err, problems = _problems(corpus)
    assert [(p.line, p.column) for p in problems] == [(2, "sha256")]
    assert "not a SHA-256" in problems[0].message
    _located(err, corpus, 2, "sha256")


def test_checksum_mismatch_allowed_is_a_warning(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, [{"doc_id": "one"}, {"doc_id": "two", "sha256": "0" * 64}])
    m = read_manifest(corpus, allow_checksum_mismatch=True)
    assert [(w.line, w.column, w.fatal) for w in m.warnings] == [(3, "sha256", False)]
    assert f"{corpus / 'manifest.csv'}:3 [sha256]" in str(m.warnings[0])
    # the document carries the file's real checksum, not the manifest's
    assert m.documents[1].sha256 == pf.sha256_file(corpus / "pdf" / "two.pdf")


def test_checksum_warning_recorded_in_store(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c", [{"doc_id": "one"}, {"doc_id": "two", "sha256": "0" * 64}])
    report = ingest(corpus, tmp_path / "s", allow_checksum_mismatch=True, workers=1)
    assert sorted(report.extracted) == ["one", "two"]
    assert any("[sha256]" in w for w in report.warnings)
    st = Store(tmp_path / "s")
    try:
        rows = [w for w in st.warnings() if w["kind"] == "manifest:sha256"]
        assert len(rows) == 1
        assert rows[0]["doc_id"] == "two"
        assert f"{corpus / 'manifest.csv'}:3 [sha256]" in rows[0]["message"]
        assert rows[0]["run_id"] == st.runs()[-1]["id"]
    finally:
        st.close()


def test_warning_doc_id_survives_blank_lines_in_manifest(tmp_path: Path) -> None:
    """A blank line shifts CSV line numbers against the row index; the warning must
    still name the right document (and ingest must not crash)."""
    corpus = _corpus(tmp_path / "c", [{"doc_id": "one"}, {"doc_id": "two", "sha256": "0" * 64}])
    _rewrite(corpus, lambda rows: [rows[0], rows[1], [], rows[2]])
    m = read_manifest(corpus, allow_checksum_mismatch=True)
    assert [(w.line, w.column) for w in m.warnings] == [(4, "sha256")]
    ingest(corpus, tmp_path / "s", allow_checksum_mismatch=True, workers=1)
    st = Store(tmp_path / "s")
    try:
        assert [w["doc_id"] for w in st.warnings() if w["kind"] == "manifest:sha256"] == ["two"]
    finally:
        st.close()


def test_unknown_role_is_a_warning(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, [{"doc_id": "one", "role": "secondary"}, {"doc_id": "two"}])
    m = read_manifest(corpus)
    assert [(w.line, w.column, w.fatal) for w in m.warnings] == [(2, "role", False)]


def test_invalid_manifest_does_not_touch_the_store(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c", [{"doc_id": "one"}, {"doc_id": "one", "file": "two.pdf"}])
    with pytest.raises(ManifestError):
        ingest(corpus, tmp_path / "s", workers=1)
    assert not (tmp_path / "s").exists()


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="manifest.csv not found") as err:
        read_manifest(tmp_path)
    # the error teaches: the columns a manifest holds and where each is described
    assert "docs/manifest.md" in str(err.value)
    assert "doc_id, file, title" in str(err.value) and "found_in" in str(err.value)
    assert (Path(__file__).parents[1] / "docs" / "manifest.md").is_file()


def test_extra_construction_columns_kept(tmp_path: Path) -> None:
    corpus = _corpus(
        tmp_path / "c",
        [
            {"doc_id": "one", "project_type": "bridge", "phase": "design", "bim_id": "B-12"},
            {"doc_id": "two", "project_type": "tunnel", "phase": "", "bim_id": ""},
        ],
    )
    m = read_manifest(corpus)
    assert m.extra_columns == ("project_type", "phase", "bim_id")
    one, two = m.documents
    assert one.extra == {"project_type": "bridge", "phase": "design", "bim_id": "B-12"}
    assert one.get("project_type") == "bridge" and two.get("phase") == ""
    assert one.as_dict()["bim_id"] == "B-12"
    ingest(corpus, tmp_path / "s", workers=1)
    st = Store(tmp_path / "s")
    try:
        stored = {d.doc_id: d for d in st.documents()}
        assert stored["one"].extra == one.extra
        assert stored["two"].get("project_type") == "tunnel"
    finally:
        st.close()


def test_safety_corpus_manifest(safety_corpus: Path) -> None:
    m = read_manifest(safety_corpus)
    assert [d.doc_id for d in m.documents] == [
        "loto_energy_control",
        "machine_guarding",
        "confined_space_entry",
        "hse_ppe_at_work",
    ]
    assert m.extra_columns == ("project_type",)
    assert sum(int(d.pages) for d in m.documents) == 11
