"""The reproducibility package of a run (study §3.8): ``export`` writes it, ``verify``
re-derives what it can and names every difference.

A package is a zip of::

    package.json            schema, versions, the runs, and the SHA-256 of every other file
    run.json, metrics.json, stats.json, ranked.jsonl, per_question.jsonl, report.md
    settings.json           the experiment design and every setting of text and indexes
    environment.json        package versions at the run and at the export
    questions.jsonl         the question set (its checksum is in run.json and package.json)
    trec/qrels.txt, trec/<version>__<method>.run
    segments/<version>.jsonl  per chunk: id, document, credited page, spans (page, start,
                              end), characters and the SHA-256 of its text
    corpus/manifest.csv, corpus/files.json   the corpus manifest and each file's SHA-256

``verify`` checks the listed checksums; the question set against run.json; the qrels
against the questions; ranked.jsonl against the run files; recomputes every metric of
metrics.json from the run files and the questions and every interval and test of
stats.json; and, given the corpus, its checksums, the segment inventory (re-ingested
with the recorded engine and text settings) and, with ``rerank``, the rankings.
The zip is written with fixed timestamps, so the same run gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sourcepage.corpus.manifest import sha256_file
from sourcepage.evaluation.provenance import package_versions
from sourcepage.package.checks import Check, corpus_checks, run_checks, segment_rows
from sourcepage.package.unpack import PackageError, Unpacked, unpack
from sourcepage.records import TEXT_VERSIONS
from sourcepage.store.db import Store
from sourcepage.store.files import atomic_open

__all__ = ["Check", "PackageError", "export", "segment_rows", "verify"]

SCHEMA = 1
#: run-folder files copied into the package when present
RUN_FILES = ("run.json", "metrics.json", "stats.json", "ranked.jsonl", "per_question.jsonl", "report.md")
SETTINGS_KEYS = (
    "experiment",
    "design",
    "runs",
    "text_settings",
    "index_settings",
    "rrf_k",
    "engine",
    "seed",
    "bootstrap_resamples",
    "depth",
    "chunk_fingerprints",
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode()


def _input(path: str, base: Path, what: str, sha: str | None) -> Path:
    """An input file named in run.json (relative to the current folder or the run folder),
    checked against its recorded checksum."""
    p = Path(path)
    for cand in (p, base / p):
        if cand.is_file():
            if sha and sha256_file(cand) != sha:
                raise PackageError(f"{what} {cand} changed since the run (SHA-256 differs from run.json)")
            return cand
    raise PackageError(
        f"{what} {path} named in run.json is not found (run from the folder the run was made in)"
    )


def export(run_dir: str | Path, out: str | Path) -> dict[str, Any]:
    """Write the reproducibility package of ``run_dir`` (a ``sourcepage eval`` or sweep-cell
    folder) to the zip ``out``; returns package.json's data. PackageError when the run's
    outputs, question set, manifest or store no longer match run.json."""
    run_dir, out = Path(run_dir), Path(out)
    try:
        info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PackageError(f"{run_dir}/run.json: {e}") from None
    for name, sha in info.get("outputs", {}).items():
        p = run_dir / name
        if not p.is_file() or sha256_file(p) != sha:
            raise PackageError(f"{p} is missing or changed since the run (run.json outputs)")
    files: dict[str, bytes] = {n: (run_dir / n).read_bytes() for n in RUN_FILES if (run_dir / n).is_file()}
    for p in sorted((run_dir / "trec").glob("*")):
        files[f"trec/{p.name}"] = p.read_bytes()
    if "trec/qrels.txt" not in files or "metrics.json" not in files or "ranked.jsonl" not in files:
        raise PackageError(f"{run_dir} lacks metrics.json, ranked.jsonl or trec/qrels.txt")
    inputs = info["inputs"]
    files["questions.jsonl"] = _input(
        inputs["questions"]["path"], run_dir, "question set", inputs["questions"]["sha256"]
    ).read_bytes()
    files["corpus/manifest.csv"] = _input(
        inputs["manifest"]["path"], run_dir, "manifest", inputs["manifest"]["sha256"]
    ).read_bytes()
    files["corpus/files.json"] = _json(inputs.get("corpus_files", {}))
    store_path = Path(info["store"])
    if not (store_path / "store.sqlite").exists() and (run_dir / "store" / "store.sqlite").exists():
        store_path = run_dir / "store"
    st = Store(store_path)
    try:
        recorded = info.get("chunk_fingerprints", {})
        for version, fp in recorded.items():
            if st.chunk_fingerprint(version) != fp:
                raise PackageError(f"store {store_path} no longer holds the {version} chunks of the run")
        if not recorded and st.get_meta("text_settings") != info.get("text_settings"):
            raise PackageError(f"store {store_path} was re-chunked with other text settings since the run")
        for version in TEXT_VERSIONS:
            files[f"segments/{version}.jsonl"] = _jsonl(segment_rows(st, version))
    finally:
        st.close()
    files["settings.json"] = _json({k: info[k] for k in SETTINGS_KEYS if k in info})
    files["environment.json"] = _json({"run": info.get("packages", {}), "export": package_versions()})
    manifest = {
        "schema": SCHEMA,
        "kind": "sourcepage reproducibility package",
        "created_at": info.get("created_at"),
        "runs": info.get("runs", []),
        "questions_sha256": inputs["questions"]["sha256"],
        "files": {name: _sha(data) for name, data in sorted(files.items())},
    }
    with atomic_open(out, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in [("package.json", _json(manifest)), *sorted(files.items())]:
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data)
    out.chmod(0o644)  # a package is for others to read (the temporary file was private)
    return manifest


# --------------------------------------------------------------------------- verify


def _checksums(unpacked: Unpacked) -> Check:
    """The packaged files against package.json's SHA-256s (computed while unpacking)."""
    check = Check("checksums of the packaged files")
    for name, sha in unpacked.manifest["files"].items():
        if name not in unpacked.written:
            check.fail(f"{name}: listed but missing")
        elif unpacked.written[name] != sha:
            check.fail(f"{name}: SHA-256 differs from package.json")
    for name in unpacked.unlisted:
        check.fail(f"{name}: in the zip but not listed in package.json")
    return check


def verify(package: str | Path, corpus: str | Path | None = None, rerank: bool = False) -> list[Check]:
    """Re-derive everything the package allows (see the module doc); every Check that
    found a difference has ``ok`` False and says what differs. The package is unpacked by
    :func:`unpack.unpack` (bounded, nothing written outside its temporary folder); a file
    of the wrong shape inside it is a PackageError, not a traceback."""
    with tempfile.TemporaryDirectory(prefix="sourcepage-verify-") as tmp:
        folder = Path(tmp)
        unpacked = unpack(Path(package), folder)
        try:
            checks = [_checksums(unpacked), *run_checks(folder)]
            if corpus is not None:
                checks += corpus_checks(folder, Path(corpus), rerank)
        except (KeyError, TypeError, AttributeError, IndexError) as e:
            why = f"a packaged file lacks a field or has the wrong shape ({e!r})"
            raise PackageError(f"{package}: {why}") from None
    return checks
