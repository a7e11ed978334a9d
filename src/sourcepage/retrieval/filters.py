"""Metadata filters applied before ranking (study §3.1: jurisdiction is a filter or a
routing constraint, not something to mix after the fact).

A filter maps a manifest column (standard or extra, e.g. ``project_type``) to one
value or a list of accepted values, compared case-insensitively; ``year_from`` and
``year_to`` bound the year (documents without a year are excluded by a bound). An extra
column is a ``;``-list, matched by any of its values (``corpus.fields``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sourcepage.corpus.fields import field_matches
from sourcepage.records import MANIFEST_COLUMNS, Document

RANGE_KEYS = ("year_from", "year_to")
Filters = Mapping[str, str | int | Sequence[str]]


def known_filter_keys(docs: Iterable[Document]) -> list[str]:
    extra = sorted({k for d in docs for k in d.extra})
    return [c for c in MANIFEST_COLUMNS if c not in ("sha256", "pages", "file")] + extra + list(RANGE_KEYS)


def check_filters(filters: Filters | None, docs: Iterable[Document]) -> dict[str, list[str]]:
    """Normalise filters to {key: [values]}; ValueError names an unknown key or bad year
    (``docs``, for the extra columns, is read only when there are filters)."""
    out: dict[str, list[str]] = {}
    if not filters:
        return out
    known = known_filter_keys(docs)
    for key, value in filters.items():
        if key not in known:
            raise ValueError(f"unknown filter {key!r}; known filters: {', '.join(known)}")
        values = [value] if isinstance(value, str | int) else list(value)
        values = [str(v).strip() for v in values if str(v).strip()]
        if key in RANGE_KEYS and (len(values) != 1 or not values[0].isdigit()):
            raise ValueError(f"filter {key} needs one year, got {value!r}")
        if values:
            out[key] = values
    return out


def matches(doc: Document, filters: Mapping[str, list[str]]) -> bool:
    """True when ``doc`` passes every filter."""
    for key, values in filters.items():
        if key == "year_from":
            if not doc.year.isdigit() or int(doc.year) < int(values[0]):
                return False
        elif key == "year_to":
            if not doc.year.isdigit() or int(doc.year) > int(values[0]):
                return False
        elif not field_matches(doc, key, values):
            return False
    return True
