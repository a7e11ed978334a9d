"""Metadata filters applied before ranking (study §3.1: jurisdiction is a filter or a
routing constraint, not something to mix after the fact).

A filter maps a manifest column (standard or extra, e.g. ``project_type``) to one
value or a list of accepted values, compared case-insensitively; ``year_from`` and
``year_to`` bound the year (documents without a year are excluded by a bound). An extra
column is a ``;``-list, matched by any of its values (``corpus.fields``).

``section`` is the one filter of pages rather than documents: a page passes when one of the
heading paths that cover it (``corpus.structure``, stored at ingest) holds a value as whole
words, case and spacing ignored — "Article 10" (not Article 100), "Part 2", "Duty of
officers", "Schedule 1".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from sourcepage.corpus.fields import field_matches
from sourcepage.records import MANIFEST_COLUMNS, Document

RANGE_KEYS = ("year_from", "year_to")
#: filters of a page's own fields, not of its document's
PAGE_KEYS = ("section",)
Filters = Mapping[str, str | int | Sequence[str]]


def known_filter_keys(docs: Iterable[Document]) -> list[str]:
    extra = sorted({k for d in docs for k in d.extra})
    own = [c for c in MANIFEST_COLUMNS if c not in ("sha256", "pages", "file")]
    return own + extra + [*RANGE_KEYS, *PAGE_KEYS]


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
    """True when ``doc`` passes every document filter (page filters, ``PAGE_KEYS``, are
    ``section_matches``')."""
    for key, values in filters.items():
        if key in PAGE_KEYS:
            continue
        if key == "year_from":
            if not doc.year.isdigit() or int(doc.year) < int(values[0]):
                return False
        elif key == "year_to":
            if not doc.year.isdigit() or int(doc.year) > int(values[0]):
                return False
        elif not field_matches(doc, key, values):
            return False
    return True


def page_filters(filters: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """The filters of pages among ``filters`` (``PAGE_KEYS``)."""
    return {k: v for k, v in filters.items() if k in PAGE_KEYS}


def section_pattern(values: Sequence[str]) -> re.Pattern[str]:
    """One pattern for the ``section`` filter's values: each as whole words, any white space
    between them, case ignored."""
    words = [r"\s+".join(re.escape(w) for w in v.split()) for v in values if v.split()]
    return re.compile(r"(?<!\w)(?:" + "|".join(words) + r")(?!\w)", re.IGNORECASE)


def section_matches(paths: Sequence[str], pattern: re.Pattern[str]) -> bool:
    """True when one of a page's heading paths holds the ``section`` filter's pattern."""
    return any(pattern.search(p) for p in paths)
