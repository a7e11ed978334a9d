"""Methods own their settings: one dataclass per registered method, its defaults written
there only, read from the method's experiment.yaml section; registry flags instead of
name prefixes; the BM25 ceiling of the support features uses the index's k1."""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from pathlib import Path

import pytest

from sourcepage.evaluation.answerability import pick_pair
from sourcepage.evaluation.experiment import Design
from sourcepage.evaluation.summary import is_fusion
from sourcepage.query import Query
from sourcepage.retrieval.bm25 import Bm25Params
from sourcepage.retrieval.fusion import RrfSettings
from sourcepage.retrieval.lsa import LsaSettings
from sourcepage.retrieval.methods import has_flag, kinds, kinds_of, parse_method, spec, uses_flag
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.settings import CandidateSettings, IndexSettings
from sourcepage.support.features import bm25_ceiling, feature_row

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "sourcepage"
#: every experiment.yaml-like file of the repository (designs and sweep grids' bases)
EXPERIMENTS = sorted(ROOT.glob("benchmarks/*/experiment.yaml"))


@pytest.mark.parametrize("kind", kinds())
def test_every_method_declares_a_frozen_settings_dataclass(kind: str) -> None:
    cls = spec(kind).settings_type
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    default = cls()
    assert IndexSettings().of(kind) == default
    # its section round-trips through a design
    d = Design.from_dict(Design().as_dict())
    assert d.index.of(kind) == default


def _defaults() -> list[tuple[str, str, object]]:
    """(kind, field, default) of every numeric or string default of every method's settings."""
    out = []
    for kind in kinds():
        for f in dataclasses.fields(spec(kind).settings_type):
            if isinstance(f.default, int | float | str) and not isinstance(f.default, bool):
                out.append((kind, f.name, f.default))
    return out


def _written(tree: ast.AST, name: str, default: object) -> list[int]:
    """Lines that give ``name`` the literal ``default``: an assignment or annotated field,
    a keyword argument, or a parameter's default (prose in docstrings does not count)."""
    lines = []

    def literal(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and type(node.value) is type(default) and node.value == default

    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and literal(node.value):
                lines.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg == name and literal(node.value):
            lines.append(node.lineno)
        elif isinstance(node, ast.arguments):
            args = [*node.posonlyargs, *node.args]
            pairs = list(zip(args[len(args) - len(node.defaults) :], node.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d is not None]
            lines += [d.lineno for a, d in pairs if a.arg == name and literal(d)]
    return lines


@pytest.mark.parametrize(("kind", "name", "default"), _defaults())
def test_a_default_is_written_in_its_settings_dataclass_only(kind: str, name: str, default: object) -> None:
    """The default appears once in the sources, in the method's settings dataclass: any
    other module refers to it (``Bm25Params.k1``) instead of writing a copy that would drift."""
    where = [
        f"{p.relative_to(SRC)}:{n}"
        for p in sorted(SRC.rglob("*.py"))
        for n in _written(ast.parse(p.read_text(encoding="utf-8")), name, default)
    ]
    assert len(where) == 1, f"{kind}.{name} = {default!r} written at {where}"


def test_the_old_copies_of_the_defaults_are_gone() -> None:
    """The design no longer repeats the methods' numbers; rank constants are the settings'."""
    text = (SRC / "evaluation" / "experiment.py").read_text(encoding="utf-8")
    for literal in ("1.5", "0.75", '"robertson"', " 256", "RRF_K", "min_df"):
        assert literal not in text, literal
    for module in ("chunkrerank.py", "ltr.py", "rerank.py", "sections.py", "fusion.py"):
        text = (SRC / "retrieval" / module).read_text(encoding="utf-8")
        assert not re.search(r"^\w*DEPTH = \d", text, re.M), module
        assert not re.search(r"^RRF_K = \d", text, re.M), module


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.parent.name)
def test_the_repository_experiment_files_still_load(path: Path) -> None:
    """Their sections (bm25, lsa, rrf, …) are the methods' own: same values as before."""
    d = Design.from_yaml(path)
    assert d.index.of("bm25") == Bm25Params(k1=1.5, b=0.75, variant="robertson")
    assert d.index.of("lsa") == LsaSettings(dims=256)
    assert d.index.of("rrf") == RrfSettings(k=60)
    assert d.seed == 42 and d.bootstrap == 20000 and d.runs()
    again = Design.from_dict(d.as_dict(), "as_dict")
    assert again.as_dict() == d.as_dict() and again.index.of("bm25") == d.index.of("bm25")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bm25: {k1: 1.2, kl: 0.5}\n", "unknown keys ['kl'] in bm25"),
        ("rrf: {k: 0}\n", "rrf: k must be 1 or more"),
        ("rerank: 30\n", "rerank must be a mapping"),
        ("bm25s: {k1: 1.2}\n", "unknown keys ['bm25s']"),
    ],
)
def test_an_unknown_key_in_a_method_section_names_the_file_and_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "experiment.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{path}: {message}")):
        Design.from_yaml(path)


def test_a_section_sets_its_method_and_yaml_numbers_take_the_fields_types(tmp_path: Path) -> None:
    path = tmp_path / "experiment.yaml"
    path.write_text(
        "bm25: {k1: 1, b: 0.5}\nrerank-chunk: {depth: 12}\ndense: {search: exact}\n"
        "sect: {demote: [contents]}\n",
        encoding="utf-8",
    )
    d = Design.from_yaml(path)
    assert d.index.of("bm25") == Bm25Params(k1=1.0, b=0.5) and isinstance(d.index.of("bm25").k1, float)
    assert d.index.of("rerank-chunk") == CandidateSettings(12) and d.index.of("rerank") == CandidateSettings()
    assert d.index.of("dense").search == "exact" and d.index.of("sect").demote == ("contents",)
    assert d.index.for_method(parse_method("bm25"))["k1"] == 1.0


def test_flags_replace_name_prefixes() -> None:
    assert has_flag("rrf:bm25+lsa", "fused") and is_fusion("rrf:bm25+dense")
    assert not is_fusion("route:rrf:bm25+dense") and uses_flag("route:rrf:bm25+dense", "fused")
    assert has_flag("ltr:bm25+dense", "learned") and not has_flag("rrf:bm25+dense", "learned")
    assert has_flag("dense:e5-small", "needs_dense") and uses_flag("rerank-chunk:bm25", "needs_dense")
    assert not uses_flag("rrf:bm25+lsa", "needs_dense")
    assert kinds_of("sect:route:rrf:bm25+dense") == ("sect", "route", "rrf", "bm25", "dense")
    runs = [("raw", "bm25"), ("raw", "rerank:bm25"), ("raw", "dense:e5-small"), ("cleaned", "lsa")]
    assert pick_pair(runs, "raw") == ("bm25", "dense:e5-small")
    with pytest.raises(ValueError, match="unknown method flag"):
        has_flag("bm25", "fusion")


def test_rrf_ranks_with_the_searchers_settings(safety_store: Path) -> None:
    q = "group lockout lockbox"
    for k in (60, 5):
        s = Searcher(safety_store, "raw", IndexSettings().replace("rrf", k=k))
        bm, lsa = (s.rank(q, m, k=None) for m in ("bm25", "lsa"))
        top = s.rank(q, "rrf:bm25+lsa", k=3).hits[0]
        want = sum(1.0 / (k + r.rank) for r in (*bm.hits, *lsa.hits) if r.page_id == top.page_id)
        assert top.score == pytest.approx(want)
        s.store.close()


def test_the_bm25_ceiling_uses_the_configured_k1(safety_store: Path) -> None:
    q_text = "Who removes a lockout device after the shift change?"
    shares = {}
    for k1 in (1.5, 0.9):
        s = Searcher(safety_store, "raw", IndexSettings().replace("bm25", k1=k1))
        a = list(s.rank(q_text, "bm25", k=10).hits)
        q = Query.of(s, q_text)
        df, n = s.term_df()
        f = feature_row(s, q, a, a)
        want = min(1.0, a[0].score / bm25_ceiling(q.tokens, df, n, k1))
        assert f["sparse_share"] == pytest.approx(want)
        shares[k1] = f["sparse_share"]
        s.store.close()
    assert not math.isclose(shares[1.5], shares[0.9])


def test_a_plug_in_stage_without_the_parsed_question_still_ranks(safety_store: Path) -> None:
    """A stage registered with the five-argument ``rank`` of before ``parsed`` (a plug-in)
    is called without it and ranks through the searcher as before."""
    from sourcepage.retrieval import methods
    from sourcepage.retrieval.fusion import RrfSettings as Settings

    calls: list[str] = []

    class Reverse:
        kind, grammar, arity, settings_type = "reverse", "reverse:<base>", "one", Settings
        summary = "the base upside down"

        def examples(self, bases: list[str]) -> list[str]:
            return ["reverse:bm25"]

        def rank(self, searcher, method, query, k, filters):  # type: ignore[no-untyped-def]
            calls.append(query)
            hits = searcher.ranked(method.parts[0], query, k, filters)
            return [dataclasses.replace(h, rank=i + 1) for i, h in enumerate(reversed(hits))]

    methods.register(Reverse())
    try:
        s = Searcher(safety_store)
        base = s.ranked(parse_method("bm25"), "lockout devices", 5, {})
        parsed = Query.parse("lockout devices").parsed
        got = s.ranked(parse_method("reverse:bm25"), "lockout devices", 5, {}, parsed=parsed)
        assert calls == ["lockout devices"]
        assert [h.page_id for h in got] == [h.page_id for h in reversed(base)]
    finally:
        methods._LOADED.pop("reverse", None)
        methods._BUILTIN.pop("reverse", None)
