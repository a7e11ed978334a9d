"""Smaller cases of issue 51 (point 8): a negative or absurd number of worker processes
was accepted by ``ingest`` and ``index``; it is refused before any work (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage.cli import app


@pytest.mark.parametrize("workers", ["-3", "-5", "100000"])
def test_ingest_and_index_refuse_a_bad_worker_count(
    safety_corpus: Path, tmp_path: Path, workers: str
) -> None:
    store = tmp_path / "store"
    for args in (
        ["ingest", "--corpus", str(safety_corpus), "--store", str(store), "--workers", workers],
        ["index", "--store", str(store), "--workers", workers],
    ):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2, (args[0], res.exit_code, res.output[-500:])
        assert "--workers" in res.output, res.output[-500:]
    assert not store.exists()


def test_search_json_sends_no_c1_control_to_the_terminal(indexed_store: Path) -> None:
    """An 8-bit CSI (U+009B) in text — a PDF's, or the question's — is escaped as \\u009b:
    JSON escapes C0 by itself, not DEL or C1."""
    import json

    question = "lockbox \u009b2J\u009b]0;pwned\u0007 \u007f group"
    args = ["search", question, "--store", str(indexed_store), "--method", "bm25", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output[-500:]
    assert not any(0x7F <= ord(c) <= 0x9F or (ord(c) < 0x20 and c not in "\n") for c in res.stdout)
    assert json.loads(res.stdout)["question"] == question  # the text itself is kept


@pytest.mark.parametrize("name", ["Ada Lovelace", "-ada", "ada\u202e", "", "a" * 65])
def test_reviews_refuses_names_reviewer_add_refuses(indexed_store: Path, name: str) -> None:
    """``reviews --reviewer`` recorded names that ``reviewer add`` refuses; now the same
    rule (store.reviewers.check_name), before the search runs, and nothing is written."""
    args = ["reviews", "--store", str(indexed_store), "--question", "group lockbox", "--decision", "refuse",
            "--reviewer", name, "--method", "bm25"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "reviewer name" in res.output, res.output[-500:]
    assert not (indexed_store / "labels.sqlite").exists()
    ok = CliRunner().invoke(app, [*args[:-4], "--reviewer", "ada.l", "--method", "bm25"])
    assert ok.exit_code == 0, ok.output[-500:]


@pytest.mark.parametrize(
    ("column", "words"),
    [
        (" phase ", "spaces around the column name"),
        ("Phase", "lower case: write 'phase'"),
        ("", "empty column name"),
        ("Title", "lower case: write 'title'"),
    ],
)
def test_a_misspelt_extra_column_is_refused(
    fresh_corpus: Path, tmp_path: Path, column: str, words: str
) -> None:
    """' phase ', 'Phase' and an empty column name were kept as extra columns nobody reads."""
    manifest = fresh_corpus / "manifest.csv"
    lines = manifest.read_text(encoding="utf-8").splitlines()
    cell = f'"{column}"' if column.strip() != column else column
    lines = [lines[0] + "," + cell] + [line + ",structure" for line in lines[1:]]
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["ingest", "--corpus", str(fresh_corpus), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and words in " ".join(res.output.split()), res.output[-600:]
    assert not (tmp_path / "s").exists()


def test_a_filter_value_holding_a_comma_can_be_given() -> None:
    """`--filter 'title=Lifting, slinging'` split at the comma; `\\,` now keeps it."""
    from sourcepage.api import filters_from_pairs

    got = filters_from_pairs(["title=Lifting\\, slinging", "jurisdiction=US, UK", "note=a\\\\,b"])
    assert got == {"title": ["Lifting, slinging"], "jurisdiction": ["US", "UK"], "note": ["a\\", "b"]}


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 300 KiB tmpfs (skipped where this process may not mount one)."""
    import subprocess

    where = tmp_path / "tiny"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_full_disk_is_called_a_full_disk(tiny_disk: Path, safety_corpus: Path) -> None:
    """SQLite's 'database or disk is full' was reported as a damaged database."""
    import reliability_kit as K

    p = K.cli("ingest", "--corpus", str(safety_corpus), "--store", str(tiny_disk / "store"))
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2, err[-800:]
    assert "the disk is full" in err and "damaged" not in err and "Traceback" not in err, err[-800:]
