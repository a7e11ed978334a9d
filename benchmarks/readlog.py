"""The log of every read of a test split: ``benchmarks/test_reads.jsonl``.

A test split is read once per release. Whatever reads one (``headline.py --split test``,
or a person running ``sourcepage eval`` on it) appends a line here, in the repository, with
the date, the commit, the file, its SHA-256 and the reason, so the count of reads is a fact
anyone can check rather than a promise.

    python benchmarks/readlog.py benchmarks/pool/intl/test.jsonl --reason "release 2026-12-07"
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

LOG = Path(__file__).resolve().parent / "test_reads.jsonl"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, cwd=LOG.parent
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            cwd=LOG.parent,
        ).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def log_read(split: str | Path, reason: str) -> dict:
    """Append one read of ``split`` to the log and return the entry."""
    if not reason.strip():
        raise ValueError("a test split is read for a reason: give one")
    path = Path(split)
    entry = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _commit(),
        "file": str(path.resolve().relative_to(LOG.parent.parent))
        if path.resolve().is_relative_to(LOG.parent.parent)
        else str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "reason": reason.strip(),
    }
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("split", type=Path)
    ap.add_argument("--reason", required=True)
    a = ap.parse_args()
    print(json.dumps(log_read(a.split, a.reason)))


if __name__ == "__main__":
    main()
