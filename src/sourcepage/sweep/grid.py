"""The sweep grid: a default cell and the factors varied one at a time around it (study §4.6).

A grid file (YAML) has three keys:

- ``base``: the default cell, as experiment.yaml keys (a mapping, or the path of an
  experiment.yaml relative to the grid file); left out, today's defaults. Its ``design``
  names the (text version, method) runs every cell evaluates.
- ``factors``: name → levels. A level list holds one mapping per level (experiment.yaml
  keys, nested or dotted, plus an optional ``label``); a mapping of dotted keys to value
  lists is the product of those values (``{bm25.k1: [0.9, 1.5], bm25.b: [0.5, 0.75]}``
  gives four levels).
- ``metric``: the metric settings are chosen by (default ``mrr``).

Each level changes only its factor's keys (one factor at a time); a level whose settings
equal the default's is the default cell itself and is not run twice. A run (text version,
method) whose inputs a cell does not change (:func:`run_signature`) is not re-run in that
cell: its results are the default cell's. The study's grid ships as ``study_grid.yaml``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from sourcepage.evaluation.experiment import Design
from sourcepage.retrieval.methods import Method, kinds_of, parse_method
from sourcepage.retrieval.settings import section_dict
from sourcepage.vocabulary import HEADLINE_METRICS

__all__ = [
    "Cell",
    "Grid",
    "Level",
    "affected_runs",
    "digest",
    "index_key",
    "run_signature",
    "study_grid",
    "text_key",
]

Key = tuple[str, str]  # (text version, method)
DEFAULT_ID = "default"


def digest(obj: Any, n: int = 12) -> str:
    """A short SHA-256 of ``obj``'s canonical JSON: equal settings, equal digest."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:n]


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in: mappings recursively, everything else replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys to nested mappings: ``{"bm25.k1": 1.2}`` → ``{"bm25": {"k1": 1.2}}``."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *path, leaf = key.split(".")
        node = out
        for p in path:
            node = node.setdefault(p, {})
        node[leaf] = merge(node[leaf], value) if isinstance(node.get(leaf), Mapping) else value
    return out


def _flat(nested: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in nested.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "level"


def _value_text(v: Any) -> str:
    if isinstance(v, list | tuple):
        return "+".join(map(str, v))
    return str(v)


# --------------------------------------------------------------------------- signatures


def text_key(d: Design) -> str:
    """The store a design's chunks live in: engine and text settings."""
    return digest({"engine": d.engine, "text": d.text.as_dict()})


def index_key(d: Design, version: str, base: Method) -> str:
    """One index: text settings, version, base method and the settings it reads."""
    return f"{base.index_key}@{digest([text_key(d), version, d.index.for_method(base)], 10)}"


def run_signature(d: Design, version: str, method: str) -> str:
    """Everything a run's rankings depend on: equal signatures, equal rankings."""
    m = parse_method(method)
    sig: dict[str, Any] = {"engine": d.engine, "chunk": d.text.chunk.as_dict(), "version": version}
    if version != "raw":
        sig["clean"] = d.text.clean.as_dict()
    if version == "enriched":
        sig["enrich_fields"] = list(d.text.enrich_fields)
    sig["indexes"] = {b.index_key: d.index.for_method(b) for b in m.needs()}
    # the settings of the stages it ranks through (a base method's are in its index's)
    bases = {b.kind for b in m.needs()}
    sig["stages"] = {k: section_dict(d.index.of(k)) for k in kinds_of(m) if k not in bases}
    return digest([m.name, sig], 16)


def affected_runs(d: Design, default: Design) -> list[Key]:
    """The runs of ``default`` whose signature ``d`` changes (all of them for ``default``)."""
    return [(v, m) for v, m in default.runs() if run_signature(d, v, m) != run_signature(default, v, m)]


# --------------------------------------------------------------------------- grid


@dataclass(frozen=True)
class Level:
    """One level of a factor: its label, its overrides (nested experiment.yaml keys) and,
    for a product factor, the value of each varied key (the heat map's axes)."""

    factor: str
    label: str
    overrides: dict[str, Any]
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Cell:
    """A setting of the grid: the default, one factor's level, or the chosen combination."""

    id: str
    factor: str
    label: str
    overrides: dict[str, Any]
    design: Design

    @property
    def key(self) -> str:
        """Digest of the settings (not of the runs or the resample count)."""
        d = self.design.as_dict()
        return digest({k: v for k, v in d.items() if k not in ("design", "bootstrap")})

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "factor": self.factor,
            "label": self.label,
            "overrides": self.overrides,
            "settings": self.design.as_dict(),
            "key": self.key,
        }


@dataclass
class Grid:
    """A default (experiment.yaml keys) and factors of levels."""

    base: dict[str, Any]
    factors: dict[str, list[Level]]
    metric: str = "mrr"
    source: str = "study_grid.yaml"

    def design(self, overrides: Mapping[str, Any] | None = None, where: str = "") -> Design:
        return Design.from_dict(merge(self.base, overrides or {}), where or self.source)

    def default(self) -> Cell:
        return Cell(DEFAULT_ID, DEFAULT_ID, "default", {}, self.design())

    def cells(self) -> list[Cell]:
        """The default cell first, then every level whose settings differ from all before."""
        out = [self.default()]
        seen = {out[0].key}
        for _level, cell in self.levels():
            if cell.key not in seen:
                seen.add(cell.key)
                out.append(cell)
        return out

    def levels(self) -> list[tuple[Level, Cell]]:
        """(level, the cell that holds its results) in factor and level order."""
        by_key = {self.default().key: self.default()}
        out = []
        used: set[str] = {DEFAULT_ID}
        for name, levels in self.factors.items():
            for lv in levels:
                cell = Cell(
                    "", name, lv.label, lv.overrides, self.design(lv.overrides, f"{self.source}: {name}")
                )
                if cell.key in by_key:
                    out.append((lv, by_key[cell.key]))
                    continue
                cid, n = f"{_slug(name)}-{_slug(lv.label)}", 2
                while cid in used:
                    cid, n = f"{_slug(name)}-{_slug(lv.label)}-{n}", n + 1
                used.add(cid)
                cell.id = cid
                by_key[cell.key] = cell
                out.append((lv, cell))
        return out

    def combine(self, chosen: Sequence[Level]) -> Cell:
        """The cell of the chosen levels together (the default when none is chosen)."""
        over: dict[str, Any] = {}
        for lv in chosen:
            over = merge(over, lv.overrides)
        if not over:
            return self.default()
        label = "; ".join(f"{lv.factor}: {lv.label}" for lv in chosen)
        return Cell("chosen", "chosen", label, over, self.design(over, f"{self.source}: chosen"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "metric": self.metric,
            "factors": {
                name: [{"label": lv.label, "overrides": lv.overrides, "values": lv.values} for lv in levels]
                for name, levels in self.factors.items()
            },
        }

    @classmethod
    def from_yaml(cls, path: str | Path) -> Grid:
        import yaml

        path = Path(path)
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return cls.from_dict(raw, str(path), path.parent)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], where: str = "grid", folder: Path | None = None) -> Grid:
        """Read a grid (see the module doc); ValueError names ``where`` and the bad key."""
        import yaml

        if not isinstance(raw, Mapping):
            raise ValueError(f"{where}: a grid is a mapping with base, factors and metric")
        bad = sorted(set(raw) - {"base", "factors", "metric"})
        if bad:
            raise ValueError(f"{where}: unknown keys {bad}; known: ['base', 'factors', 'metric']")
        base = raw.get("base") or {}
        if isinstance(base, str):
            p = (folder or Path.cwd()) / base
            base = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        if not isinstance(base, Mapping):
            raise ValueError(f"{where}: base must be experiment.yaml keys or the path of one")
        metric = str(raw.get("metric", "mrr"))
        if metric not in HEADLINE_METRICS:
            raise ValueError(f"{where}: metric {metric!r} is not one of {list(HEADLINE_METRICS)}")
        factors_raw = raw.get("factors") or {}
        if not isinstance(factors_raw, Mapping) or not factors_raw:
            raise ValueError(f"{where}: factors must name at least one factor")
        factors = {str(name): _levels(str(name), spec, where) for name, spec in factors_raw.items()}
        grid = cls(dict(base), factors, metric, where)
        grid.default().design.runs()  # a bad base fails here, before any work
        grid.levels()  # so does a bad level
        return grid


def _levels(name: str, spec: Any, where: str) -> list[Level]:
    """A factor's levels from a level list or a product mapping."""
    if isinstance(spec, Mapping):
        keys = list(spec)
        lists = [spec[k] if isinstance(spec[k], list) else [spec[k]] for k in keys]
        if not keys or not all(lists):
            raise ValueError(f"{where}: factor {name!r} needs values for every key")
        out = []
        for combo in itertools.product(*lists):
            values = dict(zip(keys, combo, strict=True))
            label = " ".join(f"{k.rsplit('.', 1)[-1]}={_value_text(v)}" for k, v in values.items())
            out.append(Level(name, label, _nest(values), values))
        return out
    if not isinstance(spec, list) or not spec:
        raise ValueError(f"{where}: factor {name!r} must be a list of levels or a mapping of value lists")
    out = []
    for i, item in enumerate(spec, 1):
        if not isinstance(item, Mapping):
            raise ValueError(f"{where}: factor {name!r} level {i} must be a mapping")
        item = dict(item)
        label = item.pop("label", None)
        over = _nest(item)
        flat = _flat(over)
        label = (
            str(label)
            if label is not None
            else " ".join(f"{k.rsplit('.', 1)[-1]}={_value_text(v)}" for k, v in flat.items())
        )
        out.append(Level(name, label, over, {}))
    labels = [lv.label for lv in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"{where}: factor {name!r} has two levels labelled alike: {labels}")
    return out


def study_grid() -> Grid:
    """The study's grid (§4.6), shipped as ``study_grid.yaml``."""
    import yaml

    text = resources.files("sourcepage.sweep").joinpath("study_grid.yaml").read_text(encoding="utf-8")
    return Grid.from_dict(yaml.safe_load(text), "study_grid.yaml")
