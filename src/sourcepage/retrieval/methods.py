"""Method names (benchmark-format.md §4), parsed in this one place.

``bm25`` · ``lsa`` · ``dense`` (the default model, ``minilm``) or ``dense:<model>``
· ``rrf:<a>+<b>[+<c>]`` (reciprocal rank fusion of the named methods' page ranks)
· ``rerank:<base>`` (the base method's top pages reranked by question–sentence cosine
with e5-small; ``retrieval.rerank``), where ``<base>`` is any of the forms above.
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_KINDS = ("bm25", "lsa", "dense")
DEFAULT_DENSE = "minilm"


@dataclass(frozen=True)
class Method:
    """A parsed method: a base retriever, or a fusion of base methods."""

    kind: str  # bm25 | lsa | dense | rrf | rerank
    model: str = ""  # dense model name
    parts: tuple[Method, ...] = ()

    @property
    def name(self) -> str:
        """The canonical name; ``dense`` stays ``dense`` for the default model."""
        if self.kind == "rrf":
            return "rrf:" + "+".join(p.name for p in self.parts)
        if self.kind == "rerank":
            return "rerank:" + self.parts[0].name
        if self.kind == "dense" and self.model != DEFAULT_DENSE:
            return f"dense:{self.model}"
        return self.kind

    @property
    def index_key(self) -> str:
        """The folder name of this base method's index."""
        return f"dense-{self.model}" if self.kind == "dense" else self.kind

    def bases(self) -> tuple[Method, ...]:
        """The base methods this method needs indexes for."""
        if self.kind == "rerank":
            return self.parts[0].bases()
        return self.parts if self.kind == "rrf" else (self,)


def parse_method(name: str) -> Method:
    """Parse a method name; ValueError says what forms are allowed."""
    from sourcepage.retrieval.dense import MODELS

    name = name.strip()
    if name.startswith("rerank:"):
        base = parse_method(name[7:])
        if base.kind == "rerank":
            raise ValueError(f"{name!r}: rerank takes a base method, not another rerank")
        return Method("rerank", parts=(base,))
    if name.startswith("rrf:"):
        parts = tuple(parse_method(p) for p in name[4:].split("+"))
        if len(parts) < 2 or any(p.kind in ("rrf", "rerank") for p in parts):
            raise ValueError(f"{name!r}: rrf needs two or more base methods, e.g. rrf:bm25+dense")
        if len({p.name for p in parts}) != len(parts):
            raise ValueError(f"{name!r}: a method appears twice in the fusion")
        return Method("rrf", parts=parts)
    kind, _, model = name.partition(":")
    if kind == "dense":
        model = model or DEFAULT_DENSE
        if model not in MODELS:
            raise ValueError(f"unknown dense model {model!r}; known: {', '.join(sorted(MODELS))}")
        return Method("dense", model=model)
    if kind in ("bm25", "lsa") and not model:
        return Method(kind)
    raise ValueError(
        f"unknown method {name!r}; use bm25, lsa, dense, dense:<model>, rrf:<a>+<b>[+<c>], or rerank:<base>"
    )


def parse_methods(spec: str) -> list[Method]:
    """A comma-separated list of method names."""
    return [parse_method(s) for s in spec.split(",") if s.strip()]


#: the method grammar in one line, for --help texts and error messages
METHOD_GRAMMAR = "bm25, lsa, dense[:model], rrf:<a>+<b>[+<c>], rerank:<base>"


def available_methods() -> list[str]:
    """Example method names a user can run on this installation (models whose packages are
    installed), for CLI help, the web page's method list, and calibrate/eval defaults."""
    import importlib.util

    from sourcepage.retrieval.dense import MODELS

    out = ["bm25", "lsa", "rrf:bm25+lsa"]
    for name, enc in MODELS.items():
        if all(importlib.util.find_spec(p) for p in getattr(enc, "packages", ())):
            out.append("dense" if name == DEFAULT_DENSE else f"dense:{name}")
    if "dense" in out:
        out += ["rrf:bm25+dense", "rerank:bm25", "rerank:rrf:bm25+dense"]
    return out
