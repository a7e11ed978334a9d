"""The method registry: every retrieval method and second stage declares itself once.

A method name (benchmark-format.md §4) is ``<kind>[:<arg>]``. Two sorts of method:

* a **base method** (``bm25``, ``lsa``, ``dense[:model]``) has an index of its own: it says
  how the index is built from a text version's chunks, saved, loaded and scored
  (``BaseMethod``);
* a **stage** composes registered methods by name: ``rrf:<a>+<b>[+<c>]`` fuses base
  methods, ``rerank:<base>`` and ``rerank-chunk:<base>`` reorder a base's top pages
  (``StageMethod``); it ranks through the ``Searcher`` it is given.

Every method declares its settings: ``settings_type``, a frozen dataclass whose defaults
are written there only, set by the experiment.yaml section named by its kind
(``retrieval.settings``); and its flags (``FLAGS``: ``fused``, ``needs_dense``, ``learned``),
which callers ask with ``has_flag`` instead of testing name prefixes.

Adding a method is one new module that defines an object with these attributes, plus one
line in ``_BUILTIN`` (or a call to ``register``). Modules are imported only when a method of
theirs is used, so ``bm25`` never imports scikit-learn or torch. The CLI, the API, the web
page, ``eval`` and ``calibrate`` list methods with ``available_methods`` and parse them with
``parse_method``: nothing else knows the kinds.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from sourcepage.records import Hit
    from sourcepage.retrieval.parsed import Parsed

# The registry sits below what it describes: the searcher that runs a stage and the settings
# that configure an index both look methods up here, so naming their types would make an
# import circle. The contracts below name them through these aliases instead; the methods'
# own modules type them exactly (``retrieval.settings.IndexSettings``, ``BuildContext``,
# ``retrieval.search.Searcher``).
IndexSettings = Any
BuildContext = Any
Searcher = Any


@dataclass(frozen=True)
class Method:
    """A parsed method name: a kind, its argument (e.g. a dense model) and, for a stage,
    the methods it composes."""

    kind: str
    model: str = ""  # the argument of a base method (a dense model name), canonical
    parts: tuple[Method, ...] = ()

    @property
    def spec(self) -> BaseMethod | StageMethod:
        return spec(self.kind)

    @property
    def is_base(self) -> bool:
        return not self.parts

    @property
    def name(self) -> str:
        """The canonical name (``dense`` stays ``dense`` for the default model)."""
        if self.parts:
            return f"{self.kind}:" + "+".join(p.name for p in self.parts)
        default = getattr(self.spec, "default_arg", "")
        return f"{self.kind}:{self.model}" if self.model and self.model != default else self.kind

    @property
    def index_key(self) -> str:
        """The folder name of this base method's index."""
        return f"{self.kind}-{self.model}" if self.model else self.kind

    def bases(self) -> tuple[Method, ...]:
        """The base methods whose indexes this method needs, in order, without repeats."""
        if self.is_base:
            return (self,)
        return tuple(dict.fromkeys(b for p in self.parts for b in p.bases()))

    def needs(self) -> tuple[Method, ...]:
        """Every base index this method reads, its second stage's own included."""
        extra = getattr(self.spec, "needs", lambda m: ())(self) if not self.is_base else ()
        return tuple(dict.fromkeys((*self.bases(), *extra)))


#: what a method may declare about itself (class attributes, False when absent):
#: ``fused`` its scores are rank-fusion sums, not calibrated (the report marks their AUROCs);
#: ``needs_dense`` it ranks with sentence embeddings (the dense extra);
#: ``learned`` it ranks with a model fitted on labelled questions
FLAGS = ("fused", "needs_dense", "learned")


class BaseMethod(Protocol):
    """A retrieval method with an index of its own over one text version's chunks."""

    kind: str
    settings_type: type  # its settings dataclass (defaults: the one place they are written)
    grammar: str  # e.g. "dense[:model]"
    summary: str
    default_arg: str  # the argument a bare kind means ("minilm" for dense); the name omits it

    def parse_arg(self, arg: str) -> str:
        """The canonical argument ('' for none); ValueError names what is allowed."""

    def examples(self) -> list[str]:
        """Names of this kind that run on this installation."""

    def settings(self, method: Method, settings: IndexSettings) -> dict[str, Any]:
        """The settings that decide this index's content (recorded in params.json)."""

    def build(
        self, method: Method, texts: Sequence[str], folder: Path, settings: IndexSettings, ctx: BuildContext
    ) -> None:
        """Build the index of ``texts`` (one per chunk, in chunk order) into ``folder``.
        Iterating ``texts`` streams them from the store (a method that iterates once builds
        in bounded memory); indexing it reads them all into memory first."""

    def load(self, method: Method, folder: Path, settings: IndexSettings) -> Any:
        """The saved index, ready to score (None: it does not serve ``settings``; rebuild)."""

    def scores(self, method: Method, model: Any, query: str, settings: IndexSettings) -> np.ndarray:
        """One score per chunk; higher is better."""

    # optional: ``score_parts(method, model, query, settings) -> list[np.ndarray]``, the
    # scores in document-aligned parts (shards) whose concatenation is ``scores``; page
    # collapse then selects its candidates part by part (retrieval.pages)
    # optional: ``top_chunks(method, model, query, settings)`` -> ``fetch`` or None: with an
    # approximate index, ``fetch(m)`` gives the (chunk indices, scores) of the m best chunks
    # and a ranking collapses those only (``pages.collapse_top``; "every page" means the
    # first ``pages.TOP_PAGES``); None scores every chunk


class StageMethod(Protocol):
    """A method composed of registered methods (fusion, second stages)."""

    kind: str
    settings_type: type  # its settings dataclass (read from the searcher's IndexSettings)
    grammar: str
    summary: str
    arity: str  # "one": kind:<method>; "many": kind:<base>+<base>[+…]

    def examples(self, bases: Sequence[str]) -> list[str]: ...

    def rank(
        self,
        searcher: Searcher,
        method: Method,
        query: str,
        k: int | None,
        filters: dict[str, list[str]],
        parsed: Parsed | None = None,
    ) -> list[Hit]:
        """Ranked pages (unique, rank 1..n) for ``query``. ``parsed``: the question's route
        and cited provisions as the search parsed them (``retrieval.parsed``), to read
        instead of parsing ``query`` again and to hand to the methods it ranks through
        (None: parse ``query`` where needed)."""


# kind → ("module:attribute", grammar); the module is imported on first use
_BUILTIN: dict[str, tuple[str, str]] = {
    "bm25": ("sourcepage.retrieval.bm25:METHOD", "bm25"),
    "lsa": ("sourcepage.retrieval.lsa:METHOD", "lsa"),
    "dense": ("sourcepage.retrieval.dense:METHOD", "dense[:model]"),
    "rrf": ("sourcepage.retrieval.fusion:METHOD", "rrf:<a>+<b>[+<c>]"),
    "rerank": ("sourcepage.retrieval.rerank:METHOD", "rerank:<base>"),
    "rerank-chunk": ("sourcepage.retrieval.chunkrerank:METHOD", "rerank-chunk:<base>"),
    "ltr": ("sourcepage.retrieval.ltr:METHOD", "ltr:<a>+<b>[+<c>]"),
    "route": ("sourcepage.retrieval.routing:METHOD", "route:<base>"),
    "sect": ("sourcepage.retrieval.sections:METHOD", "sect:<method>"),
    "xenc": ("sourcepage.retrieval.xenc:METHOD", "xenc:<base>"),
}
_LOADED: dict[str, BaseMethod | StageMethod] = {}


def register(obj: BaseMethod | StageMethod) -> None:
    """Register a method object under its ``kind`` (a plug-in's one call). A stage whose
    ``rank`` predates ``parsed`` (five arguments) is registered behind ``_Unparsed``."""
    if hasattr(obj, "arity") and not _takes_parsed(obj.rank):  # type: ignore[union-attr]
        obj = _Unparsed(obj)  # type: ignore[arg-type]
    _LOADED[obj.kind] = obj
    _BUILTIN.setdefault(obj.kind, ("", obj.grammar))


def _takes_parsed(rank: Any) -> bool:
    try:
        params = inspect.signature(rank).parameters
    except (TypeError, ValueError):
        return True
    return "parsed" in params or any(p.kind is p.VAR_POSITIONAL for p in params.values())


class _Unparsed:
    """A plug-in stage written for the five-argument ``rank``: it is called without the
    parsed question and parses the text itself, as it always did."""

    def __init__(self, stage: StageMethod):
        self._stage = stage

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stage, name)

    def rank(
        self, searcher: Searcher, method: Method, query: str, k: int | None, filters: Any, parsed: Any = None
    ) -> Any:
        return self._stage.rank(searcher, method, query, k, filters)  # type: ignore[call-arg]


def kinds() -> list[str]:
    return list(_BUILTIN)


def spec(kind: str) -> BaseMethod | StageMethod:
    """The registered method object of ``kind``."""
    if kind not in _LOADED:
        if kind not in _BUILTIN:
            raise ValueError(f"unknown method kind {kind!r}; use {method_grammar()}")
        module, _, attr = _BUILTIN[kind][0].partition(":")
        _LOADED[kind] = getattr(importlib.import_module(module), attr)
    return _LOADED[kind]


def has_flag(method: Method | str, flag: str) -> bool:
    """Whether the method's own kind declares ``flag`` (one of ``FLAGS``)."""
    if flag not in FLAGS:
        raise ValueError(f"unknown method flag {flag!r}; one of {FLAGS}")
    m = parse_method(method) if isinstance(method, str) else method
    return bool(getattr(m.spec, flag, False))


def uses_flag(method: Method | str, flag: str) -> bool:
    """Whether the method or any method it composes (or reads, ``needs``) declares ``flag``."""
    m = parse_method(method) if isinstance(method, str) else method
    return has_flag(m, flag) or any(uses_flag(p, flag) for p in (*m.parts, *m.needs()) if p != m)


def kinds_of(method: Method | str) -> tuple[str, ...]:
    """Every kind the method ranks with, its own first, without repeats."""
    m = parse_method(method) if isinstance(method, str) else method
    out = [m.kind]
    for p in (*m.parts, *m.needs()):
        if p != m:
            out += kinds_of(p)
    return tuple(dict.fromkeys(out))


def _is_stage(obj: Any) -> bool:
    return hasattr(obj, "arity")


def parse_method(name: str) -> Method:
    """Parse a method name; ValueError says what forms are allowed."""
    name = name.strip()
    kind, _, arg = name.partition(":")
    if kind not in _BUILTIN:
        raise ValueError(f"unknown method {name!r}; use {method_grammar()}")
    obj = spec(kind)
    if not _is_stage(obj):
        return Method(kind, model=obj.parse_arg(arg))  # type: ignore[union-attr]
    if obj.arity == "one":  # type: ignore[union-attr]
        base = parse_method(arg)
        over = getattr(obj, "over_stages", False)  # a stage that may wrap any method
        if not base.is_base and base.spec.arity == "one" and not over:  # type: ignore[union-attr]
            raise ValueError(f"{name!r}: {kind} takes a base method or a fusion, not {base.kind}")
        return Method(kind, parts=(base,))
    parts = tuple(parse_method(p) for p in arg.split("+"))
    if len(parts) < 2 or any(not p.is_base for p in parts):
        raise ValueError(f"{name!r}: {kind} needs two or more base methods, e.g. {kind}:bm25+dense")
    if len({p.name for p in parts}) != len(parts):
        raise ValueError(f"{name!r}: a method appears twice in the fusion")
    return Method(kind, parts=parts)


def parse_methods(names: str) -> list[Method]:
    """A comma-separated list of method names."""
    return [parse_method(s) for s in names.split(",") if s.strip()]


def packages_installed(packages: Sequence[str]) -> bool:
    return all(importlib.util.find_spec(p) for p in packages)


def available_methods() -> list[str]:
    """Method names that run on this installation (models whose packages are installed):
    every base method, then each stage's examples over them. For CLI help, the web page's
    method list, and calibrate/eval defaults."""
    bases: list[str] = []
    stages: list[StageMethod] = []
    for kind in _BUILTIN:
        obj = spec(kind)
        if _is_stage(obj):
            stages.append(obj)  # type: ignore[arg-type]
        else:
            bases += obj.examples()  # type: ignore[union-attr]
    return bases + [n for st in stages for n in st.examples(bases)]


def default_method() -> str:
    """The method of ``search``, the API and the web page when none is named, chosen by
    measurement on the dev splits (docs/experiments/sections.md): the section-aware stage
    over jurisdiction routing over BM25 + MiniLM RRF where MiniLM is installed, else routing
    over BM25."""
    dense = "dense" in spec("dense").examples()  # type: ignore[union-attr]
    return "sect:route:rrf:bm25+dense" if dense else "route:bm25"


def method_grammar() -> str:
    """The method grammar in one line, for --help texts and error messages."""
    return ", ".join(g for _, g in _BUILTIN.values())


METHOD_GRAMMAR = method_grammar()
