"""Manifest columns beyond the core ones, kept as provenance of every hit.

benchmark-format.md §1 lets a manifest carry more columns than it requires. Each one is
kept per document, filtered on, and shown with every hit (study §6: construction
deployments keep project type, phase, work package, contractor and any BIM or asset
identifier with each retrieved passage). Such a column holds a *list*: several values are
separated by ``;`` (``precast_tiltup;lifting``), so ``work_package=lifting`` matches that
document. A value of ``all`` or ``any`` (corpus-construction: ``phase=all``,
``project_type=any``) says the document applies to every value of the field, so it passes
every filter on that field.

Six fields are named and documented (docs/construction.md); any other extra
column (e.g. ``bim_id``) is kept and shown the same way, after them.

``asset_id`` (an IFC GlobalId or an asset tag) can be shown as a link: the store keeps a
URL template with an ``{asset_id}`` placeholder (``sourcepage ingest --asset-url``), and
each hit carries ``asset_links`` built from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import quote, urlsplit

from sourcepage.records import GUESSED, MANIFEST_COLUMNS, Document

#: the named fields, in the order they are shown, with what each holds
NAMED_FIELDS: dict[str, str] = {
    "project": "the project a record belongs to (empty for published guidance)",
    "project_type": "building, civil, residential, … (`any`: guidance for every project type)",
    "phase": "project phase: design, pre_construction, groundworks, structure, envelope, demolition, "
    "… (`all`: every phase)",
    "work_package": "work package: excavation, formwork, scaffolding, lifting, working_at_height, …",
    "contractor": "the contractor or subcontractor responsible",
    "asset_id": "an IFC GlobalId or asset tag of the element the record is about (shown as a link)",
}
#: how a person reads each named field (web page, CLI)
FIELD_LABELS: dict[str, str] = {
    "project": "Project",
    "project_type": "Project type",
    "phase": "Phase",
    "work_package": "Work package",
    "contractor": "Contractor",
    "asset_id": "Asset",
}
SEPARATOR = ";"
#: values that make a document apply to every value of its field
WILDCARDS = frozenset({"all", "any"})
#: the store meta key of the asset link template
ASSET_URL_KEY = "asset_url"
ASSET_PLACEHOLDER = "{asset_id}"


def split_values(value: str) -> list[str]:
    """``"precast_tiltup; lifting"`` → ``["precast_tiltup", "lifting"]`` (empty parts dropped)."""
    return [v.strip() for v in value.split(SEPARATOR) if v.strip()]


def field_values(doc: Document, name: str) -> list[str]:
    """The values of one field of ``doc``: a core column is one value, an extra column a
    ``;``-list; [] when absent or empty."""
    if name in MANIFEST_COLUMNS:
        value = doc.get(name).strip()
        return [value] if value else []
    return split_values(doc.extra.get(name, ""))


def document_fields(doc: Document) -> dict[str, list[str]]:
    """Every non-empty extra column of ``doc`` as a list: the named fields first, in
    ``NAMED_FIELDS`` order, then the others by name (so equal manifests print equally).
    ``guessed`` is not one: it says which fields are guesses (``Document.guessed``)."""
    named = [n for n in NAMED_FIELDS if n in doc.extra]
    out = {n: field_values(doc, n) for n in named + sorted(set(doc.extra) - set(named) - {GUESSED})}
    return {n: v for n, v in out.items() if v}


def field_matches(doc: Document, name: str, wanted: Iterable[str]) -> bool:
    """True when one of ``doc``'s values of ``name`` is wanted (case-insensitive), or the
    document applies to every value (an extra column holding ``all`` or ``any``)."""
    have = {v.lower() for v in field_values(doc, name)}
    if name not in MANIFEST_COLUMNS and have & WILDCARDS:
        return True
    return bool(have & {w.strip().lower() for w in wanted})


def field_choices(docs: Iterable[Document], name: str) -> list[str]:
    """The distinct values of ``name`` over ``docs``, sorted (a list field gives each value)."""
    return sorted({v for d in docs for v in field_values(d, name)})


def check_asset_url(template: str) -> str:
    """``template`` when it is an http(s) URL holding ``{asset_id}`` once, or '' (no
    links); ValueError saying what is wrong otherwise."""
    template = template.strip()
    if not template:
        return ""
    if urlsplit(template).scheme.lower() not in ("http", "https"):
        raise ValueError(f"the asset URL must start with http:// or https://, got {template!r}")
    if template.count(ASSET_PLACEHOLDER) != 1 or template.replace(ASSET_PLACEHOLDER, "").count("{"):
        raise ValueError(
            f"the asset URL must hold {ASSET_PLACEHOLDER} exactly once and no other braces, got {template!r}"
        )
    return template


def asset_links(fields: Mapping[str, list[str]], template: str) -> list[dict[str, str]]:
    """One ``{"asset_id", "url"}`` per asset id of a hit, the id percent-encoded into
    ``template`` (an IFC GlobalId holds ``$``); [] without a template."""
    if not template:
        return []
    return [
        {"asset_id": a, "url": template.replace(ASSET_PLACEHOLDER, quote(a, safe=""))}
        for a in fields.get("asset_id", [])
    ]
