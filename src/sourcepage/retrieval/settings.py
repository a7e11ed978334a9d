"""What an index build and a ranking need besides the chunks: the methods' settings and
the build's context.

Every registered method declares its own settings dataclass (``settings_type``, its
defaults written there and nowhere else) and the experiment.yaml section that sets it
(``section``, its kind); :class:`IndexSettings` holds the shared tokenizer and seed and one
settings object per method kind that differs from its defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sourcepage.retrieval.tokenize import TokenizerConfig

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method


@dataclass(frozen=True)
class CandidateSettings:
    """A second stage's candidates: the first stage's top ``depth`` pages it rescores (one
    concept shared by ``rerank``, ``rerank-chunk`` and ``ltr``, whose model was fitted on
    candidates of this depth)."""

    depth: int = 30

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise ValueError(f"depth must be 1 or more, got {self.depth}")


@dataclass(frozen=True)
class IndexSettings:
    """The settings of every method of a design: the tokenizer and seed the indexes share,
    and per method kind its settings object (a kind not in ``methods`` has its defaults).
    Each base method records the subset that decides its index in params.json."""

    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    seed: int = 42
    #: method kind → its settings dataclass (the kind's ``settings_type``)
    methods: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from sourcepage.retrieval.methods import spec

        for kind, value in self.methods.items():
            want = spec(kind).settings_type
            if not isinstance(value, want):
                raise TypeError(f"settings of {kind!r} must be a {want.__name__}, got {type(value).__name__}")

    def of(self, kind: str) -> Any:
        """The settings object of method ``kind`` (its defaults unless set)."""
        from sourcepage.retrieval.methods import spec

        got = self.methods.get(kind)
        return got if got is not None else spec(kind).settings_type()

    def replace(self, kind: str, **changes: Any) -> IndexSettings:
        """A copy with ``changes`` applied to the settings of ``kind``."""
        new = dataclasses.replace(self.of(kind), **changes)
        return dataclasses.replace(self, methods={**self.methods, kind: new})

    def for_method(self, method: Method) -> dict[str, Any]:
        """The subset of settings that matters to base ``method`` (asked of its registered object)."""
        return method.spec.settings(method, self)  # type: ignore[union-attr]


def section_settings(kind: str, raw: Any, where: str) -> Any:
    """The settings object of ``kind`` from its experiment.yaml section ``raw`` (a mapping of
    its dataclass's fields; missing fields keep their defaults); ValueError names ``where``
    and the bad key."""
    from sourcepage.retrieval.methods import spec

    cls = spec(kind).settings_type
    names = [f.name for f in dataclasses.fields(cls)]
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: {kind} must be a mapping of {names}")
    extra = sorted(set(raw) - set(names))
    if extra:
        raise ValueError(f"{where}: unknown keys {extra} in {kind}; known: {names}")
    try:
        return cls(**{k: _like(cls, k, v) for k, v in raw.items()})
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {kind}: {e}") from None


def section_dict(settings: Any) -> dict[str, Any]:
    """A settings object as its experiment.yaml section (``section_settings`` reads it back)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(settings).items()}


def _like(cls: type, name: str, value: Any) -> Any:
    """``value`` in the type of field ``name``'s default (YAML gives 1 for 1.0, lists for tuples)."""
    default = next(f.default for f in dataclasses.fields(cls) if f.name == name)
    if isinstance(default, bool) or value is None:
        return value
    if isinstance(default, float) and isinstance(value, int | float):
        return float(value)
    if isinstance(default, int) and isinstance(value, int | float) and not isinstance(value, bool):
        if value != int(value):
            raise ValueError(f"{name} must be a whole number, got {value}")
        return int(value)
    if isinstance(default, tuple) and isinstance(value, list):
        return tuple(value)
    return value


@dataclass
class BuildContext:
    """Services a build may use: the store's embedding cache and a progress callback."""

    cache_get: Callable[[str, list[str]], dict[str, Any]] | None = None
    cache_put: Callable[[str, dict[str, Any]], None] | None = None
    progress: Callable[[int, int], None] | None = None
