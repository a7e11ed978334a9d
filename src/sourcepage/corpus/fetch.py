"""Build a corpus folder from a manifest by downloading each ``source_url``, with
SHA-256 verification, into a cache — for machines without a local mirror.

Files already in the cache with the right checksum are not fetched again; a
download goes to a temp file and is renamed only when complete; a ``file`` that is not a
bare file name (``../x``) is refused, so nothing is written outside the cache. Rows without a
URL, unreachable hosts and checksum mismatches are reported per document, never
silently skipped; the caller decides whether a partial corpus is acceptable.
``locate_corpus`` is the fallback order of ``sourcepage eval``: the given folder, the
local mirror (``default_corpus``), else a download from the questions' manifest.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
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
        if not d.file or Path(d.file).name != d.file or d.file in (".", ".."):
            report.problems[d.doc_id] = f"file {d.file!r} is not a bare file name under pdf/: not fetched"
            continue
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


class CorpusUnavailable(ValueError):
    """No corpus folder could be found or built; ``report`` tells what a download did."""

    def __init__(self, message: str, report: FetchReport | None = None):
        super().__init__(message)
        self.report = report


def default_corpus() -> Path | None:
    """../shared/corpus where present (the local mirror), else None: looked up from the
    working directory, then beside the checkout this package runs from."""
    repo = Path(__file__).resolve().parents[3]  # src/sourcepage/corpus/fetch.py → the checkout
    for cand in (Path("../shared/corpus"), repo.parent / "shared" / "corpus"):
        if (cand / "manifest.csv").is_file():
            return cand.resolve()
    return None


def locate_corpus(
    questions: str | Path,
    corpus: str | Path | None = None,
    *,
    cache: str | Path | None = None,
    on_download: Callable[[Path], None] | None = None,
) -> Path:
    """The corpus folder for a question set: ``corpus`` if given, else ``default_corpus()``,
    else one downloaded (``fetch_corpus``) from the ``manifest.csv`` beside ``questions``.

    ``on_download(manifest)`` is called before a download starts. Raises
    ``CorpusUnavailable`` when there is no manifest to download from, or when any
    document could not be fetched (its ``report`` lists why, per document).
    """
    found = Path(corpus) if corpus is not None else default_corpus()
    if found is not None:
        return found
    manifest = Path(questions).parent / "manifest.csv"
    if not manifest.is_file():
        raise CorpusUnavailable(f"no --corpus given, no ../shared/corpus, and no {manifest} to download from")
    if on_download is not None:
        on_download(manifest)
    rep = fetch_corpus(manifest, cache)
    if rep.problems:
        raise CorpusUnavailable(
            f"{len(rep.problems)} of the corpus documents could not be fetched into {rep.corpus}; "
            "pass --corpus with a local copy",
            rep,
        )
    return rep.corpus
