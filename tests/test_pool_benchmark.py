"""The development pool (benchmarks/pool) is well formed, its splits are fixed, and its
pages were drawn as its README says.

Always checked: every question set parses with the project's reader; train, dev and test
partition each pool's questions exactly as ``splits.json`` froze them; every answerable
question has a grade-2 page; the test files' SHA-256 are the ones the README records.
Where ../shared is present: the page sampler reproduces ``slots.jsonl`` byte for byte
from the corpora's manifests (the slots were drawn before any question was written).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from sourcepage.evaluation.questions import read_questions

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "benchmarks" / "pool"
SHARED = ROOT.parent / "shared"
POOLS = ("intl", "construction", "extra")


@pytest.mark.parametrize("pool", POOLS)
def test_splits_partition_the_pool_as_frozen(pool: str) -> None:
    every = read_questions(POOL / pool / "questions.jsonl")
    frozen = json.loads((POOL / pool / "splits.json").read_text(encoding="utf-8"))
    seen: dict[str, str] = {}
    for name in ("train", "dev", "test"):
        for q in read_questions(POOL / pool / f"{name}.jsonl"):
            assert q.id not in seen, f"{q.id} in {seen.get(q.id)} and {name}"
            assert frozen[q.id] == name, f"{q.id} is in {name}, frozen in {frozen[q.id]}"
            seen[q.id] = name
    assert set(seen) == {q.id for q in every} == set(frozen)
    for q in every:
        if q.answerability == "answerable":
            assert 2 in q.evidence.values(), f"{q.id} has no grade-2 page"
        else:
            assert not q.evidence, f"{q.id} is {q.answerability} but has evidence"


def test_readme_records_the_test_files() -> None:
    readme = (POOL / "README.md").read_text(encoding="utf-8")
    for pool in POOLS:
        digest = hashlib.sha256((POOL / pool / "test.jsonl").read_bytes()).hexdigest()
        assert digest in readme, f"{pool}/test.jsonl SHA-256 {digest} is not the one in the README"


@pytest.mark.skipif(not (SHARED / "corpus-extra" / "manifest.csv").is_file(), reason="../shared is not here")
def test_sampler_reproduces_the_slots() -> None:
    spec = importlib.util.spec_from_file_location("pool_sample", POOL / "sample.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    slots = module.sample(SHARED, 42)
    text = "".join(json.dumps(s, sort_keys=True) + "\n" for s in slots)
    assert text == (POOL / "slots.jsonl").read_text(encoding="utf-8")
    written = {json.loads(ln)["slot"] for p in POOLS for ln in (POOL / p / "questions.jsonl").open()}
    assert written <= {s["slot"] for s in slots}, "a question whose slot the sampler never drew"
