"""Build a corpus folder from a manifest by downloading each ``source_url``, with
SHA-256 verification, into a cache — for machines without a local mirror.

Files already in the cache with the right checksum are not fetched again; a
download goes to a temp file and is renamed only when complete. Rows without a
URL, unreachable hosts and checksum mismatches are reported per document, never
silently skipped; the caller decides whether a partial corpus is acceptable.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from sourcepage.corpus.manifest import read_manifest, sha256_file


@dataclass
class FetchReport:
    corpus: Path
    fetched: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sourcepage" / "corpora"


def fetch_corpus(manifest: str | Path, cache: str | Path | None = None, timeout: float = 30.0) -> FetchReport:
    """Download the PDFs that ``manifest`` names into ``cache/<name>/pdf`` and copy the
    manifest beside them; returns what happened to each document."""
    manifest = Path(manifest)
    name = manifest.parent.name or "corpus"
    corpus = Path(cache or default_cache()) / name
    (corpus / "pdf").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(manifest, corpus / "manifest.csv")
    docs = read_manifest(corpus, check_files=False).documents
    report = FetchReport(corpus)
    for d in docs:
        target = corpus / "pdf" / d.file
        if target.is_file() and sha256_file(target) == d.sha256:
            report.cached.append(d.doc_id)
            continue
        if not d.source_url:
            report.problems[d.doc_id] = "the manifest gives no source_url for this document"
            continue
        tmp = target.with_suffix(target.suffix + ".part")
        try:
            with urllib.request.urlopen(d.source_url, timeout=timeout) as resp, open(tmp, "wb") as f:
                shutil.copyfileobj(resp, f)
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            tmp.unlink(missing_ok=True)
            report.problems[d.doc_id] = f"cannot download {d.source_url} ({e}); offline? pass --corpus"
            continue
        got = sha256_file(tmp)
        if got != d.sha256:
            tmp.unlink(missing_ok=True)
            report.problems[d.doc_id] = f"{d.source_url} has SHA-256 {got}, the manifest says {d.sha256}"
            continue
        os.replace(tmp, target)
        report.fetched.append(d.doc_id)
    return report
