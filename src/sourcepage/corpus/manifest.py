"""Read and validate a corpus folder's ``manifest.csv`` (benchmark-format.md §1).

Every problem is collected (not just the first) and names the file, the CSV line
and the column, so a person can fix the manifest in one pass.
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sourcepage.records import MANIFEST_COLUMNS, Document

DOC_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*\Z")
ROLES = ("primary", "supporting")
#: where a person reads what each column holds (named in the errors of a missing or short manifest)
GUIDE = "every column is described in docs/manifest.md"


@dataclass(frozen=True)
class Problem:
    """One manifest problem, located by file, line and column."""

    file: str
    line: int
    column: str
    message: str
    fatal: bool = True
    doc_id: str = ""  # the row's doc_id, for a row-level problem

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        col = f" [{self.column}]" if self.column else ""
        return f"{where}{col}: {self.message}"


class ManifestError(ValueError):
    """Raised when a manifest has fatal problems; ``problems`` lists them all."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        if len(problems) == 1:
            super().__init__(f"invalid manifest: {problems[0]}")
        else:
            lines = "\n  ".join(str(p) for p in problems)
            super().__init__(f"invalid manifest ({len(problems)} problems):\n  {lines}")


def sha256_file(path: Path) -> str:
    """Lower-case hex SHA-256 of a file, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _csv_problem(e: csv.Error) -> str:
    msg = str(e)
    if "field larger than field limit" in msg:
        return f"a field is longer than {csv.field_size_limit()} characters (the CSV field limit)"
    return f"unreadable CSV ({msg})"


def _rows(reader: csv.DictReader, name: str, problems: list[Problem]) -> Iterator[dict[str, str]]:
    """The rows of ``reader``; a row the csv module cannot read ends the reading with a
    problem naming its line (nothing after it can be trusted)."""
    while True:
        try:
            yield next(reader)
        except StopIteration:
            return
        except csv.Error as e:  # the DictReader's own line_num is not yet advanced
            problems.append(Problem(name, reader.reader.line_num, "", _csv_problem(e)))
            return


def _same_file(
    contents: dict[str, tuple[str, int]], sha: str, file: str, doc_id: str, name: str, line: int
) -> list[Problem]:
    """A warning when ``sha`` was seen under another doc_id (one PDF ingested twice
    doubles its pages in every ranking); records the first doc_id of each checksum."""
    first, first_line = contents.setdefault(sha, (doc_id, line))
    if first == doc_id:
        return []
    msg = f"{file} is the same file as {first!r} (line {first_line}): same SHA-256"
    return [Problem(name, line, "file", msg, fatal=False, doc_id=doc_id)]


@dataclass(frozen=True)
class Manifest:
    """A validated manifest: documents in file order, plus non-fatal warnings."""

    corpus_dir: Path
    documents: tuple[Document, ...]
    warnings: tuple[Problem, ...]
    extra_columns: tuple[str, ...]

    def pdf_path(self, doc: Document) -> Path:
        return self.corpus_dir / "pdf" / doc.file


def _header_names(header: list[str], name: str) -> list[Problem]:
    """Column names that would be kept under a name nobody reads: empty, with spaces
    around them (' phase '), or a known column in other letter case ('Phase')."""
    from sourcepage.corpus.fields import NAMED_FIELDS

    known = {*MANIFEST_COLUMNS, *NAMED_FIELDS}
    out = []
    for i, c in enumerate(header, 1):
        if not c.strip():
            out.append(Problem(name, 1, f"column {i}", "empty column name (a stray comma in the header?)"))
        elif c != c.strip():
            out.append(Problem(name, 1, c, f"spaces around the column name: write {c.strip()!r}"))
        elif c not in known and c.lower() in known:
            out.append(Problem(name, 1, c, f"column names are lower case: write {c.lower()!r}"))
    return out


def read_manifest(
    corpus_dir: str | Path,
    *,
    allow_checksum_mismatch: bool = False,
    check_files: bool = True,
) -> Manifest:
    """Parse and validate ``corpus_dir/manifest.csv``.

    Checks: header has every required column; doc_id well-formed and unique; file
    present under ``pdf/``; sha256 equal to the file's. A checksum mismatch is fatal
    unless ``allow_checksum_mismatch``, in which case it becomes a warning. Extra
    columns (e.g. construction fields) are kept in ``Document.extra``.
    """
    corpus_dir = Path(corpus_dir)
    path = corpus_dir / "manifest.csv"
    name = str(path)
    reader = _reader(path, name)
    header = reader.fieldnames or []
    dupes = sorted({c for c in header if header.count(c) > 1})
    problems = [Problem(name, 1, c, "column appears more than once in header") for c in dupes]
    problems += _header_names(header, name)
    warnings: list[Problem] = []
    extra_cols = tuple(c for c in header if c not in MANIFEST_COLUMNS and c)
    seen: dict[str, int] = {}
    contents: dict[str, tuple[str, int]] = {}  # SHA-256 -> (first doc_id, line)
    pdf_dir = (corpus_dir / "pdf").resolve()
    docs: list[Document] = []
    for row in _rows(reader, name, problems):
        line = reader.line_num
        if None in row:
            problems.append(Problem(name, line, "", "row has more fields than the header"))
            continue
        row = {k: (v or "").strip() for k, v in row.items()}
        _check_fields(row, name, line, seen, problems, warnings)
        if not row["file"]:
            problems.append(Problem(name, line, "file", "empty"))
        elif check_files:
            pdf = corpus_dir / "pdf" / row["file"]
            if Path(row["file"]).name != row["file"]:
                problems.append(Problem(name, line, "file", "must be a bare file name under pdf/"))
            elif not pdf.is_file():
                problems.append(Problem(name, line, "file", f"{pdf} does not exist"))
            elif not pdf.resolve().is_relative_to(pdf_dir):
                problems.append(
                    Problem(name, line, "file", f"{pdf} is a link to {pdf.resolve()}, outside {pdf_dir}")
                )
            else:
                got = sha256_file(pdf)
                p = _checksum_problem(row, got, name, line, allow_checksum_mismatch)
                if p is not None:
                    (warnings if allow_checksum_mismatch else problems).append(p)
                row["sha256"] = got
                warnings += _same_file(contents, got, row["file"], row["doc_id"], name, line)
        docs.append(Document.from_dict(row))
    if not docs and not problems:
        problems.append(Problem(name, 2, "", "manifest has no document rows"))
    if problems:
        raise ManifestError(problems)
    return Manifest(corpus_dir, tuple(docs), tuple(warnings), extra_cols)


def _reader(path: Path, name: str) -> csv.DictReader:
    """A reader over the manifest's rows, its header read and holding every required
    column; ManifestError for a missing, non-UTF-8, empty or unreadable file."""
    if not path.is_file():
        msg = (f"manifest.csv not found: a corpus folder holds manifest.csv (one row a PDF, columns "
               f"{', '.join(MANIFEST_COLUMNS)}) and the PDFs under pdf/; {GUIDE}")
        raise ManifestError([Problem(name, 0, "", msg)])
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ManifestError([Problem(name, 0, "", f"not UTF-8: {e}")]) from e
    if not text.strip():
        columns = ",".join(MANIFEST_COLUMNS)
        raise ManifestError([Problem(name, 0, "", f"the file is empty (it needs a header line: {columns})")])
    reader = csv.DictReader(text.splitlines(keepends=True))
    try:
        header = reader.fieldnames or []
    except csv.Error as e:
        raise ManifestError([Problem(name, reader.reader.line_num, "", _csv_problem(e))]) from None
    missing = [c for c in MANIFEST_COLUMNS if c not in header]
    if missing:
        raise ManifestError(
            [Problem(name, 1, c, f"required column missing from header ({GUIDE})") for c in missing]
        )
    return reader


def _check_fields(
    row: dict[str, str],
    name: str,
    line: int,
    seen: dict[str, int],
    problems: list[Problem],
    warnings: list[Problem],
) -> None:
    """The row's doc_id (well-formed, unique: ``seen`` maps each to its first line), role,
    year and pages; problems and warnings appended."""
    doc_id = row["doc_id"]
    if not DOC_ID.match(doc_id):
        problems.append(Problem(name, line, "doc_id", f"{doc_id!r} must match [a-z0-9][a-z0-9_-]*"))
    elif doc_id in seen:
        problems.append(Problem(name, line, "doc_id", f"duplicate {doc_id!r} (first on line {seen[doc_id]})"))
    else:
        seen[doc_id] = line
    if row["role"] and row["role"] not in ROLES:
        msg = f"{row['role']!r} is not one of {ROLES}"
        warnings.append(Problem(name, line, "role", msg, fatal=False, doc_id=doc_id))
    if row["year"] and not re.fullmatch(r"\d{4}", row["year"]):
        problems.append(Problem(name, line, "year", f"{row['year']!r} is not a year"))
    if row["pages"] and not row["pages"].isdigit():
        problems.append(Problem(name, line, "pages", f"{row['pages']!r} is not a number"))


def _checksum_problem(row: dict[str, str], got: str, name: str, line: int, allowed: bool) -> Problem | None:
    """The row's sha256 against the file's (``got``): not a digest, or another file's;
    a warning rather than fatal when mismatches are ``allowed``."""
    want = row["sha256"].lower()
    if not re.fullmatch(r"[0-9a-f]{64}", want):
        msg = f"{row['sha256']!r} is not a SHA-256 hex digest (file has {got})"
    elif want != got:
        msg = f"manifest says {want}, {row['file']} has {got}"
    else:
        return None
    return Problem(name, line, "sha256", msg, fatal=not allowed, doc_id=row["doc_id"])
